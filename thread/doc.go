// Package thread keeps the conversation state of agents and workflows as
// threads: durable, cheap to fork, checkpoint, roll back and travel through in
// time.
//
// A thread is a branch in a graph of immutable commits. Every change is a
// commit that points at its parent; the thread is a named head that points at
// one commit, plus a history of every head move, numbered by version. Nothing
// is copied to fork and nothing is rewritten to roll back:
//
//	root ── c1 ── c2 ── c3 ── c4        thread A  (head c4)
//	                     └─── c5        thread B  = fork of A at c3
//
// The smallest use:
//
//	db, _ := thread.Open(ctx, "memory://", nil)
//	th, _ := db.Create(ctx, thread.CreateOptions{Title: "support chat"})
//	th.Append(ctx, message.User("hi"), message.Assistant("hello"))
//	msgs, _ := th.Messages(ctx, thread.ReadOptions{Last: 50})
//
// What each operation costs:
//
//	Append, Commit            O(messages appended); one atomic store write (a
//	                          message with an id of its own is looked for in the
//	                          thread: O(commits since this DB last did so there;
//	                          the whole thread the first time))
//	Messages (Last: k)        O(k): walks back only the commits that hold them
//	Fork at the head, Copy    O(1): a new head on an existing commit
//	Fork at a message         O(messages after it) to find it; at most one new commit
//	Reset, Rollback, Restore  O(1): the head moves, the history records it
//	Messages (Version: v)     O(1) + the read: the history names the commit
//	View (a budget)           O(messages read): windows of 64, 256, … until it is full
//	Save, Load                O(n): the portable document (docs/portable-document.md)
//	Delete                    O(history entries + checkpoints + commits freed)
//	Copy (store to store)     O(commits the destination lacks); ids and sharing kept
//	Diff (two points)         O(commits after the one both share): the shared prefix
//	                          is counted by depth, not read (threads that share no
//	                          commit are read whole)
//	Group                     the sum of its changes, applied as one atomic batch
//
// Heads move only by compare-and-swap on the version. Two writers never both
// succeed from one version: the loser gets ErrConflict and nothing is lost.
// Pure appends commute, so Append rebases onto the new head and retries;
// rollback, restore, reset and state changes never retry silently.
//
// What a thread holds is checked once, here, for every face: a message id
// is in a thread once (a second append of it is ErrDuplicateID, an
// ErrConflict); every string is UTF-8; messages and state stay within
// Limits, JSON nesting included (ErrTooDeep); and a thread is
// service-managed or local, never both: a service thread holds only the
// mirror of its service's conversation, written by commits that say so
// (CommitOptions.Mirror).
//
// A thread also has a small key→JSON state, versioned with its messages: time
// travel restores both. Keys are namespaced by convention: ctx/<provider>
// for context-provider state, wf/… for workflows, service/… for provider ids.
//
// Each tenant has its own namespace of thread ids: a DB scoped to a tenant
// (Options.Tenant, DB.WithTenant) sees, creates, forks, loads and deletes
// only its tenant's threads, and two tenants can both have a thread
// "support". Stores need no code for it: such a DB keeps its threads under
// the key tenant/id (Key), and no id holds a '/'. Commits are shared by the
// store's tenants — their ids are random and a caller reaches a commit only
// through its own threads' heads, history and checkpoints — so a fork
// costs the same in every tenant and a store needs no per-tenant commit
// table.
//
// DB.Search finds the messages of a tenant's threads that hold every word
// of a query, newest first, in every version a thread keeps: a store that
// is a Searcher answers from its index (SQLite FTS5, PostgreSQL tsvector),
// any other is scanned; SearchQuery.Versions names, for a hit a rollback
// took out of the head, the version to read it at. DB.Watch tells a
// listener of every create, move, checkpoint and delete of its tenant's
// threads: a store that is a Watcher (PostgreSQL LISTEN/NOTIFY, Redis
// pub/sub) reports what every process does, any other what the DBs of this
// process do; a ChangeGap says some changes may have been missed.
// DB.Family returns a thread's fork family, and DB.Diff what differs
// between two versions of a thread, or a thread and its fork: messages
// added, removed and changed, and state.
//
// DB.Threads lists a tenant's threads a page at a time, filtered by kind
// and labels, in id order or most recently updated first
// (ListOptions.Order): SQLite and PostgreSQL seek an index on update times
// for a page, the other stores sort every matching record
// (ListByUpdated). Threads loom makes for itself — a work log's, a
// workflow's sub-threads — carry LabelOwner (Own); ListOptions.Internal
// leaves them out or lists them alone.
//
// Every version is kept until a retention says otherwise (Retention): a
// thread's own labels (LabelTTL, LabelKeepLast, LabelKeepFor, set by
// Thread.SetRetention) over the store-wide Options.Retention. DB.GC applies
// it: it deletes the threads idle past their TTL and drops the versions
// their history limits no longer keep (never a checkpoint or the current
// version), in one store batch a thread (store.Prune), and the store frees
// every commit that nothing reaches any more — a fork keeps what it
// shares.
//
// Storage is a Store: a small interface that backends implement and
// thread/storetest checks. Open picks one by URL ("memory://" is built in;
// sqlite://, postgres://, redis:// and file:// join when their packages are
// imported). Errors are ErrNotFound, ErrConflict, ErrInvalid and
// ErrUnsupported, wrapped with context; match them with errors.Is.
package thread
