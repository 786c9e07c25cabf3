package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// EventKind says what an Event tells.
type EventKind string

// The kinds of event: one per step record (a step started, ended, waits or
// failed), one for an attempt that was interrupted (seen when the next
// attempt of its step starts), one when the workflow reaches done, waiting
// or failed, and one when it was moved other than by its runner going on
// (a Restore, a rollback).
const (
	EventStepStarted     EventKind = "step_started"
	EventStepDone        EventKind = "step_done"
	EventStepWaiting     EventKind = "step_waiting"
	EventStepFailed      EventKind = "step_failed"
	EventStepInterrupted EventKind = "step_interrupted"
	EventDone            EventKind = "workflow_done"
	EventWaiting         EventKind = "workflow_waiting"
	EventFailed          EventKind = "workflow_failed"
	// EventMoved says the workflow thread moved to a line that does not
	// continue the one before (a Restore, a rollback): what follows
	// continues from Version's state, and steps it had already reported
	// may be reported again.
	EventMoved EventKind = "workflow_moved"
)

// Event is one step of a workflow's progress, as Workflow.Events yields
// it.
type Event struct {
	// Cursor names the event's place in the stream: EventsOptions.After
	// resumes after it. It is "<version>.<index>": the version of the
	// workflow thread whose commit the event comes from, and the event's
	// index among that version's events.
	Cursor   string    `json:"cursor"`
	Kind     EventKind `json:"kind"`
	Workflow string    `json:"workflow"`
	// Version is the workflow thread's version the event comes from; Time
	// when that version was made.
	Version int64     `json:"version"`
	Time    time.Time `json:"time"`
	// Status is the workflow's status as of Version.
	Status Status `json:"status"`
	// Step is the step attempt of a step event, as its record says (an
	// interrupted one as it was last recorded, with Status interrupted).
	Step *StepRun `json:"step,omitzero"`
	// Error is the workflow's error of a workflow_failed event.
	Error string `json:"error,omitzero"`
	// Waiting are the steps waiting for input, of a workflow_waiting event.
	Waiting []Waiting `json:"waiting,omitzero"`
}

// EventsOptions tune Workflow.Events.
type EventsOptions struct {
	// After is the cursor of the last event the consumer saw: the events
	// after it are yielded. "" yields every event from the workflow's
	// creation.
	After string
	// NoFollow ends the sequence once the events up to the workflow's
	// current version are yielded, instead of waiting for more.
	NoFollow bool
	// UntilSettled ends the sequence once the workflow, as of the events
	// yielded, is done, waiting for input, or failed (right away when it
	// already is), and its runner has let it go (no live lease: input can
	// be given, a Run can take it): what a caller that started a run and
	// wants to see it through waits for.
	UntilSettled bool
	// PollInterval is how often the workflow thread's version is read when
	// the store cannot tell this process about other processes' writes
	// (it is not a store.Watcher, as SQLite and JSON files are not); 0
	// means 200 ms. Writes made through this process's DBs are heard at
	// once either way.
	PollInterval time.Duration
}

// ErrCursor is returned by Events (and ParseCursor) for a cursor that is
// not one Events gave, or that is past the workflow's version (a
// workflow deleted and made again under its id).
var ErrCursor = fmt.Errorf("not a cursor of this workflow's events: %w", thread.ErrInvalid)

// Cursor is the place of an event in a workflow's event stream.
type Cursor struct {
	Version int64
	Index   int
}

// String returns the cursor as Event.Cursor has it.
func (c Cursor) String() string {
	return strconv.FormatInt(c.Version, 10) + "." + strconv.Itoa(c.Index)
}

// ParseCursor parses an Event.Cursor; "" is the zero Cursor (the start).
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	v, i, ok := strings.Cut(s, ".")
	ver, err1 := strconv.ParseInt(v, 10, 64)
	idx, err2 := strconv.Atoi(i)
	if !ok || err1 != nil || err2 != nil || ver < 1 || idx < 0 || len(s) > 40 {
		return Cursor{}, fmt.Errorf("cursor %q: %w", clip(s), ErrCursor)
	}
	return Cursor{Version: ver, Index: idx}, nil
}

