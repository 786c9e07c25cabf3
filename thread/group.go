package thread

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loomthreads/loom/thread/store"
)

// Group gathers changes to several threads of one DB — commits, restores,
// rollbacks, checkpoints, creations, forks and deletions — and applies them
// as one Batch: all of them or none. A workflow checkpoints, restores and
// forks itself and its sub-threads with one.
//
// Each head move and deletion is checked against the version of the handle
// it was given (a compare-and-swap, as Thread's own writes are), so Apply
// returns ErrConflict and changes nothing when any of those threads has
// moved since; a checkpoint names the head as the group leaves it, from
// the handle's version. A thread takes at most one head move in a group —
// a commit, a restore or a rollback, or a restore or rollback followed by
// one commit on the commit it moves to (which is then the move's head, in
// one history entry) — plus any checkpoints. A thread is in a group
// through one handle. A change that cannot be built (bad input, a version
// that does not exist) is returned by the call that adds it, and again by
// Apply, which then writes nothing.
//
// A Group is not safe for concurrent use, and is applied once.
type Group struct {
	db      *DB
	b       store.Batch
	touched map[string]*groupEntry
	created map[string]bool
	err     error
	applied bool
}

// groupEntry is an existing thread as the group leaves it.
type groupEntry struct {
	t    *Thread
	rec  *Record // after the group's move, or as the handle had it
	head *Commit // header of rec.Head, when known (a Commit loads it)
	// move is the index of the thread's move in the batch, -1 for none;
	// committed says a commit made it, deleted that it is deleted.
	move               int
	committed, deleted bool
	// cps are the indexes of the thread's checkpoints in the batch, which
	// follow its head.
	cps []int
}

// Group returns an empty group of changes on db.
func (db *DB) Group() *Group {
	return &Group{db: db, touched: map[string]*groupEntry{}, created: map[string]bool{}}
}

// fail records the first error of the group and returns err.
func (g *Group) fail(err error) error {
	if g.err == nil {
		g.err = err
	}
	return err
}

// entry returns what the group knows of t, checking that t is of the
// group's DB.
func (g *Group) entry(ctx context.Context, t *Thread) (*groupEntry, error) {
	if t.db != g.db {
		return nil, fmt.Errorf("group: thread %s is of another DB: %w", t.ID(), ErrInvalid)
	}
	if e, ok := g.touched[t.ID()]; ok {
		if e.t != t {
			return nil, fmt.Errorf("group: thread %s is in the group through another handle: %w", t.ID(), ErrInvalid)
		}
		return e, nil
	}
	// Only a commit needs the head commit: a checkpoint, a move or a
	// deletion costs the same whatever the thread holds.
	t.mu.RLock()
	e := &groupEntry{t: t, rec: t.rec, head: t.head, move: -1}
	t.mu.RUnlock()
	g.touched[t.ID()] = e
	return e, nil
}

// move adds a head move of t to the commit head ("": the empty root),
// whose header is h when known.
func (g *Group) move(ctx context.Context, t *Thread, op Op, head string, h *Commit, what string) error {
	e, err := g.entry(ctx, t)
	if err != nil {
		return g.fail(fmt.Errorf("%s %s: %w", what, t.ID(), err))
	}
	if e.move >= 0 || e.deleted {
		return g.fail(fmt.Errorf("%s %s: the group moves it already: %w", what, t.ID(), ErrInvalid))
	}
	mv := store.Move{Thread: e.rec.ID, From: e.rec.Version, Head: head, Op: op, Time: g.db.clock()}
	e.move = len(g.b.Moves)
	g.b.Moves = append(g.b.Moves, mv)
	e.rec = moved(e.rec, mv)
	g.headIs(e, h)
	return nil
}

// headIs records that e's head (e.rec.Head) has the header h (nil:
// unknown), and moves e's checkpoints there.
func (g *Group) headIs(e *groupEntry, h *Commit) {
	e.head = nil
	if h != nil {
		e.head = header(h)
	}
	for _, i := range e.cps {
		g.b.Checkpoints[i].Commit, g.b.Checkpoints[i].Version = e.rec.Head, e.rec.Version
	}
}

