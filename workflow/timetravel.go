package workflow

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// Point names a past state of a workflow: a checkpoint by name, or a
// version of the workflow's thread. The zero Point is the handle's
// version.
type Point struct {
	Checkpoint string `json:"checkpoint,omitzero"`
	Version    int64  `json:"version,omitzero"`
}

// String names p for people: "checkpoint NAME" or "version N".
func (p Point) String() string {
	if p.Checkpoint != "" {
		return "checkpoint " + p.Checkpoint
	}
	return fmt.Sprintf("version %d", p.Version)
}

// resolve returns the version of the workflow's thread p names. Callers
// hold mu.
func (w *Workflow) resolve(ctx context.Context, p Point) (int64, error) {
	switch {
	case p.Checkpoint != "" && p.Version != 0:
		return 0, fmt.Errorf("workflow %s: a checkpoint or a version, not both: %w", w.ID(), thread.ErrInvalid)
	case p.Checkpoint != "":
		for cp, err := range w.th.Checkpoints(ctx) {
			if err != nil {
				return 0, fmt.Errorf("workflow %s: %w", w.ID(), err)
			}
			if cp.Name == p.Checkpoint {
				return cp.Version, nil
			}
		}
		return 0, fmt.Errorf("workflow %s: checkpoint %q: %w", w.ID(), clip(p.Checkpoint), thread.ErrNotFound)
	case p.Version < 0:
		return 0, fmt.Errorf("workflow %s: version %d: %w", w.ID(), p.Version, thread.ErrInvalid)
	case p.Version > w.th.Version():
		return 0, fmt.Errorf("workflow %s: version %d: %w", w.ID(), p.Version, thread.ErrNotFound)
	case p.Version == 0:
		return w.th.Version(), nil
	}
	return p.Version, nil
}

// stateAt returns the execution state and sub-threads at version v.
func (w *Workflow) stateAt(ctx context.Context, v int64) (*execState, map[string]subHead, error) {
	st, err := w.th.State(ctx, v)
	if err != nil {
		return nil, nil, fmt.Errorf("workflow %s: %w", w.ID(), err)
	}
	return decodeState(w.ID(), st)
}

// Checkpoint records the workflow as it is — its execution state and the
// head of every sub-thread — under name, in one atomic store operation: one
// commit of the workflow thread, and a checkpoint of that name on it and on
// each sub-thread that has messages (so that a sub-thread alone can be
// rolled back to it too). A sub-thread that a step is writing (it started
// and has not ended) is kept as the workflow last recorded it, before the
// step, and gets no checkpoint of its own: the step runs again from there.
// A name taken on any of them is thread.ErrConflict, and changes nothing.
//
// While a runner of another handle (or process) runs the workflow,
// Checkpoint does not wait for it nor get in its way: it commits nothing,
// and records the workflow as of its last committed step — a checkpoint
// taken between steps. The checkpoint names the workflow thread's head,
// whose state records each sub-thread at its version as of the last step
// end, and each sub-thread that is still at that version gets a
// checkpoint of its own too, all in one batch of checkpoints that moves no
// thread, so the runner goes on unaware. Restore to it brings back that
// consistent state: steps that had not ended there run again.
func (w *Workflow) Checkpoint(ctx context.Context, name string) (thread.Checkpoint, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.refresh(ctx); err != nil {
		return thread.Checkpoint{}, err
	}
	if err := w.refuseBusy(ctx, true); err != nil {
		if !errors.Is(err, ErrBusy) {
			return thread.Checkpoint{}, fmt.Errorf("checkpoint workflow %s: %w", w.ID(), err)
		}
		return w.checkpointBeside(ctx, name)
	}
	err := w.commitThen(ctx, "checkpoint "+name, nil, func(g *thread.Group, ex *execState, subs map[string]subHead) error {
		inUse := map[string]bool{}
		for _, uses := range ex.Uses {
			for key := range uses {
				inUse[key] = true
			}
		}
		for _, key := range slices.Sorted(maps.Keys(subs)) {
			if inUse[key] {
				// A step that has not ended is writing it: the checkpoint
				// keeps it as its last ended step left it, which is where
				// the step starts again from.
				continue
			}
			sub, err := w.db.Thread(ctx, subID(w.ID(), key))
			if err != nil {
				return fmt.Errorf("sub-thread %s: %w", key, err)
			}
			r := sub.Record()
			subs[key] = subHead{Version: r.Version, Head: r.Head}
			if r.Head != "" {
				if err := g.Checkpoint(ctx, sub, name); err != nil {
					return err
				}
			}
		}
		return nil
	}, func(g *thread.Group) error { return g.Checkpoint(ctx, w.th, name) })
	if err != nil {
		return thread.Checkpoint{}, err
	}
	r := w.th.Record()
	return thread.Checkpoint{Thread: w.ID(), Name: name, Commit: r.Head, Version: r.Version, CreatedAt: r.UpdatedAt}, nil
}

