package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/loomthreads/loom/thread"
)

// LabelName is the label of a workflow started from a Registry: the name
// it was registered under, by which Registry.Of finds its graph to resume
// it.
const LabelName = "loom.workflow.name"

// ErrUnknown is returned by Registry.Lookup, Registry.Of and the Runner's
// Start and Resume for a name no workflow is registered under, or a
// workflow that was not started from the registry.
var ErrUnknown = fmt.Errorf("no workflow registered by that name: %w", thread.ErrNotFound)

// Definition is a workflow registered by name.
type Definition struct {
	Name  string
	Graph *Graph
	// Title is the title of the workflows started by this name when their
	// CreateOptions give none; Description says what it does, for
	// listings.
	Title, Description string
	// SubThreads are the sub-threads made with each workflow started, as
	// CreateOptions.SubThreads.
	SubThreads []string
	// CheckInput, when not nil, checks the input of a workflow being
	// started (as JSON; nil when none is given) before it is made: its
	// error refuses the start, as thread.ErrInvalid.
	CheckInput func(input json.RawMessage) error
}

// RegisterOptions describe a workflow being registered; nil means none.
// Their fields are Definition's.
type RegisterOptions struct {
	Title, Description string
	SubThreads         []string
	CheckInput         func(input json.RawMessage) error
}

// Registry holds named workflows, each a Graph, that a server (httpapi,
// mcpserver) or a command starts and resumes by name. It is safe for
// concurrent use. A Registry is made by NewRegistry and holds what its
// owner registers: there is no global one.
type Registry struct {
	mu   sync.RWMutex
	defs map[string]Definition
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{defs: map[string]Definition{}} }