// Events yields the workflow's progress: an event for each step record of
// the workflow thread (a step started, done, waiting, failed), for each
// attempt interrupted, and for the workflow reaching done, waiting or
// failed, in the order of the workflow thread's versions. The events are
// derived from what the workflow thread holds, version by version, so a
// consumer that starts late replays them all, one that resumes after a
// cursor (opts.After) gets exactly those after it, and a runner killed at
// any moment loses none that were committed.
//
// After those of the current version it follows the workflow, yielding
// events as new versions are made, until ctx ends (the sequence then ends
// without an error), or until the workflow settles with
// opts.UntilSettled, or at once with opts.NoFollow. It hears writes made
// through this process's DBs on the store at once (DB.Watch), every
// process's on a store that is a store.Watcher, and polls the thread's
// version every opts.PollInterval otherwise. An error (the workflow
// deleted, a store failing, a bad cursor: ErrCursor) is yielded last.
//
// A workflow whose oldest versions retention dropped (thread.Retention)
// replays from the oldest version it keeps, whose state starts the
// derivation: the events of the versions after it; a cursor in a dropped
// version goes on from there too.
//
// Replaying costs a read of the workflow thread's history and one of each
// version's commit (and of the step records at the cursor's version, to
// know which attempts had ended), not the records of every version.
func (w *Workflow) Events(ctx context.Context, opts EventsOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		after, err := ParseCursor(opts.After)
		if err != nil {
			yield(Event{}, err)
			return
		}
		e := &eventer{db: w.db, id: w.ID(), after: after}
		if err := e.run(ctx, opts, yield); err != nil && ctx.Err() == nil {
			yield(Event{}, err)
		}
	}
}

// eventer derives the events of one workflow, version by version.
type eventer struct {
	db    *thread.DB
	id    string
	after Cursor
	th    *thread.Thread

	// Where the derivation stands: the version done, its head commit and
	// status, and the last status recorded of each attempt on its line.
	at       int64
	head     string
	status   Status
	runner   *Lease
	attempts map[string]StepRun
}

func (e *eventer) run(ctx context.Context, opts EventsOptions, yield func(Event, error) bool) error {
	interval := opts.PollInterval
	if interval <= 0 {
		interval = 200 * time.Millisecond
	}
	// Listen before reading, so that nothing made meanwhile is missed.
	moved := make(chan struct{}, 1)
	wake := func() {
		select {
		case moved <- struct{}{}:
		default:
		}
	}
	follow := !opts.NoFollow
	if follow {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if err := e.db.Watch(wctx, func(c thread.Change) {
			if c.Kind == thread.ChangeGap || c.Thread == e.id {
				wake()
			}
		}); err != nil {
			return fmt.Errorf("workflow %s: events: %w", e.id, err)
		}
	}
	th, err := e.db.Thread(ctx, e.id)
	if err != nil {
		return fmt.Errorf("workflow %s: events: %w", e.id, err)
	}
	if th.Kind() != thread.KindWorkflow {
		return fmt.Errorf("workflow %s: events: %w", e.id, ErrNotWorkflow)
	}
	e.th = th
	if e.after.Version > th.Version() {
		return fmt.Errorf("workflow %s: cursor %s past its version %d: %w", e.id, e.after, th.Version(), ErrCursor)
	}
	if err := e.start(ctx); err != nil {
		return err
	}
	var tick <-chan time.Time
	if _, watched := e.db.Store().(store.Watcher); follow && !watched {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		ok, err := e.upTo(ctx, th.Version(), yield)
		if err != nil || !ok {
			return err
		}
		settled := e.status == StatusDone || e.status == StatusWaiting || e.status == StatusFailed
		if opts.UntilSettled && settled && !e.runner.Live(time.Now()) {
			return nil
		}
		if !follow {
			return nil
		}
		// Settled but held: the lease running out (its runner gone
		// elsewhere) lets it go without a new version.
		var expiry <-chan time.Time
		stop := func() bool { return false }
		if opts.UntilSettled && settled {
			t := time.NewTimer(time.Until(e.runner.Until) + time.Millisecond)
			expiry, stop = t.C, t.Stop
		}
		done, err := e.wait(ctx, th, moved, tick, expiry)
		stop()
		if done || err != nil {
			return err
		}
	}
}