// checkpointBeside is Checkpoint while another runner runs the workflow:
// checkpoints of the workflow thread at the handle's version and of each
// sub-thread at the version recorded there, when it is still at it, in
// one batch that moves no thread. Callers hold mu.
func (w *Workflow) checkpointBeside(ctx context.Context, name string) (thread.Checkpoint, error) {
	g := w.db.Group()
	if err := g.Checkpoint(ctx, w.th, name); err != nil {
		return thread.Checkpoint{}, fmt.Errorf("checkpoint workflow %s: %w", w.ID(), err)
	}
	for _, key := range slices.Sorted(maps.Keys(w.subs)) {
		h := w.subs[key]
		if h.Head == "" {
			continue
		}
		sub, err := w.db.Thread(ctx, subID(w.ID(), key))
		if err != nil {
			return thread.Checkpoint{}, fmt.Errorf("checkpoint workflow %s: sub-thread %s: %w", w.ID(), key, err)
		}
		// A step writing it moved it past the recorded head: the
		// workflow's checkpoint records the version, and a restore
		// brings it back there.
		if r := sub.Record(); r.Head == h.Head && r.Version == h.Version {
			if err := g.Checkpoint(ctx, sub, name); err != nil {
				return thread.Checkpoint{}, fmt.Errorf("checkpoint workflow %s: %w", w.ID(), err)
			}
		}
	}
	if err := g.Apply(ctx); err != nil {
		return thread.Checkpoint{}, fmt.Errorf("checkpoint workflow %s: %w", w.ID(), err)
	}
	for cp, err := range w.th.Checkpoints(ctx) {
		if err == nil && cp.Name == name {
			return cp, nil
		}
	}
	r := w.th.Record()
	return thread.Checkpoint{Thread: w.ID(), Name: name, Commit: r.Head, Version: r.Version}, nil
}

// Checkpoints yields the workflow's checkpoints, in name order.
func (w *Workflow) Checkpoints(ctx context.Context) iter.Seq2[thread.Checkpoint, error] {
	return w.th.Checkpoints(ctx)
}

// History yields the versions of the workflow's thread, newest first:
// each step's start and end, each checkpoint, restore and input, with its
// op and time. Execution and At read the workflow at any of them.
func (w *Workflow) History(ctx context.Context, opts thread.HistoryOptions) iter.Seq2[thread.HistoryEntry, error] {
	return w.th.History(ctx, opts)
}

// Restore moves the workflow back to p — its thread to that version or
// checkpoint, and every sub-thread to the head the workflow recorded for
// it there — in one atomic store operation. Sub-threads made after p are
// emptied (their history keeps what they held). Like every move in loom it
// rewrites nothing: the history records the restore, and a later Restore
// can go forward again. The next Run goes on from p: steps that had not
// ended there run again.
//
// A workflow that a runner holds is ErrBusy; a p that does not exist, or
// whose sub-thread was deleted since, is thread.ErrNotFound; and a p of
// another workflow cannot be named (checkpoints and versions are the
// workflow's own). None of them changes anything.
func (w *Workflow) Restore(ctx context.Context, p Point) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.refresh(ctx); err != nil {
		return err
	}
	if err := w.refuseBusy(ctx, false); err != nil {
		return fmt.Errorf("restore workflow %s: %w", w.ID(), err)
	}
	v, err := w.resolve(ctx, p)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	exAt, subsAt, err := w.stateAt(ctx, v)
	if err != nil {
		return err
	}
	g := w.db.Group()
	now, err := w.restoreInto(ctx, g, p, v, subsAt)
	if err != nil {
		return err
	}
	// In the same move of the workflow thread: no runner holds what comes
	// back (a lease there is of a run long gone), and the sub-threads are
	// recorded where they now are.
	exAt.Runner = nil
	st, err := encodeState(w.ID(), exAt, now)
	if err != nil {
		return err
	}
	if _, err := g.Commit(ctx, w.th, thread.CommitOptions{State: st, Metadata: map[string]string{"workflow": "restore to " + p.String()}}); err != nil {
		return fmt.Errorf("restore workflow %s to %s: %w", w.ID(), p, err)
	}
	if err := g.Apply(ctx); err != nil {
		return fmt.Errorf("restore workflow %s to %s: %w", w.ID(), p, err)
	}
	return w.load(ctx)
}

