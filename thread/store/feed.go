package store

import (
	"context"
	"time"
)

// ChangeKind says what a Change did.
type ChangeKind string

// The kinds of change.
const (
	ChangeCreate     ChangeKind = "create"     // a thread was made
	ChangeMove       ChangeKind = "move"       // a thread's head moved (or its record changed)
	ChangeCheckpoint ChangeKind = "checkpoint" // a checkpoint was made or dropped
	ChangeDelete     ChangeKind = "delete"     // a thread was deleted
	// ChangeGap says that changes may have been missed (a dropped
	// connection, a listener too slow to keep up): whoever shows threads
	// should read them again. Its Thread is "".
	ChangeGap ChangeKind = "gap"
)

// Change is one change to a thread, as a feed reports it.
type Change struct {
	Kind ChangeKind `json:"kind"`
	// Thread is the thread's id (its key, at the store's level).
	Thread string `json:"thread,omitzero"`
	// Version and Head are the thread's after a create or a move.
	Version int64  `json:"version,omitzero"`
	Head    string `json:"head,omitzero"`
	// Op is the history entry's op of a create or a move.
	Op Op `json:"op,omitzero"`
	// Checkpoint names the checkpoint of a ChangeCheckpoint.
	Checkpoint string `json:"checkpoint,omitzero"`
	// Time is when the change was made (a delete's is when it was seen).
	Time time.Time `json:"time,omitzero"`
}

// Changes returns what applying b changes, in the order a store applies
// it: creations, moves, dropped and new checkpoints, deletions. Stores
// that publish changes (Watcher) publish these.
func (b *Batch) Changes(now time.Time) []Change {
	var out []Change
	for _, cr := range b.Create {
		op := cr.Op
		if n := len(cr.History); n > 0 {
			op = cr.History[n-1].Op
		}
		out = append(out, Change{Kind: ChangeCreate, Thread: cr.Record.ID, Version: cr.Record.Version,
			Head: cr.Record.Head, Op: op, Time: cr.Record.UpdatedAt})
	}
	for _, mv := range b.Moves {
		out = append(out, Change{Kind: ChangeMove, Thread: mv.Thread, Version: mv.From + 1, Head: mv.Head, Op: mv.Op, Time: mv.Time})
	}
	for _, ck := range b.DropCheckpoints {
		out = append(out, Change{Kind: ChangeCheckpoint, Thread: ck.Thread, Checkpoint: ck.Name, Time: now})
	}
	for _, cp := range b.Checkpoints {
		out = append(out, Change{Kind: ChangeCheckpoint, Thread: cp.Thread, Checkpoint: cp.Name, Time: cp.CreatedAt})
	}
	// A prune changes no record and no readable version's content: it
	// publishes nothing.
	for _, d := range b.Delete {
		out = append(out, Change{Kind: ChangeDelete, Thread: d.Thread, Time: now})
	}
	return out
}

// Watcher is an optional upgrade of a Store whose changes every process
// that shares it can hear: PostgreSQL's LISTEN/NOTIFY, Redis's pub/sub.
//
// Watch returns once it listens. From then until ctx ends, fn hears the
// changes (Batch.Changes, thread ids as keys) of every batch that any
// process applies to the store, each batch's at once and, for any one
// thread, in the order of its versions. fn runs on one goroutine of the
// store and must return quickly. When changes may have been missed (the
// connection that listens dropped and came back), fn hears a ChangeGap.
// Watch never calls fn before it returns.
//
// A DB on a store that is not a Watcher hears the changes made through
// the DBs of its own process only.
type Watcher interface {
	Watch(ctx context.Context, fn func([]Change)) error
}
