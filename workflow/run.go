package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/thread"
)

// RunOptions tune Run. A nil *RunOptions means the defaults.
type RunOptions struct {
	// Wait makes Run wait while another runner holds the workflow, and
	// then go on from where that one left it, instead of returning
	// ErrBusy.
	Wait bool
	// LeaseTTL is how long the runner's lease on the workflow lasts
	// without being renewed; 0 means 30 seconds. The runner renews it with
	// each commit, and every LeaseTTL/3 while a step runs long. Another
	// process may take the workflow over once the lease has run out, or at
	// once, on the same host, when the runner's process is gone.
	LeaseTTL time.Duration
	// Now is the clock of the runner's records and lease deadlines; nil
	// means time.Now. Whether a lease has run out is always judged by the
	// wall clock.
	Now func() time.Time
	// MaxRounds is how many rounds this Run may run (LangGraph's
	// recursion_limit, which counts super-steps per invocation); 0 means
	// DefaultMaxRounds. The round in progress when Run starts counts as
	// the first. A Run that would start one more stops before it with a
	// *StepLimitError and lets its lease go: nothing of the next round has
	// started, and a later Run, with the same limit or a higher one, goes
	// on from exactly there. It is what stops a loop that never ends.
	MaxRounds int
}

// DefaultMaxRounds is the number of rounds a Run runs at most when
// RunOptions.MaxRounds is 0: far more than a graph without loops needs
// (one round per step of its longest path), few enough that a loop that
// never ends stops within seconds of commits.
const DefaultMaxRounds = 100

// StepLimitError is the error of Run when it reached its RunOptions.MaxRounds
// with steps still to run. The workflow stays StatusRunning, with no
// runner: the next Run goes on from Round, where it stopped. It is
// ErrStepLimit.
type StepLimitError struct {
	Workflow string
	// Limit is the number of rounds the Run ran; Round is the round it
	// stopped before, which the next Run starts with.
	Limit int
	Round int
}

func (e *StepLimitError) Error() string {
	return fmt.Sprintf("workflow %s: ran %d rounds, stopped before round %d: %v", e.Workflow, e.Limit, e.Round, ErrStepLimit)
}

func (e *StepLimitError) Unwrap() error { return ErrStepLimit }

// StepError is the error of Run when a step failed: the workflow is then
// StatusFailed, and the next Run runs the failed steps again.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return fmt.Sprintf("step %s: %v", e.Step, e.Err) }
func (e *StepError) Unwrap() error { return e.Err }

// Run runs the workflow on the steps g declares, from where it stands,
// until it is done, waits for input, or a step fails, and returns its
// execution state then.
//
// Each step is recorded as it starts and as it ends, each record a message
// of the workflow thread, committed with what the step changed in the
// execution state (its output, the successors it chose, the sub-threads it
// used). A step's start is committed before its func is called: the claim
// starts the first round's steps, and the commit that ends a round starts
// the next round's, so a step that does nothing costs one commit. A
// workflow whose runner was killed at any moment therefore resumes, at the
// next Run, from its last committed step: steps that ended are not run
// again; a step that had started and not ended runs again, after the
// sub-threads it had used are moved back to where they were before it used
// them, so that its second attempt starts from what its first one saw.
//
// One runner runs a workflow at a time: Run takes a lease on it (see
// RunOptions), and another Run meanwhile returns ErrBusy or, with Wait,
// waits its turn. A runner that finds the workflow moved under it (a
// Restore, or a runner that took over an expired lease) stops with
// thread.ErrConflict, and never records a step's end twice. The lease
// fences the workflow thread, not the sub-threads: a runner that stalled
// past its lease may still append to a sub-thread until its next commit
// to the workflow fails; the next runner then moves that sub-thread back
// only if the step it belonged to runs again. A lease is also judged by
// host name and process id, so processes on hosts that share a name (such
// as containers with separate process namespaces) should not run one
// workflow at once.
//
// A workflow waiting for input returns with StatusWaiting and no error;
// Provide gives the input, and the next Run (in any process) goes on. A
// failed step returns a *StepError. A Run that ran RunOptions.MaxRounds
// rounds with more to run returns a *StepLimitError, the workflow left to
// the next Run. A done workflow returns at once.
func (w *Workflow) Run(ctx context.Context, g *Graph, opts *RunOptions) (*Execution, error) {
	if err := g.Check(); err != nil {
		return nil, fmt.Errorf("run workflow %s: %w", w.ID(), err)
	}
	r := &runner{w: w, g: g, id: ids.New("run_"), ttl: 30 * time.Second, now: time.Now, limit: DefaultMaxRounds}
	if opts != nil {
		if opts.MaxRounds < 0 {
			return nil, fmt.Errorf("run workflow %s: max rounds %d: %w", w.ID(), opts.MaxRounds, thread.ErrInvalid)
		}
		if opts.MaxRounds > 0 {
			r.limit = opts.MaxRounds
		}
		if opts.LeaseTTL > 0 {
			r.ttl = opts.LeaseTTL
		}
		if opts.Now != nil {
			r.now = opts.Now
		}
	}
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		run, err := r.claim(ctx)
		if err == nil && !run {
			return w.Execution(ctx, 0)
		}
		if err == nil {
			break
		}
		if opts == nil || !opts.Wait || !errors.Is(err, thread.ErrConflict) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("run workflow %s: waiting for the other runner: %w", w.ID(), ctx.Err())
		case <-time.After(wait):
		}
	}
	err := r.run(ctx)
	w.mu.Lock()
	ex := w.keptExecution()
	w.mu.Unlock()
	var xerr error
	if ex == nil {
		ex, xerr = w.Execution(context.WithoutCancel(ctx), 0)
	}
	if err != nil {
		return ex, err
	}
	return ex, xerr
}

