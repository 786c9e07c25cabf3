package langgraph

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/message"
)

// metaKey is the message metadata key that keeps what a loom message has
// no field for: the LangChain message's data other than its content, tool
// calls, tool call id and id (additional_kwargs, response_metadata, name,
// usage_metadata, …), as it came.
const metaKey = "langchain"

// metaTypeKey keeps a LangChain message's type where its role does not
// say it (a chat or function message, a chunk).
const metaTypeKey = "langchain_type"

// typeOf is the LangChain message type of a loom role.
func typeOf(r message.Role) string {
	for t, role := range roles {
		if role == r {
			return t
		}
	}
	return string(r)
}

// stored is a LangChain message in its stored form (message_to_dict in
// Python, toDict in JavaScript).
type stored struct {
	Type string                     `json:"type"`
	Data map[string]json.RawMessage `json:"data"`
}

// roles maps LangChain's message types to loom's roles; other types are
// kept as their own role.
var roles = map[string]message.Role{
	"human":  message.RoleUser,
	"ai":     message.RoleAssistant,
	"system": message.RoleSystem,
	"tool":   message.RoleTool,
}

// toolCall is one of an AI message's tool_calls, when it holds exactly
// what a FunctionCall keeps.
type toolCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
	ID   string          `json:"id"`
	Type string          `json:"type"`
}

// fromStored makes a loom message of a stored LangChain message. The
// message's content (a string) becomes its text, an AI message's tool
// calls its function calls and a tool message its function result; the
// rest of data is kept in metadata, so toStored gives back data as it was.
func fromStored(raw json.RawMessage) (message.Message, error) {
	var s stored
	if err := json.Unmarshal(raw, &s); err != nil {
		return message.Message{}, invalidf("a message: not a LangChain stored message ({\"type\", \"data\"}): %v", err)
	}
	if s.Type == "" || s.Data == nil {
		return message.Message{}, invalidf("a message: type and data are required")
	}
	var id string
	if err := json.Unmarshal(s.Data["id"], &id); err != nil || id == "" {
		return message.Message{}, invalidf("a message: data.id: a non-empty string is required")
	}
	rest := make(map[string]any, len(s.Data))
	for k, v := range s.Data {
		rest[k] = v
	}
	m := message.Message{Role: roles[s.Type]}
	if m.Role == "" {
		m.Role = message.Role(s.Type)
		if !validRole(s.Type) {
			m.Role = message.RoleUser
		}
	}
	if ids.Valid(id) {
		m.ID = id
		delete(rest, "id")
	}
	var text string
	if c, ok := s.Data["content"]; ok && json.Unmarshal(c, &text) == nil && text != "" {
		m.Contents = append(m.Contents, message.Text{Text: text})
		delete(rest, "content")
	}
	if tc, ok := s.Data["tool_calls"]; ok && s.Type == "ai" {
		if calls, ok := plainCalls(tc); ok {
			for _, c := range calls {
				m.Contents = append(m.Contents, message.FunctionCall{CallID: c.ID, Name: c.Name, Arguments: string(c.Args)})
			}
			delete(rest, "tool_calls")
		}
	}
	if s.Type == "tool" && text != "" {
		var callID string
		if json.Unmarshal(s.Data["tool_call_id"], &callID) == nil && callID != "" {
			// The text is the result: one content, not two.
			m.Contents = []message.Content{message.FunctionResult{CallID: callID, Result: text}}
			delete(rest, "tool_call_id")
		}
	}
	meta := make(map[string]any, len(rest))
	for k, v := range rest {
		if r, ok := v.(json.RawMessage); ok {
			var x any
			d := json.NewDecoder(bytes.NewReader(r))
			d.UseNumber()
			if err := d.Decode(&x); err != nil {
				return message.Message{}, invalidf("a message: data.%s: %v", k, err)
			}
			v = x
		}
		meta[k] = v
	}
	m.Metadata = map[string]any{metaKey: meta}
	if typeOf(m.Role) != s.Type {
		m.Metadata[metaTypeKey] = s.Type
	}
	if err := m.Validate(); err != nil {
		return message.Message{}, invalidf("a message: %v", err)
	}
	return m, nil
}

// plainCalls reads tool_calls when each holds only name, args (an object),
// id and type "tool_call", so that FunctionCalls keep all of it.
func plainCalls(raw json.RawMessage) ([]toolCall, bool) {
	var objs []map[string]json.RawMessage
	if json.Unmarshal(raw, &objs) != nil || len(objs) == 0 {
		return nil, false
	}
	calls := make([]toolCall, len(objs))
	for i, o := range objs {
		if len(o) != 4 {
			return nil, false
		}
		var c toolCall
		b, _ := json.Marshal(o)
		if json.Unmarshal(b, &c) != nil || c.ID == "" || c.Type != "tool_call" || len(c.Args) == 0 || c.Args[0] != '{' {
			return nil, false
		}
		calls[i] = c
	}
	return calls, true
}

func validRole(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 'a' || s[i] > 'z' {
			return false
		}
	}
	return true
}

// toStored gives back the stored LangChain message that fromStored took.
func toStored(m message.Message) (json.RawMessage, error) {
	typ := typeOf(m.Role)
	if t, ok := m.Metadata[metaTypeKey].(string); ok {
		typ = t
	}
	meta, _ := m.Metadata[metaKey].(map[string]any)
	if meta == nil {
		// A message that came another way (loom's API, an agent): the
		// LangChain message of its role.
		meta = map[string]any{"type": typ, "content": "", "additional_kwargs": map[string]any{}, "response_metadata": map[string]any{}}
	}
	data := make(map[string]any, len(meta)+3)
	for k, v := range meta {
		data[k] = v
	}
	if _, kept := data["id"]; !kept && m.ID != "" {
		// An id that is no loom id stayed in data as it came.
		data["id"] = m.ID
	}
	var calls []any
	for _, c := range m.Contents {
		switch c := c.(type) {
		case message.Text:
			if t, ok := data["content"].(string); ok && t != "" && m.Metadata[metaKey] == nil {
				data["content"] = t + "\n" + c.Text
				continue
			}
			data["content"] = c.Text
		case message.FunctionCall:
			calls = append(calls, map[string]any{"name": c.Name, "args": json.RawMessage(c.Arguments), "id": c.CallID, "type": "tool_call"})
		case message.FunctionResult:
			data["content"] = c.Result
			data["tool_call_id"] = c.CallID
		}
	}
	if calls != nil {
		data["tool_calls"] = calls
	}
	return json.Marshal(map[string]any{"type": typ, "data": data})
}

// nextSum is the chain sum of a list of messages after one more, whose
// stored form is st: the first 128 bits of sha256 of the previous sum, st's length and st. Equal
// lists, and only they, have equal sums; the empty list's is "". A sum
// is carried on: a list that extends another continues its sum.
func nextSum(prev string, st []byte) string {
	h := sha256.New()
	h.Write([]byte(prev))
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(st)))
	h.Write(n[:])
	h.Write(st)
	return hex.EncodeToString(h.Sum(nil)[:16])
}
