// Package postgres is a store.Store on PostgreSQL: the store for many
// `loom serve` processes, on one machine or many, sharing one database.
//
// Pick it when threads must outlive a machine, or when more than one process
// writes them; for one process on one machine the embedded sqlite store is
// simpler and faster. Importing the package registers the postgres:// and
// postgresql:// URL schemes with thread.Open:
//
//	import _ "github.com/loomthreads/loom/postgres"
//
//	db, err := thread.Open(ctx, "postgres://loom:secret@db.internal:5432/loom?sslmode=require", nil)
//	if err != nil {
//		return err
//	}
//	defer db.Close()
//	th, err := db.Create(ctx, thread.CreateOptions{Title: "support chat"})
//
// or, with options, Open(ctx, dsn, &Options{MaxConns: 32}) and
// thread.New(store, nil). The DSN is pgx's: a URL or key=value pairs, with
// pgxpool's pool_max_conns and the like as query parameters.
//
// # Deadlines and outages
//
// No call waits on the network for longer than the store's deadlines
// (Options.ConnectTimeout and Options.Timeout, or in a URL DSN
// ?connect_timeout=5s&timeout=10s, as Go durations or whole seconds):
// making a connection (dialing, TLS, the startup handshake) takes at most
// connect_timeout, 5 s by default, and each round trip at most timeout,
// 10 s by default: a read, a page of a listing or a walk, and a write's
// transaction up to and including its COMMIT (which goes on if the caller
// goes away, but not past the deadline). Open pings the server within
// them too. A server that is down, refuses, resets the connection, is
// shutting down or starting, or does not answer in time fails the call
// with thread.ErrUnavailable (a *thread.StoreError whose Reason, "cannot
// reach PostgreSQL" or "PostgreSQL did not answer in time", names no
// address), and a full disk (SQLSTATE 53100) with thread.ErrStorageFull.
// A connection that timed out is closed, within connect_timeout (pgx
// alone would wait 15 s for the server to acknowledge, keeping the
// connection's place in the pool); the pool dials a new one for the next
// call, so the Store serves again as soon as the server does. A write
// that timed out may or may not have been applied: its answer was lost.
// The caller's own cancel or deadline is returned as it is.
//
// A busy server is not an unavailable one. Waiting for a connection of
// the pool is bounded by the caller's context only (an idle connection is
// pinged within timeout, a new one dialed within connect_timeout). Each
// statement of a write's transaction may take up to timeout with its waits
// for the locks of other writers (statement_timeout; each wait up to half
// of it, lock_timeout); the server then ends it and answers, and the
// transaction runs again (Options.Retries, then thread.ErrConflict), on
// the same connection. Its round trips therefore have twice timeout to
// answer.
//
// Open creates the schema (tables named loom_*, in the connection's
// search_path) or migrates it, under an advisory lock so that processes
// starting together take turns; a database written by a newer loom is
// refused with ErrNewerSchema. Schema 2 keeps the threads of a tenant other
// than the default under their key, tenant/id (thread.Key), which gives
// each tenant its own namespace of ids; Open then carries the rows of
// loom_sessions, the table an older loom kept for the work log's session
// records, into threads (where package worklog keeps them now) and drops
// it. The package keeps threads and nothing else.
//
// Commits are keyed by a BIGINT identity with the public id a unique text
// column, so reading the last k messages is one recursive query over
// integer keys whatever the thread's length. Messages, state and metadata
// are stored as the bytes of their JSON (not jsonb, which would reorder
// keys and reformat numbers), times as timestamptz with microseconds, read
// back in UTC. Every Apply is one transaction that locks the threads it
// moves in id order and checks every version under those locks (see
// Store.Apply); commits are reference-counted in the same transaction, and
// deleting a thread frees the commits that nothing else reaches.
//
// The store is a store.Searcher: schema 4 adds loom_search, a tsvector of
// each message's words (store.SearchTokens) under a GIN index, dropped
// with its commit, and indexes what an older database kept when Open
// migrates it. Since schema 6 a commit's transaction only queues it
// (loom_search_pending); a background fold of the Store indexes what is
// queued shortly after, many commits at a time, and a search folds what
// is left before it reads, so that it finds everything committed before
// it. Batches are planned by package store (store.PlanBatch): the store
// reads the facts a batch needs under its locks and writes the plan.
// Schema 7 indexes forks (Forks, Descendants) and labels (loom_labels), so
// that a family and a page of a label cost their own rows. It is a store.Watcher too:
// every batch, once it committed, notifies its changes on the channel
// loom_changes, and Store.Watch listens, so that a DB's watchers hear what
// every process writes, each thread's changes in the order of its
// versions. The notifications are not sent in the batch's transaction: in
// it they would make PostgreSQL commit the writers one at a time, each
// waiting for the one before to be flushed to disk. Apply queues them once
// the batch committed and returns; a goroutine of the Store sends what is
// queued, many batches' in one transaction on a connection of its own,
// shortly after, and Close sends what is left. A process that crashes
// before they are sent loses the notifications, not the batches; the
// listeners learn of a lost change at the thread's next change, as a
// ChangeGap (see Store.Watch, and Options.NoNotify).
package postgres
