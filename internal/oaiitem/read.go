package oaiitem

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"strconv"
	"strings"

	"github.com/loomthreads/loom/internal/jsonstr"
	"github.com/loomthreads/loom/message"
)

// Item is one item of a conversation: its id, the loom message it comes
// from and its JSON.
type Item struct {
	ID      string
	Message string
	JSON    json.RawMessage
}

// Items converts stored messages to items: the item a message keeps under
// MetadataKey, or else one item per run of text and data contents and one
// per function call, function result, reasoning and unknown item, in the
// order of the contents. The first item of a message has the message's id,
// the k-th (k ≥ 1) "<id>.<k>".
func Items(msgs []message.Message) []Item {
	out := make([]Item, 0, len(msgs))
	for _, m := range msgs {
		out = appendItems(out, m)
	}
	return out
}

// appendItems appends the items of m. Items made from contents are
// written directly, not built as maps and marshaled: listing is the hot
// path.
func appendItems(out []Item, m message.Message) []Item {
	if kept, ok := m.Metadata[MetadataKey].(map[string]any); ok {
		obj := maps.Clone(kept)
		obj["id"] = m.ID
		return append(out, Item{ID: m.ID, Message: m.ID, JSON: raw(obj)})
	}
	gs, _ := groups(m)
	for k, g := range gs {
		id := SubID(m.ID, k)
		out = append(out, Item{ID: id, Message: m.ID, JSON: itemJSON(id, m.Role, g)})
	}
	return out
}

// SubID is the id of the k-th item of the message id.
func SubID(id string, k int) string {
	if k == 0 {
		return id
	}
	return id + "." + strconv.Itoa(k)
}

