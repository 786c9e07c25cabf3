// Package redis is a loom thread store (a store.Store of package
// thread/store) on Redis: low latency, optional expiry of threads, and
// several processes (or loom servers) sharing one Redis.
//
// Pick it when threads are hot, short-lived or shared by many workers and
// Redis is already at hand; pick sqlite for one process on one disk and
// postgres for long-lived data that needs SQL. Durability is Redis's own:
// with appendonly yes and appendfsync always, what the store acknowledged
// survives a crash of the process, of the server and of the machine; with
// appendfsync everysec a crash of the machine (or of the OS) can lose the
// last second or so of acknowledged writes; without the append-only file,
// everything since the last snapshot.
// It needs Redis 6.2 or later (Lua scripting).
//
// The smallest use:
//
//	import _ "github.com/loomthreads/loom/redis"
//
//	db, err := thread.Open(ctx, "redis://localhost:6379/0?prefix=loom", nil)
//	th, err := db.Create(ctx, thread.CreateOptions{})
//	_, err = th.Append(ctx, message.User("hello"))
//
// or redis.Open(ctx, url, &redis.Options{…}) for the options.
//
// # URL
//
//	redis://[user:pass@]host:port/db?prefix=loom&ttl=24h&sweep=1m&cluster=false&connect_timeout=5s&timeout=10s
//
// rediss:// is the same over TLS. The driver's own parameters
// (dial_timeout, pool_size, …) pass through to go-redis.
//
// # Deadlines and outages
//
// The store's deadlines are PostgreSQL's (package postgres):
// ?connect_timeout=5s bounds dialing (Options.ConnectTimeout, default 5 s)
// and ?timeout=10s each command and each pipeline the store sends, its
// retries included (Options.Timeout, default 10 s; go-redis's read and
// write timeouts are set to it), both as Go durations or whole seconds. A
// Redis that is down, refuses, resets the connection, is loading or
// read-only, or does not answer in time fails the call with
// thread.ErrUnavailable (a *thread.StoreError whose Reason, "cannot reach
// Redis" or "Redis did not answer in time", names no address); one out of
// memory or that cannot write its files (OOM, MISCONF) with
// thread.ErrStorageFull. The client reconnects by itself: the Store serves
// again as soon as Redis does. A write that timed out may or may not have
// been applied: its answer was lost. A client given in Options.Client keeps
// its own timeouts; its errors are mapped the same way.
//
// # Layout
//
// Threads are grouped into families: a thread created from nothing starts
// one (named after its id); a fork or copy joins its source's family, and so
// does every commit made on a family's commits. Every key of a family
// carries the hash tag {family}, so a Redis Cluster keeps it in one slot:
//
//	P:{F}:c         hash commit id -> commit (framed bytes; messages as their exact JSON)
//	P:{F}:m         hash commit id -> "depth \t parent \t parent's family"
//	P:{F}:n         hash commit id -> references (children + history entries + checkpoints)
//	P:{F}:r:<id>    hash: a thread's record (times in µs)
//	P:{F}:h:<id>    hash version -> "µs \t op \t commit \t family" (from the oldest version kept)
//	P:{F}:k:<id>    hash checkpoint name -> "µs \t version \t commit \t family"
//
// Small index keys outside the families find them: P:t:<thread> and
// P:c:<commit> hold the family (written with or before the batch that
// makes the object and never changed while it exists, so reading one first
// is safe),
// and sorted sets P:a (every thread) and P:l:=<tenant> list ids in lexical
// order for ZRANGEBYLEX paging (a tenant that is not a valid id of at most
// 64 bytes is listed under P:l:~<hex of its sha256>); P:x orders the TTL
// deadlines. P:f:<sha1 of a thread key> lists, in a sorted set, the
// threads forked from that thread (Store.Forks, which thread.DB.Family
// uses: a family costs reads of its members), and P:b:<sha1 of tenant NUL
// key NUL value> the tenant's threads with that label: a listing filtered
// by labels pages through the smallest of its labels' sets, so a page of a
// rare label reads about a page of records. Each record's field s names
// the sets it is in. Readers check every record they read from a set.
// P:schema holds the schema version.
//
// # Tenants and migration
//
// A thread of a tenant other than the default is kept under its key,
// tenant/id (thread.Key), which gives each tenant its own namespace of ids:
// the key is the thread's id everywhere above, and a family started by such
// a thread is named after its key. Every commit id that becomes part of a
// key has passed ids.Valid, and every thread id or key ids.ValidKey, so
// none can leave the prefix or make a hash tag of its own ('/' is an
// ordinary byte to Redis).
//
// Open migrates data of an older schema under a lock (P:migrating, set with
// NX and an expiry, renewed while the migration runs, and checked before
// each step so that a migrator that stalled past the expiry stops), and
// writes the new version only when it is done: a migration cut short is
// finished by the next Open, and each step is safe to repeat. Schema 2
// moved each tenant's threads from their bare ids to their keys (record,
// history and checkpoints renamed together by a script in their family's
// slot, then their listings, deadlines and index keys; a moved thread keeps
// its family, named after its old id, which a thread of the default tenant
// made later with that id merely shares), and carried the
// session records that an older loom kept here for package worklog
// (P:s:…) into threads in the format of internal/sessionrec (one thread
// per tenant and project) before deleting those keys. The package keeps
// threads and nothing else: package worklog keeps its session records in
// threads of any store. Schema 3 listed every thread in its fork set and
// label sets (a page of 256 threads at a time).
//
// # Apply
//
// Apply resolves the families the batch names (from a cache kept by each
// Store, else the index keys), reads in one pipelined round trip what
// store.NeedsOf lists (each thread's version, head and deadline, each
// commit's existence, each checkpoint), and plans the batch with
// store.PlanBatch, which holds every rule of a batch. One Lua script then
// writes the plan: it first repeats those reads and compares them with
// what the plan was made on (a compare-and-swap on the facts, which
// restates no rule), and writes nothing if any changed; Apply then reads
// and plans again, up to 8 times, and the planner's verdict on the fresh
// facts decides (a move from a version that moved on is a conflict there).
// The script is atomic, so a batch is applied whole or not at all. A
// batch that names a thread that has no family is refused with
// thread.ErrNotFound. On a single server the script also writes the
// index keys, listings and deadlines of what it makes, moves and deletes,
// and its guard checks that an index key of a new thread or commit which
// points at another family points at nothing live there; so an id is
// created once however many processes race for it, and a refused batch
// leaves nothing behind. In cluster mode the index keys and listings of
// new threads and commits are written before the script (see Known
// limits). The plan's reference counts are written with its commits;
// letting go of the last reference to a commit (a deletion, a dropped
// checkpoint, a prune) deletes it, walking up the parents, inside the same
// script.
//
// A prune (retention, store.Batch.Prune) deletes a thread's history
// entries below its Before, newest first down to the first one missing
// (a history is a contiguous run of versions, so what is below a gap is
// gone already: a prune may be repeated), each letting go of its
// reference. It is one script, so Redis serves nothing else while it
// runs: 0.1 to 0.3 s for 10,000 versions on a 2-core VM. History reads end
// at the oldest entry kept; a thread made from a pruned history (a copy
// or load) keeps its versions' numbers.
//
// With Options.Cluster (set for a *redis.ClusterClient or ?cluster=true) a
// batch whose threads and commits span several families is refused with
// thread.ErrUnsupported: a script can only touch one slot. Ordinary thread
// operations never span families (a fork joins its source's); a raw batch
// that moves two unrelated threads does. On a single server any batch works.
//
// # Expiry
//
// With a TTL (Options.TTL or ?ttl=24h) each thread expires TTL after its
// last head move. Expiry is loom's, not Redis's EXPIRE: a thread past its
// deadline is not found at once, to reads (Thread, Threads, History,
// Checkpoints) and to writes (moves, checkpoints, deletes); a creation of
// its id succeeds and first lets the expired thread go as a delete would.
// A sweeper (every Options.SweepInterval, or Store.Sweep) deletes expired
// threads as a normal Delete does. Commits do not expire themselves: Commit
// and Ancestors still find an expired thread's commits by id until the
// sweep (or a re-creation of the id) frees them. Commits that another thread or checkpoint still reaches (a fork's
// shared prefix) survive; the rest go with the thread. Redis EXPIRE on the
// keys would leave reference counts and index keys wrong.
//
// # Changes
//
// Store is a store.Watcher: the apply script PUBLISHes the JSON of each
// batch's store.Batch.Changes on the channel P:changes as its last step,
// so every process that shares the Redis (thread.DB.Watch) hears what any
// of them writes, sweeps included, and a crash cannot separate a write
// from its notice. Redis keeps no backlog: a listener hears what is
// published while it is subscribed, and after its connection drops and
// the client subscribes again it hears a thread.ChangeGap. A user whose
// ACL forbids the channel still writes, unheard. In cluster mode the
// notice is a classic PUBLISH, which the cluster bus takes to every node
// (SPUBLISH would tie the channel to one slot, which a script on another
// node cannot reach): each thread's changes arrive in order,
// but those of families on different nodes may interleave in another
// order than they were applied, and every batch costs a message to every
// node.
//
// # Known limits
//
// On a single server none of the races below exist. In cluster mode index
// keys and listings are written outside the script (they live in other
// slots): a crash between them and the script leaves an index key that
// points at nothing, which readers treat as missing and a later creation
// takes over (by compare-and-set). Taking over is still not atomic with
// the check that the other family's object does not exist, so two
// processes that create one id in two families at the same moment can both
// succeed; and two that delete a thread and create one with the same id
// at the same moment can leave the new thread unlisted or unfindable by
// id. A cluster store also refuses (ErrConflict) to create an id whose
// expired thread lives in another family until the sweeper deletes it.
// A cluster store lists a new thread in its fork set before the script
// and takes a deleted one out after it, with the same races; it keeps no
// label sets (a listing filtered by labels reads every record of the
// tenant), so data written in cluster mode must not be opened by a store
// that is not.
package redis
