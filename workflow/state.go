package workflow

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// The state keys of a workflow thread.
const (
	keyExec = "wf/exec" // the execution state
	keySubs = "wf/subs" // the sub-threads, with their recorded versions
)

// Status is where a workflow, or one of its steps, stands.
type Status string

// The statuses.
const (
	// StatusPending is a workflow that has not run yet.
	StatusPending Status = "pending"
	// StatusRunning is a workflow with steps to run, or a step that
	// started and has not ended. A running step of a workflow whose runner
	// is gone was interrupted: the next Run runs it again.
	StatusRunning Status = "running"
	// StatusWaiting is a workflow, or a step, waiting for input (Provide).
	StatusWaiting Status = "waiting"
	// StatusDone is a workflow that has run all its steps, or a step that
	// ended.
	StatusDone Status = "done"
	// StatusFailed is a workflow whose step failed, or that step. The next
	// Run runs the failed steps again.
	StatusFailed Status = "failed"
	// StatusInterrupted is a step attempt that started and never ended: its
	// runner was killed or lost the workflow. A later attempt replaced it.
	StatusInterrupted Status = "interrupted"
)

// execState is the execution state as the workflow thread's state keeps it
// (wf/exec): small, and flat in the number of steps taken, which are
// messages of the workflow thread.
type execState struct {
	Status Status          `json:"status"`
	Input  json.RawMessage `json:"input,omitzero"`
	// Round counts the rounds of steps; the steps of one round run
	// concurrently, and their successors form the next.
	Round   int      `json:"round,omitzero"`
	Current []string `json:"current,omitzero"`
	Done    []string `json:"done,omitzero"` // steps of Current that ended
	Next    []string `json:"next,omitzero"` // successors chosen so far
	// Attempts counts the attempts of Current's steps.
	Attempts map[string]int `json:"attempts,omitzero"`
	// Uses records, for each step of Current that has not ended, the
	// version each sub-thread it used had before it first used it: a step
	// run again starts from those versions.
	Uses    map[string]map[string]int64 `json:"uses,omitzero"`
	Waiting []Waiting                   `json:"waiting,omitzero"`
	// Inputs are the inputs given to waiting steps, until they end.
	Inputs map[string]json.RawMessage `json:"inputs,omitzero"`
	// Given are the inputs of the round's steps that an edit chose
	// (Update.Next), which no step of the round before chose.
	Given  map[string]json.RawMessage `json:"given,omitzero"`
	Failed []string                   `json:"failed,omitzero"`
	Error  string                     `json:"error,omitzero"`
	Runner *Lease                     `json:"runner,omitzero"`
	// Follow are steps of Current that an edit ended (Update.Outputs of a
	// step that had not ended): the next Run chooses their declared
	// successors, which the edit, without the graph, could not.
	Follow []string `json:"follow,omitzero"`
}

// forget drops what ex keeps of a step of the round only until it ends:
// the sub-thread versions it started from, and the input it was given.
func (ex *execState) forget(step string) {
	delete(ex.Uses, step)
	delete(ex.Inputs, step)
	if len(ex.Uses) == 0 {
		ex.Uses = nil
	}
	if len(ex.Inputs) == 0 {
		ex.Inputs = nil
	}
}

// Waiting is a step waiting for input, with what it asked.
type Waiting struct {
	Step   string          `json:"step"`
	Prompt json.RawMessage `json:"prompt,omitzero"`
	Since  time.Time       `json:"since"`
}

// Lease says which runner runs a workflow, until when. A runner renews it
// with every commit; a lease past Until, or of a process that is gone from
// this host, is free to take.
type Lease struct {
	ID    string    `json:"id"`
	Host  string    `json:"host,omitzero"`
	PID   int       `json:"pid,omitzero"`
	Until time.Time `json:"until"`
}

// subHead is a sub-thread as the workflow last recorded it.
type subHead struct {
	Version int64  `json:"version"`
	Head    string `json:"head,omitzero"`
}

// StepRun is one attempt of a step, as the workflow thread records it.
type StepRun struct {
	// ID names the attempt: round, step and attempt, as "2/write#1", or
	// "3/summarize[4]#1" for an instance that a step sent (Step.Send).
	ID string `json:"id"`
	// Name is the step's name, with the instance's index in the round for
	// an instance of a dynamic fan-out: "summarize[4]".
	Name    string          `json:"name"`
	Round   int             `json:"round"`
	Attempt int             `json:"attempt"`
	Status  Status          `json:"status"`
	Start   time.Time       `json:"start"`
	End     time.Time       `json:"end,omitzero"`
	Input   json.RawMessage `json:"input,omitzero"`
	Output  json.RawMessage `json:"output,omitzero"`
	Error   string          `json:"error,omitzero"`
	// Next are the successors the step chose.
	Next []string `json:"next,omitzero"`
	// SubThreads are the keys of the sub-threads it used.
	SubThreads []string `json:"sub_threads,omitzero"`
	// Answer is the input given to it (Provide) that its Ask returned.
	Answer json.RawMessage `json:"answer,omitzero"`
	// EditedBy names the person who set this output (Update.Outputs): the
	// record is then not an attempt but an edit of the attempt its ID
	// names ("2/write#1/edit1"), which it supersedes.
	EditedBy string `json:"edited_by,omitzero"`
	// Sends are the instances it sent (Step.Send), which ran in the next
	// round, in the order it sent them.
	Sends []Sent `json:"sends,omitzero"`
}