// runner is one Run of a workflow.
type runner struct {
	w   *Workflow
	g   *Graph
	id  string
	ttl time.Duration
	now func() time.Time

	// Guarded by w.mu.
	outputs map[string]StepRun // the newest ended attempt of each step
	// ended are the ended attempts of the previous and current rounds, by
	// round and name: a step's input is made of the previous round's, which
	// a step of the current round ending meanwhile must not hide.
	ended map[int]map[string]StepRun
	// started are the start records, by step, that a commit made ahead of
	// their step's call: the claim, and the commit that ended the round
	// before, start the steps of the round (so that a step that does
	// nothing costs one commit, its end). A step takes its record when it
	// is called; release gives back the attempts of those never called.
	started    map[string]StepRun
	lastCommit time.Time
	fatal      error // the workflow moved under the runner
	// rounds counts the rounds this run started, up to limit; limited is
	// set when a round ended with the next one left unstarted for it.
	rounds, limit int
	limited       bool
}

func (r *runner) lease() *Lease {
	return &Lease{ID: r.id, Host: hostname(), PID: os.Getpid(), Until: r.now().Add(r.ttl).UTC()}
}

// claim takes the workflow for this runner, if there is anything to run:
// it reads the workflow, refuses a live lease of another runner, and in
// one commit takes the lease, starts a pending workflow, clears a failure
// and moves the sub-threads that unfinished steps had used back to where
// they were before them.
func (r *runner) claim(ctx context.Context) (bool, error) {
	w := r.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.refresh(ctx); err != nil {
		return false, fmt.Errorf("run workflow %s: %w", w.ID(), err)
	}
	ex := w.ex
	if ex.Status == StatusDone {
		return false, nil
	}
	if err := w.refuseBusy(ctx, false); err != nil {
		return false, fmt.Errorf("run workflow %s: %w", w.ID(), err)
	}
	if err := r.g.checkState(ex); err != nil {
		return false, fmt.Errorf("run workflow %s: %w", w.ID(), err)
	}
	if len(r.runnable(ex)) == 0 && ex.Status == StatusWaiting {
		return false, nil
	}
	msgs, err := w.th.Messages(ctx, thread.ReadOptions{})
	if err != nil {
		return false, fmt.Errorf("run workflow %s: %w", w.ID(), err)
	}
	recs := stepRecords(msgs)
	r.outputs, r.ended = map[string]StepRun{}, map[int]map[string]StepRun{}
	for _, s := range foldRuns(recs) {
		if s.Status == StatusDone {
			r.keep(s, ex.Round)
		}
	}
	// The handle keeps the records through the run's commits, for the
	// execution state Run returns.
	w.recs, w.recsAt, w.edits = recs, w.th.Version(), editRecords(msgs)
	var starts []StepRun
	err = w.commitRecs(ctx, "claim", func(g *thread.Group, ex *execState, subs map[string]subHead) ([]StepRun, []StepRun, error) {
		ex.Runner = r.lease()
		switch ex.Status {
		case StatusPending:
			ex.Round, ex.Current = 1, r.g.starts()
		case StatusFailed:
			ex.Error, ex.Failed = "", nil
		}
		ex.Status = StatusRunning
		if len(r.runnable(ex)) == 0 && len(ex.Waiting) > 0 {
			ex.Status = StatusWaiting
		}
		// The steps an edit ended are followed by their declared
		// successors, as a step that returned without Goto is; their
		// records say so again, with the successors, for the inputs of
		// the next round (in this run or, after a crash, the next).
		var followed []StepRun
		for _, name := range ex.Follow {
			step, _, _ := parseTask(name)
			next := r.g.steps[step].next
			for _, n := range next {
				if !slices.Contains(ex.Next, n) {
					ex.Next = append(ex.Next, n)
				}
			}
			if rec, ok := r.ended[ex.Round][name]; ok {
				rec.Next = slices.Clone(next)
				r.keep(rec, ex.Round)
				followed = append(followed, rec)
			}
		}
		ex.Follow = nil
		// The steps that will run again start from what they saw.
		back := restartPoints(ex, subs, r.runnable(ex))
		for _, step := range r.runnable(ex) {
			delete(ex.Uses, step)
		}
		for _, key := range slices.Sorted(maps.Keys(back)) {
			if err := w.moveBack(ctx, g, subs, key, back[key]); err != nil {
				return nil, nil, err
			}
		}
		if err := r.advance(ex); err != nil {
			return nil, nil, err
		}
		// The records restated and the starts share the commit's
		// messages.
		starts = r.startRound(ex, maxStartAhead-len(followed))
		if ex.Status == StatusRunning && len(r.runnable(ex)) > 0 {
			r.rounds = 1
		}
		return followed, starts, nil
	}, nil)
	if err != nil {
		return false, err
	}
	r.started = map[string]StepRun{}
	r.took(starts)
	r.lastCommit = r.now()
	w.running = r.id
	return true, nil
}

