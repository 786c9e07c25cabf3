package oaiitem

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/url"
	"path"
	"strings"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// MetadataKey is the message Metadata key under which an item is kept
// whole when its message alone would not give it back as it came.
const MetadataKey = "openai.item"

// Error is a bad item: Param names the member ("items[3].content[0].image_url")
// and Msg says what is wrong with it. It wraps thread.ErrInvalid.
type Error struct {
	Param string
	Msg   string
}

func (e *Error) Error() string { return e.Param + ": " + e.Msg }

// Unwrap makes errors.Is(err, thread.ErrInvalid) hold.
func (e *Error) Unwrap() error { return thread.ErrInvalid }

func bad(param, format string, args ...any) error {
	return &Error{Param: param, Msg: fmt.Sprintf(format, args...)}
}

// NewID returns a fresh id for an item of type typ: msg_, fc_, fco_, rs_
// or item_ followed by 26 characters of loom's id alphabet.
func NewID(typ string) string {
	switch typ {
	case "message":
		return ids.New("msg_")
	case "function_call":
		return ids.New("fc_")
	case "function_call_output":
		return ids.New("fco_")
	case "reasoning":
		return ids.New("rs_")
	}
	return ids.New("item_")
}

// FromItems converts items as a client sent them (JSON objects) to
// messages, one per item, giving ids to items without one. A bad item is
// an *Error (wrapping thread.ErrInvalid) whose text names the item index
// and field ("items[3].content[0].image_url: …"). Two items with one id
// are refused, as a thread would refuse the second.
func FromItems(items []json.RawMessage) ([]message.Message, error) {
	msgs, _, err := fromItems("items", items)
	return msgs, err
}

// FromItemsFresh is FromItems that also reports whether every id is one it
// made (no item came with an id of its own): such ids are new by
// construction, and a commit need not look them up on the thread
// (thread.CommitOptions.FreshIDs).
func FromItemsFresh(items []json.RawMessage) (msgs []message.Message, fresh bool, err error) {
	return fromItems("items", items)
}

// Input parses a Responses API `input`: a string (one user message with a
// fresh id) or an array of items, as FromItems reads them with errors
// naming "input[i]…".
func Input(raw json.RawMessage) ([]message.Message, error) {
	trimmed := bytes.TrimSpace(raw)
	switch {
	case len(trimmed) == 0 || string(trimmed) == "null":
		return nil, bad("input", "required: a string or an array of items")
	case trimmed[0] == '"':
		var s string
		if err := json.Unmarshal(trimmed, &s); err != nil {
			return nil, bad("input", "not a JSON string")
		}
		return []message.Message{{ID: NewID("message"), Role: message.RoleUser, Contents: []message.Content{message.Text{Text: s}}}}, nil
	case trimmed[0] == '[':
		var items []json.RawMessage
		if err := json.Unmarshal(trimmed, &items); err != nil {
			return nil, bad("input", "not a JSON array")
		}
		msgs, _, err := fromItems("input", items)
		return msgs, err
	}
	return nil, bad("input", "want a string or an array of items")
}

func fromItems(param string, items []json.RawMessage) ([]message.Message, bool, error) {
	out := make([]message.Message, 0, len(items))
	seen := make(map[string]int, len(items))
	fresh := true
	for i, raw := range items {
		p := fmt.Sprintf("%s[%d]", param, i)
		m, given, err := fromItem(p, raw)
		if err != nil {
			return nil, false, err
		}
		if j, ok := seen[m.ID]; ok {
			return nil, false, bad(p+".id", "%q is the id of %s[%d] too", m.ID, param, j)
		}
		seen[m.ID] = i
		fresh = fresh && !given
		out = append(out, m)
	}
	return out, fresh, nil
}

// statusTypes are the item types that carry a status, "completed" when
// the client gave none.
var statusTypes = map[string]bool{"message": true, "function_call": true, "function_call_output": true, "reasoning": true}