// Register registers g under name: letters, digits, '_' and '-', at most
// 32 bytes. A name taken is thread.ErrConflict; a bad name, or a graph
// that fails Graph.Check, thread.ErrInvalid.
func (r *Registry) Register(name string, g *Graph, opts *RegisterOptions) error {
	if !validKey(name) {
		return fmt.Errorf("register workflow %q: letters, digits, '_' and '-', at most %d bytes: %w", clip(name), maxKeyLen, thread.ErrInvalid)
	}
	if g == nil {
		return fmt.Errorf("register workflow %s: no graph: %w", name, thread.ErrInvalid)
	}
	if err := g.Check(); err != nil {
		return fmt.Errorf("register workflow %s: %w", name, err)
	}
	d := Definition{Name: name, Graph: g}
	if opts != nil {
		d.Title, d.Description, d.SubThreads = opts.Title, opts.Description, slices.Clone(opts.SubThreads)
		d.CheckInput = opts.CheckInput
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.defs[name]; ok {
		return fmt.Errorf("register workflow %s: registered already: %w", name, thread.ErrConflict)
	}
	r.defs[name] = d
	return nil
}

// Lookup returns the workflow registered under name, or ErrUnknown.
func (r *Registry) Lookup(name string) (Definition, error) {
	if r != nil {
		r.mu.RLock()
		d, ok := r.defs[name]
		r.mu.RUnlock()
		if ok {
			return d, nil
		}
	}
	return Definition{}, fmt.Errorf("workflow %q: %w", clip(name), ErrUnknown)
}

// Names returns the names registered, sorted.
func (r *Registry) Names() []string {
	if r == nil {
		return []string{}
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.defs))
	for n := range r.defs {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Definitions returns the workflows registered, by name.
func (r *Registry) Definitions() []Definition {
	out := []Definition{}
	for _, n := range r.Names() {
		d, _ := r.Lookup(n)
		out = append(out, d)
	}
	return out
}

// Create makes a workflow of the one registered under name (Create, with
// the definition's title and sub-threads where opts gives none, and
// LabelName set to name), without running it. An input the definition's
// CheckInput refuses is thread.ErrInvalid.
func (r *Registry) Create(ctx context.Context, db *thread.DB, name string, opts CreateOptions) (*Workflow, error) {
	d, err := r.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("create workflow: %w", err)
	}
	if d.CheckInput != nil {
		var in json.RawMessage
		if opts.Input != nil {
			if in, err = json.Marshal(opts.Input); err != nil {
				return nil, fmt.Errorf("create workflow %s: input: %v: %w", name, err, thread.ErrInvalid)
			}
		}
		if err := d.CheckInput(in); err != nil {
			if errors.Is(err, thread.ErrInvalid) {
				return nil, fmt.Errorf("create workflow %s: input: %w", name, err)
			}
			return nil, fmt.Errorf("create workflow %s: input: %v: %w", name, err, thread.ErrInvalid)
		}
	}
	if opts.Title == "" {
		opts.Title = d.Title
	}
	opts.SubThreads = dedupe(append(slices.Clone(d.SubThreads), opts.SubThreads...))
	labels := map[string]string{}
	for k, v := range opts.Labels {
		labels[k] = v
	}
	labels[LabelName] = name
	opts.Labels = labels
	return Create(ctx, db, opts)
}

// Of returns the definition the workflow was started from (its LabelName),
// or ErrUnknown when it was not started from a registry, or its name is
// not registered here.
func (r *Registry) Of(w *Workflow) (Definition, error) {
	name, ok := w.Thread().Record().Labels[LabelName]
	if !ok {
		return Definition{}, fmt.Errorf("workflow %s was not started by name (no label %s): %w", w.ID(), LabelName, ErrUnknown)
	}
	d, err := r.Lookup(name)
	if err != nil {
		return Definition{}, fmt.Errorf("workflow %s: %w", w.ID(), err)
	}
	return d, nil
}

// RunnerOptions tune a Runner; nil means the defaults.
type RunnerOptions struct {
	// Logger logs each run's end (and why it ended); nil means
	// slog.Default().
	Logger *slog.Logger
	// Run are the options of each run (LeaseTTL, Now); Wait is ignored: a
	// workflow that another runner holds is ErrBusy.
	Run *RunOptions
}

// Runner runs the workflows of a registry in the background, for a
// server whose requests start and resume them: Start and Resume return
// once the run is under way, and it goes on after the request, on the
// Runner's own context, until the workflow is done, waits for input,
// fails, or Close cancels it (its steps cut short then run again at the
// next Resume, as after a crash). Each run is Workflow.Run, so a run
// killed with its process resumes too, and what it does is seen through
// Workflow.Events. It is safe for concurrent use.
type Runner struct {
	reg  *Registry
	log  *slog.Logger
	opts RunOptions

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	runs   map[string]*bgRun // by tenant/id
	closed bool
}

// ErrClosed is returned by a Runner's Start and Resume once it is closed.
var ErrClosed = errors.New("the workflow runner is closed")

// NewRunner returns a Runner of the workflows of reg.
func NewRunner(reg *Registry, opts *RunnerOptions) *Runner {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Runner{reg: reg, log: slog.Default(), ctx: ctx, cancel: cancel, runs: map[string]*bgRun{}}
	if opts != nil {
		if opts.Logger != nil {
			r.log = opts.Logger
		}
		if opts.Run != nil {
			r.opts = *opts.Run
		}
	}
	r.opts.Wait = false
	return r
}

// Registry returns the runner's registry.
func (r *Runner) Registry() *Registry { return r.reg }

// Start makes a workflow of the one registered under name in db
// (Registry.Create) and runs it in the background. An unknown name is
// ErrUnknown; an id taken thread.ErrConflict; bad options (an id, an input
// that is not JSON) thread.ErrInvalid.
func (r *Runner) Start(ctx context.Context, db *thread.DB, name string, opts CreateOptions) (*Workflow, error) {
	if err := r.open(); err != nil {
		return nil, err
	}
	d, err := r.reg.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("start workflow: %w", err)
	}
	w, err := r.reg.Create(ctx, db, name, opts)
	if err != nil {
		return nil, err
	}
	if err := r.launch(db, w, d); err != nil {
		return nil, err
	}
	return w, nil
}

// Resume runs the workflow id of db again, in the background, from where
// it stands (after input was given to its waiting steps, after its runner
// crashed or was cancelled, after a step failed), on the graph it was
// started with (LabelName). A workflow that is done is returned as it is,
// and nothing runs. One that a runner holds (a live lease: this Runner's
// run, or another's) is ErrBusy; one whose run by this Runner is starting
// or ending (no lease held) is run once more after it. One not started by
// name, or by a name not registered, is ErrUnknown; a missing one
// thread.ErrNotFound.
func (r *Runner) Resume(ctx context.Context, db *thread.DB, id string) (*Workflow, error) {
	if err := r.open(); err != nil {
		return nil, err
	}
	w, err := Open(ctx, db, id)
	if err != nil {
		return nil, fmt.Errorf("resume workflow: %w", err)
	}
	d, err := r.reg.Of(w)
	if err != nil {
		return nil, fmt.Errorf("resume workflow: %w", err)
	}
	w.mu.Lock()
	done := w.ex.Status == StatusDone
	if !done {
		err = w.refuseBusy(ctx, false)
	}
	w.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("resume workflow %s: %w", id, err)
	}
	if done {
		return w, nil
	}
	if err := r.launch(db, w, d); err != nil {
		return nil, err
	}
	return w, nil
}

