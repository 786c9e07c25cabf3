package thread

import (
	"context"
	"errors"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/thread/store"
)

// Append appends to thread id without opening a handle first, and returns
// the commit and the thread's record after it. On a store that queues
// appends (store.Appender) it is one trip to the store: the record and
// head are read under the thread's lock, in the transaction that writes.
// That is what a server wants for a request that names a thread and
// appends to it; a program that holds a Thread uses Thread.Commit.
//
// opts is a pure append's: Messages, Metadata, FreshIDs, and Op "" or
// OpAppend. Anything else (State, Kind, IfVersion, Mirror), a store
// without queued appends, or messages with ids of their own whose line the
// DB does not remember go through DB.Thread and Thread.Commit, with the
// same result.
func (db *DB) Append(ctx context.Context, id string, opts CommitOptions) (*Commit, Record, error) {
	if opts.Op == "" {
		opts.Op = OpAppend
	}
	pure := len(opts.Messages) > 0 && opts.State == nil && opts.Kind == "" && opts.IfVersion == 0 && !opts.Mirror && opts.Op == OpAppend
	if ap, ok := appender(db.store); ok && pure && ids.Valid(id) {
		c, rec, err := db.appendByID(ctx, ap, id, opts)
		if !errors.Is(err, errLineUnknown) {
			return c, rec, err
		}
	}
	t, err := db.Thread(ctx, id)
	if err != nil {
		return nil, Record{}, err
	}
	c, err := t.Commit(ctx, opts)
	if err != nil {
		return nil, Record{}, err
	}
	return c, t.Record(), nil
}

func (db *DB) appendByID(ctx context.Context, ap store.Appender, id string, opts CommitOptions) (_ *Commit, _ Record, err error) {
	ctx, span := db.startSpan(ctx, "commit", id, AttrOp.String(string(opts.Op)))
	defer endSpan(span, &err)
	// A handle that knows only its id: appendLocked reads the rest under
	// the store's lock.
	t := &Thread{db: db, rec: &Record{ID: id, Tenant: db.tenant}}
	c, err := t.appendLocked(ctx, ap, opts)
	if err != nil {
		return nil, Record{}, err
	}
	return c, t.Record(), nil
}
