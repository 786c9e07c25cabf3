package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// MainKey is the key of the sub-thread every workflow has.
const MainKey = "main"

// maxKeyLen caps a sub-thread key or step name, and maxIDLen a workflow
// id, so that a sub-thread's id (workflow id, '.', key) is a valid id.
const (
	maxKeyLen = 32
	maxIDLen  = ids.MaxLen - 1 - maxKeyLen
)

// The labels that link a sub-thread to its workflow.
const (
	LabelWorkflow = "loom.workflow"
	LabelKey      = "loom.workflow.key"
)

// Owner is the value of thread.LabelOwner on a workflow's sub-threads,
// which listings leave out by default; the workflow's own thread is not
// marked.
const Owner = "workflow"

// validKey reports whether s can be a sub-thread key or a step name:
// letters, digits, '_' and '-', at most 32 bytes.
func validKey(s string) bool {
	if len(s) == 0 || len(s) > maxKeyLen || s[0] == '-' {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// subID is the id of a workflow's sub-thread.
func subID(workflow, key string) string { return workflow + "." + key }

// Workflow is a handle on one workflow: its own thread (kind workflow),
// whose state holds the execution state and the list of sub-threads and
// whose messages record every step taken, and its sub-threads, each a full
// loom thread. It is safe for concurrent use; its writes to the workflow
// thread run one at a time.
type Workflow struct {
	db *thread.DB

	mu   sync.Mutex // serializes writes to th, and guards ex and subs
	th   *thread.Thread
	ex   *execState
	subs map[string]subHead
	// running is the lease id of the runner running on this handle, if
	// any: this handle's own checkpoints do not wait for it.
	running string
	// subsJSON is subs as the last commit wrote it, nil when unknown.
	subsJSON json.RawMessage
	// recs are the step records of the thread at version recsAt, one a
	// message, in order, while a runner keeps them (from its claim, through
	// each commit of the handle), so that a run ends without reading them
	// back; recsAt is 0 when they are not kept.
	recs   []StepRun
	recsAt int64
	edits  []Edit // the edits recorded, with recs
}

// CreateOptions describe a new workflow.
type CreateOptions struct {
	// ID names the workflow; "" means a fresh id ("wf_…"). An id is at
	// most 95 bytes, so that its sub-threads' ids are ids too.
	ID     string
	Title  string
	Labels map[string]string
	// Input is the workflow's input, given to its first steps as JSON.
	Input any
	// SubThreads are keys of sub-threads made with it, besides MainKey.
	SubThreads []string
}

// Create makes a workflow and its sub-threads (MainKey and
// opts.SubThreads) in one atomic store operation. An id taken is
// thread.ErrConflict.
func Create(ctx context.Context, db *thread.DB, opts CreateOptions) (*Workflow, error) {
	if opts.ID == "" {
		opts.ID = ids.New("wf_")
	}
	if !ids.Valid(opts.ID) || len(opts.ID) > maxIDLen {
		return nil, fmt.Errorf("create workflow: id %q: letters, digits, '_', '-', '.', at most %d bytes: %w", clip(opts.ID), maxIDLen, thread.ErrInvalid)
	}
	keys := dedupe(append([]string{MainKey}, opts.SubThreads...))
	for _, k := range keys {
		if !validKey(k) {
			return nil, fmt.Errorf("create workflow %s: sub-thread key %q: letters, digits, '_' and '-', at most %d bytes: %w", opts.ID, clip(k), maxKeyLen, thread.ErrInvalid)
		}
	}
	ex := &execState{Status: StatusPending}
	if opts.Input != nil {
		b, err := json.Marshal(opts.Input)
		if err != nil {
			return nil, fmt.Errorf("create workflow %s: input: %v: %w", opts.ID, err, thread.ErrInvalid)
		}
		ex.Input = b
	}
	subs := map[string]subHead{}
	for _, k := range keys {
		subs[k] = subHead{Version: 1}
	}
	st, err := encodeState(opts.ID, ex, subs)
	if err != nil {
		return nil, err
	}
	g := db.Group()
	th, err := g.Create(ctx, thread.CreateOptions{ID: opts.ID, Kind: thread.KindWorkflow, Title: opts.Title, Labels: opts.Labels, State: st})
	if err != nil {
		return nil, fmt.Errorf("create workflow: %w", err)
	}
	for _, k := range keys {
		if _, err := g.Create(ctx, subOptions(opts.ID, k, opts.Title)); err != nil {
			return nil, fmt.Errorf("create workflow %s: %w", opts.ID, err)
		}
	}
	if err := g.Apply(ctx); err != nil {
		return nil, fmt.Errorf("create workflow %s: %w", opts.ID, err)
	}
	return &Workflow{db: db, th: th, ex: ex, subs: subs}, nil
}

func subOptions(workflow, key, title string) thread.CreateOptions {
	if title == "" {
		title = workflow
	}
	return thread.CreateOptions{ID: subID(workflow, key), Kind: thread.KindLocal, Parent: workflow,
		Title: clipTitle(title + " · " + key), Labels: map[string]string{LabelWorkflow: workflow, LabelKey: key, thread.LabelOwner: Owner}}
}

func clipTitle(s string) string {
	if len(s) > 512 {
		return s[:512]
	}
	return s
}

// Open returns a handle on the workflow id. A thread that is not a
// workflow is ErrNotWorkflow (which is thread.ErrNotFound).
func Open(ctx context.Context, db *thread.DB, id string) (*Workflow, error) {
	th, err := db.Thread(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("open workflow: %w", err)
	}
	return wrap(ctx, db, th)
}

func wrap(ctx context.Context, db *thread.DB, th *thread.Thread) (*Workflow, error) {
	if th.Kind() != thread.KindWorkflow {
		return nil, fmt.Errorf("open workflow %s: %w", th.ID(), ErrNotWorkflow)
	}
	w := &Workflow{db: db, th: th}
	if err := w.load(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// load reads the execution state at the handle's version. Callers hold mu
// or own w alone.
func (w *Workflow) load(ctx context.Context) error {
	st, err := w.th.State(ctx, 0)
	if err != nil {
		return fmt.Errorf("workflow %s: %w", w.th.ID(), err)
	}
	ex, subs, err := decodeState(w.th.ID(), st)
	if err != nil {
		return err
	}
	w.ex, w.subs, w.subsJSON = ex, subs, nil
	w.recs, w.recsAt = nil, 0
	return nil
}

// List yields the workflows of db that match opts (whose Kind is set to
// workflow), in id order.
func List(ctx context.Context, db *thread.DB, opts thread.ListOptions) iter.Seq2[*Workflow, error] {
	opts.Kind = thread.KindWorkflow
	return func(yield func(*Workflow, error) bool) {
		for th, err := range db.Threads(ctx, opts) {
			if err != nil {
				yield(nil, err)
				return
			}
			w, err := wrap(ctx, db, th)
			if !yield(w, err) || err != nil {
				return
			}
		}
	}
}

// Delete deletes the workflow id and its sub-threads, in one atomic store
// operation. It cannot be undone.
func Delete(ctx context.Context, db *thread.DB, id string) error {
	w, err := Open(ctx, db, id)
	if err != nil {
		return fmt.Errorf("delete workflow: %w", err)
	}
	return w.Delete(ctx)
}

// Delete deletes the workflow and every sub-thread linked to it, in one
// atomic store operation, unless a runner holds it (ErrBusy).
func (w *Workflow) Delete(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.refuseBusy(ctx, false); err != nil {
		return fmt.Errorf("delete workflow %s: %w", w.th.ID(), err)
	}
	g := w.db.Group()
	if err := g.Delete(ctx, w.th); err != nil {
		return err
	}
	// The linked threads, listed or not (a restore resets the sub-threads
	// made after its point, and keeps them).
	for th, err := range w.db.Threads(ctx, thread.ListOptions{Labels: map[string]string{LabelWorkflow: w.th.ID()}}) {
		if err != nil {
			return fmt.Errorf("delete workflow %s: %w", w.th.ID(), err)
		}
		if th.ID() != subID(w.th.ID(), th.Record().Labels[LabelKey]) {
			continue // a thread that only claims the label
		}
		if err := g.Delete(ctx, th); err != nil {
			return err
		}
	}
	if err := g.Apply(ctx); err != nil {
		return fmt.Errorf("delete workflow %s: %w", w.th.ID(), err)
	}
	return nil
}

// ID returns the workflow's id.
func (w *Workflow) ID() string { return w.th.ID() }

// Title returns the workflow's title.
func (w *Workflow) Title() string { return w.th.Title() }

// Thread returns the workflow's own thread.
func (w *Workflow) Thread() *thread.Thread { return w.th }

// DB returns the database the workflow lives in.
func (w *Workflow) DB() *thread.DB { return w.db }

// Version returns the version of the workflow's thread the handle is at.
func (w *Workflow) Version() int64 { return w.th.Version() }

// Status returns the workflow's status as of the handle's version.
func (w *Workflow) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ex.Status
}

// Round returns the round in progress as of the handle's version: 0 while
// the workflow is pending, then from 1 (see Execution.Round).
func (w *Workflow) Round() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ex.Round
}

// Refresh moves the handle to the workflow's current version.
func (w *Workflow) Refresh(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.refresh(ctx)
}

func (w *Workflow) refresh(ctx context.Context) error {
	if err := w.th.Refresh(ctx); err != nil {
		return err
	}
	return w.load(ctx)
}

// SubThreadKeys returns the keys of the workflow's sub-threads, sorted.
func (w *Workflow) SubThreadKeys() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(maps.Keys(w.subs))
}

// SubThread returns a handle on the sub-thread key. A key the workflow
// does not have is thread.ErrNotFound.
func (w *Workflow) SubThread(ctx context.Context, key string) (*thread.Thread, error) {
	w.mu.Lock()
	_, ok := w.subs[key]
	w.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("workflow %s: sub-thread %q: %w", w.ID(), clip(key), thread.ErrNotFound)
	}
	return w.db.Thread(ctx, subID(w.ID(), key))
}

