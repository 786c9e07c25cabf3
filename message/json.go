package message

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// wireMessage is the JSON shape of a Message; see docs/wire-format.md.
type wireMessage struct {
	ID         string            `json:"id,omitzero"`
	Role       Role              `json:"role"`
	AuthorName string            `json:"author_name,omitzero"`
	Contents   []json.RawMessage `json:"contents"`
	CreatedAt  time.Time         `json:"created_at,omitzero"`
	Metadata   map[string]any    `json:"metadata,omitzero"`
}

// MarshalJSON writes m in the wire format. It is AppendJSON to a new buffer.
func (m Message) MarshalJSON() ([]byte, error) {
	b, err := m.AppendJSON(make([]byte, 0, m.sizeHint()))
	if err != nil {
		return nil, err
	}
	return b, nil
}

// marshalSlow is MarshalJSON with encoding/json: the reference that
// AppendJSON follows byte for byte, which the tests compare it with.
func (m Message) marshalSlow() ([]byte, error) {
	w := wireMessage{ID: m.ID, Role: m.Role, AuthorName: m.AuthorName, CreatedAt: m.CreatedAt, Metadata: m.Metadata}
	w.Contents = make([]json.RawMessage, len(m.Contents))
	for i, c := range m.Contents {
		b, err := marshalContentSlow(c)
		if err != nil {
			return nil, fmt.Errorf("contents[%d]: %w", i, err)
		}
		w.Contents[i] = b
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads m from the wire format. Contents of unknown types
// become Unknown; numbers in Metadata become json.Number, so they are written
// back digit for digit.
func (m *Message) UnmarshalJSON(b []byte) error {
	if out, ok := decodeMessage(b); ok {
		*m = out
		return nil
	}
	return m.unmarshalJSONStd(b)
}

// unmarshalJSONStd is UnmarshalJSON with encoding/json alone: the reference
// that decoder follows, used for whatever decoder gives up on.
func (m *Message) unmarshalJSONStd(b []byte) error {
	var w wireMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&w); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("message: data after the message object")
	}
	// Go reads offsets up to ±24:59 but writes none beyond ±23:59; refuse
	// what could not be written back.
	if !w.CreatedAt.IsZero() {
		if _, err := w.CreatedAt.MarshalJSON(); err != nil {
			return fmt.Errorf("created_at: %w", err)
		}
	}
	out := Message{ID: w.ID, Role: w.Role, AuthorName: w.AuthorName, CreatedAt: w.CreatedAt, Metadata: w.Metadata}
	if len(w.Contents) > 0 {
		out.Contents = make([]Content, len(w.Contents))
	}
	for i, raw := range w.Contents {
		c, err := unmarshalContentStd(raw)
		if err != nil {
			return fmt.Errorf("contents[%d]: %w", i, err)
		}
		out.Contents[i] = c
	}
	*m = out
	return nil
}

// MarshalContent writes c as a JSON object whose "type" member names its
// variant. Unknown contents are written as the raw JSON they were read from.
func MarshalContent(c Content) ([]byte, error) {
	n := contentSize(c)
	b, err := appendContent(make([]byte, 0, n+n/8+64), c)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// marshalContentSlow is MarshalContent with encoding/json: the reference
// that appendContent follows byte for byte.
func marshalContentSlow(c Content) ([]byte, error) {
	switch v := c.(type) {
	case nil:
		return nil, errors.New("nil content")
	case Text:
		return json.Marshal(struct {
			Type string `json:"type"`
			Text
		}{"text", v})
	case FunctionCall:
		return json.Marshal(struct {
			Type string `json:"type"`
			FunctionCall
		}{"function_call", v})
	case FunctionResult:
		return json.Marshal(struct {
			Type string `json:"type"`
			FunctionResult
		}{"function_result", v})
	case Data:
		return json.Marshal(struct {
			Type string `json:"type"`
			Data
		}{"data", v})
	case Reasoning:
		return json.Marshal(struct {
			Type string `json:"type"`
			Reasoning
		}{"reasoning", v})
	case Usage:
		return json.Marshal(struct {
			Type string `json:"type"`
			Usage
		}{"usage", v})
	case Error:
		return json.Marshal(struct {
			Type string `json:"type"`
			Error
		}{"error", v})
	case Unknown:
		if _, err := unknownType(v.Raw); err != nil {
			return nil, err
		}
		return canonicalRaw(v.Raw)
	}
	return nil, fmt.Errorf("content type %T", c)
}

// UnmarshalContent reads one content from its JSON object. A type this
// version does not know becomes Unknown with the raw object in the form it is
// written back in (see Unknown).
func UnmarshalContent(b []byte) (Content, error) {
	if c, ok := decodeContent(b); ok {
		return c, nil
	}
	return unmarshalContentStd(b)
}

// unmarshalContentStd is UnmarshalContent with encoding/json alone.
func unmarshalContentStd(b []byte) (Content, error) {
	typ, err := unknownType(b)
	if err != nil {
		return nil, err
	}
	var c Content
	switch typ {
	case "text":
		var v Text
		err = json.Unmarshal(b, &v)
		c = v
	case "function_call":
		var v FunctionCall
		err = json.Unmarshal(b, &v)
		c = v
	case "function_result":
		var v FunctionResult
		err = json.Unmarshal(b, &v)
		c = v
	case "data":
		var v Data
		err = json.Unmarshal(b, &v)
		c = v
	case "reasoning":
		var v Reasoning
		err = json.Unmarshal(b, &v)
		c = v
	case "usage":
		var v Usage
		err = json.Unmarshal(b, &v)
		c = v
	case "error":
		var v Error
		err = json.Unmarshal(b, &v)
		c = v
	default:
		raw, err := canonicalRaw(b)
		if err != nil {
			return nil, err
		}
		return Unknown{Raw: raw}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", typ, err)
	}
	return c, nil
}

// canonicalRaw returns the JSON b compacted, with <, >, &, U+2028 and U+2029
// in strings escaped the way encoding/json writes them, which is also what
// json.Marshal makes of b when it writes a Message. Storing Unknown.Raw in
// this form makes it the exact bytes a message carrying it is written with,
// so a message read back from its JSON equals the message that was written.
func canonicalRaw(b []byte) ([]byte, error) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	json.HTMLEscape(&out, compact.Bytes())
	return out.Bytes(), nil
}

// knownType reports whether t is the wire type of a variant other than
// Unknown.
func knownType(t string) bool {
	switch t {
	case "text", "function_call", "function_result", "data", "reasoning", "usage", "error":
		return true
	}
	return false
}

// unknownType returns the "type" member of a content object.
func unknownType(b []byte) (string, error) {
	var probe struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return "", fmt.Errorf("content: %w", err)
	}
	if probe.Type == nil || *probe.Type == "" {
		return "", errors.New("content: missing type")
	}
	return *probe.Type, nil
}