func (r *Runner) open() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	return nil
}

// bgRun is a run of a Runner, in the background.
type bgRun struct {
	// again asks the run to run once more when it returns: a Resume came
	// while it was starting or ending (no live lease).
	again bool
	done  chan struct{} // closed when the run (and any again) ends
}

// Provide gives input to the step of the workflow id of db that waits for
// it, as Workflow.Provide does — except that when this Runner's run of the
// workflow has left it waiting and is letting it go (its lease is held a
// moment longer, which Provide would refuse as ErrBusy), it waits for that
// run to end first, or for ctx.
func (r *Runner) Provide(ctx context.Context, db *thread.DB, id, step string, input any) (*Workflow, error) {
	return r.whenLetGo(ctx, db, id, "input for workflow", func(w *Workflow) error {
		return w.Provide(context.WithoutCancel(ctx), step, input)
	})
}

// Update edits the workflow id of db as Workflow.Update does — except
// that when this Runner's run of the workflow has stopped (waiting,
// failed) and is letting it go, it waits for that run to end first, or
// for ctx: an edit that answers for a step that just began to wait is not
// refused as ErrBusy.
func (r *Runner) Update(ctx context.Context, db *thread.DB, id string, p Point, u Update) (*Workflow, error) {
	return r.whenLetGo(ctx, db, id, "edit workflow", func(w *Workflow) error {
		return w.Update(context.WithoutCancel(ctx), p, u)
	})
}

// whenLetGo opens the workflow id and calls f on it; while f says ErrBusy
// because this Runner's run of it, which no longer runs steps, holds it a
// moment longer, it waits for that run to end and calls f again.
func (r *Runner) whenLetGo(ctx context.Context, db *thread.DB, id, what string, f func(*Workflow) error) (*Workflow, error) {
	for {
		w, err := Open(ctx, db, id)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		err = f(w)
		if err == nil || !errors.Is(err, ErrBusy) || w.Status() == StatusRunning {
			return w, err
		}
		r.mu.Lock()
		run, ok := r.runs[thread.Key(db.Tenant(), id)]
		r.mu.Unlock()
		if !ok {
			return w, err
		}
		select {
		case <-run.done:
		case <-ctx.Done():
			return w, err
		}
	}
}

// launch runs w in the background. When this runner runs w already (it
// holds no live lease, or Resume would have refused: the run is starting,
// or ending), the run runs once more when it returns, to go on from what
// it would have missed.
func (r *Runner) launch(db *thread.DB, w *Workflow, d Definition) error {
	key := thread.Key(db.Tenant(), w.ID())
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if run, ok := r.runs[key]; ok {
		run.again = true
		return nil
	}
	run := &bgRun{done: make(chan struct{})}
	r.runs[key] = run
	r.wg.Add(1)
	opts := r.opts
	go func() {
		defer r.wg.Done()
		for {
			ex, err := w.Run(r.ctx, d.Graph, &opts)
			r.logEnd(db, w, d, ex, err)
			r.mu.Lock()
			again := run.again && !r.closed
			run.again = false
			if !again {
				delete(r.runs, key)
			}
			r.mu.Unlock()
			if !again {
				close(run.done)
				return
			}
		}
	}()
	return nil
}

func (r *Runner) logEnd(db *thread.DB, w *Workflow, d Definition, ex *Execution, err error) {
	attrs := []any{"workflow", w.ID(), "name", d.Name, "tenant", db.Tenant()}
	var se *StepError
	switch {
	case err == nil:
		r.log.Info("workflow run ended", append(attrs, "status", string(ex.Status), "version", ex.Version)...)
	case r.ctx.Err() != nil:
		r.log.Info("workflow run cancelled: it resumes at the next resume", attrs...)
	case errors.As(err, &se):
		r.log.Info("workflow run ended: a step failed", append(attrs, "step", se.Step, "err", strings.TrimSpace(se.Error()))...)
	default:
		r.log.Warn("workflow run stopped", append(attrs, "err", err)...)
	}
}

// Running reports whether this runner runs the workflow id of db now.
func (r *Runner) Running(db *thread.DB, id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.runs[thread.Key(db.Tenant(), id)]
	return ok
}

// Close cancels the runs under way and waits for them to end: each lets
// its lease go, and its steps cut short run again at the next Resume.
// Start and Resume return ErrClosed after it.
func (r *Runner) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	return nil
}
