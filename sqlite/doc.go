// Package sqlite is a store.Store in one SQLite database file: loom's
// embedded default store, the one `loom serve` (a later release) will open
// unless told otherwise.
// It is pure Go (modernc.org/sqlite, no cgo).
//
// Pick it for an agent or a server on one machine: it needs no other
// process, keeps everything in one file that is easy to copy, and several
// processes of that machine may share the file. Pick postgres when many
// machines share one store, memory:// for tests.
//
// The smallest use, through package thread's registry:
//
//	import _ "github.com/loomthreads/loom/sqlite"
//
//	db, err := thread.Open(ctx, "sqlite://loom.db", nil)
//	if err != nil { … }
//	defer db.Close()
//
// or directly, with options:
//
//	st, err := sqlite.Open(ctx, "/var/lib/loom/loom.db", &sqlite.Options{Synchronous: sqlite.SyncFull})
//	db := thread.New(st, nil)
//
// # URLs
//
//	sqlite:///abs/path.db          an absolute path
//	sqlite://relative/path.db      a path relative to the working directory
//	sqlite://./loom.db             the same, spelled as loom serve's default
//	sqlite:loom.db                 also relative
//
// The first part of a relative path is the URL's host, where Go allows no
// percent-escapes: a path with spaces or other characters that need them
// takes the absolute form (sqlite:///data/my%20threads.db). "~" is not
// expanded. Query options:
//
//	synchronous=normal|full   durability of an acknowledged write (Options.Synchronous)
//	busy_timeout=10s          how long a write waits for another process (Options.BusyTimeout)
//	cache_bytes=33554432      memory for decoded commits, -1 for none (Options.CacheBytes)
//
// An unknown option is an error, so that a typo is not silently ignored.
//
// # Durability and concurrency
//
// The database is in WAL mode. With synchronous=normal (the default) a write
// is acknowledged once it is in the write-ahead log: it survives the process
// being killed (kill -9), and a power loss may lose the last writes but
// never corrupts the file. With synchronous=full each write also waits for
// an fsync and survives power loss.
//
// Every write is a BEGIN IMMEDIATE transaction: it takes the database's
// write lock before it reads anything, so the checks of a batch and its
// writes are one atomic step even when several processes write to the
// same file. The checks are package store's (store.PlanBatch): the store
// answers the planner's questions with reads in that transaction and then
// writes what the plan says, restating no rule of its own. Writers of one
// process share transactions (group commit): each queues its batch, and the
// writer whose turn it is writes every batch queued by then in one
// transaction, each under a savepoint, so that a batch that fails is undone
// alone and the batches after it see the store as if it had never been
// tried; the writers it answered wake together. Sixty-four writers then
// take one COMMIT's cost instead of sixty-four (BenchmarkGroupCommit).
// Writers of other processes wait up to BusyTimeout. Readers use their own
// connections and never wait for writers. The store is a store.Appender:
// an append to a hot thread reads its head in the transaction that writes
// it, so racing appends take turns instead of retrying.
//
// A write never copies the write-ahead log into the database file (SQLite's
// auto-checkpoint is off on the write connection): each Store checkpoints
// it in the background, on a connection of its own, once it passes 4 MiB,
// and keeps it near 16 MiB even under writes that never pause. Close stops
// it. Checkpoints only copy what the log already holds.
//
// A write SQLite has no room for (SQLITE_FULL: a full disk, or a
// database at its max_page_count) is rolled back and fails with
// thread.ErrStorageFull; reads go on, and writes again once there is room.
//
// # Schema
//
// Commits are keyed by an integer (the SQLite rowid) and point at their
// parent by it, with the public id in a unique index: Ancestors is one
// recursive query that walks the integer keys and stops at the floor, and
// costs the commits it returns, not the length of the thread. Messages are
// stored as the JSON that package message writes, so they read back byte
// for byte, unknown content included; maps (labels, state, metadata) are
// stored in a length-prefixed binary form that keeps every byte. Times are
// Unix microseconds, read back in UTC.
//
// Commits never change, so the store keeps recently read ones decoded in
// memory (Options.CacheBytes): decoding a commit's messages from JSON is
// most of what a read costs, and a cached commit is only copied. An entry
// is checked against the row it stands for on every read, so that the
// cache is safe when other processes write to the same file. A walk up a
// thread caches only the commits nearest its start, up to a quarter of the
// cache: a full read of a thread longer than the cache costs no more than
// with the cache off, and leaves the ends of other threads in it.
//
// Each commit counts the child commits, history entries and checkpoints
// that point at it. Deleting a thread drops the references of its history
// and checkpoints in one statement and deletes the commits that reach zero,
// walking up their parents for as long as that frees them: a commit that
// another thread or a checkpoint reaches survives.
//
// Retention (thread.DB.GC) prunes a thread's history in the batch's one
// transaction: the entries below the version kept drop their references
// in one statement and go in another, and the commits left without any
// are freed as a deletion frees them, with their search entries. Past a
// few dozen, commits are freed a set at a time, two statements per level
// of shared ancestors, not per commit: pruning 100,000 regenerated answers
// takes about 3 s (BenchmarkGC100k). A file this package makes gives the
// pages back: a transaction that freed commits ends with an incremental
// vacuum when a quarter of the file or more is free (vacuum.go); a file
// made by an older loom keeps its free pages for later writes until it is
// vacuumed once.
//
// Forks are indexed by the thread they were forked from: the store is a
// store.DescendantIndex, and thread.DB.Family is one recursive query that
// costs the family, not the store. Each label is kept with its thread's
// tenant, id and update time (by triggers, in label_index), so that a
// tenant's page of threads of a label, in id order or by update, is a walk
// of that label's entries in the listing's order: with a million threads a
// family of 101 takes about a millisecond and a page of a label, rare or
// common, well under one (BenchmarkIndexedReads). A move of a labelled
// thread updates its labels' entries.
//
// # Search
//
// The store is a store.Searcher: the words of each new commit's messages
// go into a contentless FTS5 table, under the thread the batch commits it
// for, and a freed commit's entries go with it. Apply only queues the
// commit for the index, with a row in the commit's transaction, so that
// what is committed is found, crash or not; a background goroutine folds
// the queue into the index every 200 ms, many commits per transaction, and
// a search folds what is left before it reads (if another process holds
// the write lock past the busy timeout, it matches the queued commits'
// messages itself). thread.DB.Search reads the index newest first and
// stops at its limit, so a two-word search of a million messages takes
// under a millisecond (BenchmarkSearch1M).
//
// The schema version is kept in the database (PRAGMA user_version) and the
// migrations to the current one run in one transaction on Open. A database
// written by a newer version of this package is refused with
// ErrNewerSchema rather than misread. Schema 2 keeps the threads of a
// tenant other than the default under their key, tenant/id (thread.Key),
// which gives each tenant its own namespace of ids; Open then carries the
// rows of the sessions table, which an older loom kept beside the threads
// for the work log's session records, into threads (where package worklog
// keeps them now) and drops it. Schema 3 adds the search index and queues
// every commit that a thread reaches for it; the folds after Open index
// them. Schema 4 indexes threads by update time; schema 5 indexes forks
// and labels, those of the file's threads included.
// The package keeps threads and nothing else.
package sqlite