// restoreInto adds to g the moves that bring the workflow back to p, at
// version v of its thread where the sub-threads were subsAt: the
// workflow thread's, and each sub-thread's to the head recorded there (an
// emptying for one made since). It returns the sub-threads as the group
// leaves them, for the commit on the workflow thread that the caller adds.
// Callers hold mu.
func (w *Workflow) restoreInto(ctx context.Context, g *thread.Group, p Point, v int64, subsAt map[string]subHead) (map[string]subHead, error) {
	var err error
	if p.Checkpoint != "" {
		err = g.Rollback(ctx, w.th, p.Checkpoint)
	} else {
		err = g.Restore(ctx, w.th, v)
	}
	if err != nil {
		return nil, fmt.Errorf("restore workflow %s to %s: %w", w.ID(), p, err)
	}
	// Each sub-thread goes back to the head recorded there, and is
	// recorded at the version that brings it back.
	now := map[string]subHead{}
	for _, key := range slices.Sorted(maps.Keys(subsAt)) {
		sub, err := w.db.Thread(ctx, subID(w.ID(), key))
		if err != nil {
			return nil, fmt.Errorf("restore workflow %s to %s: sub-thread %s was deleted since: %w", w.ID(), p, key, err)
		}
		h := subsAt[key]
		if sub.Record().Head == h.Head {
			// There already (if it is the thread recorded, not one made
			// anew since).
			if sub.Version() != h.Version {
				if _, err := w.recordedSub(ctx, key, h); err != nil {
					return nil, fmt.Errorf("restore workflow %s to %s: %w", w.ID(), p, err)
				}
			}
			now[key] = subHead{Version: sub.Version(), Head: h.Head}
			continue
		}
		if err := g.RestoreChecked(ctx, sub, h.Version, func(e thread.HistoryEntry) error { return recorded(key, h, e) }); err != nil {
			return nil, fmt.Errorf("restore workflow %s to %s: %w", w.ID(), p, err)
		}
		now[key] = subHead{Version: sub.Version() + 1, Head: h.Head}
	}
	for key := range w.subs {
		if _, ok := subsAt[key]; ok {
			continue
		}
		sub, err := w.db.Thread(ctx, subID(w.ID(), key))
		if err != nil {
			return nil, fmt.Errorf("restore workflow %s to %s: sub-thread %s: %w", w.ID(), p, key, err)
		}
		if sub.Record().Head != "" {
			if err := g.Reset(ctx, sub); err != nil {
				return nil, fmt.Errorf("restore workflow %s to %s: %w", w.ID(), p, err)
			}
		}
	}
	return now, nil
}

// recordedSub opens the sub-thread key and checks that its version h is
// the one the workflow recorded: the same head. A sub-thread deleted since
// (or deleted and made anew) is thread.ErrNotFound.
func (w *Workflow) recordedSub(ctx context.Context, key string, h subHead) (*thread.Thread, error) {
	sub, err := w.db.Thread(ctx, subID(w.ID(), key))
	if err != nil {
		return nil, fmt.Errorf("sub-thread %s was deleted since: %w", key, err)
	}
	for e, err := range sub.History(ctx, thread.HistoryOptions{Before: h.Version + 1, Limit: 1}) {
		if err != nil {
			return nil, fmt.Errorf("sub-thread %s: %w", key, err)
		}
		if err := recorded(key, h, e); err != nil {
			return nil, err
		}
		return sub, nil
	}
	return nil, fmt.Errorf("sub-thread %s has no version %d: %w", key, h.Version, thread.ErrNotFound)
}

// recorded checks that the history entry e is the version h of sub-thread
// key as the workflow recorded it.
func recorded(key string, h subHead, e thread.HistoryEntry) error {
	if e.Version == h.Version && e.Commit == h.Head {
		return nil
	}
	return fmt.Errorf("sub-thread %s was deleted and made anew since: version %d is not the one recorded: %w", key, h.Version, thread.ErrNotFound)
}

// ForkOptions describe a workflow made by Fork.
type ForkOptions struct {
	// ID names the new workflow; "" means a fresh id.
	ID string
	// Title names it; "" keeps the source's.
	Title string
	// Labels, when not nil, replace the source's labels.
	Labels map[string]string
}