// fromItem converts one item. It normalizes the item as it goes (a null
// member is an absent one, string content is one text part, defaults
// filled in) and keeps it in Metadata when the message does not give the
// normalized item back. given says that the item came with an id of its
// own.
func fromItem(p string, raw json.RawMessage) (_ message.Message, given bool, _ error) {
	obj, err := decodeObject(raw)
	if err != nil {
		return message.Message{}, false, bad(p, "%s", err)
	}
	typ, ok := obj["type"].(string)
	switch {
	case obj["type"] == nil && obj["role"] != nil:
		typ = "message" // an "easy input message"
	case obj["type"] == nil:
		return message.Message{}, false, bad(p+".type", "required")
	case !ok || typ == "":
		return message.Message{}, false, bad(p+".type", "want a non-empty string")
	}
	obj["type"] = typ
	id := NewID(typ)
	if v, present := obj["id"]; present && v != "" { // "" is no id, as null is
		s, ok := v.(string)
		if !ok || !ids.Valid(s) {
			return message.Message{}, false, bad(p+".id", "want an id of 1 to %d ASCII letters, digits, '_', '-' or '.', not starting with '.' or '-'", ids.MaxLen)
		}
		id, given = s, true
	}
	obj["id"] = id
	var m message.Message
	switch typ {
	case "message":
		m, err = fromMessage(p, obj)
	case "function_call":
		m, err = fromCall(p, obj)
	case "function_call_output":
		m, err = fromOutput(p, obj)
	case "reasoning":
		m, err = fromReasoning(p, obj)
	default:
		m, err = fromOther(p, obj)
	}
	if err != nil {
		return message.Message{}, false, err
	}
	if statusTypes[typ] && obj["status"] == nil {
		obj["status"] = "completed"
	}
	m.ID = id
	if back := appendItems(nil, m); len(back) != 1 || !sameJSON(back[0].JSON, obj) {
		m.Metadata = map[string]any{MetadataKey: obj}
	}
	if err := m.Validate(); err != nil {
		return message.Message{}, false, bad(p, "%v", err)
	}
	return m, given, nil
}

// decodeObject reads raw as one JSON object, numbers as json.Number and
// null members dropped (OpenAI reads a null as an absent member).
func decodeObject(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not valid JSON")
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want a JSON object")
	}
	dropNulls(obj)
	return obj, nil
}

func dropNulls(obj map[string]any) {
	for k, v := range obj {
		if v == nil {
			delete(obj, k)
		}
	}
}