// wait waits for the workflow thread to move past its version: done
// reports that the sequence ends (ctx ended, or the lease of a settled
// workflow ran out).
func (e *eventer) wait(ctx context.Context, th *thread.Thread, moved <-chan struct{}, tick, expiry <-chan time.Time) (done bool, err error) {
	for v := th.Version(); th.Version() == v; {
		select {
		case <-ctx.Done():
			return true, nil
		case <-moved:
		case <-tick:
		case <-expiry:
			return true, nil
		}
		if err := th.Refresh(ctx); err != nil {
			if ctx.Err() != nil {
				return true, nil
			}
			return true, fmt.Errorf("workflow %s: events: %w", e.id, err)
		}
	}
	return false, nil
}

// start sets the derivation at the version before the cursor's (whose
// events after the cursor's index are yet to come): its head, status and
// the attempts recorded on its line.
func (e *eventer) start(ctx context.Context) error {
	e.attempts = map[string]StepRun{}
	v := e.after.Version - 1
	if v <= 0 {
		return nil
	}
	ent, err := e.entry(ctx, v)
	if errors.Is(err, ErrCursor) && v < e.th.Version() {
		// The cursor's version was dropped by retention (a history is a
		// run of versions up to the current one): go on from the oldest
		// kept, as a reader that starts afresh does.
		e.after = Cursor{}
		return nil
	}
	if err != nil {
		return err
	}
	return e.baseline(ctx, ent)
}

// baseline sets the derivation at version ent: its head, status and the
// attempts recorded on its line, with no event for it.
func (e *eventer) baseline(ctx context.Context, ent thread.HistoryEntry) error {
	_, ex, err := e.commit(ctx, ent.Commit)
	if err != nil {
		return err
	}
	if err := e.reline(ctx, ent.Version); err != nil {
		return err
	}
	e.at, e.head, e.status, e.runner = ent.Version, ent.Commit, ex.Status, ex.Runner
	return nil
}

// entry returns the history entry of version v.
func (e *eventer) entry(ctx context.Context, v int64) (thread.HistoryEntry, error) {
	for ent, err := range e.th.History(ctx, thread.HistoryOptions{Before: v + 1, Limit: 1}) {
		if err != nil {
			return thread.HistoryEntry{}, fmt.Errorf("workflow %s: events: %w", e.id, err)
		}
		if ent.Version == v {
			return ent, nil
		}
	}
	return thread.HistoryEntry{}, fmt.Errorf("workflow %s: version %d: %w", e.id, v, ErrCursor)
}

// commit reads a head commit of the workflow thread and the execution
// state in effect at it.
func (e *eventer) commit(ctx context.Context, id string) (*store.Commit, *execState, error) {
	if id == "" {
		return &store.Commit{}, &execState{Status: StatusPending}, nil
	}
	s := e.db.Store()
	c, err := s.Commit(ctx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("workflow %s: events: %w", e.id, err)
	}
	st := c.State
	if st == nil && c.StateFrom != "" {
		from, err := s.Commit(ctx, c.StateFrom)
		if err != nil {
			return nil, nil, fmt.Errorf("workflow %s: events: %w", e.id, err)
		}
		st = from.State
	}
	ex := &execState{Status: StatusPending}
	if raw, ok := st[keyExec]; ok {
		if err := json.Unmarshal(raw, ex); err != nil {
			return nil, nil, fmt.Errorf("workflow %s: execution state: %v: %w", e.id, err, thread.ErrInvalid)
		}
	}
	return c, ex, nil
}

// reline sets the attempts from the step records of the line at version
// v.
func (e *eventer) reline(ctx context.Context, v int64) error {
	msgs, err := e.th.Messages(ctx, thread.ReadOptions{Version: v})
	if err != nil {
		return fmt.Errorf("workflow %s: events: %w", e.id, err)
	}
	e.attempts = map[string]StepRun{}
	for _, r := range stepRecords(msgs) {
		e.attempts[r.ID] = r
	}
	return nil
}

