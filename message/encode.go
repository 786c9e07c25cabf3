package message

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/loomthreads/loom/internal/jsonstr"
	"slices"
	"strconv"
)

// The encoder below writes messages and contents by hand, several times
// faster than encoding/json, and byte for byte as encoding/json writes the
// structs of json.go (marshalSlow and marshalContentSlow, the reference that
// the tests and FuzzEncoder compare it with): members in struct order, empty
// optional members left out as omitzero does, strings escaped as
// encoding/json escapes them by default. Metadata it does not write the way
// encoding/json would for certain (a Go int or float, a type the decoder
// never makes, nesting beyond maxDepth) is left to encoding/json, and so is
// an Unknown whose raw JSON is not already in canonical form.

// AppendJSON appends m in the wire format (see docs/wire-format.md) to b and
// returns the extended buffer: exactly the bytes MarshalJSON returns. If m
// cannot be written (a content that is nil or not a loom content, an Unknown
// that is not a JSON object with a type, a CreatedAt that RFC 3339 cannot
// write, metadata that is not JSON), it returns b unchanged and the error.
func (m Message) AppendJSON(b []byte) ([]byte, error) {
	orig := b
	b = append(b, '{')
	if m.ID != "" {
		b = appendMember(b, `"id":`, m.ID)
		b = append(b, ',')
	}
	b = appendMember(b, `"role":`, string(m.Role))
	if m.AuthorName != "" {
		b = appendMember(b, `,"author_name":`, m.AuthorName)
	}
	b = append(b, `,"contents":[`...)
	for i, c := range m.Contents {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendContent(b, c); err != nil {
			return orig, fmt.Errorf("contents[%d]: %w", i, err)
		}
	}
	b = append(b, ']')
	if !m.CreatedAt.IsZero() {
		b = append(b, `,"created_at":"`...)
		var err error
		if b, err = m.CreatedAt.AppendText(b); err != nil {
			return orig, fmt.Errorf("created_at: %w", err)
		}
		b = append(b, '"')
	}
	if m.Metadata != nil {
		b = append(b, `,"metadata":`...)
		var err error
		if b, err = appendMetadata(b, m.Metadata); err != nil {
			return orig, fmt.Errorf("metadata: %w", err)
		}
	}
	return append(b, '}'), nil
}

// sizeHint returns about how long m's JSON is, so that MarshalJSON
// usually allocates once. Unlike Size, it does not walk the metadata, which
// may be cyclic: encoding/json reports that as an error.
func (m Message) sizeHint() int {
	n := 128 + len(m.ID) + len(m.Role) + len(m.AuthorName) + 64*len(m.Metadata)
	for _, c := range m.Contents {
		n += 64 + contentSize(c)
	}
	return n + n/8 // for escapes
}

// appendContent appends c as MarshalContent writes it.
func appendContent(b []byte, c Content) ([]byte, error) {
	switch v := c.(type) {
	case nil:
		return b, errors.New("nil content")
	case Text:
		return v.appendJSON(b), nil
	case FunctionCall:
		return v.appendJSON(b), nil
	case FunctionResult:
		return v.appendJSON(b), nil
	case Data:
		return v.appendJSON(b), nil
	case Reasoning:
		return v.appendJSON(b), nil
	case Usage:
		return v.appendJSON(b), nil
	case Error:
		return v.appendJSON(b), nil
	case Unknown:
		return v.appendJSON(b)
	}
	return b, fmt.Errorf("content type %T", c)
}

func (t Text) appendJSON(b []byte) []byte {
	b = appendMember(b, `{"type":"text","text":`, t.Text)
	return append(b, '}')
}

func (f FunctionCall) appendJSON(b []byte) []byte {
	b = appendMember(b, `{"type":"function_call","call_id":`, f.CallID)
	b = appendMember(b, `,"name":`, f.Name)
	if f.Arguments != "" {
		b = appendMember(b, `,"arguments":`, f.Arguments)
	}
	return append(b, '}')
}

func (r FunctionResult) appendJSON(b []byte) []byte {
	b = appendMember(b, `{"type":"function_result","call_id":`, r.CallID)
	if r.Result != "" {
		b = appendMember(b, `,"result":`, r.Result)
	}
	if r.IsError {
		b = append(b, `,"is_error":true`...)
	}
	return append(b, '}')
}

func (d Data) appendJSON(b []byte) []byte {
	b = append(b, `{"type":"data"`...)
	if d.MediaType != "" {
		b = appendMember(b, `,"media_type":`, d.MediaType)
	}
	if d.URI != "" {
		b = appendMember(b, `,"uri":`, d.URI)
	}
	if d.Data != nil { // empty but not nil is written as ""
		b = append(b, `,"data":"`...)
		b = base64.StdEncoding.AppendEncode(b, d.Data)
		b = append(b, '"')
	}
	if d.Name != "" {
		b = appendMember(b, `,"name":`, d.Name)
	}
	return append(b, '}')
}

func (r Reasoning) appendJSON(b []byte) []byte {
	b = append(b, `{"type":"reasoning"`...)
	if r.Text != "" {
		b = appendMember(b, `,"text":`, r.Text)
	}
	if r.Protected != "" {
		b = appendMember(b, `,"protected":`, r.Protected)
	}
	return append(b, '}')
}

