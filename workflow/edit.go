package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// Update is an edit of a workflow's execution by a person (LangGraph's
// update_state, and its as_node): what to set, and who sets it. Fields
// left zero are left as they are.
type Update struct {
	// By names who edits: a person, recorded with the edit. It is
	// required.
	By string
	// Input, when not nil, replaces the workflow's input (encoded as JSON:
	// json.RawMessage("null") sets null), which the steps of the first
	// round that have not ended get.
	Input any
	// Outputs set the outputs of steps, by name (an instance by its task
	// name, "summarize[3]"), as if the step had returned it (LangGraph's
	// as_node). A step of the round in progress that has not ended —
	// not started, running, waiting for input or failed — ends with it:
	// it does not run, what it had written to sub-threads is moved back,
	// and the next Run goes on to the successors the graph declares for
	// it. Any other step's newest ended attempt gets it, so that the steps
	// after it that have not ended get it as their input, and Step.Output
	// returns it. A step with neither is thread.ErrInvalid.
	Outputs map[string]any
	// Next, when not nil, sets which steps run next: the round in progress
	// ends (its steps that had not ended do not run, and what they had
	// written to sub-threads is moved back), and Next make the next round.
	// Their input is an object of the outputs of the round's steps that
	// ended, by name (as Outputs leave them) or, when none ended, of the
	// round's before (what the round got) — in a workflow that never ran,
	// the workflow's input. An empty, non-nil Next ends the workflow.
	// A step the graph does not declare is refused by the next Run.
	Next []string
}

// Edit is an edit as the workflow thread records it: who made it, and
// what it set.
type Edit struct {
	By string `json:"by"`
	// Version is the version of the workflow's thread the edit made.
	Version int64           `json:"version,omitzero"`
	Input   json.RawMessage `json:"input,omitzero"`
	// Outputs are the steps whose outputs it set (the step records, with
	// EditedBy, hold the outputs).
	Outputs []string `json:"outputs,omitzero"`
	Next    []string `json:"next,omitzero"`
	// Ended says that the edit ended the workflow (an empty Next).
	Ended bool `json:"ended,omitzero"`
}

// metaEdit is the metadata key of the message that records an edit.
const metaEdit = "loom.workflow.edit"

// maxByLen caps Update.By.
const maxByLen = 128