// ParseID splits an item id into its message id and index: "m.2" is the
// item 2 of message m when m.2 is not itself a message id, which the
// caller decides; ok is false when id has no index.
func ParseID(id string) (msg string, k int, ok bool) {
	i := strings.LastIndexByte(id, '.')
	if i <= 0 {
		return id, 0, false
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil || n < 1 || strconv.Itoa(n) != id[i+1:] {
		return id, 0, false
	}
	return id[:i], n, true
}

// group is the contents of one item of a message.
type group struct {
	typ      string // the item's type; "message" for a run of parts
	contents []message.Content
}

// groups splits m's contents into items, Usage and Error contents left
// out (rest holds them).
func groups(m message.Message) (gs []group, rest []message.Content) {
	open := -1 // the index of the message group taking parts, or -1
	for _, c := range m.Contents {
		typ := ""
		switch c := c.(type) {
		case message.Text, message.Data:
			typ = "message"
		case message.Unknown:
			if isPart(c) {
				typ = "message"
			} else {
				typ = c.Type()
			}
		case message.FunctionCall:
			typ = "function_call"
		case message.FunctionResult:
			typ = "function_call_output"
		case message.Reasoning:
			typ = "reasoning"
		default:
			rest = append(rest, c)
			continue
		}
		if typ == "message" && open >= 0 {
			gs[open].contents = append(gs[open].contents, c)
			continue
		}
		open = -1
		if typ == "message" {
			open = len(gs)
		}
		gs = append(gs, group{typ: typ, contents: []message.Content{c}})
	}
	return gs, rest
}

// isPart reports whether an Unknown content is a part of a message item
// rather than an item of its own: items have ids, parts do not.
func isPart(u message.Unknown) bool {
	var probe struct {
		ID *json.RawMessage `json:"id"`
	}
	if json.Unmarshal(u.Raw, &probe) == nil && probe.ID != nil {
		return false
	}
	return partTypes[u.Type()]
}

// itemJSON writes the item of the group g of a message of role, with id.
func itemJSON(id string, role message.Role, g group) []byte {
	b := make([]byte, 0, 128)
	switch c := g.contents[0].(type) {
	case message.FunctionCall:
		b = append(b, `{"type":"function_call","id":`...)
		b = jsonstr.Append(b, id)
		b = append(b, `,"call_id":`...)
		b = jsonstr.Append(b, c.CallID)
		b = append(b, `,"name":`...)
		b = jsonstr.Append(b, c.Name)
		b = append(b, `,"arguments":`...)
		b = jsonstr.Append(b, c.Arguments)
		return append(b, `,"status":"completed"}`...)
	case message.FunctionResult:
		b = append(b, `{"type":"function_call_output","id":`...)
		b = jsonstr.Append(b, id)
		b = append(b, `,"call_id":`...)
		b = jsonstr.Append(b, c.CallID)
		b = append(b, `,"output":`...)
		b = jsonstr.Append(b, c.Result)
		return append(b, `,"status":"completed"}`...)
	case message.Reasoning:
		b = append(b, `{"type":"reasoning","id":`...)
		b = jsonstr.Append(b, id)
		b = append(b, `,"summary":[`...)
		if c.Text != "" {
			b = append(b, `{"type":"summary_text","text":`...)
			b = jsonstr.Append(b, c.Text)
			b = append(b, '}')
		}
		b = append(b, ']')
		if c.Protected != "" {
			b = append(b, `,"encrypted_content":`...)
			b = jsonstr.Append(b, c.Protected)
		}
		return append(b, `,"status":"completed"}`...)
	case message.Unknown:
		if g.typ != "message" {
			obj, err := decodeObject(c.Raw)
			if err != nil { // a stored Unknown is an object; be safe
				obj = map[string]any{"type": c.Type()}
			}
			obj["id"] = id
			return raw(obj)
		}
	}
	r := string(role)
	switch role {
	case message.RoleUser, message.RoleSystem, "developer", message.RoleAssistant:
	default:
		r = "assistant" // a tool's or another author's text: not the user's words
	}
	b = append(b, `{"type":"message","id":`...)
	b = jsonstr.Append(b, id)
	b = append(b, `,"role":`...)
	b = jsonstr.Append(b, r)
	b = append(b, `,"status":"completed","content":[`...)
	for i, c := range g.contents {
		if i > 0 {
			b = append(b, ',')
		}
		switch c := c.(type) {
		case message.Text:
			if r == "assistant" {
				b = append(b, `{"type":"output_text","text":`...)
				b = jsonstr.Append(b, c.Text)
				b = append(b, `,"annotations":[],"logprobs":[]}`...)
			} else {
				b = append(b, `{"type":"input_text","text":`...)
				b = jsonstr.Append(b, c.Text)
				b = append(b, '}')
			}
		case message.Data:
			b = append(b, raw(dataPart(c))...)
		case message.Unknown:
			b = append(b, c.Raw...)
		}
	}
	return append(b, "]}"...)
}

// dataPart is a Data content as an input_image (an image/ media type) or
// an input_file. A URI without a scheme is a file id, as message.Data has
// it.
func dataPart(d message.Data) map[string]any {
	ref, kind := d.URI, "url"
	switch {
	case len(d.Data) > 0:
		mt := d.MediaType
		if mt == "" {
			mt = "application/octet-stream"
		}
		ref, kind = "data:"+mt+";base64,"+base64.StdEncoding.EncodeToString(d.Data), "data"
	case isDataURL(d.URI):
		kind = "data"
	case !strings.Contains(d.URI, ":"):
		kind = "file"
	}
	if strings.HasPrefix(strings.ToLower(d.MediaType), "image/") {
		if kind == "file" {
			return map[string]any{"type": "input_image", "file_id": ref, "detail": "auto"}
		}
		return map[string]any{"type": "input_image", "image_url": ref, "detail": "auto"}
	}
	part := map[string]any{"type": "input_file"}
	switch kind {
	case "file":
		part["file_id"] = ref
	case "data":
		part["file_data"] = ref
	default:
		part["file_url"] = ref
	}
	if d.Name != "" {
		part["filename"] = d.Name
	}
	return part
}

// Split splits a model's message into one message per item, as a
// conversation holds them, each with a fresh id by its type (msg_, fc_,
// fco_, rs_, item_). Usage and Error contents go with the last message; a
// message that makes no item is returned alone with a fresh msg_ id.
// Metadata is copied to each message, but for MetadataKey, which is kept
// only when the message is one item.
func Split(m message.Message) []message.Message {
	gs, rest := groups(m)
	if _, kept := m.Metadata[MetadataKey]; kept || len(gs) <= 1 {
		typ := "message"
		if len(gs) == 1 {
			typ = gs[0].typ
		}
		m = m.Clone()
		m.ID = NewID(typ)
		return []message.Message{m}
	}
	out := make([]message.Message, 0, len(gs))
	for i, g := range gs {
		part := message.Message{ID: NewID(g.typ), Role: m.Role, AuthorName: m.AuthorName, CreatedAt: m.CreatedAt, Contents: g.contents}
		if i == len(gs)-1 {
			part.Contents = append(part.Contents[:len(part.Contents):len(part.Contents)], rest...)
		}
		if m.Metadata != nil {
			part.Metadata = m.Clone().Metadata
		}
		out = append(out, part.Clone())
	}
	return out
}

// Coalesce merges each run of consecutive assistant messages, and each
// run of consecutive tool messages, into one message (the first's id,
// author and time, the contents in order, no kept item), and returns the
// others as they are.
//
// A conversation holds one message per item, but loom's providers send one
// message per message: a model turn of text and parallel function calls
// would reach Anthropic as several assistant turns in a row (which it
// refuses) and reach Chat Completions as calls split from their text.
// Coalesced, the context has loom's usual shape — one assistant message
// per model turn, one tool message with its results — whatever provider
// answers.
func Coalesce(msgs []message.Message) []message.Message {
	out := make([]message.Message, 0, len(msgs))
	for _, m := range msgs {
		if n := len(out); n > 0 && (m.Role == message.RoleAssistant || m.Role == message.RoleTool) && out[n-1].Role == m.Role {
			last := &out[n-1]
			last.Contents = append(last.Contents[:len(last.Contents):len(last.Contents)], m.Contents...)
			if _, kept := last.Metadata[MetadataKey]; kept {
				last.Metadata = maps.Clone(last.Metadata)
				delete(last.Metadata, MetadataKey)
			}
			continue
		}
		out = append(out, m)
	}
	return out
}

// Cut returns the messages that replace m when its k-th item (as Items
// counts them) is deleted, and false when m has no such item. Item ids
// stay what they were: each item that is left becomes a message of its
// own whose id is the item's (m's id for item 0, "<id>.<j>" for item j),
// so that a deleted id never names another item, and deleting it again
// finds nothing. A message of one item leaves none. Usage and Error
// contents go with the last message; each message carries m's metadata.
func Cut(m message.Message, k int) ([]message.Message, bool) {
	if _, kept := m.Metadata[MetadataKey]; kept {
		return nil, k == 0
	}
	gs, rest := groups(m)
	if k < 0 || k >= len(gs) {
		return nil, false
	}
	var out []message.Message
	for j, g := range gs {
		if j == k {
			continue
		}
		part := message.Message{ID: SubID(m.ID, j), Role: m.Role, AuthorName: m.AuthorName, CreatedAt: m.CreatedAt,
			Contents: g.contents, Metadata: m.Metadata}
		out = append(out, part.Clone())
	}
	if len(out) > 0 && len(rest) > 0 {
		last := &out[len(out)-1]
		last.Contents = append(last.Contents, rest...)
	}
	return out, true
}
