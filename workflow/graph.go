package workflow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/loomthreads/loom/thread"
)

// StepFunc is the work of a step. It returns the step's output, which the
// runner keeps as JSON (nil for none); an error fails the step, and with it
// the workflow, until the next Run runs it again. A step that called
// Step.Ask and got ErrWaiting returns that error as it is.
//
// A step may run more than once: when its runner was killed after it
// started and before its end was committed, the next Run runs it again
// (its sub-threads first moved back to where they were when it started).
// Work outside loom that must happen once is the step's to make
// idempotent, as in any durable workflow engine.
type StepFunc func(ctx context.Context, s *Step) (any, error)

// Graph declares a workflow's steps and what may follow each. It is a
// directed graph, run in rounds (LangGraph's super-steps): the steps of a
// round run concurrently (fan-out), and the successors they choose, each
// once, make the next round, so that a step that several steps of a round
// choose waits for all of them (fan-in). A step chooses among its declared
// successors with Step.Goto (a conditional next); by default it chooses
// them all. A step can also run another step as many times as it likes in
// the next round, each instance with its own input (Step.Send, a dynamic
// fan-out).
//
// The graph may have cycles: a writer and a reviewer that pass a draft
// back and forth until the reviewer approves are two steps that name each
// other, and the loop ends when a step chooses to leave it (Goto). A Run
// runs at most RunOptions.MaxRounds rounds, so that a loop that never ends
// stops, resumably, with a *StepLimitError.
//
// A step chosen in several rounds (by steps of different lengths of path,
// or around a loop) runs once in each, as in LangGraph; its input in each
// is the outputs of the steps that chose it in the round before.
//
// Build it with NewGraph and Add; Run checks it first. A Graph is not
// changed by running it and may run many workflows at once.
type Graph struct {
	steps map[string]*node
	preds map[string][]string // the steps that name each as a successor
	order []string
	start []string
	err   error
}

type node struct {
	name string
	fn   StepFunc
	next []string
}

// NewGraph returns an empty graph.
func NewGraph() *Graph { return &Graph{steps: map[string]*node{}, preds: map[string][]string{}} }

// Add declares the step name, its work, and the steps that may follow it.
// Errors (a name taken or invalid, a nil func) are reported by Check.
func (g *Graph) Add(name string, fn StepFunc, next ...string) *Graph {
	switch {
	case !validKey(name):
		g.fail(fmt.Errorf("step name %q: letters, digits, '_' and '-', at most %d bytes: %w", clip(name), maxKeyLen, thread.ErrInvalid))
	case g.steps[name] != nil:
		g.fail(fmt.Errorf("step %q declared twice: %w", name, thread.ErrInvalid))
	case fn == nil:
		g.fail(fmt.Errorf("step %q has no func: %w", name, thread.ErrInvalid))
	default:
		g.steps[name] = &node{name: name, fn: fn, next: slices.Clone(next)}
		g.order = append(g.order, name)
		for _, n := range dedupe(next) {
			g.preds[n] = append(g.preds[n], name)
		}
	}
	return g
}

// Start names the steps of the first round. Without it, the first round
// is every step that no step names as a successor.
func (g *Graph) Start(names ...string) *Graph {
	g.start = slices.Clone(names)
	return g
}

func (g *Graph) fail(err error) {
	if g.err == nil {
		g.err = err
	}
}

// Check reports what is wrong with the declaration: a bad or duplicate
// step, a successor or start step that is not declared, or no step to
// start with (a graph whose every step follows another, such as a loop,
// names its first steps with Start). Each is thread.ErrInvalid. A cycle is
// not an error: RunOptions.MaxRounds bounds a loop that never ends.
func (g *Graph) Check() error {
	if g.err != nil {
		return g.err
	}
	if len(g.steps) == 0 {
		return fmt.Errorf("graph has no steps: %w", thread.ErrInvalid)
	}
	for _, name := range g.order {
		for _, n := range g.steps[name].next {
			if g.steps[n] == nil {
				return fmt.Errorf("step %q: successor %q is not a step: %w", name, clip(n), thread.ErrInvalid)
			}
		}
	}
	for _, n := range g.start {
		if g.steps[n] == nil {
			return fmt.Errorf("start step %q is not a step: %w", clip(n), thread.ErrInvalid)
		}
	}
	if len(g.starts()) == 0 {
		return fmt.Errorf("graph has no step to start with (every step follows another: name the first with Start): %w", thread.ErrInvalid)
	}
	return nil
}

// starts returns the first round's steps.
func (g *Graph) starts() []string {
	if len(g.start) > 0 {
		return dedupe(g.start)
	}
	named := map[string]bool{}
	for _, n := range g.steps {
		for _, s := range n.next {
			named[s] = true
		}
	}
	var out []string
	for _, name := range g.order {
		if !named[name] {
			out = append(out, name)
		}
	}
	return out
}

// checkState reports whether the execution state can run on g: every step
// it names is declared.
func (g *Graph) checkState(ex *execState) error {
	var errs []error
	for _, list := range [][]string{ex.Current, ex.Next, ex.Follow} {
		for _, n := range list {
			if step, _, ok := parseTask(n); !ok || g.steps[step] == nil {
				errs = append(errs, fmt.Errorf("the workflow's execution names step %q, which the graph does not declare: %w", clip(n), thread.ErrInvalid))
			}
		}
	}
	return errors.Join(errs...)
}

func dedupe(names []string) []string {
	var out []string
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// maxSends caps the instances one step sends (Step.Send) in a round.
const maxSends = 10_000

// A task is what a round runs: a step, by its name, or an instance of a
// step that a step sent (Step.Send), by the step's name and the instance's
// index in the round, as "summarize[3]".
func taskName(step string, instance int) string {
	return step + "[" + strconv.Itoa(instance) + "]"
}

// parseTask returns the step of a task, and its instance's index (-1 for
// a step run as itself); ok is false for a name that is neither.
func parseTask(task string) (step string, instance int, ok bool) {
	i := strings.IndexByte(task, '[')
	if i < 0 {
		return task, -1, validKey(task)
	}
	if !strings.HasSuffix(task, "]") || len(task) < i+3 {
		return "", 0, false
	}
	n, err := strconv.Atoi(task[i+1 : len(task)-1])
	if err != nil || n < 0 || n >= maxSends*maxSends || taskName(task[:i], n) != task {
		return "", 0, false
	}
	return task[:i], n, validKey(task[:i])
}

// stepOf returns the step of a task.
func stepOf(task string) string {
	step, _, _ := parseTask(task)
	return step
}