// Commit adds a commit on t at its handle's version (or opts.IfVersion)
// and returns it as it will be once the group is applied. A commit holds
// messages, state or, alone, metadata: a mark on the thread's line that
// costs one small record (package langgraph marks a task's writes so). Unlike
// Thread.Commit it never retries: the group fails if t has moved. After a
// Restore, Rollback or Reset of t in the group, the commit is made on the
// commit they move to (the empty root for a Reset), and becomes the head
// of that same move. Changing the kind
// is not done in a group (ErrInvalid).
func (g *Group) Commit(ctx context.Context, t *Thread, opts CommitOptions) (*Commit, error) {
	if opts.Op == "" {
		opts.Op = OpAppend
		if len(opts.Messages) == 0 {
			opts.Op = OpState
		}
	}
	if len(opts.Messages) == 0 && opts.State == nil && len(opts.Metadata) == 0 || opts.Kind != "" {
		return nil, g.fail(fmt.Errorf("commit to %s in a group: no messages, state or metadata, or a kind: %w", t.ID(), ErrInvalid))
	}
	e, err := g.entry(ctx, t)
	if err != nil {
		return nil, g.fail(fmt.Errorf("commit to %s: %w", t.ID(), err))
	}
	switch {
	case e.committed || e.deleted || e.move >= 0 && g.b.Moves[e.move].Op != OpRestore && g.b.Moves[e.move].Op != OpRollback && g.b.Moves[e.move].Op != OpReset:
		return nil, g.fail(fmt.Errorf("commit to %s: the group moves it already: %w", t.ID(), ErrInvalid))
	case opts.IfVersion != 0 && opts.IfVersion != e.rec.Version && e.move < 0:
		return nil, g.fail(fmt.Errorf("commit to %s: at version %d, not %d: %w", t.ID(), e.rec.Version, opts.IfVersion, ErrConflict))
	}
	if e.head == nil && e.rec.Head != "" {
		if e.move >= 0 {
			c, err := g.db.store.Commit(ctx, e.rec.Head)
			if err != nil {
				return nil, g.fail(fmt.Errorf("commit to %s: %w", t.ID(), err))
			}
			e.head = header(c)
		} else {
			r, h, err := t.headCommit(ctx)
			if err != nil {
				return nil, g.fail(fmt.Errorf("commit to %s: %w", t.ID(), err))
			}
			if r != e.rec {
				return nil, g.fail(fmt.Errorf("commit to %s: the handle moved while the group was built: %w", t.ID(), ErrConflict))
			}
			e.head = h
		}
	}
	if err := checkMirror(e.rec.Kind, len(opts.Messages), opts.Mirror); err != nil {
		return nil, g.fail(fmt.Errorf("commit to %s: %w", t.ID(), err))
	}
	var st map[string]json.RawMessage
	if opts.State != nil {
		if st, err = t.stateAt(ctx, e.head); err != nil {
			return nil, g.fail(fmt.Errorf("commit to %s: %w", t.ID(), err))
		}
	}
	c, err := g.db.newCommit(e.head, st, opts.Messages, opts.State, opts.Op, opts.Metadata, g.db.clock())
	if err != nil {
		return nil, g.fail(fmt.Errorf("commit to %s: %w", t.ID(), err))
	}
	if err := g.checkNewIDs(ctx, e.head, opts); err != nil {
		return nil, g.fail(fmt.Errorf("commit to %s: %w", t.ID(), err))
	}
	g.b.Commits = append(g.b.Commits, c)
	e.committed = true
	if e.move >= 0 {
		// The restore's or rollback's move goes to the commit instead.
		g.b.Moves[e.move].Head = c.ID
		e.rec.Head = c.ID
		g.headIs(e, c)
		return c, nil
	}
	if err := g.move(ctx, t, opts.Op, c.ID, c, "commit to"); err != nil {
		return nil, err
	}
	return c, nil
}

