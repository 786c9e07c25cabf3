package langgraph

import "encoding/json"

// Config names a checkpoint: a LangGraph thread, a namespace within it
// ("" for the root graph, "node:task" for a subgraph) and, where it
// matters, one checkpoint's id.
type Config struct {
	ThreadID     string `json:"thread_id"`
	CheckpointNS string `json:"checkpoint_ns"`
	CheckpointID string `json:"checkpoint_id,omitempty"`
}

// Blob is a value as the client's serializer made it: a type tag and bytes
// (base64 in JSON). loom keeps it as it came.
type Blob struct {
	Type string `json:"type"`
	Data []byte `json:"data"`
}

// Value is a channel's value or a pending write's: a Blob, or, for the
// channel named "messages", the list of LangChain messages in their stored
// form ({"type", "data"}), which loom keeps as its own messages.
//
// A list of messages may be sent and answered as its new part only, so
// that a turn costs what it adds, not the whole thread: Extends says the
// list begins with the N messages whose chain sum is H — in a put, those
// of the parent checkpoint; in an answer, those of the list the request
// said it knows. Shares, in a list's answer, says the list begins with
// the first N messages of an earlier tuple of the same answer. Sum, in an
// answer, is the whole list's count and chain sum, for the next request.
type Value struct {
	Blob     *Blob             `json:"blob,omitzero"`
	Messages []json.RawMessage `json:"messages,omitzero"`
	Extends  *MessagesSum      `json:"extends,omitzero"`
	Shares   *Share            `json:"shares,omitzero"`
	Sum      *MessagesSum      `json:"sum,omitzero"`
}

// MessagesSum names a list of messages: how many, and their chain sum
// (sha256 over each message's stored form, in order; "" for none).
type MessagesSum struct {
	N int    `json:"n"`
	H string `json:"h"`
}

// Share says that a list begins with the first N messages of the list of
// the tuple at index Tuple of the same answer.
type Share struct {
	Tuple int `json:"tuple"`
	N     int `json:"n"`
}

// PutRequest is BaseCheckpointSaver.put: a checkpoint whose parent is
// Config.CheckpointID ("" for none). Checkpoint holds every field of
// LangGraph's Checkpoint but channel_values (id and channel_versions are
// read; the rest is kept as given); ChannelValues holds the values of the
// channels of NewVersions that have one.
type PutRequest struct {
	Config        Config                     `json:"config"`
	Checkpoint    map[string]json.RawMessage `json:"checkpoint"`
	Metadata      map[string]json.RawMessage `json:"metadata"`
	NewVersions   map[string]json.RawMessage `json:"new_versions"`
	ChannelValues map[string]Value           `json:"channel_values"`
}

// PutResponse names the checkpoint put, and its messages when it has
// them (to extend in the next put).
type PutResponse struct {
	Config   Config       `json:"config"`
	Messages *MessagesSum `json:"messages,omitzero"`
}

// Write is one pending write of a task. Idx is its index in the task's
// writes, or LangGraph's fixed negative index for a special channel
// (errors, interrupts), which replaces rather than adds.
type Write struct {
	Idx     int    `json:"idx"`
	Channel string `json:"channel"`
	Value   Value  `json:"value"`
}

// WritesRequest is BaseCheckpointSaver.putWrites: the writes of one task
// against the checkpoint Config names.
type WritesRequest struct {
	Config   Config  `json:"config"`
	TaskID   string  `json:"task_id"`
	TaskPath string  `json:"task_path"`
	Writes   []Write `json:"writes"`
}

// PendingWrite is a stored write, as a checkpoint tuple returns it.
type PendingWrite struct {
	TaskID   string `json:"task_id"`
	Channel  string `json:"channel"`
	Value    Value  `json:"value"`
	Idx      int    `json:"idx"`
	TaskPath string `json:"task_path"`
}

// Tuple is LangGraph's CheckpointTuple: a checkpoint (with its
// channel_values), its metadata, its parent and its pending writes.
type Tuple struct {
	Config        Config                     `json:"config"`
	Checkpoint    map[string]json.RawMessage `json:"checkpoint"`
	Metadata      map[string]json.RawMessage `json:"metadata"`
	ParentConfig  *Config                    `json:"parent_config"`
	PendingWrites []PendingWrite             `json:"pending_writes"`
}

// ListRequest is BaseCheckpointSaver.list. Empty ThreadID lists every
// LangGraph thread; a nil CheckpointNS lists every namespace.
type ListRequest struct {
	ThreadID     string                     `json:"thread_id,omitempty"`
	CheckpointNS *string                    `json:"checkpoint_ns,omitempty"`
	CheckpointID string                     `json:"checkpoint_id,omitempty"`
	Filter       map[string]json.RawMessage `json:"filter,omitempty"`
	Before       string                     `json:"before,omitempty"`
	Limit        int                        `json:"limit,omitempty"`
}

// ListResponse holds the listed tuples, newest first.
type ListResponse struct {
	Checkpoints []Tuple `json:"checkpoints"`
}

// CopyRequest names the thread a copy makes.
type CopyRequest struct {
	TargetThreadID string `json:"target_thread_id"`
}

// Prune strategies.
const (
	KeepLatest = "keep_latest"
	DeleteAll  = "delete"
)

// PruneRequest is BaseCheckpointSaver.prune.
type PruneRequest struct {
	ThreadIDs []string `json:"thread_ids"`
	Strategy  string   `json:"strategy"`
}

// DeleteRunsRequest is BaseCheckpointSaver.deleteForRuns.
type DeleteRunsRequest struct {
	RunIDs []string `json:"run_ids"`
}

// DeltaRequest is BaseCheckpointSaver.getDeltaChannelHistory.
type DeltaRequest struct {
	Config   Config   `json:"config"`
	Channels []string `json:"channels"`
}

// DeltaHistory is what one channel contributed along a checkpoint's
// ancestors: the value at the nearest ancestor that stored one (nil:
// none), and the writes after it, oldest first.
type DeltaHistory struct {
	Seed   *Value         `json:"seed,omitempty"`
	Writes []PendingWrite `json:"writes"`
}

// DeltaResponse maps each channel asked for to its history.
type DeltaResponse struct {
	Channels map[string]DeltaHistory `json:"channels"`
}
