package store

import (
	"encoding/json"
	"maps"
	"time"

	"github.com/loomthreads/loom/message"
)

// Kind is the lifecycle of a thread as an agent sees it: undetermined until
// its first run, then local or service-managed for good.
type Kind string

// The thread kinds.
const (
	// KindUndetermined is a new thread that is neither local nor
	// service-managed yet; the first agent run decides.
	KindUndetermined Kind = "undetermined"
	// KindLocal is a thread whose messages live in loom's store.
	KindLocal Kind = "local"
	// KindService is a thread whose conversation a chat provider keeps under
	// its own id; loom keeps the id, state and a mirror of the messages.
	KindService Kind = "service"
	// KindWorkflow is a workflow's own thread (package workflow): its
	// messages record the steps taken, its state the execution state and
	// sub-threads. Agents run on the sub-threads, not on it.
	KindWorkflow Kind = "workflow"
)

// Op names what made a commit or moved a head.
type Op string

// The operations recorded in commits and history entries.
const (
	OpCreate   Op = "create"   // a thread was created
	OpAppend   Op = "append"   // messages were appended
	OpState    Op = "state"    // only the state changed
	OpCompact  Op = "compact"  // a summary replaced a prefix
	OpFork     Op = "fork"     // a thread was forked (or a commit split to fork inside it)
	OpCopy     Op = "copy"     // a thread was copied
	OpLoad     Op = "load"     // a thread was loaded from a document
	OpReset    Op = "reset"    // the head moved to the empty root
	OpRollback Op = "rollback" // the head moved to a checkpoint
	OpRestore  Op = "restore"  // the head moved to the head of an earlier version
	OpUpdate   Op = "update"   // title, labels or kind changed; the head did not move
)

// Commit is an immutable step of a thread: the messages it appends to its
// parent, and optionally a snapshot of the state. A commit id always names
// the same commit, so commits may be cached forever.
type Commit struct {
	// ID names the commit.
	ID string
	// Parent is the previous commit, "" for the first.
	Parent string
	// Depth counts the messages from the root up to and including this
	// commit's.
	Depth int64
	// Messages are the messages this commit appends, oldest first.
	Messages []message.Message
	// State, when not nil, is the whole state map as of this commit. A commit
	// with a nil State inherits the state of StateFrom.
	State map[string]json.RawMessage
	// StateFrom is the commit whose State is in effect here: the commit
	// itself when State is not nil, an ancestor otherwise, "" when no commit
	// on the way to the root has set any state.
	StateFrom string
	// Op says what made the commit.
	Op Op
	// Time is when the commit was made. Stores keep it to the microsecond,
	// in UTC: loom makes its times so.
	Time time.Time
	// Metadata is free-form: run id, model, author.
	Metadata map[string]string
}

// Clone returns a deep copy of c.
func (c *Commit) Clone() *Commit {
	var out *Commit
	if len(c.Messages) == 1 {
		// The common commit of one message: one allocation for both.
		one := &struct {
			c Commit
			m [1]message.Message
		}{c: *c}
		one.m[0] = c.Messages[0].Clone()
		out = &one.c
		out.Messages = one.m[:]
	} else {
		out = new(Commit)
		*out = *c
		if c.Messages != nil {
			out.Messages = make([]message.Message, len(c.Messages))
			for i, m := range c.Messages {
				out.Messages[i] = m.Clone()
			}
		}
	}
	out.State = cloneState(c.State)
	out.Metadata = maps.Clone(c.Metadata)
	return out
}

// ForkPoint says where a thread was forked from: the thread, and the
// commit and message the fork shares up to. A thread made with
// CreateOptions.Parent has a ForkPoint that names only the parent.
type ForkPoint struct {
	Thread  string `json:"thread"`
	Commit  string `json:"commit,omitzero"`
	Message string `json:"message,omitzero"`
}

// Record is what a store keeps about a thread besides its commits: the head,
// the version and the descriptive fields.
type Record struct {
	// ID names the thread.
	ID string
	// Tenant owns the thread; a DB scoped to a tenant sees only its threads.
	Tenant string
	// Kind is the thread's lifecycle kind.
	Kind Kind
	// Title is a human-readable name.
	Title string
	// Labels are filterable key-value pairs.
	Labels map[string]string
	// Head is the current commit, "" for an empty thread.
	Head string
	// Version counts the head moves: 1 after creation, one more per move.
	Version int64
	// CreatedAt and UpdatedAt are the times of creation and of the last move.
	CreatedAt, UpdatedAt time.Time
	// ForkedFrom is set on a thread made by Fork.
	ForkedFrom ForkPoint
}

// Clone returns a deep copy of r.
func (r *Record) Clone() *Record {
	out := *r
	out.Labels = maps.Clone(r.Labels)
	return &out
}

// HistoryEntry records one head move: after it, the thread was at Version
// with head Commit.
type HistoryEntry struct {
	Version int64
	Commit  string
	Op      Op
	Time    time.Time
}

// Checkpoint is a named pointer to a commit of a thread.
type Checkpoint struct {
	Thread string
	Name   string
	Commit string
	// Version is the thread's version when the checkpoint was made.
	Version   int64
	CreatedAt time.Time
}

func cloneState(s map[string]json.RawMessage) map[string]json.RawMessage {
	if s == nil {
		return nil
	}
	out := make(map[string]json.RawMessage, len(s))
	for k, v := range s {
		out[k] = append(json.RawMessage(nil), v...)
	}
	return out
}
