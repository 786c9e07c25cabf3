// Package jsonfile is a store.Store that keeps loom's threads as plain,
// indented JSON files in one directory: readable with cat and jq, easy to
// back up with cp or rsync, and friendly to git (one file per commit and per
// thread, written whole, so diffs are small and meaningful).
//
// Pick it for a single machine where people want to see and version their
// agents' conversations as files, for demos, and for small deployments
// where a database is too much. It is slower than the sqlite store (every
// write is several files and fsyncs; see docs/benchmarks.md) and every
// listing reads the thread files, so prefer sqlite or postgres for
// thousands of threads or heavy write traffic (a fork family and a page
// of a label are read through an index in memory; other listings read
// the thread files). Several processes may share
// one directory on a local file system (not over NFS, whose flock is not
// to be trusted).
//
// The smallest use:
//
//	import _ "github.com/loomthreads/loom/jsonfile"
//
//	db, err := thread.Open(ctx, "file://./threads", nil) // or file:///abs/dir
//	if err != nil { … }
//	defer db.Close()
//	th, err := db.Create(ctx, thread.CreateOptions{})
//	_, err = th.Append(ctx, message.User("hello"))
//
// or, without the URL, jsonfile.Open(ctx, dir, nil). The URL parameter
// ?nosync=true sets Options.NoSync.
//
// The directory and every file in it are created for their owner only
// (0700 and 0600): conversations are not for other users of the machine.
//
// # Layout
//
//	DIR/loom.json                 {"format": "loom.jsonfile", "schema": 4}
//	DIR/.lock                     flock(2)ed by every writer
//	DIR/intent.json               the last batch's write-ahead intent (empty when done)
//	DIR/changes                   the change log that keeps indexes current: an
//	                              epoch, then the keys of threads created, deleted
//	                              or relabelled
//	DIR/commits/<id>.json         one immutable commit: parent, depth, op, time,
//	                              state, metadata, messages in the wire format
//	DIR/refs/<id>                 the commit's reference count, in decimal
//	DIR/threads/<name>.json       a thread: record, checkpoints (in name order)
//	                              and its newest history entries
//	DIR/history/<name>/<n>.json   sealed history: versions 64n+1 to 64n+64
//
// A thread's name is its key (thread.Key): its id for the default tenant,
// and tenant~id for another tenant's (the key tenant/id with its '/' made
// a '~', which no id holds), so every thread file stays in one directory.
// A key is at most 200 bytes here, to keep every name within the file
// systems' 255. Schema 3 moved the threads of other tenants, which schema
// 2 kept under their bare ids, to their keys.
//
// A thread file holds at most 63 history entries; each 64th move seals them
// into a history chunk that never changes again, so a move rewrites a small
// file whatever the thread's age. Chunk n holds versions 64n+1 to 64n+64.
// A thread's history may start above version 1 (schema 4): a prune
// (retention, store.Batch.Prune) drops the entries below a version, and a
// copy or load of a pruned thread starts where it does. The thread file
// then names its first version (first_version); the chunks below that
// version's are removed, the entries below it in that chunk are not read,
// and a thread made from a pruned history seals a first chunk of fewer
// than 64 entries, ending at a multiple of 64. Ids are checked (ids.Valid) before they
// become file names, and every file is opened through an os.Root on DIR, so
// no id can name a file outside it. Files whose names start with "." are
// temporary and ignored; Open removes the ".tmp-" files a killed writer
// left, in every directory of the store.
//
// Ids are file names as they are. On a file system that ignores case
// (macOS's and Windows's by default), where "Th" and "th" would be one
// file, Open notices (it looks up a file it made under another case) and
// the store then refuses ids with upper-case letters (thread.ErrInvalid)
// and finds none; loom's own ids are lower case. Every read also checks
// that a file holds the id it was asked for.
//
// # Writes
//
// A batch (store.Store.Apply) runs under an in-process lock and an
// exclusive flock on DIR/.lock, which the kernel releases if the process
// dies. store.PlanBatch checks every rule of the batch (versions,
// existence, checkpoints) against the files, read afresh under that lock,
// so compare-and-swap holds across processes; the store only answers its
// questions and writes the plan. A process that is
// stopped without dying (SIGSTOP, a debugger, a hung disk) keeps the lock:
// Apply, Open, and a read that must finish a batch wait for it at most
// Options.LockTimeout (10 s by default) or until their context ends, then
// fail with ErrLockTimeout (or the context's error). The writer then:
//
//  1. writes each new commit file under a temporary name (".tmp-…"),
//     fsyncs it, and fsyncs commits/. No reader sees these, and if the
//     batch fails here they are removed (after a crash, by the next Open);
//  2. writes the intent: every rename, write and removal of the batch
//     (the new commit files' renames first, then thread files, history
//     chunks, reference counts, freed commits), with a SHA-256 of its
//     content, in place, and fsyncs it. This is the commit point: a torn
//     intent fails its sum and is ignored, as its batch was never
//     acknowledged;
//  3. does the intent: the commit renames; each thread file and history
//     chunk by temporary file, fsync and rename; each refs file in place
//     and fsynced (only writers read them, and only after step 4 of any
//     earlier batch); removals; then fsyncs the directories it touched;
//  4. empties the intent.
//
// A process that dies between 2 and 4 leaves the intent; the next Open,
// Apply or read, in any process, does it again before anything else. Its
// writes are whole files and a rename already done is skipped, so doing
// them twice is doing them once. A batch over several threads is therefore
// atomic after a crash, and a commit whose batch failed or never reached
// step 2 is never readable.
//
// Batches that wait for the lock together are one group (group commit): a
// writer goroutine takes the lock, plans each batch against the files as
// the batches before it in the group leave them, and writes the group with
// one intent, so one intent fsync, and each file and directory once, serve
// them all. A batch that fails its rules fails alone; the others are
// answered once the group's intent is done, as durable as if alone. A batch
// that would make again a thread or commit that the group deletes waits
// for the next group. Store.AppendAt (store.Appender) builds its batch in
// the group, on the thread as the batches before it leave it, so that
// many writers appending to one thread take turns instead of retrying.
//
// A batch whose intent is durable is committed. If step 3 fails (a full
// disk), the writer tries it again twice; if it still fails, Apply succeeds
// all the same (it is committed: an error would have the caller apply it
// again), logs it, the store is read-only while its disk is full, and the
// batch is finished by the next writer, Open or read of any process.
//
// Readers take no lock: every file they read is replaced by a rename, so
// they see it whole, before or after a write. Each read first checks (one
// fstat) that the intent is empty; if it is not, it takes the lock and
// finishes the batch before reading, so no reader sees half of a committed
// batch. A reader thus waits for a writer that is between steps 2 and 4.
// If the disk keeps the batch from being finished, readers read through
// its intent (each file as the batch has it), so they see it whole, and
// try to finish it again at most once a second.
//
// # A full disk
//
// A write that finds no room on the disk (ENOSPC, EDQUOT) before its
// commit point fails with thread.ErrStorageFull, whose reason says the
// store is read-only until space is freed, and leaves nothing behind;
// reads go on. The store logs (Options.Logger) when it becomes read-only
// and writable again, and Store.ReadOnly says whether it is. Open succeeds
// on a directory whose committed batch the full disk keeps from being
// finished (unless a migration is due), read-only; the first write or read
// that finds room finishes it. `loom serve` thus starts on a full disk and
// serves reads, answering writes 507 until space is freed.
//
// # Reference counts and delete
//
// As in thread.MemoryStore, a commit's count is its child commits plus the
// history entries and checkpoints that point at it, kept in refs/<id> and
// changed in the same intent as what changes them. Deleting a thread reads
// its history (O(versions)), drops each reference, and removes every commit
// whose count reaches zero, walking up the parents while that frees them:
// O(commits freed), never a scan of the store. A prune does the same for
// the entries it drops, in one intent: O(versions dropped) reads and refs
// files rewritten (3 to 4 s for 10,000 versions on a 2-core VM's ext4,
// during which the store's other writers wait).
//
// # Indexes
//
// A Store keeps in memory which threads were forked from each thread
// (store.ForkIndex, which DB.Family uses) and which threads hold each
// label, so that a fork family costs reads of its members and a page of a
// rare label reads of the page. The index is built on first use, by reading
// every thread file (O(threads), once per process), and follows every
// process's writes through DIR/changes: each batch that creates, deletes
// or relabels threads appends their keys once its files are written, and
// the index reads the log's new lines (usually none: one fstat) before it
// answers. The log begins anew past 4 MiB: the writer's own index follows
// the new log, the other processes' indexes read every thread file again. A listing filtered by labels reads the threads of the
// rarest of its labels, in id order, and checks each against the filters;
// other listings read the thread files in id order. While a committed
// batch waits for room on the disk, the indexes are not used (reads scan,
// through the batch). Versions of this package older than the change log
// do not write it: a process of such a version writing to a directory
// shared with this one leaves this one's indexes behind until it reopens.
//
// # Versions
//
// loom.json names the schema version. Open finishes a pending batch, then
// runs the migrations from an older version, and refuses a directory
// written by a newer version of this package with an error that wraps
// thread.ErrUnsupported. Schema 2 renames commit files in the intent;
// its migration from schema 1 removes the commit files that a failed batch
// of schema 1 left without a refs file. A schema 2 directory is refused
// by the versions that wrote schema 1. Schema 4 moves nothing: it only
// keeps the versions that read every history from version 1 from opening
// a directory where a prune made one start later.
package jsonfile
