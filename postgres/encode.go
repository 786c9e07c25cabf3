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

func decodeMessages(b []byte) ([]message.Message, error) {
	if b == nil {
		return nil, nil
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