// keep keeps an ended step attempt, as of the round in progress: its
// output for Step.Output, and for the inputs of the next round. Callers
// hold w.mu.
func (r *runner) keep(s StepRun, round int) {
	r.outputs[s.Name] = s
	if s.Round < round-1 {
		return
	}
	if r.ended[s.Round] == nil {
		r.ended[s.Round] = map[string]StepRun{}
		for k := range r.ended {
			if k < s.Round-1 {
				delete(r.ended, k)
			}
		}
	}
	r.ended[s.Round][s.Name] = s
}

// restartPoints returns, for each sub-thread that the steps (to run again)
// had used, the version to move it back to before they do: where it was
// before the first of them used it, but never before what a step that
// ended recorded of it (a step of the same round that shared it, or an
// earlier one), so that what ended stays. What an interrupted step wrote
// to a sub-thread it shared before the other step ended stays too: steps
// that run at once are best given sub-threads of their own.
func restartPoints(ex *execState, subs map[string]subHead, steps []string) map[string]int64 {
	back := map[string]int64{}
	for _, step := range steps {
		for key, before := range ex.Uses[step] {
			if v, ok := back[key]; !ok || before < v {
				back[key] = before
			}
		}
	}
	for key, v := range back {
		if h, ok := subs[key]; !ok {
			delete(back, key) // deleted since
		} else {
			back[key] = max(v, h.Version)
		}
	}
	return back
}

// moveBack adds to g the move of sub-thread key back to its version v,
// unless it is at v's head.
func (w *Workflow) moveBack(ctx context.Context, g *thread.Group, subs map[string]subHead, key string, v int64) error {
	sub, err := w.db.Thread(ctx, subID(w.ID(), key))
	if err != nil {
		return fmt.Errorf("sub-thread %s: %w", key, err)
	}
	if sub.Version() == v {
		subs[key] = subHead{Version: v, Head: sub.Record().Head}
		return nil
	}
	var head string
	found := false
	for e, err := range sub.History(ctx, thread.HistoryOptions{Before: v + 1, Limit: 1}) {
		if err != nil {
			return fmt.Errorf("sub-thread %s: %w", key, err)
		}
		head, found = e.Commit, e.Version == v
	}
	switch {
	case !found:
		return fmt.Errorf("sub-thread %s has no version %d: %w", key, v, thread.ErrNotFound)
	case head == sub.Record().Head:
		// At that head already: no move.
		subs[key] = subHead{Version: sub.Version(), Head: head}
		return nil
	}
	if err := g.Restore(ctx, sub, v); err != nil {
		return err
	}
	subs[key] = subHead{Version: sub.Version() + 1, Head: head}
	return nil
}

// runnable returns the steps of the current round that are to run: not
// ended, and not waiting for an input not given yet.
func (r *runner) runnable(ex *execState) []string {
	if len(ex.Done)+len(ex.Waiting) == 0 {
		return slices.Clone(ex.Current)
	}
	// A set, not a scan of Done per step: every commit of a fan-out of N
	// asks, and N scans of N names a commit made its round O(N³).
	skip := make(map[string]bool, len(ex.Done)+len(ex.Waiting))
	for _, s := range ex.Done {
		skip[s] = true
	}
	for _, wt := range ex.Waiting {
		skip[wt.Step] = true
	}
	var out []string
	for _, s := range ex.Current {
		if !skip[s] {
			out = append(out, s)
		}
	}
	return out
}

// startRound makes the start records of the round's steps that are to run,
// at most limit of them, counting their attempts in ex, for the commit
// that leaves ex. Callers hold w.mu.
func (r *runner) startRound(ex *execState, limit int) []StepRun {
	if ex.Status != StatusRunning {
		return nil
	}
	var recs []StepRun
	todo := r.runnable(ex)
	// The rest start by a commit of their own when they run: a commit
	// holds at most 10,000 messages, and a fan-out may send as many.
	todo = todo[:max(0, min(len(todo), limit))]
	for _, name := range todo {
		if ex.Attempts == nil {
			ex.Attempts = map[string]int{}
		}
		ex.Attempts[name]++
		a := ex.Attempts[name]
		recs = append(recs, StepRun{ID: stepID(ex.Round, name, a), Name: name, Round: ex.Round, Attempt: a,
			Status: StatusRunning, Start: r.now().UTC(), Input: r.inputOf(ex, name)})
	}
	return recs
}