// Sent is an instance of a step that a step sent (Step.Send).
type Sent struct {
	// Task names the instance, as "summarize[4]": its index counts the
	// instances of that step sent in the round, by all steps, in the order
	// their ends were committed.
	Task  string          `json:"task"`
	Input json.RawMessage `json:"input,omitzero"`
}

func stepID(round int, name string, attempt int) string {
	return fmt.Sprintf("%d/%s#%d", round, name, attempt)
}

// The message that records a step attempt: the record as JSON in its
// metadata, and a line for people.
const (
	stepRole = message.Role("workflow")
	metaStep = "loom.workflow.step"
)

func stepMessage(r StepRun) (message.Message, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return message.Message{}, err
	}
	line := fmt.Sprintf("%s %s", r.ID, r.Status)
	switch {
	case r.Error != "":
		line += ": " + r.Error
	case r.Status == StatusDone && len(r.Next)+len(r.Sends) > 0:
		next := slices.Clone(r.Next)
		sent := map[string]int{}
		for _, sd := range r.Sends {
			step := stepOf(sd.Task)
			if sent[step] == 0 {
				next = append(next, step)
			}
			sent[step]++
		}
		for i, n := range next {
			if sent[n] > 0 && i >= len(r.Next) {
				next[i] = fmt.Sprintf("%s×%d", n, sent[n])
			}
		}
		line += " → " + strings.Join(next, ", ")
	}
	m := message.New(stepRole, message.Text{Text: line})
	m.AuthorName = stepOf(r.Name)
	m.Metadata = map[string]any{metaStep: string(b)}
	return m, nil
}

// stepRecords returns the step records of msgs, one a message, in order.
func stepRecords(msgs []message.Message) []StepRun {
	return records(msgs, metaStep, func(r StepRun) bool { return r.ID != "" })
}

