package postgres

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/message"
)

// decodeCases are messages of every content kind, with metadata, unicode
// and escapes, as commits hold them.
func decodeCases() []message.Message {
	at := time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)
	paris := time.FixedZone("CET", 3600)
	text := "I'm planning a three-day trip to Paris next month with my partner. " +
		"We like museums, long walks and small restaurants, and we'd rather avoid \"tourist traps\".\n\n" +
		"Could you suggest a rough plan for each day? Also: is the Museum Pass worth it?"
	return []message.Message{
		{ID: "msg_1", Role: message.RoleUser, Contents: []message.Content{message.Text{Text: text}}, CreatedAt: at},
		{ID: "msg_2", Role: message.RoleAssistant, AuthorName: "planner", CreatedAt: at.In(paris),
			Contents: []message.Content{
				message.Text{Text: "Let me check the weather."},
				message.FunctionCall{CallID: "call_8f3a", Name: "weather_forecast", Arguments: `{"city":"Paris","days":3}`},
			}},
		{ID: "msg_3", Role: message.RoleTool, CreatedAt: at,
			Contents: []message.Content{message.FunctionResult{CallID: "call_8f3a", Result: `{"days":[{"high_c":17,"sky":"sunny"}]}`}}},
		{ID: "msg_4", Role: message.RoleTool, CreatedAt: at,
			Contents: []message.Content{message.FunctionResult{CallID: "call_x", Result: "no such city", IsError: true}}},
		{ID: "msg_5", Role: message.RoleAssistant, CreatedAt: at,
			Contents: []message.Content{
				message.Reasoning{Text: "Day two is rainy: the museum goes there.", Protected: "c2lnbmF0dXJl"},
				message.Text{Text: strings.Repeat("Day one: the Louvre, then the Marais. ", 4)},
				message.Usage{InputTokens: 1200, OutputTokens: 385, TotalTokens: 1585, CachedInputTokens: 1024},
			},
			Metadata: map[string]any{"model": "gpt-4.1", "latency_ms": json.Number("1312"), "ratio": json.Number("1.5e-3"),
				"nested": map[string]any{"a": []any{true, false, nil, "x", json.Number("-0")}}, "empty": map[string]any{}}},
		{ID: "msg_6", Role: message.RoleUser, CreatedAt: at,
			Contents: []message.Content{message.Data{MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G', 0, 1, 2, 0xff}, Name: "pixel.png"}}},
		{ID: "msg_7", Role: message.RoleAssistant, CreatedAt: at,
			Contents: []message.Content{message.Error{Code: "rate_limited", Message: "too many requests: \"retry\" in 2s"}}},
		{ID: "msg_8", Role: message.RoleAssistant, CreatedAt: at,
			Contents: []message.Content{
				message.Unknown{Raw: []byte(`{"type":"citation","url":"https://example.com/?a=1&b=2","n":[1,2.5e10]}`)},
				message.Unknown{Raw: []byte(`{"type":"x-empty"}`)},
			}},
		{ID: "msg_9", Role: "custom-role", AuthorName: "Zoë 🧵", CreatedAt: at,
			Contents: []message.Content{message.Text{Text: "héllo 世界 🌍 \u2028\u2029 tab\t nl\n cr\r bell\x07 back\\slash quote\" <html> & \u00e9\U0001F600"}}},
		{ID: "msg_10", Role: message.RoleSystem, Contents: []message.Content{message.Text{Text: ""}}},
		{ID: "msg_11", Role: message.RoleUser, CreatedAt: at, Contents: []message.Content{}},
		{ID: "msg_12", Role: message.RoleUser, CreatedAt: at, Metadata: map[string]any{"k\"ey": "v\\al\u0001", "ünï": "☃"}},
	}
}

// stdDecode is what decodeMessages gave before it had a fast path, and
// the reference it must still give: encoding/json over the whole array.
func stdDecode(b []byte) ([]message.Message, error) {
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

// checkDecode fails t if decodeMessages(b) does not give what encoding/json
// gives: the same error or none, and the same messages, compared by their
// encoding (which catches a json.Number read as a float, or a time zone
// lost) and, if deep, value by value.
func checkDecode(t *testing.T, b []byte, deep bool) {
	t.Helper()
	want, wantErr := stdDecode(b)
	got, err := decodeMessages(b)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("decodeMessages(%q): error %v, encoding/json's %v", b, err, wantErr)
	}
	if err != nil {
		return
	}
	wb, _ := json.Marshal(want)
	gb, _ := json.Marshal(got)
	if !bytes.Equal(wb, gb) {
		t.Fatalf("decodeMessages(%q) encodes as\n%s\nencoding/json's as\n%s", b, gb, wb)
	}
	if !deep {
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("decodeMessages(%q) differs from encoding/json (-want +got):\n%s", b, diff)
	}
}

// TestDecodeMessages checks that decodeMessages reads what encoding/json
// reads, message for message, for what encodeMessages writes and for
// arrays it does not write (white space, other shapes, broken bytes).
func TestDecodeMessages(t *testing.T) {
	msgs := decodeCases()
	for i := range msgs {
		b, err := encodeMessages(msgs[i : i+1])
		if err != nil {
			t.Fatal(err)
		}
		checkDecode(t, b, true)
	}
	all, err := encodeMessages(msgs)
	if err != nil {
		t.Fatal(err)
	}
	checkDecode(t, all, true)
	for _, s := range []string{
		"", "null", "[]", " [ ] ", "[null]", "[{}]", "[{},{}]", `[{"id":"a"} , {"id":"b"}]`, " " + string(all) + " ",
		`[{"id":"a","ID":"b"}]`, `[{"id":"a","id":"b"}]`, `[{"id":"\ud800"}]`, "[{\"id\":\"\xff\"}]",
		`[{"id":"a"}]x`, `[{"id":"a"},]`, `[,{"id":"a"}]`, `[{"id":"a"}`, `[{"id":"a}]`, `[{"id":"a\"}]`,
		`[{"id":"a\\"}]`, `[{"id":"a\\\"}"}]`, `[{"id":"a"}{"id":"b"}]`, `[{"id":"a"}}]`, `[{"id":1}]`, `[1]`, `{}`,
		`[{"contents":[{"type":"text","text":"]},{"}]}]`, `[{"metadata":{"a":[{"b":"}"}]}}]`,
	} {
		checkDecode(t, []byte(s), true)
	}
}

// TestDecodeMessagesMutated checks decodeMessages against encoding/json on
// one-byte changes of an encoded commit: each byte of its syntax (a quote,
// a backslash, a brace, a bracket, a comma, a colon) deleted, or replaced by
// another such byte or by one that is not UTF-8.
func TestDecodeMessagesMutated(t *testing.T) {
	all, err := encodeMessages(decodeCases())
	if err != nil {
		t.Fatal(err)
	}
	for i := range all {
		if strings.IndexByte(`"\{}[],:`, all[i]) < 0 {
			continue
		}
		checkDecode(t, slices.Delete(slices.Clone(all), i, i+1), false)
		for _, c := range []byte("\"\\{}[],: \xff") {
			b := slices.Clone(all)
			b[i] = c
			checkDecode(t, b, false)
		}
	}
}

// FuzzDecodeMessages checks decodeMessages against encoding/json on any
// bytes, starting from what encodeMessages writes.
func FuzzDecodeMessages(f *testing.F) {
	msgs := decodeCases()
	for i := range msgs {
		b, _ := encodeMessages(msgs[i:])
		f.Add(b)
	}
	f.Add([]byte(`[{"id":"a\\\"}"},{}]`))
	f.Fuzz(func(t *testing.T, b []byte) { checkDecode(t, b, true) })
}

// BenchmarkDecodeMessages reads back a commit of the messages of
// decodeCases with decodeMessages; with encoding/json over the whole array
// (what decodeMessages did before package message's decoder read each
// message); and, as the floor, with Message.UnmarshalJSON alone on each
// message already split out. ns/msg is per message.
func BenchmarkDecodeMessages(b *testing.B) {
	data, err := encodeMessages(decodeCases())
	if err != nil {
		b.Fatal(err)
	}
	n := len(decodeCases())
	elems, ok := splitObjects(data)
	if !ok {
		b.Fatal("splitObjects refused encodeMessages' array")
	}
	floor := func([]byte) ([]message.Message, error) {
		msgs := make([]message.Message, len(elems))
		for i, e := range elems {
			if err := msgs[i].UnmarshalJSON(e); err != nil {
				return nil, err
			}
		}
		return msgs, nil
	}
	for _, bc := range []struct {
		name   string
		decode func([]byte) ([]message.Message, error)
	}{{"store", decodeMessages}, {"encoding_json", stdDecode}, {"floor", floor}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := bc.decode(data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
		})
	}
}
