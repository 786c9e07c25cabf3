package mcpserver

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// inMessage is a message as the tools take it: {"role", "text"} for the
// common case, or loom's wire format (docs/wire-format.md) with contents.
// It is kept as JSON until a handler converts it, so that errors can say
// which message is wrong.
type inMessage []byte

// UnmarshalJSON keeps the JSON of the message.
func (m *inMessage) UnmarshalJSON(b []byte) error {
	*m = append((*m)[:0], b...)
	return nil
}

// MarshalJSON writes the JSON of the message back.
func (m inMessage) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	return m, nil
}

// messages converts the tools' messages to loom's, saying which one is
// wrong. Every failure wraps thread.ErrInvalid.
func messages(field string, in []inMessage) ([]message.Message, error) {
	out := make([]message.Message, 0, len(in))
	for i, raw := range in {
		m, err := raw.message()
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %s: %w", field, i, err, thread.ErrInvalid)
		}
		out = append(out, m)
	}
	return out, nil
}

func (m inMessage) message() (message.Message, error) {
	var probe struct {
		Text     *string         `json:"text"`
		Contents json.RawMessage `json:"contents"`
	}
	if err := json.Unmarshal(m, &probe); err != nil {
		return message.Message{}, fmt.Errorf("%s", jsonError(err))
	}
	var msg message.Message
	if err := json.Unmarshal(m, &msg); err != nil {
		return message.Message{}, fmt.Errorf("%s", jsonError(err))
	}
	hasContents := len(probe.Contents) > 0 && string(probe.Contents) != "null"
	switch {
	case probe.Text != nil && hasContents:
		return message.Message{}, fmt.Errorf("text or contents, not both")
	case probe.Text != nil:
		msg.Contents = []message.Content{message.Text{Text: *probe.Text}}
	case !hasContents:
		return message.Message{}, fmt.Errorf("text or contents is required")
	}
	// Checked here too, so that the error says which message is wrong.
	if err := msg.Validate(); err != nil {
		return message.Message{}, err
	}
	return msg, nil
}

// falseSchema is the schema nothing matches: no other properties.
func falseSchema() *jsonschema.Schema { return &jsonschema.Schema{Not: &jsonschema.Schema{}} }

// contentSchema describes one content of the wire format; for the input
// it says what the variants are.
func contentSchema(input bool) *jsonschema.Schema {
	s := &jsonschema.Schema{
		Type: "object",
		Properties: map[string]*jsonschema.Schema{
			"type": {Type: "string", Description: "the content's variant"},
		},
		Required: []string{"type"},
	}
	if input {
		s.Description = `A part of a message: {"type":"text","text":…}, {"type":"function_call","call_id","name","arguments"}, {"type":"function_result","call_id","result","is_error"}, {"type":"data","media_type","uri"|"data","name"}, {"type":"reasoning","text","protected"}, {"type":"usage",…}, {"type":"error","code","message"}; other types are kept as they are.`
	}
	return s
}

// inMessageSchema describes inMessage.
func inMessageSchema() *jsonschema.Schema {
	return &jsonschema.Schema{
		Type:        "object",
		Description: `A message: {"role":"user","text":"hi"}, or loom's wire format with "contents" (as thread_get returns messages).`,
		Properties: map[string]*jsonschema.Schema{
			"role":        {Type: "string", Description: "user, assistant, system, tool, or another lowercase word"},
			"text":        {Type: "string", Description: "the message's text; give text or contents"},
			"contents":    {Type: "array", Items: contentSchema(true), Description: "the message's parts in the wire format; give text or contents"},
			"id":          {Type: "string", Description: "the message's id; left out, the thread gives it a fresh one"},
			"author_name": {Type: "string", Description: "names the author, such as an agent in a workflow"},
			"created_at":  {Type: "string", Description: "RFC 3339; left out, the time of the append"},
			"metadata":    {Type: "object", Description: "free-form data that travels with the message"},
		},
		PropertyOrder:        []string{"role", "text", "contents", "id", "author_name", "created_at", "metadata"},
		Required:             []string{"role"},
		AdditionalProperties: falseSchema(),
	}
}

// messageSchema describes a message.Message: loom's wire format.
func messageSchema() *jsonschema.Schema {
	return &jsonschema.Schema{
		Type:        "object",
		Description: "A message in loom's wire format.",
		Properties: map[string]*jsonschema.Schema{
			"id":          {Type: "string"},
			"role":        {Type: "string"},
			"author_name": {Type: "string"},
			"contents":    {Type: "array", Items: contentSchema(false)},
			"created_at":  {Type: "string"},
			"metadata":    {Type: "object"},
		},
		PropertyOrder: []string{"id", "role", "author_name", "contents", "created_at", "metadata"},
		Required:      []string{"role", "contents"},
	}
}