// Fork makes a new workflow from p: its thread a fork of this one's at p,
// and each of its sub-threads a fork of the sub-thread as the workflow
// recorded it there, all in one atomic store operation that copies no
// message (O(number of sub-threads)). The fork has its own execution,
// which Run takes on from p, and it and its source evolve independently.
// A sub-thread that a step had used without ending is forked from where it
// was before the step used it, since the step runs again in the fork.
func (w *Workflow) Fork(ctx context.Context, p Point, opts ForkOptions) (*Workflow, error) {
	if opts.ID == "" {
		opts.ID = ids.New("wf_")
	}
	if !ids.Valid(opts.ID) || len(opts.ID) > maxIDLen {
		return nil, fmt.Errorf("fork workflow %s: id %q: letters, digits, '_', '-', '.', at most %d bytes: %w", w.ID(), clip(opts.ID), maxIDLen, thread.ErrInvalid)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.refresh(ctx); err != nil {
		return nil, err
	}
	v, err := w.resolve(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("fork: %w", err)
	}
	ex, subsAt, err := w.stateAt(ctx, v)
	if err != nil {
		return nil, err
	}
	// Where each sub-thread is forked from: where the workflow recorded
	// it, or, for one that unfinished steps had written to, where a run
	// would move it back to before they run again.
	from := map[string]int64{}
	for key, h := range subsAt {
		from[key] = h.Version
	}
	maps.Copy(from, restartPoints(ex, subsAt, slices.Collect(maps.Keys(ex.Uses))))
	ex = cloneExec(ex)
	ex.Runner = nil
	for step, uses := range ex.Uses {
		for key := range uses {
			ex.Uses[step][key] = 1
		}
	}
	g := w.db.Group()
	subs := map[string]subHead{}
	title := w.Title()
	if opts.Title != "" {
		title = opts.Title
	}
	for _, key := range slices.Sorted(maps.Keys(from)) {
		src, err := w.recordedSub(ctx, key, subsAt[key])
		if err != nil {
			return nil, fmt.Errorf("fork workflow %s at %s: %w", w.ID(), p, err)
		}
		so := subOptions(opts.ID, key, title)
		f, err := g.Fork(ctx, src, thread.ForkOptions{ID: so.ID, Version: from[key], Title: so.Title, Labels: so.Labels})
		if err != nil {
			return nil, fmt.Errorf("fork workflow %s at %s: %w", w.ID(), p, err)
		}
		subs[key] = subHead{Version: 1, Head: f.Record().Head}
	}
	st, err := encodeState(opts.ID, ex, subs)
	if err != nil {
		return nil, err
	}
	th, err := g.Fork(ctx, w.th, thread.ForkOptions{ID: opts.ID, Version: v, Title: opts.Title, Labels: opts.Labels, State: st})
	if err != nil {
		return nil, fmt.Errorf("fork workflow %s at %s: %w", w.ID(), p, err)
	}
	if err := g.Apply(ctx); err != nil {
		return nil, fmt.Errorf("fork workflow %s at %s: %w", w.ID(), p, err)
	}
	return &Workflow{db: w.db, th: th, ex: ex, subs: subs}, nil
}

// Snapshot is a whole workflow at one point: its execution state and the
// messages of each sub-thread as the workflow recorded it there.
type Snapshot struct {
	*Execution
	// Messages are each sub-thread's messages, by key.
	Messages map[string][]message.Message `json:"messages"`
	// At is when the workflow's thread reached that version.
	At time.Time `json:"at"`
}

// AtOptions select what At reads of each sub-thread.
type AtOptions struct {
	// Last reads only each sub-thread's newest Last messages; 0 means all.
	Last int
}

// At returns the whole workflow at p: the execution state there and each
// sub-thread's messages as the workflow recorded it (time travel for the
// whole workflow). A sub-thread deleted since is thread.ErrNotFound.
func (w *Workflow) At(ctx context.Context, p Point, opts AtOptions) (*Snapshot, error) {
	w.mu.Lock()
	v, err := w.resolve(ctx, p)
	w.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	ex, err := w.Execution(ctx, v)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Execution: ex, Messages: map[string][]message.Message{}}
	for e, err := range w.th.History(ctx, thread.HistoryOptions{Before: v + 1, Limit: 1}) {
		if err != nil {
			return nil, err
		}
		s.At = e.Time
	}
	for _, st := range ex.SubThreads {
		sub, err := w.recordedSub(ctx, st.Key, subHead{Version: st.Version, Head: st.Head})
		if err != nil {
			return nil, fmt.Errorf("workflow %s at %s: %w", w.ID(), p, err)
		}
		msgs, err := sub.Messages(ctx, thread.ReadOptions{Version: st.Version, Last: opts.Last})
		if err != nil {
			return nil, fmt.Errorf("workflow %s at %s: sub-thread %s: %w", w.ID(), p, st.Key, err)
		}
		s.Messages[st.Key] = msgs
	}
	return s, nil
}