// Update edits the workflow at p (zero: its head) as u says, and the next
// Run goes on from the edited execution. At a past p, the workflow is
// moved back to p first — its thread and every sub-thread, as Restore
// does — in the same atomic store operation as the edit's commit, so that
// the edit is a new version that continues p, and the versions after p
// stay in the history. To edit without touching the workflow, Fork it at p
// and Update the fork.
//
// The edit is one commit of the workflow thread, whose metadata names its
// author ("author"), holding a step record for each output set (EditedBy
// names the author; Execution.Steps shows it after the attempt it edits)
// and a message recording the edit (Execution.Edits). A workflow that a
// runner holds is ErrBusy; an Update without By or without anything to set,
// or whose values are not JSON, is thread.ErrInvalid. None changes
// anything.
func (w *Workflow) Update(ctx context.Context, p Point, u Update) error {
	if u.By == "" || len(u.By) > maxByLen || !utf8.ValidString(u.By) {
		return fmt.Errorf("update workflow %s: by %q: a name of at most %d bytes of UTF-8 is required: %w", w.ID(), clip(u.By), maxByLen, thread.ErrInvalid)
	}
	if u.Input == nil && len(u.Outputs) == 0 && u.Next == nil {
		return fmt.Errorf("update workflow %s: nothing to set: %w", w.ID(), thread.ErrInvalid)
	}
	edit := Edit{By: u.By, Next: dedupe(u.Next), Ended: u.Next != nil && len(u.Next) == 0}
	for _, n := range edit.Next {
		if _, _, ok := parseTask(n); !ok {
			return fmt.Errorf("update workflow %s: next step %q: %w", w.ID(), clip(n), thread.ErrInvalid)
		}
	}
	if u.Input != nil {
		b, err := json.Marshal(u.Input)
		if err != nil {
			return fmt.Errorf("update workflow %s: input: %v: %w", w.ID(), err, thread.ErrInvalid)
		}
		edit.Input = b
	}
	outputs := map[string]json.RawMessage{}
	for name, out := range u.Outputs {
		b, err := marshalOutput(out)
		if err != nil {
			return fmt.Errorf("update workflow %s: output of %s: %w", w.ID(), clip(name), err)
		}
		outputs[name] = b
	}
	edit.Outputs = slices.Sorted(maps.Keys(outputs))

	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.refresh(ctx); err != nil {
		return err
	}
	if err := w.refuseBusy(ctx, false); err != nil {
		return fmt.Errorf("update workflow %s: %w", w.ID(), err)
	}
	v, err := w.resolve(ctx, p)
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	ex, subs, err := w.stateAt(ctx, v)
	if err != nil {
		return err
	}
	msgs, err := w.th.Messages(ctx, thread.ReadOptions{Version: v})
	if err != nil {
		return fmt.Errorf("update workflow %s: %w", w.ID(), err)
	}
	runs := foldRuns(stepRecords(msgs))
	g := w.db.Group()
	if v != w.th.Version() {
		if subs, err = w.restoreInto(ctx, g, p, v, subs); err != nil {
			return err
		}
	}
	ex = cloneExec(ex)
	ex.Runner = nil
	now := time.Now().UTC()
	edit.Version = w.th.Version() + 1

	// A step of the round that has not ended ends by the edit: an attempt
	// of its own, done, that its next successors follow (ex.Follow).
	var recs []StepRun
	var ending []string
	for _, name := range edit.Outputs {
		if ex.Status == StatusPending || ex.Status == StatusDone || !slices.Contains(ex.Current, name) || slices.Contains(ex.Done, name) {
			continue
		}
		if ex.Attempts == nil {
			ex.Attempts = map[string]int{}
		}
		ex.Attempts[name]++
		a := ex.Attempts[name]
		rec := StepRun{ID: stepID(ex.Round, name, a), Name: name, Round: ex.Round, Attempt: a, Status: StatusDone,
			Start: now, End: now, Output: outputs[name], EditedBy: u.By}
		recs = append(recs, rec)
		runs = append(runs, rec)
		ending = append(ending, name)
	}
	if len(ending) > 0 {
		if v == w.th.Version() {
			back := restartPoints(ex, subs, ending)
			for _, key := range slices.Sorted(maps.Keys(back)) {
				if err := w.moveBack(ctx, g, subs, key, back[key]); err != nil {
					return fmt.Errorf("update workflow %s: %w", w.ID(), err)
				}
			}
		}
		for _, name := range ending {
			ex.forget(name)
		}
		ended := func(n string) bool { return slices.Contains(ending, n) }
		ex.Done = append(ex.Done, ending...)
		ex.Follow = append(ex.Follow, ending...)
		ex.Waiting = slices.DeleteFunc(ex.Waiting, func(wt Waiting) bool { return ended(wt.Step) })
		ex.Failed = slices.DeleteFunc(ex.Failed, ended)
		if len(ex.Waiting) == 0 {
			ex.Waiting = nil
		}
		if len(ex.Failed) == 0 {
			ex.Failed, ex.Error = nil, ""
			ex.Status = StatusRunning
			if len(ex.Waiting) > 0 && len(ex.Done)+len(ex.Waiting) == len(ex.Current) {
				ex.Status = StatusWaiting
			}
		} else if slices.ContainsFunc(ending, func(n string) bool { return strings.HasPrefix(ex.Error, "step "+n+": ") }) {
			// The error was the ended step's: it is now a step's that
			// still failed.
			for j := len(runs) - 1; j >= 0; j-- {
				if s := runs[j]; s.Name == ex.Failed[0] && s.Status == StatusFailed {
					ex.Error = fmt.Sprintf("step %s: %s", s.Name, s.Error)
					break
				}
			}
		}
	}
	// Each other output set is a record of the attempt it edits, under an
	// id of its own ("2/write#1/edit1"), that supersedes it.
	for _, name := range edit.Outputs {
		if slices.Contains(ending, name) {
			continue
		}
		var last *StepRun
		for j := len(runs) - 1; j >= 0; j-- {
			if runs[j].Name == name && runs[j].Status == StatusDone {
				last = &runs[j]
				break
			}
		}
		if last == nil {
			return fmt.Errorf("update workflow %s at %s: step %q has no ended attempt to set the output of: %w", w.ID(), p, clip(name), thread.ErrInvalid)
		}
		base := stepID(last.Round, last.Name, last.Attempt) + "/edit"
		n := 1
		for _, s := range runs {
			if strings.HasPrefix(s.ID, base) {
				n++
			}
		}
		rec := *last
		rec.ID = fmt.Sprintf("%s%d", base, n)
		rec.Output, rec.EditedBy, rec.Start, rec.End = outputs[name], u.By, now, now
		recs = append(recs, rec)
		runs = append(runs, rec)
	}
	if edit.Input != nil {
		ex.Input = edit.Input
	}
	if u.Next != nil {
		if err := w.setNext(ctx, g, ex, subs, runs, edit.Next, v == w.th.Version()); err != nil {
			return fmt.Errorf("update workflow %s at %s: %w", w.ID(), p, err)
		}
	}
	ms, err := stepMessages(recs)
	if err != nil {
		return err
	}
	em, err := editMessage(edit)
	if err != nil {
		return err
	}
	st, err := encodeState(w.ID(), ex, subs)
	if err != nil {
		return err
	}
	what := "edit by " + u.By
	if v != w.th.Version() {
		what += " at " + p.String()
	}
	if _, err := g.Commit(ctx, w.th, thread.CommitOptions{Messages: append(ms, em), State: st,
		Metadata: map[string]string{"workflow": what, "author": u.By}}); err != nil {
		return fmt.Errorf("update workflow %s: %w", w.ID(), err)
	}
	if err := g.Apply(ctx); err != nil {
		return fmt.Errorf("update workflow %s: %w", w.ID(), err)
	}
	return w.load(ctx)
}