// threadInfo is a thread's record as the tools return it.
type threadInfo struct {
	ID         string            `json:"id" jsonschema:"the thread's id"`
	Kind       thread.Kind       `json:"kind" jsonschema:"undetermined until the first agent run, then local or service"`
	Title      string            `json:"title,omitzero"`
	Labels     map[string]string `json:"labels,omitzero"`
	Head       string            `json:"head,omitzero" jsonschema:"the id of the head commit; empty for an empty thread"`
	Version    int64             `json:"version" jsonschema:"counts the head moves; pass it as if_version to write only if nothing changed"`
	CreatedAt  time.Time         `json:"created_at"`
	UpdatedAt  time.Time         `json:"updated_at"`
	ForkedFrom *thread.ForkPoint `json:"forked_from,omitzero" jsonschema:"where the thread was forked from"`
}

func info(r thread.Record) threadInfo {
	ti := threadInfo{
		ID: r.ID, Kind: r.Kind, Title: r.Title, Labels: r.Labels, Head: r.Head,
		Version: r.Version, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if r.ForkedFrom.Thread != "" {
		fp := r.ForkedFrom
		ti.ForkedFrom = &fp
	}
	return ti
}

// line says in one line what a thread is.
func (ti threadInfo) line() string {
	var b strings.Builder
	b.WriteString(ti.ID)
	if ti.Title != "" {
		fmt.Fprintf(&b, " %q", clip(ti.Title, 80))
	}
	fmt.Fprintf(&b, " (%s, version %d", ti.Kind, ti.Version)
	if len(ti.Labels) > 0 {
		keys := make([]string, 0, len(ti.Labels))
		for k := range ti.Labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString(", labels")
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%s", k, ti.Labels[k])
		}
	}
	if ti.ForkedFrom != nil {
		fmt.Fprintf(&b, ", forked from %s", ti.ForkedFrom.Thread)
		if ti.ForkedFrom.Message != "" {
			fmt.Fprintf(&b, " at %s", ti.ForkedFrom.Message)
		}
	}
	b.WriteString(")")
	return b.String()
}

// checkpointInfo is a checkpoint as the tools return it.
type checkpointInfo struct {
	Name      string    `json:"name"`
	Commit    string    `json:"commit"`
	Version   int64     `json:"version" jsonschema:"the thread's version when the checkpoint was made"`
	CreatedAt time.Time `json:"created_at"`
}

func checkpoint(cp thread.Checkpoint) checkpointInfo {
	return checkpointInfo{Name: cp.Name, Commit: cp.Commit, Version: cp.Version, CreatedAt: cp.CreatedAt}
}

// count says "1 message" or "n messages".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// summaryTextMax is how many characters of a message a summary shows.
const summaryTextMax = 200

// writeMessages writes one line per message.
func writeMessages(b *strings.Builder, msgs []message.Message) {
	for _, m := range msgs {
		b.WriteString("\n")
		b.WriteString(summarize(m))
	}
}

// summarize says in one line who said what in m.
func summarize(m message.Message) string {
	var parts []string
	for _, c := range m.Contents {
		switch c := c.(type) {
		case message.Text:
			parts = append(parts, c.Text)
		case message.FunctionCall:
			parts = append(parts, fmt.Sprintf("calls %s(%s) [%s]", c.Name, c.Arguments, c.CallID))
		case message.FunctionResult:
			what := "result"
			if c.IsError {
				what = "error"
			}
			parts = append(parts, fmt.Sprintf("%s of [%s]: %s", what, c.CallID, c.Result))
		case message.Data:
			parts = append(parts, strings.Join(strings.Fields(fmt.Sprintf("[data %s %s]", c.MediaType, c.Name)), " "))
		case message.Reasoning:
			parts = append(parts, "[reasoning]")
		case message.Usage:
		case message.Error:
			parts = append(parts, fmt.Sprintf("[error %s: %s]", c.Code, c.Message))
		default:
			parts = append(parts, "["+c.Type()+"]")
		}
	}
	who := string(m.Role)
	if m.AuthorName != "" {
		who += " (" + m.AuthorName + ")"
	}
	return fmt.Sprintf("[%s] %s: %s", m.ID, who, clip(strings.Join(strings.Fields(strings.Join(parts, " ")), " "), summaryTextMax))
}

// clip cuts s to at most n runes, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
