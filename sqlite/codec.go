package sqlite

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/loomthreads/loom/message"
)

// Maps (labels, commit metadata, state) are stored as a count followed by
// length-prefixed keys and values, all uvarints, keys sorted: every byte
// comes back as it went in, which JSON would not promise for strings that
// are not valid UTF-8 or state values that are not compact JSON. A nil map
// is stored as NULL; an empty one as the single byte 0.

func appendMap[V ~string | ~[]byte](b []byte, m map[string]V) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = binary.AppendUvarint(b, uint64(len(m)))
	for _, k := range keys {
		v := m[k]
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	return b
}

// encodeStrings encodes a string map; nil and empty maps become NULL, as
// thread's own stores keep them.
func encodeStrings(m map[string]string) []byte {
	if len(m) == 0 {
		return nil
	}
	return appendMap(nil, m)
}

// encodeState encodes a state map; nil stays NULL, empty is kept as empty.
func encodeState(m map[string]json.RawMessage) []byte {
	if m == nil {
		return nil
	}
	return appendMap(make([]byte, 0, 16), m)
}

var errCorrupt = errors.New("corrupt map encoding")

// decodeMap decodes what appendMap wrote; b == nil (NULL) is a nil map. It
// copies: b may be reused by the driver.
func decodeMap[V ~string | ~[]byte](b []byte, conv func([]byte) V) (map[string]V, error) {
	if b == nil {
		return nil, nil
	}
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)) {
		return nil, errCorrupt
	}
	b = b[w:]
	m := make(map[string]V, n)
	next := func() ([]byte, error) {
		l, w := binary.Uvarint(b)
		if w <= 0 || l > uint64(len(b)-w) {
			return nil, errCorrupt
		}
		out := b[w : w+int(l)]
		b = b[w+int(l):]
		return out, nil
	}
	for range n {
		k, err := next()
		if err != nil {
			return nil, err
		}
		v, err := next()
		if err != nil {
			return nil, err
		}
		m[string(k)] = conv(v)
	}
	if len(b) != 0 {
		return nil, errCorrupt
	}
	return m, nil
}

func decodeStrings(b []byte) (map[string]string, error) {
	m, err := decodeMap(b, func(v []byte) string { return string(v) })
	if len(m) == 0 {
		m = nil
	}
	return m, err
}

func decodeState(b []byte) (map[string]json.RawMessage, error) {
	return decodeMap(b, func(v []byte) json.RawMessage { return append(json.RawMessage(nil), v...) })
}

// encodeMessages writes msgs as a JSON array of the messages' wire format,
// NULL when there are none.
func encodeMessages(msgs []message.Message) ([]byte, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	b := make([]byte, 0, 256*len(msgs))
	b = append(b, '[')
	for i, m := range msgs {
		j, err := m.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, j...)
	}
	return append(b, ']'), nil
}

func decodeMessages(b []byte) ([]message.Message, error) {
	if len(b) == 0 {
		return nil, nil
	}
	// The array is ours, compact: split it and give each message to its
	// own decoder, which saves encoding/json a validating pass over the
	// whole array and a skip over each element.
	if elems, ok := splitArray(b); ok {
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
		msgs = nil
	}
	return msgs, nil
}

// splitArray splits a compact JSON array of objects into its elements,
// tracking only nesting and strings; it reports false for anything else,
// and the caller then takes the slow, validating path. Most of a stored
// array is the text inside strings, so a string is crossed with
// bytes.IndexByte from one quote to the next, not a byte at a time: a quote
// ends the string unless an odd run of backslashes comes before it. That
// is the same rule as stepping over each backslash and the byte after it,
// so the elements are those a byte-at-a-time scan finds.
func splitArray(b []byte) ([][]byte, bool) {
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return nil, false
	}
	body := b[:len(b)-1] // the closing bracket is not scanned
	var out [][]byte
	depth, start := 0, 1
	for i := 1; i < len(body); i++ {
		switch body[i] {
		case '"':
			end, ok := closingQuote(body, i+1)
			if !ok {
				return nil, false
			}
			i = end
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth < 0 {
				return nil, false
			}
		case ',':
			if depth == 0 {
				if i == start || body[start] != '{' {
					return nil, false
				}
				out = append(out, body[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 || start >= len(body) || body[start] != '{' {
		return nil, false
	}
	return append(out, body[start:]), true
}

// closingQuote is the index in b of the quote that ends the string whose
// contents start at i, or false if b ends first. The quote that opened the
// string is at i-1, so the backward count of backslashes stops there.
func closingQuote(b []byte, i int) (int, bool) {
	// Keys and ids are short: look at their bytes before paying for a call.
	for n := min(len(b), i+16); i < n; i++ {
		switch b[i] {
		case '"':
			return i, true
		case '\\':
			i++ // the byte after a backslash never ends the string
		}
	}
	if i >= len(b) {
		return 0, false
	}
	for {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return 0, false
		}
		i += q
		j := i - 1
		for b[j] == '\\' {
			j--
		}
		if (i-j)%2 == 1 { // an even number (i-j-1) of backslashes
			return i, true
		}
		i++
	}
}

// micros is how a time is stored: Unix microseconds. loom's times are UTC
// microseconds already, so nothing is lost.
func micros(t time.Time) int64 { return t.UnixMicro() }

// fromMicros is the time micros stored, in UTC.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }
