package postgres

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// Messages, state and metadata are kept as the bytes of their JSON: the
// wire format of package message for messages (which keeps each message's
// own time zone and nanoseconds, and unknown content as it came), an object
// of the raw values for state, and a plain object for metadata. SQL NULL
// stands for nil, so a nil map and an empty one read back as they were
// written.

func encodeMessages(msgs []message.Message) ([]byte, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, m := range msgs {
		b, err := m.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("message %d: %v: %w", i, err, thread.ErrInvalid)
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(b)
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// decodeMessages reads what encodeMessages wrote. The array is compact and
// ours: it is split into its messages, each read by package message's own
// decoder, which saves encoding/json a validating pass over the whole array
// and a scan of each message before its UnmarshalJSON. Anything the split
// does not take (white space, an empty array, a broken one) is read by
// encoding/json, as before; TestDecodeMessages and FuzzDecodeMessages check
// that both read the same.
func decodeMessages(b []byte) ([]message.Message, error) {
	if b == nil {
		return nil, nil
	}
	if elems, ok := splitObjects(b); ok {
		msgs := make([]message.Message, len(elems))
		for i, e := range elems {
			if err := msgs[i].UnmarshalJSON(e); err != nil {
				return nil, fmt.Errorf("message %d: %w", i, err)
			}
		}
		return msgs, nil
	}
	var msgs []message.Message
	if err := json.Unmarshal(b, &msgs); err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	return msgs, nil
}

// splitObjects splits a compact JSON array of one or more objects into its
// elements, each a balanced object; it tracks only strings and nesting, and
// reports false for anything else (white space or a value other than an
// object between them, an unbalanced or unterminated one), which the caller
// leaves to encoding/json. Strings, the bulk of messages, are skipped with
// bytes.IndexByte to their closing quote.
func splitObjects(b []byte) ([][]byte, bool) {
	if len(b) < 4 || b[0] != '[' || b[1] != '{' || b[len(b)-1] != ']' {
		return nil, false
	}
	out := make([][]byte, 0, 4)
	depth, start := 0, 1
	for i := 1; i < len(b)-1; i++ {
		switch b[i] {
		case '"':
			// Find the closing quote: the next one not escaped, that is
			// not preceded by an odd run of backslashes.
			for {
				j := bytes.IndexByte(b[i+1:], '"')
				if j < 0 {
					return nil, false
				}
				i += 1 + j
				k := i - 1
				for b[k] == '\\' {
					k--
				}
				if (i-k)%2 == 1 {
					break
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth < 0 {
				return nil, false
			}
			if depth == 0 {
				if b[i] != '}' {
					return nil, false
				}
				out = append(out, b[start:i+1])
				// An object ends the array or a comma and another
				// object follow it.
				switch {
				case i+1 == len(b)-1:
				case b[i+1] == ',' && b[i+2] == '{':
					i++
					start = i + 1
				default:
					return nil, false
				}
			}
		default:
			if depth == 0 {
				return nil, false
			}
		}
	}
	// At depth 0 the last object closed just before the ']'.
	if depth != 0 {
		return nil, false
	}
	return out, true
}

// encodeState writes the state map as a JSON object whose values are the
// raw values, byte for byte (less surrounding white space, which JSON does
// not keep), keys in order.
func encodeState(st map[string]json.RawMessage) ([]byte, error) {
	if st == nil {
		return nil, nil
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(st)) {
		v := bytes.TrimSpace(st[k])
		if !json.Valid(v) {
			return nil, fmt.Errorf("state %q: not JSON: %w", clip(k), thread.ErrInvalid)
		}
		key, _ := json.Marshal(k)
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(key)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func decodeState(b []byte) (map[string]json.RawMessage, error) {
	if b == nil {
		return nil, nil
	}
	st := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, err
	}
	return st, nil
}

func encodeMeta(m map[string]string) ([]byte, error) {
	if m == nil {
		return nil, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("metadata: %v: %w", err, thread.ErrInvalid)
	}
	return b, nil
}

func decodeMeta(b []byte) (map[string]string, error) {
	if b == nil {
		return nil, nil
	}
	m := map[string]string{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// encodeLabels writes labels for the jsonb column: '{}' for none.
func encodeLabels(l map[string]string) string {
	if len(l) == 0 {
		return "{}"
	}
	b, _ := json.Marshal(l) // a map of strings always encodes
	return string(b)
}

func decodeLabels(b []byte) (map[string]string, error) {
	var l map[string]string
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, err
	}
	if len(l) == 0 {
		return nil, nil
	}
	return l, nil
}

// clip shortens untrusted input for error messages.
func clip(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return s
}