// sameJSON reports whether the item a and the object b are the same JSON
// value (maps are written with sorted keys, numbers as they were read).
func sameJSON(a []byte, b map[string]any) bool {
	obj, err := decodeObject(a)
	if err != nil {
		return false
	}
	x, err1 := json.Marshal(obj)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// raw is v as canonical JSON (sorted keys, HTML characters escaped), the
// form message.Unknown keeps.
func raw(v any) []byte {
	b, _ := json.Marshal(v) // v was decoded from JSON: it encodes
	return b
}

// reserved reports whether typ is the type of a loom content other than
// Unknown, which an unknown item or part cannot carry.
func reserved(typ string) bool {
	switch typ {
	case "text", "function_call", "function_result", "data", "reasoning", "usage", "error":
		return true
	}
	return false
}

// partTypes are the content part types of message items; an Unknown of
// another type (or with an id) is an item of its own.
var partTypes = map[string]bool{
	"input_text": true, "output_text": true, "text": true, "input_image": true, "input_file": true,
	"refusal": true, "input_audio": true, "output_audio": true, "summary_text": true, "reasoning_text": true,
}

func optString(p string, obj map[string]any, key string) (string, bool, error) {
	v, ok := obj[key]
	if !ok {
		return "", false, nil
	}
	s, isString := v.(string)
	if !isString {
		return "", false, bad(p+"."+key, "want a string")
	}
	return s, true, nil
}

func reqString(p string, obj map[string]any, key string) (string, error) {
	s, ok, err := optString(p, obj, key)
	if err == nil && (!ok || s == "") {
		err = bad(p+"."+key, "required")
	}
	return s, err
}

func fromMessage(p string, obj map[string]any) (message.Message, error) {
	role, err := reqString(p, obj, "role")
	if err != nil {
		return message.Message{}, err
	}
	switch role {
	case "user", "system", "developer", "assistant":
	default:
		return message.Message{}, bad(p+".role", "want user, system, developer or assistant, not %.40q", role)
	}
	m := message.Message{Role: message.Role(role)}
	switch content := obj["content"].(type) {
	case string:
		part := textPart(role, content)
		obj["content"] = []any{part}
		m.Contents = []message.Content{message.Text{Text: content}}
	case []any:
		for j, v := range content {
			pp := fmt.Sprintf("%s.content[%d]", p, j)
			part, ok := v.(map[string]any)
			if !ok {
				return message.Message{}, bad(pp, "want a JSON object")
			}
			dropNulls(part)
			c, err := fromPart(pp, part)
			if err != nil {
				return message.Message{}, err
			}
			m.Contents = append(m.Contents, c)
		}
	case nil:
		return message.Message{}, bad(p+".content", "required")
	default:
		return message.Message{}, bad(p+".content", "want a string or an array of content parts")
	}
	return m, nil
}

// textPart is the part a text reads as in a message of role.
func textPart(role, text string) map[string]any {
	if role == "assistant" {
		return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
	}
	return map[string]any{"type": "input_text", "text": text}
}

func fromPart(p string, part map[string]any) (message.Content, error) {
	typ, err := reqString(p, part, "type")
	if err != nil {
		return nil, err
	}
	switch typ {
	case "input_text", "output_text", "text":
		text, ok, err := optString(p, part, "text")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, bad(p+".text", "required")
		}
		if typ == "output_text" {
			for _, k := range []string{"annotations", "logprobs"} {
				if part[k] == nil {
					part[k] = []any{}
				}
			}
		}
		return message.Text{Text: text}, nil
	case "input_image":
		if part["detail"] == nil {
			part["detail"] = "auto"
		}
		u, hasURL, err := optString(p, part, "image_url")
		if err != nil {
			return nil, err
		}
		fileID, hasFile, err := optString(p, part, "file_id")
		if err != nil {
			return nil, err
		}
		switch {
		case hasURL && u != "":
			if !validURL(u) {
				return nil, bad(p+".image_url", "expected a valid URL (https: or data:), but got a value with an invalid format")
			}
			return message.Data{URI: u, MediaType: imageType(u)}, nil
		case hasFile && fileID != "":
			return message.Data{URI: fileID, MediaType: "image/*"}, nil
		}
		return nil, bad(p+".image_url", "an image_url or a file_id is required")
	case "input_file":
		name, _, err := optString(p, part, "filename")
		if err != nil {
			return nil, err
		}
		d := message.Data{Name: name}
		for _, k := range []string{"file_data", "file_url", "file_id"} {
			s, ok, err := optString(p, part, k)
			if err != nil {
				return nil, err
			}
			if !ok || s == "" {
				continue
			}
			switch k {
			case "file_data":
				if isDataURL(s) {
					d.URI, d.MediaType = s, dataURLType(s)
				} else {
					b, err := base64.StdEncoding.DecodeString(s)
					if err != nil {
						return nil, bad(p+".file_data", "want a data: URL or base64")
					}
					d.Data, d.MediaType = b, fileType(name)
				}
			case "file_url":
				if !validURL(s) || isDataURL(s) {
					return nil, bad(p+".file_url", "expected a valid URL, but got a value with an invalid format")
				}
				d.URI, d.MediaType = s, fileType(urlPath(s))
			case "file_id":
				d.URI, d.MediaType = s, fileType(name)
			}
			return d, nil
		}
		return nil, bad(p+".file_id", "a file_id, file_url or file_data is required")
	}
	if reserved(typ) {
		return nil, bad(p+".type", "%q is not a content part type", typ)
	}
	return message.Unknown{Raw: raw(part)}, nil
}

