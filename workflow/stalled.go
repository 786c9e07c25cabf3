package workflow

import (
	"slices"
	"time"
)

// Live reports whether the lease holds at now: its time has not run out,
// and its process, when it is of this host, is still there. A nil lease
// holds nothing.
func (l *Lease) Live(now time.Time) bool { return l.live(now) }

// Stalled reports whether the workflow, as of the handle's version, has
// steps to run and no runner running them at now: its status is running
// (or it waits and a step of it has its input) but no live lease is held
// on it — its runner was killed or lost the workflow, or it was given
// input, restored or forked and nothing ran it since. The next Run goes
// on from its last committed step. Only the newest version can be
// stalled: a past one is what it was.
func (w *Workflow) Stalled(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	ex := w.ex
	return stalled(ex.Status, ex.Current, ex.Done, ex.Waiting, ex.Runner, now)
}

// Stalled is Workflow.Stalled for the execution state at the workflow's
// newest version.
func (e *Execution) Stalled(now time.Time) bool {
	return stalled(e.Status, e.Current, e.Completed, e.Waiting, e.Runner, now)
}

func stalled(status Status, current, done []string, waiting []Waiting, runner *Lease, now time.Time) bool {
	switch status {
	case StatusRunning:
	case StatusWaiting:
		// Waiting on a run: a step that neither ended nor waits.
		if !slices.ContainsFunc(current, func(s string) bool {
			return !slices.Contains(done, s) && !slices.ContainsFunc(waiting, func(wt Waiting) bool { return wt.Step == s })
		}) {
			return false
		}
	default:
		return false
	}
	return !runner.live(now)
}