func (u Usage) appendJSON(b []byte) []byte {
	b = append(b, `{"type":"usage"`...)
	b = appendTokens(b, `,"input_tokens":`, u.InputTokens)
	b = appendTokens(b, `,"output_tokens":`, u.OutputTokens)
	b = appendTokens(b, `,"total_tokens":`, u.TotalTokens)
	b = appendTokens(b, `,"cached_input_tokens":`, u.CachedInputTokens)
	b = appendTokens(b, `,"reasoning_tokens":`, u.ReasoningTokens)
	return append(b, '}')
}

// appendTokens appends the member name and n, or nothing if n is 0.
func appendTokens(b []byte, name string, n int64) []byte {
	if n == 0 {
		return b
	}
	b = append(b, name...)
	return strconv.AppendInt(b, n, 10)
}

func (e Error) appendJSON(b []byte) []byte {
	b = append(b, `{"type":"error"`...)
	if e.Code != "" {
		b = appendMember(b, `,"code":`, e.Code)
	}
	b = appendMember(b, `,"message":`, e.Message)
	return append(b, '}')
}

// appendJSON appends u.Raw as it is when it is in canonical form, as the
// decoder leaves it, and otherwise what encoding/json makes of it.
func (u Unknown) appendJSON(b []byte) ([]byte, error) {
	if canonicalUnknown(u.Raw) {
		return append(b, u.Raw...), nil
	}
	raw, err := marshalContentSlow(u)
	if err != nil {
		return b, err
	}
	return append(b, raw...), nil
}

// canonicalUnknown reports whether raw is a JSON object that marshalContentSlow
// writes unchanged: one with a "type" member that is a non-empty string, in
// canonical form (see canonicalRaw): no whitespace between tokens, and no <,
// >, &, U+2028 or U+2029 unescaped. Anything else, such as nesting beyond
// maxDepth, is left to encoding/json.
func canonicalUnknown(raw []byte) bool {
	d := decoder{data: raw}
	if !d.consume('{') {
		return false
	}
	hasType := false
	for {
		key, ok := d.key()
		if !ok {
			return false
		}
		switch {
		case bytes.EqualFold(key, []byte("type")):
			// encoding/json reads any case of type, and the last one
			// counts: each must be a type.
			typ, ok := d.str()
			if !ok || len(typ) == 0 {
				return false
			}
			hasType = true
		case bytes.IndexByte(key, '\\') >= 0: // might be "type" escaped
			return false
		case !d.skip(1):
			return false
		}
		more, ok := d.next('}')
		if !ok {
			return false
		}
		if !more {
			break
		}
	}
	if !hasType || d.off != len(raw) {
		return false
	}
	// The syntax is valid; look for what canonicalRaw would change.
	inString := false
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			inString = !inString
		case '\\':
			i++ // only in a string, and never before its closing quote
		case ' ', '\t', '\n', '\r':
			if !inString {
				return false
			}
		case '<', '>', '&':
			return false
		case 0xE2: // U+2028 and U+2029 are E2 80 A8 and E2 80 A9
			if i+2 < len(raw) && raw[i+1] == 0x80 && raw[i+2]&^1 == 0xA8 {
				return false
			}
		}
	}
	return true
}

// appendMetadata appends the metadata object md as encoding/json writes it.
func appendMetadata(b []byte, md map[string]any) ([]byte, error) {
	if out, ok := appendMetaValue(b, md, 0); ok {
		return out, nil
	}
	j, err := json.Marshal(md)
	if err != nil {
		return b, err
	}
	return append(b, j...), nil
}

// appendMetaValue appends v as encoding/json writes it, if v holds only what
// the decoder makes of JSON (string, json.Number, bool, nil, []any and
// map[string]any) nested no deeper than maxDepth. Otherwise it reports false,
// having written to b's spare capacity at most.
func appendMetaValue(b []byte, v any, depth int) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), true
	case bool:
		return strconv.AppendBool(b, v), true
	case string:
		return jsonstr.Append(b, v), true
	case json.Number:
		// encoding/json writes "" as 0 and refuses other invalid numbers.
		if d := (decoder{data: []byte(v)}); !d.skipNumber() || d.off != len(v) {
			return b, false
		}
		return append(b, v...), true
	case []any:
		if v == nil {
			return append(b, "null"...), true
		}
		if depth >= maxDepth {
			return b, false
		}
		b = append(b, '[')
		for i, x := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendMetaValue(b, x, depth+1); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case map[string]any:
		if v == nil {
			return append(b, "null"...), true
		}
		if depth >= maxDepth {
			return b, false
		}
		var small [16]string
		keys := small[:0]
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys) // as encoding/json sorts them: by their bytes, unescaped
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonstr.Append(b, k)
			b = append(b, ':')
			var ok bool
			if b, ok = appendMetaValue(b, v[k], depth+1); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	}
	return b, false
}

// appendMember appends name, which holds the JSON before the value, and s
// as a JSON string.
func appendMember(b []byte, name, s string) []byte {
	return jsonstr.Append(append(b, name...), s)
}