// maxStartAhead is the most steps one commit starts ahead of their calls.
const maxStartAhead = 1000

// took keeps the start records of a commit that was applied, for the
// steps' calls. Callers hold w.mu.
func (r *runner) took(starts []StepRun) {
	for _, s := range starts {
		r.started[s.Name] = s
	}
}

// advance ends the round when all its steps ended: the successors they
// chose make the next round, and a round with none ends the workflow,
// which lets its lease go.
func (r *runner) advance(ex *execState) error {
	for ex.Status == StatusRunning && len(ex.Current) > 0 && len(ex.Done) == len(ex.Current) {
		ex.Round++
		ex.Current, ex.Done, ex.Next, ex.Attempts, ex.Given = ex.Next, nil, nil, nil, nil
	}
	if ex.Status == StatusRunning && len(ex.Current) == 0 {
		ex.Status, ex.Runner, ex.Uses, ex.Inputs = StatusDone, nil, nil, nil
	}
	return nil
}

// run runs rounds until the workflow is done, waits, fails, or moves under
// the runner; it lets the lease go when it stops.
func (r *runner) run(ctx context.Context) error {
	w := r.w
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { r.renew(ctx, cancel, stop) })
	defer func() {
		close(stop)
		bg.Wait()
	}()
	for {
		w.mu.Lock()
		ex := w.ex
		todo := r.runnable(ex)
		status := ex.Status
		w.mu.Unlock()
		if status != StatusRunning || len(todo) == 0 || r.limited {
			return r.release(ctx)
		}
		if len(todo) == 1 {
			// A round of one step runs on the run's own goroutine.
			if err := r.step(ctx, todo[0]); err != nil {
				cancel(err)
			}
		} else {
			var steps sync.WaitGroup
			for _, name := range todo {
				steps.Go(func() {
					if err := r.step(ctx, name); err != nil {
						cancel(err)
					}
				})
			}
			steps.Wait()
		}
		if err := context.Cause(ctx); err != nil {
			w.mu.Lock()
			fatal := r.fatal
			w.mu.Unlock()
			if fatal == nil {
				// Cancelled by the caller: the steps cut short run again
				// next time; the lease goes now.
				err = errors.Join(err, r.release(ctx))
			}
			return err
		}
	}
}

// release ends the run: it lets the lease go (unless the workflow ended,
// which let it go already) and returns the error the status calls for.
func (r *runner) release(ctx context.Context) error {
	w := r.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running == r.id {
		w.running = ""
	}
	if r.fatal != nil {
		return r.fatal
	}
	if w.ex.Runner != nil && w.ex.Runner.ID == r.id {
		if err := w.commit(context.WithoutCancel(ctx), "release", nil, func(_ *thread.Group, ex *execState, _ map[string]subHead) error {
			ex.Runner = nil
			// A step started ahead and never called (the run was cut
			// short) takes the same attempt next time.
			for name, s := range r.started {
				if s.Round == ex.Round && ex.Attempts[name] == s.Attempt {
					ex.Attempts[name]--
					if ex.Attempts[name] == 0 {
						delete(ex.Attempts, name)
					}
				}
			}
			if len(ex.Attempts) == 0 {
				ex.Attempts = nil
			}
			return nil
		}); err != nil {
			return err
		}
		clear(r.started)
	}
	if r.limited && w.ex.Status == StatusRunning {
		return &StepLimitError{Workflow: w.ID(), Limit: r.rounds, Round: w.ex.Round}
	}
	if w.ex.Status == StatusFailed {
		name := ""
		if len(w.ex.Failed) > 0 {
			name = w.ex.Failed[0]
		}
		return &StepError{Step: name, Err: errors.New(w.ex.Error)}
	}
	return nil
}

