package scripted

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/message"
)

// Echo returns the demo model of loom serve --provider scripted: a client
// that needs no key and no network, and answers every request the same way
// given the same messages, so that SDK tests and demos can drive loom end
// to end, tools included:
//
//   - when the last message is the user's and reads "call <tool> <json
//     arguments>" (arguments optional, {} by default) and the request
//     offers a tool of that name, it calls the tool: one assistant message
//     with one function call (call id "call_" and fresh id characters),
//     finish reason tool_calls;
//   - when the last message holds function results, it says
//     "Tool <name> returned: <result>" (the name found by the call id among
//     the earlier messages; several results joined by "; ");
//   - otherwise it says "You said: <the last user text>".
//
// A stream yields the text in pieces of ChunkSize runes. Usage counts
// words: the input's as input tokens, the answer's as output tokens. The
// client repeats forever and records no requests; set Record before its
// first use to keep them.
func Echo() *Client {
	c := New(Step{Func: echo, pieces: true})
	c.Repeat, c.Record = true, false
	return c
}

// echo is Echo's step.
func echo(_ context.Context, r Request) (*agent.ChatResponse, error) {
	out := echoAnswer(r)
	in := int64(0)
	for _, m := range r.Messages {
		in += words(m.Text())
		for _, res := range m.Results() {
			in += words(res.Result)
		}
		for _, fc := range m.Calls() {
			in += words(fc.Name) + words(fc.Arguments)
		}
	}
	in += words(r.Options.Instructions)
	o := words(out.Text())
	for _, fc := range out.Calls() {
		o += words(fc.Name) + words(fc.Arguments)
	}
	resp := &agent.ChatResponse{Messages: []message.Message{out}, FinishReason: agent.FinishStop, Model: "scripted",
		Usage: message.Usage{InputTokens: in, OutputTokens: o, TotalTokens: in + o}}
	if len(out.Calls()) > 0 {
		resp.FinishReason = agent.FinishToolCalls
	}
	return resp, nil
}

// DemoDelay is the pause before each piece of a Demo client's streams.
const DemoDelay = 15 * time.Millisecond

// Demo returns the demo model of loom serve --provider scripted and loom
// chat: Echo, whose streams pause DemoDelay before each piece of four
// runes, as a model's do (slow enough to watch, and to abort), and which
// compacts when asked to: a last user message that begins "Call the
// compact tool", in a request that offers a tool named "compact", is
// answered with a call of it whose summary lists what the user said
// before.
func Demo() *Client {
	c := New(Step{Func: echo, pieces: true, ChunkDelay: DemoDelay})
	c.Repeat, c.Record = true, false
	return c
}

// echoAnswer is the assistant message Echo answers r with.
func echoAnswer(r Request) message.Message {
	if n := len(r.Messages); n > 0 {
		last := r.Messages[n-1]
		if last.Role == message.RoleUser {
			if fc, ok := callOf(last.Text(), r.Options.Tools); ok {
				return message.New(message.RoleAssistant, fc)
			}
			if fc, ok := compactOf(r); ok {
				return message.New(message.RoleAssistant, fc)
			}
		}
		if results := last.Results(); len(results) > 0 {
			names := map[string]string{}
			for _, m := range r.Messages[:n-1] {
				for _, fc := range m.Calls() {
					names[fc.CallID] = fc.Name
				}
			}
			parts := make([]string, len(results))
			for i, res := range results {
				name := names[res.CallID]
				if name == "" {
					name = res.CallID
				}
				parts[i] = "Tool " + name + " returned: " + res.Result
			}
			return message.Assistant(strings.Join(parts, "; "))
		}
	}
	last := ""
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == message.RoleUser {
			last = r.Messages[i].Text()
			break
		}
	}
	return message.Assistant("You said: " + last)
}

// callOf is the function call text asks for: "call <tool> <json args>",
// when one of tools is named <tool> and the arguments are a JSON object.
func callOf(text string, tools []agent.ToolSpec) (message.FunctionCall, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(text), "call ")
	if !ok {
		return message.FunctionCall{}, false
	}
	rest = strings.TrimSpace(rest)
	name, args, _ := strings.Cut(rest, " ")
	if i := strings.IndexFunc(rest, unicode.IsSpace); i >= 0 {
		name, args = rest[:i], rest[i+1:]
	}
	args = strings.TrimSpace(args)
	if args == "" {
		args = "{}"
	}
	var obj map[string]any
	if json.Unmarshal([]byte(args), &obj) != nil || obj == nil {
		return message.FunctionCall{}, false
	}
	for _, t := range tools {
		if t.Name == name {
			return message.FunctionCall{CallID: ids.New("call_"), Name: name, Arguments: args}, true
		}
	}
	return message.FunctionCall{}, false
}

// compactOf is the call of the compact tool r asks for: its last user
// message begins "Call the compact tool" and it offers a tool "compact".
// The summary is what the user said before, in order.
func compactOf(r Request) (message.FunctionCall, bool) {
	n := len(r.Messages)
	if !strings.HasPrefix(r.Messages[n-1].Text(), "Call the compact tool") {
		return message.FunctionCall{}, false
	}
	if !slices.ContainsFunc(r.Options.Tools, func(t agent.ToolSpec) bool { return t.Name == "compact" }) {
		return message.FunctionCall{}, false
	}
	var said []string
	for _, m := range r.Messages[:n-1] {
		if m.Role == message.RoleUser {
			said = append(said, m.Text())
		}
	}
	args, _ := json.Marshal(map[string]string{"summary": "The user said: " + strings.Join(said, " / ")})
	return message.FunctionCall{CallID: ids.New("call_"), Name: "compact", Arguments: string(args)}, true
}

// words counts the words of s.
func words(s string) int64 { return int64(len(strings.Fields(s))) }
