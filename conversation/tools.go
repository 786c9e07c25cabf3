package conversation

import (
	"encoding/json"
	"strings"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
)

// The tools of the conversation itself, which every agent of a
// conversation is offered besides its own: compact, fork and the
// sub-agents' tools. yield_to_parent is offered to sub-agents only.
const (
	ToolCompact   = "compact"
	ToolFork      = "fork_thread"
	ToolYield     = "yield_to_parent"
	ToolSpawn     = "spawn_subagent"
	ToolWaitSubs  = "wait_for_subagents"
	stateMode     = "conv/mode"
	stateStatus   = "conv/status"
	stateQueued   = "conv/queued"
	compactAuthor = "compact"
)

// LabelParent labels a sub-agent's thread with the id of the conversation
// that started it.
const LabelParent = "loom.conversation.parent"

// IsConversation reports whether state, a thread's state, is a
// conversation's: this package writes its mode there from the thread's
// first commit. Lists of conversations (loom serve's) find them with it.
func IsConversation(state map[string]json.RawMessage) bool {
	_, ok := state[stateMode]
	return ok
}

// StatusIn returns the agent's status that state (a thread's, or one
// commit's) records, and false when it records none.
func StatusIn(state map[string]json.RawMessage) (Status, bool) {
	var st Status
	raw, ok := state[stateStatus]
	if !ok || json.Unmarshal(raw, &st) != nil || st.Kind == "" {
		return Status{}, false
	}
	return st, true
}

func schema(props string, required ...string) json.RawMessage {
	req, _ := json.Marshal(required)
	return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `,"additionalProperties":false}`)
}

// ownTools returns the specs of the conversation's own tools.
func ownTools(sub bool) []agent.ToolSpec {
	specs := []agent.ToolSpec{
		{Name: ToolCompact, Description: "Replace the conversation so far with a summary of it, to free the context. Write the summary; next_prompt, if given, is what to do after.",
			Parameters: schema(`"summary":{"type":"string"},"next_prompt":{"type":"string"}`, "summary")},
		{Name: ToolFork, Description: "Start a new conversation that shares this one so far and goes on with prompt; this one goes on too.",
			Parameters: schema(`"prompt":{"type":"string"}`, "prompt")},
		{Name: ToolSpawn, Description: "Start a sub-agent on a conversation of its own with prompt. Returns its id; wait_for_subagents waits for its result.",
			Parameters: schema(`"prompt":{"type":"string"},"title":{"type":"string"}`, "prompt")},
		{Name: ToolWaitSubs, Description: "Wait until every sub-agent named has yielded its result, failed or been aborted, and return what each gave.",
			Parameters: schema(`"ids":{"type":"array","items":{"type":"string"}}`, "ids")},
	}
	if sub {
		specs = append(specs, agent.ToolSpec{Name: ToolYield, Description: "End this sub-agent's work and give result to the conversation that started it.",
			Parameters: schema(`"result":{"type":"string"}`, "result")})
	}
	return specs
}

// interpretToolUse decides what the calls of the agent's last answer ask
// for: a control flow operation (compact, fork, yield — the first in the
// answer wins, and the answer's other calls are not run), or tool use, in
// which every call runs. It is the one place that reads tool calls.
func interpretToolUse(calls []message.FunctionCall, sub bool) Mode {
	for _, c := range calls {
		var args struct {
			Summary    string `json:"summary"`
			NextPrompt string `json:"next_prompt"`
			Prompt     string `json:"prompt"`
			Result     string `json:"result"`
		}
		json.Unmarshal([]byte(c.Arguments), &args) // bad arguments read as empty
		switch {
		case c.Name == ToolCompact:
			return Mode{Kind: ModeControlFlow, Op: &ControlFlowOp{Kind: OpCompact, CallID: c.CallID,
				Summary: strings.TrimSpace(args.Summary), NextPrompt: args.NextPrompt}}
		case c.Name == ToolFork:
			return Mode{Kind: ModeControlFlow, Op: &ControlFlowOp{Kind: OpFork, CallID: c.CallID, NextPrompt: args.Prompt}}
		case c.Name == ToolYield && sub:
			return Mode{Kind: ModeControlFlow, Op: &ControlFlowOp{Kind: OpYield, CallID: c.CallID, Response: args.Result}}
		}
	}
	active := map[string]string{}
	for _, c := range calls {
		active[c.CallID] = c.Name
	}
	return Mode{Kind: ModeToolUse, ActiveTools: active}
}