// upTo yields the events of the versions after e.at up to head; it
// reports false when the consumer stopped.
func (e *eventer) upTo(ctx context.Context, head int64, yield func(Event, error) bool) (bool, error) {
	if head <= e.at {
		return true, nil
	}
	var ents []thread.HistoryEntry
	for ent, err := range e.th.History(ctx, thread.HistoryOptions{Before: head + 1}) {
		if err != nil {
			return false, fmt.Errorf("workflow %s: events: %w", e.id, err)
		}
		if ent.Version <= e.at {
			break
		}
		ents = append(ents, ent)
	}
	slices.Reverse(ents)
	if len(ents) > 0 && ents[0].Version > e.at+1 {
		// The versions before it were dropped (retention): what they did
		// is known only as the state of the oldest kept, which starts the
		// derivation.
		if err := e.baseline(ctx, ents[0]); err != nil {
			return false, err
		}
		ents = ents[1:]
	}
	for _, ent := range ents {
		evs, err := e.version(ctx, ent)
		if err != nil {
			return false, err
		}
		for i, ev := range evs {
			if ent.Version == e.after.Version && i <= e.after.Index {
				continue // seen before the cursor
			}
			ev.Cursor = Cursor{Version: ent.Version, Index: i}.String()
			if !yield(ev, nil) {
				return false, nil
			}
		}
	}
	return true, nil
}

// version derives the events of one version and moves the derivation
// past it.
func (e *eventer) version(ctx context.Context, ent thread.HistoryEntry) ([]Event, error) {
	c, ex, err := e.commit(ctx, ent.Commit)
	if err != nil {
		return nil, err
	}
	base := Event{Workflow: e.id, Version: ent.Version, Time: ent.Time, Status: ex.Status}
	var out []Event
	if ent.Commit == e.head || c.Parent == e.head {
		// The line goes on: the records of the commit are new.
		var recs []StepRun
		if ent.Commit != e.head {
			recs = stepRecords(c.Messages)
		}
		for _, r := range recs {
			if r.Attempt > 1 {
				// A later attempt — run again, or ended by an edit —
				// interrupted one that had not ended.
				prev, ok := e.attempts[stepID(r.Round, r.Name, r.Attempt-1)]
				if ok && prev.Status == StatusRunning {
					prev.Status = StatusInterrupted
					e.attempts[prev.ID] = prev
					ev := base
					ev.Kind, ev.Step = EventStepInterrupted, &prev
					out = append(out, ev)
				}
			}
			if prev, ok := e.attempts[r.ID]; ok && prev.Status == r.Status {
				// Restated as it was (a run adds the successors of a step
				// an edit ended): no new event.
				e.attempts[r.ID] = r
				continue
			}
			e.attempts[r.ID] = r
			ev := base
			ev.Step = &r
			switch r.Status {
			case StatusRunning:
				ev.Kind = EventStepStarted
			case StatusDone:
				ev.Kind = EventStepDone
			case StatusWaiting:
				ev.Kind = EventStepWaiting
			case StatusFailed:
				ev.Kind = EventStepFailed
			default:
				continue
			}
			out = append(out, ev)
		}
	} else {
		// Moved to another line: a restore, a rollback, or the commit a
		// fork was made at.
		if err := e.reline(ctx, ent.Version); err != nil {
			return nil, err
		}
		if ent.Version > 1 {
			ev := base
			ev.Kind = EventMoved
			out = append(out, ev)
		}
	}
	if ex.Status != e.status || len(out) > 0 && ex.Status == StatusWaiting && e.waitingGrew(out) {
		ev := base
		switch ex.Status {
		case StatusDone:
			ev.Kind = EventDone
		case StatusWaiting:
			ev.Kind, ev.Waiting = EventWaiting, ex.Waiting
		case StatusFailed:
			ev.Kind, ev.Error = EventFailed, ex.Error
		}
		if ev.Kind != "" {
			out = append(out, ev)
		}
	}
	e.at, e.head, e.status, e.runner = ent.Version, ent.Commit, ex.Status, ex.Runner
	return out, nil
}

// waitingGrew reports whether the events of a version that leaves the
// workflow waiting, as it was, hold a step that started waiting: the
// workflow waits again, for more.
func (e *eventer) waitingGrew(out []Event) bool {
	return slices.ContainsFunc(out, func(ev Event) bool { return ev.Kind == EventStepWaiting })
}