// checkNewIDs is DB.checkNewIDs for a commit on head in the group: the
// part of head's line that the group itself adds (a thread it creates with
// messages, a fork it splits or patches) is not in the store yet, and is
// read from the group's commits.
func (g *Group) checkNewIDs(ctx context.Context, head *Commit, opts CommitOptions) error {
	if head == nil {
		return nil
	}
	id := head.ID
	if opts.Op != OpCompact && !opts.FreshIDs && ownIDs(opts.Messages) {
		var ours *idLine
		for c := g.pending(id); c != nil; c = g.pending(id) {
			if ours == nil {
				ours = &idLine{ids: make(map[string]struct{})}
			}
			addIDs(ours, c.Messages)
			id = c.Parent
		}
		if ours != nil {
			if err := ours.check(opts.Messages); err != nil {
				return err
			}
		}
	}
	if id == "" {
		return nil
	}
	stored := head
	if id != head.ID {
		stored = &Commit{ID: id}
	}
	return g.db.checkNewIDs(ctx, stored, opts)
}

// pending returns the commit id that the group adds, or nil.
func (g *Group) pending(id string) *Commit {
	for _, c := range g.b.Commits {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// Restore adds a move of t's head to where it was at version v, as
// Thread.Restore does.
func (g *Group) Restore(ctx context.Context, t *Thread, v int64) error {
	return g.RestoreChecked(ctx, t, v, nil)
}

// RestoreChecked is Restore that first checks the history entry of version
// v with check, and fails with check's error, changing nothing: a caller
// that recorded a thread's version and head (a workflow, its sub-threads')
// finds out that the thread was deleted and made anew since.
func (g *Group) RestoreChecked(ctx context.Context, t *Thread, v int64, check func(HistoryEntry) error) error {
	e, err := t.entry(ctx, v)
	if err == nil && check != nil {
		err = check(e)
	}
	if err != nil {
		return g.fail(fmt.Errorf("restore %s: %w", t.ID(), err))
	}
	return g.moveTo(ctx, t, OpRestore, e.Commit, "restore")
}

// Reset adds a move of t's head to the empty root, as Thread.Reset does.
func (g *Group) Reset(ctx context.Context, t *Thread) error {
	return g.move(ctx, t, OpReset, "", nil, "reset")
}

// Rollback adds a move of t's head to its checkpoint name, as
// Thread.Rollback does.
func (g *Group) Rollback(ctx context.Context, t *Thread, name string) error {
	cp, err := t.checkpoint(ctx, name)
	if err != nil {
		return g.fail(fmt.Errorf("rollback %s: %w", t.ID(), err))
	}
	return g.moveTo(ctx, t, OpRollback, cp.Commit, "rollback")
}

func (g *Group) moveTo(ctx context.Context, t *Thread, op Op, id, what string) error {
	// The commit is read only where a service thread may refuse it: a move
	// costs the same whatever the commit holds.
	if err := t.refuseLinear(ctx, t.snapshot(), id); err != nil {
		return g.fail(fmt.Errorf("%s %s: %w", what, t.ID(), err))
	}
	return g.move(ctx, t, op, id, nil, what)
}

// DropCheckpoint adds the deletion of t's checkpoint name; a checkpoint of
// that name added to the group after it takes its place, so that moving a
// name to the head is one atomic change. A missing name is ErrNotFound at
// Apply.
func (g *Group) DropCheckpoint(ctx context.Context, t *Thread, name string) error {
	if err := checkCheckpointName(name); err != nil {
		return g.fail(fmt.Errorf("drop checkpoint %s: %w", t.ID(), err))
	}
	e, err := g.entry(ctx, t)
	if err != nil {
		return g.fail(fmt.Errorf("drop checkpoint %s of %s: %w", name, t.ID(), err))
	}
	if e.deleted {
		return g.fail(fmt.Errorf("drop checkpoint %s of %s: the group deletes it: %w", name, t.ID(), ErrInvalid))
	}
	g.b.DropCheckpoints = append(g.b.DropCheckpoints, store.CheckpointKey{Thread: e.rec.ID, Name: name})
	return nil
}

// Checkpoint adds a checkpoint name on t at its head as the group leaves
// it (after the group's commit on t, if any). An empty head is ErrInvalid;
// a name taken is ErrConflict at Apply.
func (g *Group) Checkpoint(ctx context.Context, t *Thread, name string) error {
	if err := checkCheckpointName(name); err != nil {
		return g.fail(fmt.Errorf("checkpoint %s: %w", t.ID(), err))
	}
	e, err := g.entry(ctx, t)
	if err != nil {
		return g.fail(fmt.Errorf("checkpoint %s of %s: %w", name, t.ID(), err))
	}
	if e.rec.Head == "" {
		return g.fail(fmt.Errorf("checkpoint %s of empty thread %s: %w", name, t.ID(), ErrInvalid))
	}
	if e.deleted {
		return g.fail(fmt.Errorf("checkpoint %s of %s: the group deletes it: %w", name, t.ID(), ErrInvalid))
	}
	e.cps = append(e.cps, len(g.b.Checkpoints))
	g.b.Checkpoints = append(g.b.Checkpoints, Checkpoint{Thread: e.rec.ID, Name: name, Commit: e.rec.Head, Version: e.rec.Version, CreatedAt: g.db.clock()})
	return nil
}

// Create adds the creation of a thread, as DB.Create makes it, and returns
// its handle, valid once the group is applied. Its Parent may be a thread
// the group creates.
func (g *Group) Create(ctx context.Context, opts CreateOptions) (*Thread, error) {
	if p := opts.Parent; p != "" && !g.created[p] {
		if _, ok := g.touched[p]; !ok {
			if _, err := g.db.record(ctx, p); err != nil {
				return nil, g.fail(fmt.Errorf("create: parent: %w", err))
			}
		}
	}
	r, head, err := g.db.createInto(opts, &g.b)
	if err != nil {
		return nil, g.fail(err)
	}
	return g.made(r, head)
}

// Fork adds a fork of t, as Thread.Fork makes it, and returns the new
// thread's handle, valid once the group is applied.
func (g *Group) Fork(ctx context.Context, t *Thread, opts ForkOptions) (*Thread, error) {
	if t.db != g.db {
		return nil, g.fail(fmt.Errorf("group: thread %s is of another DB: %w", t.ID(), ErrInvalid))
	}
	r, head, err := t.forkInto(ctx, opts, OpFork, &g.b)
	if err != nil {
		return nil, g.fail(err)
	}
	return g.made(r, head)
}

func (g *Group) made(r *Record, head *Commit) (*Thread, error) {
	if g.created[r.ID] || g.touched[r.ID] != nil {
		return nil, g.fail(fmt.Errorf("create %s: the group has it already: %w", r.ID, ErrConflict))
	}
	g.created[r.ID] = true
	return g.db.handle(r, head), nil
}

// Delete adds the deletion of t, at its handle's version.
func (g *Group) Delete(ctx context.Context, t *Thread) error {
	e, err := g.entry(ctx, t)
	if err != nil {
		return g.fail(fmt.Errorf("delete %s: %w", t.ID(), err))
	}
	if e.move >= 0 || e.deleted || len(e.cps) > 0 {
		return g.fail(fmt.Errorf("delete %s: the group changes it: %w", t.ID(), ErrInvalid))
	}
	e.deleted = true
	g.b.Delete = append(g.b.Delete, store.Deletion{Thread: e.rec.ID, Version: e.rec.Version})
	return nil
}

// Apply applies the group's changes in one atomic store operation and
// moves the handles it was given to their new versions. The first error of
// building the group is returned instead, with nothing written.
func (g *Group) Apply(ctx context.Context) error {
	if g.applied {
		return fmt.Errorf("group: applied already: %w", ErrInvalid)
	}
	if g.err != nil {
		return g.err
	}
	g.applied = true
	b := &g.b
	if len(b.Commits)+len(b.Create)+len(b.Moves)+len(b.DropCheckpoints)+len(b.Checkpoints)+len(b.Delete) == 0 {
		return nil
	}
	if err := g.db.apply(ctx, b); err != nil {
		if errors.Is(err, ErrConflict) {
			return fmt.Errorf("group of %d threads: a thread moved, or an id or name is taken: %w", len(g.touched)+len(g.created), err)
		}
		return fmt.Errorf("group of %d threads: %w", len(g.touched)+len(g.created), err)
	}
	for _, e := range g.touched {
		if e.move >= 0 {
			e.t.advance(e.rec, e.head)
		}
	}
	return nil
}