// SubThreadOptions describe a new sub-thread.
type SubThreadOptions struct {
	// Title names it; "" means the workflow's title and the key.
	Title string
}

// CreateSubThread makes the sub-thread key (for an agent, usually named
// after it) and records it in the workflow, in one atomic store operation.
// A key that is not letters, digits, '_' and '-' (at most 32 bytes) is
// thread.ErrInvalid; a key the workflow has is thread.ErrConflict, and so
// is a thread of that id that is not the workflow's; a workflow that
// another runner holds is ErrBusy. Steps use Step.SubThread instead.
func (w *Workflow) CreateSubThread(ctx context.Context, key string, opts SubThreadOptions) (*thread.Thread, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.refuseBusy(ctx, true); err != nil {
		return nil, fmt.Errorf("workflow %s: sub-thread %q: %w", w.ID(), clip(key), err)
	}
	return w.createSub(ctx, key, opts, nil)
}

// createSub makes the sub-thread key; with mut, it changes the execution
// state in the same commit. Callers hold mu.
func (w *Workflow) createSub(ctx context.Context, key string, opts SubThreadOptions, mut func(*execState) error) (*thread.Thread, error) {
	if !validKey(key) {
		return nil, fmt.Errorf("workflow %s: sub-thread key %q: letters, digits, '_' and '-', at most %d bytes: %w", w.ID(), clip(key), maxKeyLen, thread.ErrInvalid)
	}
	if _, ok := w.subs[key]; ok {
		return nil, fmt.Errorf("workflow %s: sub-thread %q exists: %w", w.ID(), key, thread.ErrConflict)
	}
	so := subOptions(w.ID(), key, w.Title())
	if opts.Title != "" {
		so.Title = opts.Title
	}
	var sub *thread.Thread
	err := w.commit(ctx, "sub-thread "+key, nil, func(g *thread.Group, ex *execState, subs map[string]subHead) error {
		// A thread of this key made before a restore went back past it is
		// taken up again, emptied.
		old, err := w.db.Thread(ctx, so.ID)
		switch {
		case err == nil && old.Kind() == thread.KindLocal && old.Record().Labels[LabelWorkflow] == w.ID() && old.Record().Labels[LabelKey] == key:
			if old.Record().Head != "" {
				if err := g.Reset(ctx, old); err != nil {
					return err
				}
			}
			sub = old
		case err == nil:
			return fmt.Errorf("workflow %s: sub-thread %q: thread %s exists: %w", w.ID(), key, so.ID, thread.ErrConflict)
		default:
			if sub, err = g.Create(ctx, so); err != nil {
				return err
			}
		}
		v := sub.Version()
		if sub.Record().Head != "" {
			v++ // the reset above
		}
		subs[key] = subHead{Version: v}
		if mut != nil {
			return mut(ex)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := sub.Refresh(ctx); err != nil {
		return nil, err
	}
	return sub, nil
}

// DeleteSubThread deletes the sub-thread key and removes it from the
// workflow, in one atomic store operation. MainKey cannot be deleted
// (thread.ErrInvalid), nor a sub-thread that a step which has not ended
// uses (thread.ErrConflict), nor one of a workflow that another runner
// holds (ErrBusy). A checkpoint or version from before the deletion
// can no longer be restored (thread.ErrNotFound): the sub-thread's history
// went with it.
func (w *Workflow) DeleteSubThread(ctx context.Context, key string) error {
	if key == MainKey {
		return fmt.Errorf("workflow %s: the main sub-thread cannot be deleted: %w", w.ID(), thread.ErrInvalid)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.subs[key]; !ok {
		return fmt.Errorf("workflow %s: sub-thread %q: %w", w.ID(), clip(key), thread.ErrNotFound)
	}
	if err := w.refuseBusy(ctx, true); err != nil {
		return fmt.Errorf("workflow %s: sub-thread %q: %w", w.ID(), key, err)
	}
	for step, uses := range w.ex.Uses {
		if _, ok := uses[key]; ok {
			return fmt.Errorf("workflow %s: sub-thread %q is used by step %s, which has not ended: %w", w.ID(), key, step, thread.ErrConflict)
		}
	}
	sub, err := w.db.Thread(ctx, subID(w.ID(), key))
	if err != nil {
		return fmt.Errorf("workflow %s: sub-thread %q: %w", w.ID(), key, err)
	}
	return w.commit(ctx, "delete sub-thread "+key, nil, func(g *thread.Group, _ *execState, subs map[string]subHead) error {
		delete(subs, key)
		return g.Delete(ctx, sub)
	})
}

// commit writes one commit on the workflow thread — step records msgs, and
// the execution state and sub-threads as change leaves them — together
// with whatever change adds to the group, in one atomic store operation.
// change works on copies; w keeps them only when the group is applied.
// Callers hold mu.
func (w *Workflow) commit(ctx context.Context, what string, recs []StepRun, change func(g *thread.Group, ex *execState, subs map[string]subHead) error) error {
	return w.commitThen(ctx, what, recs, change, nil)
}

// commitThen is commit, with then adding to the group after the commit (a
// checkpoint of the workflow thread names the commit).
func (w *Workflow) commitThen(ctx context.Context, what string, recs []StepRun, change func(g *thread.Group, ex *execState, subs map[string]subHead) error, then func(g *thread.Group) error) error {
	return w.commitRecs(ctx, what, func(g *thread.Group, ex *execState, subs map[string]subHead) ([]StepRun, []StepRun, error) {
		if change != nil {
			if err := change(g, ex, subs); err != nil {
				return nil, nil, err
			}
		}
		return recs, nil, nil
	}, then)
}

// commitRecs is commitThen whose change returns the step records the
// commit holds, which it may make from the execution state it leaves: recs,
// and starts, the starts of steps that the commit's metadata names besides
// what (the runner starts the steps of a round in the commit that ends the
// round before).
func (w *Workflow) commitRecs(ctx context.Context, what string, change func(g *thread.Group, ex *execState, subs map[string]subHead) (recs, starts []StepRun, err error), then func(g *thread.Group) error) error {
	ex, subs := cloneExec(w.ex), maps.Clone(w.subs)
	from := w.th.Version()
	g := w.db.Group()
	recs, starts, err := change(g, ex, subs)
	if err != nil {
		return fmt.Errorf("workflow %s: %s: %w", w.ID(), what, err)
	}
	meta := what
	for i, s := range starts {
		if len(meta)+len(s.ID) > maxMetaLen {
			// A fan-out of thousands starts more steps than a commit's
			// metadata value holds (4 KB): the records name them all.
			meta += fmt.Sprintf(" and %d more", len(starts)-i)
			break
		}
		if i == 0 {
			meta += ", start "
		} else {
			meta += ", "
		}
		meta += s.ID
	}
	if len(starts) > 0 {
		recs = slices.Concat(recs, starts)
	}
	var st map[string]json.RawMessage
	if w.subsJSON != nil && maps.Equal(subs, w.subs) {
		// Most commits (a step's start, most ends) leave the sub-threads
		// as they were: their JSON is kept from the last.
		st, err = encodeExec(ex, w.subsJSON)
	} else {
		st, err = encodeState(w.ID(), ex, subs)
	}
	if err != nil {
		return fmt.Errorf("workflow %s: %s: %w", w.ID(), what, err)
	}
	ms, err := stepMessages(recs)
	if err != nil {
		return fmt.Errorf("workflow %s: %s: %w", w.ID(), what, err)
	}
	if _, err := g.Commit(ctx, w.th, thread.CommitOptions{Messages: ms, State: st, Metadata: map[string]string{"workflow": meta}}); err != nil {
		return fmt.Errorf("workflow %s: %s: %w", w.ID(), what, err)
	}
	if then != nil {
		if err := then(g); err != nil {
			return fmt.Errorf("workflow %s: %s: %w", w.ID(), what, err)
		}
	}
	if err := g.Apply(ctx); err != nil {
		return fmt.Errorf("workflow %s: %s: %w", w.ID(), what, err)
	}
	if w.recsAt != 0 && w.recsAt == from && w.th.Version() == from+1 {
		w.recs, w.recsAt = append(w.recs, recs...), w.th.Version()
	} else {
		w.recs, w.recsAt = nil, 0
	}
	w.ex, w.subs, w.subsJSON = ex, subs, st[keySubs]
	return nil
}

// maxMetaLen is where the list of a commit's starts stops, in its
// "workflow" metadata, whose values thread caps at 4,096 bytes.
const maxMetaLen = 3000

func stepMessages(recs []StepRun) ([]message.Message, error) {
	out := make([]message.Message, 0, len(recs))
	for _, r := range recs {
		m, err := stepMessage(r)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func cloneExec(ex *execState) *execState {
	c := *ex
	c.Current, c.Done, c.Next, c.Failed = slices.Clone(ex.Current), slices.Clone(ex.Done), slices.Clone(ex.Next), slices.Clone(ex.Failed)
	c.Waiting = slices.Clone(ex.Waiting)
	c.Attempts = maps.Clone(ex.Attempts)
	c.Inputs = maps.Clone(ex.Inputs)
	c.Given = maps.Clone(ex.Given)
	c.Follow = slices.Clone(ex.Follow)
	if ex.Uses != nil {
		c.Uses = make(map[string]map[string]int64, len(ex.Uses))
		for k, v := range ex.Uses {
			c.Uses[k] = maps.Clone(v)
		}
	}
	if ex.Runner != nil {
		r := *ex.Runner
		c.Runner = &r
	}
	return &c
}

// Execution returns the execution state at version (0: the handle's
// version): where the workflow stood, every step attempt it had taken, and
// its sub-threads as it had recorded them.
func (w *Workflow) Execution(ctx context.Context, version int64) (*Execution, error) {
	if version == 0 {
		version = w.th.Version()
	}
	st, err := w.th.State(ctx, version)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %w", w.ID(), err)
	}
	ex, subs, err := decodeState(w.ID(), st)
	if err != nil {
		return nil, err
	}
	msgs, err := w.th.Messages(ctx, thread.ReadOptions{Version: version})
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %w", w.ID(), err)
	}
	return execution(w.ID(), version, ex, subs, stepRecords(msgs), editRecords(msgs)), nil
}

// keptExecution returns the execution state at the handle's version from
// what the handle keeps (the step records a runner kept), and lets the
// records go; nil when it does not keep them. Callers hold mu.
func (w *Workflow) keptExecution() *Execution {
	v := w.th.Version()
	if w.recsAt == 0 || w.recsAt != v || w.ex.Runner != nil && !utf8.ValidString(w.ex.Runner.Host) {
		return nil
	}
	ex := cloneExec(w.ex)
	ex.Input = slices.Clone(ex.Input)
	e := execution(w.ID(), v, ex, w.subs, w.recs, w.edits)
	w.recs, w.recsAt, w.edits = nil, 0, nil
	return e
}