// validURL reports whether s is an http(s) URL with a host or a data: URL
// with data, as OpenAI takes them.
func validURL(s string) bool {
	if isDataURL(s) {
		return strings.Contains(s, ",")
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

func isDataURL(s string) bool { return len(s) >= 5 && strings.EqualFold(s[:5], "data:") }

// dataURLType is the media type of a data: URL ("" if it names none).
func dataURLType(s string) string {
	mt, _, _ := strings.Cut(s[len("data:"):], ",")
	mt, _, _ = strings.Cut(mt, ";")
	return strings.ToLower(mt)
}

// imageType is the media type of an image URL: a data: URL's own, one
// guessed from the extension, or the range image/* (which keeps it an
// image for loom's providers).
func imageType(u string) string {
	if isDataURL(u) {
		if mt := dataURLType(u); strings.HasPrefix(mt, "image/") {
			return mt
		}
		return "image/*"
	}
	if mt, _, _ := strings.Cut(mime.TypeByExtension(path.Ext(urlPath(u))), ";"); strings.HasPrefix(mt, "image/") {
		return mt
	}
	return "image/*"
}

// fileType is the media type of a file by its name, never an image's (an
// input_file stays a file), application/octet-stream when unknown.
func fileType(name string) string {
	if mt, _, _ := strings.Cut(mime.TypeByExtension(path.Ext(name)), ";"); mt != "" && !strings.HasPrefix(mt, "image/") {
		return mt
	}
	return "application/octet-stream"
}

func urlPath(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Path
	}
	return ""
}

func fromCall(p string, obj map[string]any) (message.Message, error) {
	callID, err := reqString(p, obj, "call_id")
	if err != nil {
		return message.Message{}, err
	}
	name, err := reqString(p, obj, "name")
	if err != nil {
		return message.Message{}, err
	}
	args, _, err := optString(p, obj, "arguments")
	if err != nil {
		return message.Message{}, err
	}
	obj["arguments"] = args
	return message.New(message.RoleAssistant, message.FunctionCall{CallID: callID, Name: name, Arguments: args}), nil
}

func fromOutput(p string, obj map[string]any) (message.Message, error) {
	callID, err := reqString(p, obj, "call_id")
	if err != nil {
		return message.Message{}, err
	}
	var result string
	switch out := obj["output"].(type) {
	case string:
		result = out
	case []any:
		// Parts (input_text, input_image, input_file): the model is sent
		// their text, or the array's JSON when they hold none; the item
		// itself is kept whole.
		var b strings.Builder
		for j, v := range out {
			part, ok := v.(map[string]any)
			if !ok {
				return message.Message{}, bad(fmt.Sprintf("%s.output[%d]", p, j), "want a JSON object")
			}
			if t, ok := part["text"].(string); ok {
				b.WriteString(t)
			}
		}
		result = b.String()
		if result == "" {
			result = string(raw(out))
		}
	case nil:
		return message.Message{}, bad(p+".output", "required")
	default:
		return message.Message{}, bad(p+".output", "want a string or an array of content parts")
	}
	return message.New(message.RoleTool, message.FunctionResult{CallID: callID, Result: result}), nil
}

func fromReasoning(p string, obj map[string]any) (message.Message, error) {
	var texts []string
	switch summary := obj["summary"].(type) {
	case nil:
		obj["summary"] = []any{}
	case []any:
		for j, v := range summary {
			part, ok := v.(map[string]any)
			if !ok {
				return message.Message{}, bad(fmt.Sprintf("%s.summary[%d]", p, j), "want a JSON object")
			}
			t, ok := part["text"].(string)
			if !ok {
				return message.Message{}, bad(fmt.Sprintf("%s.summary[%d].text", p, j), "want a string")
			}
			texts = append(texts, t)
		}
	default:
		return message.Message{}, bad(p+".summary", "want an array of summary parts")
	}
	enc, _, err := optString(p, obj, "encrypted_content")
	if err != nil {
		return message.Message{}, err
	}
	return message.New(message.RoleAssistant, message.Reasoning{Text: strings.Join(texts, "\n\n"), Protected: enc}), nil
}

// fromOther keeps an item of a type this package does not know as the one
// Unknown content of a message.
func fromOther(p string, obj map[string]any) (message.Message, error) {
	typ := obj["type"].(string)
	if reserved(typ) {
		return message.Message{}, bad(p+".type", "%q is not an item type", typ)
	}
	role := message.RoleAssistant
	switch r, _ := obj["role"].(string); r {
	case "user", "system", "developer", "assistant", "tool":
		role = message.Role(r)
	default:
		if strings.HasSuffix(typ, "_output") {
			role = message.RoleTool
		}
	}
	return message.New(role, message.Unknown{Raw: raw(obj)}), nil
}