// renew renews the lease while steps run long, and cancels the run if the
// workflow moved under it.
func (r *runner) renew(ctx context.Context, cancel context.CancelCauseFunc, stop chan struct{}) {
	t := time.NewTicker(max(r.ttl/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w := r.w
		w.mu.Lock()
		var err error
		if w.ex.Runner != nil && w.ex.Runner.ID == r.id && r.now().Sub(r.lastCommit) >= r.ttl/3 {
			err = r.commit(ctx, "renew", nil, nil)
		}
		w.mu.Unlock()
		if err != nil {
			cancel(err)
			return
		}
	}
}

// commit is w.commit for the runner: it renews the lease, and holds the
// error that ends the run when the workflow moved. Callers hold w.mu.
func (r *runner) commit(ctx context.Context, what string, recs []StepRun, change func(g *thread.Group, ex *execState, subs map[string]subHead) error) error {
	return r.commitStarting(ctx, what, recs, change, false)
}

// commitStarting is commit that, with next, also starts the steps of the
// next round when change ends the round (unless the run is being cut
// short): their start records go in the same commit, and their calls take
// them (started).
func (r *runner) commitStarting(ctx context.Context, what string, recs []StepRun, change func(g *thread.Group, ex *execState, subs map[string]subHead) error, next bool) error {
	if r.fatal != nil {
		return r.fatal
	}
	var starts []StepRun
	err := r.w.commitRecs(context.WithoutCancel(ctx), what, func(g *thread.Group, ex *execState, subs map[string]subHead) ([]StepRun, []StepRun, error) {
		if ex.Runner == nil || ex.Runner.ID != r.id {
			return nil, nil, fmt.Errorf("the runner lost its lease: %w", thread.ErrConflict)
		}
		ex.Runner = r.lease()
		round := ex.Round
		if change != nil {
			if err := change(g, ex, subs); err != nil {
				return nil, nil, err
			}
		}
		starts = nil
		if next && ex.Round != round && ctx.Err() == nil && ex.Status == StatusRunning {
			if r.rounds >= r.limit {
				r.limited = true
			} else {
				r.rounds++
				starts = r.startRound(ex, maxStartAhead)
			}
		}
		return recs, starts, nil
	}, nil)
	if errors.Is(err, thread.ErrConflict) {
		r.fatal = fmt.Errorf("workflow %s moved under its runner (restored, or taken over): %w", r.w.ID(), err)
		return r.fatal
	}
	if err == nil {
		r.took(starts)
		r.lastCommit = r.now()
	}
	return err
}

// step runs one attempt of a step: its start committed, its work, its end
// committed. The error returned is one that ends the run (the workflow
// moved, a store failed); a step's own failure is recorded, not returned.
func (r *runner) step(ctx context.Context, name string) error {
	w := r.w
	step, instance, _ := parseTask(name)
	s := &Step{r: r, name: step, task: name, instance: instance, next: r.g.steps[step].next}
	w.mu.Lock()
	ex := w.ex
	s.answer = ex.Inputs[name]
	rec, ok := r.started[name]
	delete(r.started, name)
	var err error
	if ok && rec.Round == ex.Round && rec.Attempt == ex.Attempts[name] {
		// Started ahead, by the commit that ended the round before.
		s.round, s.attempt, s.input = rec.Round, rec.Attempt, rec.Input
	} else {
		s.round = ex.Round
		s.attempt = ex.Attempts[name] + 1
		s.input = r.inputOf(ex, name)
		rec = StepRun{ID: stepID(s.round, name, s.attempt), Name: name, Round: s.round, Attempt: s.attempt,
			Status: StatusRunning, Start: r.now().UTC(), Input: s.input}
		err = r.commit(ctx, "start "+rec.ID, []StepRun{rec}, func(_ *thread.Group, ex *execState, _ map[string]subHead) error {
			if ex.Attempts == nil {
				ex.Attempts = map[string]int{}
			}
			ex.Attempts[name] = s.attempt
			return nil
		})
	}
	w.mu.Unlock()
	if err != nil {
		return err
	}

	out, ferr := r.call(ctx, s)

	// What the step's sub-threads are now, read before taking the lock.
	heads := map[string]subHead{}
	var herr error
	for key, th := range s.usedThreads() {
		if err := th.Refresh(context.WithoutCancel(ctx)); err != nil {
			herr = errors.Join(herr, err)
			continue
		}
		rc := th.Record()
		heads[key] = subHead{Version: rc.Version, Head: rc.Head}
	}
	if herr != nil && ferr == nil {
		ferr = herr
	}
	rec.End = r.now().UTC()
	rec.SubThreads = slices.Sorted(maps.Keys(heads))
	rec.Answer = s.answer
	if ferr == nil && s.gotoErr != nil {
		ferr = s.gotoErr
	}
	switch {
	case ferr == nil:
		rec.Status = StatusDone
		if rec.Output, ferr = marshalOutput(out); ferr != nil {
			rec.Status, rec.Error = StatusFailed, asStored(ferr.Error())
		}
		rec.Next, rec.Sends = s.chosen()
	case errors.Is(ferr, ErrWaiting) && s.waiting:
		rec.Status = StatusWaiting
	default:
		rec.Status, rec.Error = StatusFailed, asStored(ferr.Error())
	}
	if ctx.Err() != nil && rec.Status != StatusDone {
		// The run ends (the workflow moved, or the caller cancelled): the
		// step did not fail, it was cut short, and runs again next time.
		return context.Cause(ctx)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	recs := []StepRun{rec}
	return r.commitStarting(ctx, "end "+rec.ID, recs, func(_ *thread.Group, ex *execState, subs map[string]subHead) error {
		rec := &recs[0]
		switch rec.Status {
		case StatusDone:
			ex.Done = append(ex.Done, name)
			for _, n := range rec.Next {
				if !slices.Contains(ex.Next, n) {
					ex.Next = append(ex.Next, n)
				}
			}
			// The instances sent are numbered in the round, in the order
			// the senders' ends are committed.
			count := map[string]int{}
			for _, n := range ex.Next {
				if step, i, _ := parseTask(n); i >= 0 {
					count[step] = max(count[step], i+1)
				}
			}
			for i := range rec.Sends {
				step := rec.Sends[i].Task
				rec.Sends[i].Task = taskName(step, count[step])
				count[step]++
				ex.Next = append(ex.Next, rec.Sends[i].Task)
			}
			ex.forget(name)
			for k, h := range heads {
				// Only newer: a step that shared the sub-thread may have
				// recorded a later version meanwhile; and not a key
				// deleted meanwhile.
				if old, ok := subs[k]; ok && h.Version > old.Version {
					subs[k] = h
				}
			}
			r.keep(*rec, ex.Round)
		case StatusWaiting:
			ex.Waiting = append(ex.Waiting, Waiting{Step: name, Prompt: s.prompt, Since: rec.End})
		case StatusFailed:
			ex.Failed = append(ex.Failed, name)
			if ex.Error == "" {
				ex.Error = fmt.Sprintf("step %s: %s", name, rec.Error)
			}
			ex.Status = StatusFailed
		}
		if ex.Status != StatusFailed {
			// The workflow waits once the steps of the round that do not
			// wait have ended.
			ex.Status = StatusRunning
			if len(r.runnable(ex)) == 0 && len(ex.Waiting) > 0 {
				ex.Status = StatusWaiting
			}
		}
		return r.advance(ex)
	}, true)
}

// call runs the step's func, turning a panic into the step's failure.
func (r *runner) call(ctx context.Context, s *Step) (out any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return r.g.steps[s.name].fn(ctx, s)
}

func marshalOutput(out any) (json.RawMessage, error) {
	switch v := out.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if !json.Valid(v) {
			return nil, fmt.Errorf("output is not valid JSON: %w", thread.ErrInvalid)
		}
		// As the record stores it (compact, HTML escaped): the record the
		// runner keeps is the one read back.
		return json.Marshal(v)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("output: %v: %w", err, thread.ErrInvalid)
	}
	return b, nil
}

// asStored returns s as a step record reads back: JSON turns each byte
// that is not UTF-8 into U+FFFD.
func asStored(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b, _ := json.Marshal(s)
	_ = json.Unmarshal(b, &s)
	return s
}

// inputOf returns the input of a task of the current round: the input an
// edit gave it (Update.Next); what was sent
// to an instance; the workflow's input in the first round; and after it
// an object of the outputs of the previous round's tasks that chose it, by
// step name, the outputs of a step's instances as an array in instance
// order.
func (r *runner) inputOf(ex *execState, task string) json.RawMessage {
	if in, ok := ex.Given[task]; ok {
		return in
	}
	if _, instance, _ := parseTask(task); instance >= 0 {
		for _, rec := range r.ended[ex.Round-1] {
			for _, sd := range rec.Sends {
				if sd.Task == task {
					if sd.Input == nil {
						return json.RawMessage("null")
					}
					return sd.Input
				}
			}
		}
		return json.RawMessage("null")
	}
	if ex.Round <= 1 {
		return ex.Input
	}
	type out struct {
		instance int
		output   json.RawMessage
	}
	by := map[string][]out{}
	for _, rec := range r.ended[ex.Round-1] {
		if !slices.Contains(rec.Next, task) {
			continue
		}
		step, instance, _ := parseTask(rec.Name)
		o := rec.Output
		if o == nil {
			o = json.RawMessage("null")
		}
		by[step] = append(by[step], out{instance, o})
	}
	in := map[string]any{}
	for step, outs := range by {
		if len(outs) == 1 && outs[0].instance < 0 {
			in[step] = outs[0].output
			continue
		}
		// Instances, and the step run as itself (first) if it was too.
		slices.SortFunc(outs, func(a, b out) int { return a.instance - b.instance })
		list := make([]json.RawMessage, len(outs))
		for i, o := range outs {
			list[i] = o.output
		}
		in[step] = list
	}
	b, _ := json.Marshal(in)
	return b
}

// Step is what a step's func gets: its input, the outputs of the steps
// before it, the workflow's sub-threads, a way to choose its successors,
// and a way to ask for input and wait for it.
type Step struct {
	r        *runner
	name     string
	task     string // name, or name[instance]
	instance int    // -1 for a step run as itself
	round    int
	attempt  int
	input    json.RawMessage
	next     []string

	mu      sync.Mutex
	used    map[string]*thread.Thread
	goto_   []string
	gotoSet bool
	gotoErr error
	answer  json.RawMessage
	waiting bool
	prompt  json.RawMessage
	sends   []Sent
}

// Name returns the step's name.
func (s *Step) Name() string { return s.name }

// Instance returns the index of the instance, for a step that runs as an
// instance another step sent (Send), and whether it is one: the index
// numbers the instances of the step sent in the previous round, from 0,
// and is stable across attempts, so that an instance can key its own
// sub-thread by it.
func (s *Step) Instance() (int, bool) { return s.instance, s.instance >= 0 }

// Round returns the round the step runs in, from 1.
func (s *Step) Round() int { return s.round }

// Attempt returns the attempt, from 1: more when an earlier attempt was
// interrupted, failed, or waited for input.
func (s *Step) Attempt() int { return s.attempt }

// Workflow returns the workflow the step runs in.
func (s *Step) Workflow() *Workflow { return s.r.w }

// Input returns the step's input as JSON: the workflow's input for a step
// of the first round; for a later one, an object of the outputs of the
// steps that chose it, by name — the outputs of a step's instances (Send)
// under its name as an array, in instance order; and for an instance, the
// input it was sent.
func (s *Step) Input() json.RawMessage { return s.input }

// DecodeInput decodes the step's input into v.
func (s *Step) DecodeInput(v any) error {
	if len(s.input) == 0 {
		return nil
	}
	return json.Unmarshal(s.input, v)
}

// Output returns the output of the newest ended attempt of the step name
// (an instance by its task name, as "summarize[3]"), and whether there is
// one.
func (s *Step) Output(name string) (json.RawMessage, bool) {
	w := s.r.w
	w.mu.Lock()
	defer w.mu.Unlock()
	rec, ok := s.r.outputs[name]
	return rec.Output, ok
}

// SubThread returns a handle on the sub-thread key, made (and recorded in
// the workflow) if the workflow has none. The workflow records, before the
// step first uses a sub-thread, the version it is at: if the step runs
// again, the sub-thread is moved back there first.
func (s *Step) SubThread(ctx context.Context, key string) (*thread.Thread, error) {
	s.mu.Lock()
	th := s.used[key]
	s.mu.Unlock()
	if th != nil {
		return th, nil
	}
	r, w := s.r, s.r.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if r.fatal != nil {
		return nil, r.fatal
	}
	if _, ok := w.subs[key]; !ok {
		var err error
		th, err = w.createSub(ctx, key, SubThreadOptions{}, func(ex *execState) error {
			if ex.Runner == nil || ex.Runner.ID != r.id {
				return fmt.Errorf("the runner lost its lease: %w", thread.ErrConflict)
			}
			ex.Runner = r.lease()
			use(ex, s.task, key, 1)
			return nil
		})
		if err != nil {
			return nil, err
		}
		// A sub-thread taken up again starts past version 1, empty.
		if th.Version() != 1 {
			if err := r.commit(ctx, "use "+key, nil, func(_ *thread.Group, ex *execState, _ map[string]subHead) error {
				use(ex, s.task, key, th.Version())
				return nil
			}); err != nil {
				return nil, err
			}
		}
	} else {
		var err error
		if th, err = w.db.Thread(ctx, subID(w.ID(), key)); err != nil {
			return nil, fmt.Errorf("workflow %s: sub-thread %q: %w", w.ID(), key, err)
		}
		if err := r.commit(ctx, "use "+key, nil, func(_ *thread.Group, ex *execState, _ map[string]subHead) error {
			if _, ok := ex.Uses[s.task][key]; !ok {
				use(ex, s.task, key, th.Version())
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	if s.used == nil {
		s.used = map[string]*thread.Thread{}
	}
	s.used[key] = th
	s.mu.Unlock()
	return th, nil
}

func use(ex *execState, step, key string, v int64) {
	if ex.Uses == nil {
		ex.Uses = map[string]map[string]int64{}
	}
	if ex.Uses[step] == nil {
		ex.Uses[step] = map[string]int64{}
	}
	ex.Uses[step][key] = v
}

func (s *Step) usedThreads() map[string]*thread.Thread {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.used)
}

// Goto chooses the successors that run after the step, among those it was
// declared with (a conditional next); none ends this branch. Without it, a
// step is followed by all its declared successors. A name that was not
// declared fails the step.
func (s *Step) Goto(names ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		if !slices.Contains(s.next, n) {
			s.gotoErr = fmt.Errorf("goto %q: not one of its successors %v: %w", clip(n), s.next, thread.ErrInvalid)
			return s.gotoErr
		}
	}
	s.goto_, s.gotoSet = dedupe(names), true
	return nil
}

// chosen returns the successors the step chose, and the instances it
// sent (their tasks named by step only, until the end is committed).
func (s *Step) chosen() ([]string, []Sent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gotoSet || len(s.sends) > 0 {
		return slices.Clone(s.goto_), slices.Clone(s.sends)
	}
	return slices.Clone(s.next), nil
}

// Send runs step once more in the next round, as an instance of its own
// whose input is input (encoded as JSON): LangGraph's Send, a fan-out
// decided at run time. A step may send any number of instances, to one
// step or several, up to 10,000; they run concurrently, each with its own
// attempts (a crash re-runs only the instances that had not ended), and
// are named by step and index in the round, "summarize[3]"
// (Step.Instance), in the order sent.
//
// The successors the instances choose fan in as any step's do: a step
// they all choose (by default, each chooses its step's declared
// successors) runs once after all of them, and its input holds their
// outputs under the step's name as an array, in instance order:
// {"summarize": [out0, out1, …]}. (A step that is also chosen as itself in
// the same round, by Goto or by default, runs once more as itself, and its
// output comes first in that array.)
//
// A step that sends chooses only what it sends, unless it calls Goto too:
// its declared successors are no longer its default. A step that sends no
// instance (a fan-out of zero) therefore ends its branch, unless it goes
// on with Goto — to the fan-in step, say, which then gets no outputs of
// the instances, only the sender's.
//
// Step must be one of the step's declared successors, and input must
// encode as JSON; otherwise Send returns thread.ErrInvalid and the step
// fails, as with Goto. What was sent is recorded with the step's end.
func (s *Step) Send(step string, input any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.next, step) {
		s.gotoErr = fmt.Errorf("send to %q: not one of its successors %v: %w", clip(step), s.next, thread.ErrInvalid)
		return s.gotoErr
	}
	if len(s.sends) >= maxSends {
		s.gotoErr = fmt.Errorf("send to %q: more than %d instances: %w", step, maxSends, thread.ErrInvalid)
		return s.gotoErr
	}
	b, err := json.Marshal(input)
	if err != nil {
		s.gotoErr = fmt.Errorf("send to %q: input: %v: %w", step, err, thread.ErrInvalid)
		return s.gotoErr
	}
	s.sends = append(s.sends, Sent{Task: step, Input: b})
	return nil
}

// Ask returns the input given to the step (Provide), or, when none was
// given yet, ErrWaiting, which the step returns: the workflow then waits,
// durably, with prompt (encoded as JSON) as what it asks. When the input is
// given, the step runs again from its start, and this time Ask returns it;
// what the step wrote to its sub-threads before asking is undone first.
func (s *Step) Ask(prompt any) (json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.answer != nil {
		return s.answer, nil
	}
	p, err := json.Marshal(prompt)
	if err != nil {
		return nil, fmt.Errorf("step %s: prompt: %v: %w", s.name, err, thread.ErrInvalid)
	}
	s.waiting, s.prompt = true, p
	return nil, ErrWaiting
}

// Provide gives input to the step waiting for it, as JSON: the next Run
// runs the step again, and its Ask returns the input. A step that is not
// waiting is ErrNotWaiting, and a workflow that a runner holds ErrBusy;
// neither changes anything.
func (w *Workflow) Provide(ctx context.Context, step string, input any) error {
	b, err := json.Marshal(input)
	if err != nil {
		return fmt.Errorf("workflow %s: input for %s: %v: %w", w.ID(), clip(step), err, thread.ErrInvalid)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.refresh(ctx); err != nil {
		return err
	}
	if err := w.refuseBusy(ctx, false); err != nil {
		return fmt.Errorf("workflow %s: input for %s: %w", w.ID(), clip(step), err)
	}
	if !slices.ContainsFunc(w.ex.Waiting, func(wt Waiting) bool { return wt.Step == step }) {
		return fmt.Errorf("workflow %s: input for %q: %w", w.ID(), clip(step), ErrNotWaiting)
	}
	return w.commit(ctx, "input for "+step, nil, func(_ *thread.Group, ex *execState, _ map[string]subHead) error {
		ex.Waiting = slices.DeleteFunc(ex.Waiting, func(wt Waiting) bool { return wt.Step == step })
		if len(ex.Waiting) == 0 {
			ex.Waiting = nil
		}
		if ex.Inputs == nil {
			ex.Inputs = map[string]json.RawMessage{}
		}
		ex.Inputs[step] = b
		if ex.Status == StatusWaiting {
			ex.Status = StatusRunning
		}
		return nil
	})
}

// refuseBusy returns ErrBusy when a runner holds a live lease on the
// workflow at the handle's version — with own, unless it is the runner
// running on this handle. A lease is not live once the workflow was
// restored or rolled back past it. Callers hold mu.
func (w *Workflow) refuseBusy(ctx context.Context, own bool) error {
	l := w.ex.Runner
	if !l.live(time.Now()) || own && l.ID == w.running {
		return nil
	}
	for e, err := range w.th.History(ctx, thread.HistoryOptions{Limit: 1}) {
		if err != nil {
			return err
		}
		if e.Op == thread.OpRestore || e.Op == thread.OpRollback {
			return nil
		}
	}
	return fmt.Errorf("%w (runner %s on %s, pid %d, until %s)", ErrBusy, l.ID, l.Host, l.PID, l.Until.Format(time.RFC3339))
}