// setNext makes next the steps of the next round of ex, as Update.Next
// says; at the head, it moves back what the round's unfinished steps had
// written (at a past version the restore did).
func (w *Workflow) setNext(ctx context.Context, g *thread.Group, ex *execState, subs map[string]subHead, runs []StepRun, next []string, head bool) error {
	if head {
		back := restartPoints(ex, subs, slices.Collect(maps.Keys(ex.Uses)))
		for _, key := range slices.Sorted(maps.Keys(back)) {
			if err := w.moveBack(ctx, g, subs, key, back[key]); err != nil {
				return err
			}
		}
	}
	var given json.RawMessage
	if ex.Status != StatusPending {
		outs := map[string]json.RawMessage{}
		// The round's ended steps, or, if none ended, the round's before.
		for round := ex.Round; round >= ex.Round-1 && len(outs) == 0; round-- {
			for _, s := range runs {
				if s.Round == round && s.Status == StatusDone && (round < ex.Round || slices.Contains(ex.Done, s.Name)) {
					outs[s.Name] = s.Output
					if outs[s.Name] == nil {
						outs[s.Name] = json.RawMessage("null")
					}
				}
			}
		}
		given, _ = json.Marshal(outs)
	}
	ex.Done, ex.Next, ex.Attempts, ex.Uses, ex.Waiting, ex.Inputs, ex.Failed, ex.Error, ex.Given, ex.Follow = nil, nil, nil, nil, nil, nil, nil, "", nil, nil
	if len(next) == 0 {
		ex.Status, ex.Current = StatusDone, nil
		return nil
	}
	ex.Round++
	ex.Status, ex.Current = StatusRunning, next
	if given != nil {
		ex.Given = map[string]json.RawMessage{}
		for _, n := range next {
			ex.Given[n] = given
		}
	}
	return nil
}

func editMessage(e Edit) (message.Message, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return message.Message{}, err
	}
	var parts []string
	if e.Input != nil {
		parts = append(parts, "input")
	}
	if len(e.Outputs) > 0 {
		parts = append(parts, "output of "+strings.Join(e.Outputs, ", "))
	}
	switch {
	case e.Ended:
		parts = append(parts, "ends the workflow")
	case e.Next != nil:
		parts = append(parts, "next "+strings.Join(e.Next, ", "))
	}
	m := message.New(stepRole, message.Text{Text: "edit by " + e.By + ": " + strings.Join(parts, "; ")})
	m.AuthorName = e.By
	m.Metadata = map[string]any{metaEdit: string(b)}
	return m, nil
}

// editRecords returns the edits that msgs record, in order.
func editRecords(msgs []message.Message) []Edit {
	return records(msgs, metaEdit, func(e Edit) bool { return e.By != "" })
}
