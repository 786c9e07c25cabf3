package message_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/loomthreads/loom/message"
)

// TestSizeSurvivesTheWire checks that a message has one size before and
// after its JSON: a limit that accepts it once accepts it read back (the
// export of a thread loads). A message without an id counts the id a
// thread gives it, and a Go number counts the digits it is written with.
func TestSizeSurvivesTheWire(t *testing.T) {
	for name, md := range map[string]map[string]any{
		"ints":      {"a": 1, "b": int64(math.MinInt64), "c": uint64(math.MaxUint64), "d": int8(-3)},
		"floats":    {"a": 0.1234567890123456, "b": 1e300, "c": 1e-9, "d": float32(3.25), "e": -0.0},
		"empty":     {"n": nil, "m": map[string]any(nil), "s": []any(nil), "t": true, "f": false},
		"number":    {"n": json.Number("12345678901234567890123")},
		"nested":    {"x": []any{1.5, map[string]any{"y": 7}}},
		"no values": {},
	} {
		t.Run(name, func(t *testing.T) {
			m := message.User("hi")
			// An unknown content a caller built, written back in canonical
			// form: compact, with <, >, &, U+2028 and U+2029 escaped.
			m.Contents = append(m.Contents, message.Unknown{Raw: []byte("{\"type\":\"x\",\"v\":\"<a & b>\u2028\u2029\"}")})
			m.Metadata = md
			want := m.Size()
			m.ID = message.NewID()
			if got := m.Size(); got != want {
				t.Fatalf("size %d with its id, %d without", got, want)
			}
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			var back message.Message
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if got := back.Size(); got != want {
				t.Fatalf("size %d read back from %s, %d before", got, b, want)
			}
		})
	}
}