// records returns the records of msgs kept as JSON under key in the
// metadata of the workflow's own messages (role workflow), in order: those
// that decode and that valid accepts.
func records[T any](msgs []message.Message, key string, valid func(T) bool) []T {
	var out []T
	for _, m := range msgs {
		raw, ok := m.Metadata[key].(string)
		if !ok || m.Role != stepRole {
			continue
		}
		var r T
		if json.Unmarshal([]byte(raw), &r) != nil || !valid(r) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// stepRuns folds the step records of msgs into one entry per attempt (see
// foldRuns).
func stepRuns(msgs []message.Message) []StepRun { return foldRuns(stepRecords(msgs)) }

// foldRuns folds step records into one entry per attempt, in the order the
// attempts started; an attempt that never ended but was followed by
// another of the same step is marked interrupted.
func foldRuns(recs []StepRun) []StepRun {
	var out []StepRun
	at := map[string]int{}
	for _, r := range recs {
		if i, ok := at[r.ID]; ok {
			out[i] = r
			continue
		}
		at[r.ID] = len(out)
		out = append(out, r)
	}
	for i, r := range out {
		if r.Status != StatusRunning {
			continue
		}
		if _, later := at[stepID(r.Round, r.Name, r.Attempt+1)]; later {
			out[i].Status = StatusInterrupted
		}
	}
	return out
}

// Execution is a workflow's execution state as of one version of its
// thread: where it stands, the steps it took, and its sub-threads as it
// recorded them.
type Execution struct {
	// Workflow is the workflow's id; Version the version of its thread
	// this is read at.
	Workflow string `json:"workflow"`
	Version  int64  `json:"version"`
	Status   Status `json:"status"`
	// Input is the workflow's input, given to its first steps.
	Input json.RawMessage `json:"input,omitzero"`
	// Round numbers the round in progress (the steps of a round run
	// concurrently); Current are its steps, Completed those of them that
	// ended, and Next the successors they chose, which make the next round.
	Round     int      `json:"round"`
	Current   []string `json:"current"`
	Completed []string `json:"completed"`
	Next      []string `json:"next"`
	// Waiting are the steps waiting for input.
	Waiting []Waiting `json:"waiting,omitzero"`
	// Error is the error of the step that failed.
	Error string `json:"error,omitzero"`
	// Runner holds the lease of the runner that runs it, if any.
	Runner *Lease `json:"runner,omitzero"`
	// Steps are every step attempt taken, in the order they started.
	Steps []StepRun `json:"steps"`
	// SubThreads are the sub-threads, by key.
	SubThreads []SubThread `json:"sub_threads"`
	// Edits are the edits people made (Update), in order.
	Edits []Edit `json:"edits,omitzero"`
}

// SubThread is a sub-thread of a workflow as the workflow recorded it.
type SubThread struct {
	Key string `json:"key"`
	// Thread is the sub-thread's id: the workflow's id, '.', the key.
	Thread string `json:"thread"`
	// Version and Head are the sub-thread's version and head commit when
	// the workflow last recorded them (at each step's end, a checkpoint, a
	// restore).
	Version int64  `json:"version"`
	Head    string `json:"head,omitzero"`
}

// decodeState reads the workflow's keys of a thread state.
func decodeState(id string, st map[string]json.RawMessage) (*execState, map[string]subHead, error) {
	raw, ok := st[keyExec]
	if !ok {
		return nil, nil, fmt.Errorf("%s: %w", id, ErrNotWorkflow)
	}
	var ex execState
	if err := json.Unmarshal(raw, &ex); err != nil {
		return nil, nil, fmt.Errorf("workflow %s: execution state: %v: %w", id, err, thread.ErrInvalid)
	}
	switch ex.Status {
	case StatusPending, StatusRunning, StatusWaiting, StatusDone, StatusFailed:
	default:
		return nil, nil, fmt.Errorf("workflow %s: status %q: %w", id, clip(string(ex.Status)), thread.ErrInvalid)
	}
	var subs map[string]subHead
	if raw, ok := st[keySubs]; ok {
		if err := json.Unmarshal(raw, &subs); err != nil {
			return nil, nil, fmt.Errorf("workflow %s: sub-threads: %v: %w", id, err, thread.ErrInvalid)
		}
	}
	if subs == nil {
		subs = map[string]subHead{}
	}
	for k, h := range subs {
		if !validKey(k) || h.Version < 1 {
			return nil, nil, fmt.Errorf("workflow %s: sub-thread %q at version %d: %w", id, clip(k), h.Version, thread.ErrInvalid)
		}
	}
	return &ex, subs, nil
}

// encodeState is the state patch that writes ex and subs, of workflow
// id, and the versions of the sub-threads that it names for GC
// (thread.StateLinks): those subs record, which no later version of the
// workflow records older (a restore records the version that brings a
// sub-thread back).
func encodeState(id string, ex *execState, subs map[string]subHead) (map[string]json.RawMessage, error) {
	e, err := json.Marshal(ex)
	if err != nil {
		return nil, err
	}
	s, err := json.Marshal(subs)
	if err != nil {
		return nil, err
	}
	group := make(map[string]int64, len(subs))
	for k, h := range subs {
		group[k] = h.Version
	}
	l, err := json.Marshal(map[string]map[string]int64{subID(id, ""): group})
	if err != nil {
		return nil, err
	}
	return map[string]json.RawMessage{keyExec: e, keySubs: s, thread.StateLinks: l}, nil
}

// encodeExec is the state patch that writes ex, and subs as JSON already.
func encodeExec(ex *execState, subs json.RawMessage) (map[string]json.RawMessage, error) {
	e, err := json.Marshal(ex)
	if err != nil {
		return nil, err
	}
	return map[string]json.RawMessage{keyExec: e, keySubs: subs}, nil
}

// execution builds the Execution of workflow id at a version, of the step
// records recs (one a message of the thread, in order).
func execution(id string, version int64, ex *execState, subs map[string]subHead, recs []StepRun, edits []Edit) *Execution {
	e := &Execution{Workflow: id, Version: version, Status: ex.Status, Input: ex.Input, Round: ex.Round,
		Current: nonNil(ex.Current), Completed: nonNil(inOrderOf(ex.Current, ex.Done)), Next: nonNil(ex.Next), Waiting: ex.Waiting,
		Error: ex.Error, Runner: ex.Runner, Steps: foldRuns(recs), SubThreads: subList(id, subs), Edits: edits}
	if e.Steps == nil {
		e.Steps = []StepRun{}
	}
	return e
}

func subList(id string, subs map[string]subHead) []SubThread {
	out := make([]SubThread, 0, len(subs))
	for k, h := range subs {
		out = append(out, SubThread{Key: k, Thread: subID(id, k), Version: h.Version, Head: h.Head})
	}
	slices.SortFunc(out, func(a, b SubThread) int { return strings.Compare(a.Key, b.Key) })
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
