package message_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/message"
)

// benchMessages are typical messages as a durable store reads them back.
func benchMessages() []struct {
	name string
	msg  message.Message
} {
	created := time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)
	text := "I'm planning a three-day trip to Paris next month with my partner. " +
		"We like museums, long walks and small restaurants, and we'd rather avoid \"tourist traps\".\n\n" +
		"Could you suggest a rough plan for each day, with one museum in the morning, " +
		"a neighbourhood to walk through in the afternoon and a place for dinner? " +
		"Also: is the Museum Pass worth it for three days?"
	return []struct {
		name string
		msg  message.Message
	}{
		{"text_720", message.Message{
			ID: "msg_01jpbx5b8qc3v0f4nyk2r7s9wd", Role: message.RoleAssistant,
			Contents:  []message.Content{message.Text{Text: strings.Repeat("The quick brown fox jumps over the lazy dog. ", 16)}},
			CreatedAt: created,
		}},
		{"user_text", message.Message{
			ID: "msg_01jpbx5b8qc3v0f4nyk2r7s9wd", Role: message.RoleUser,
			Contents: []message.Content{message.Text{Text: text}}, CreatedAt: created,
		}},
		{"assistant_call", message.Message{
			ID: "msg_01jpbx6c2w8h5t3m9qz4e7r1kd", Role: message.RoleAssistant, AuthorName: "planner",
			Contents: []message.Content{
				message.Text{Text: "Let me check the weather in Paris for your dates."},
				message.FunctionCall{CallID: "call_8f3a2b1c9d", Name: "weather_forecast", Arguments: `{"city":"Paris","country":"FR","days":3,"units":"metric"}`},
			},
			CreatedAt: created,
		}},
		{"tool_result", message.Message{
			ID: "msg_01jpbx7d3x9j6v4n0r5f8s2le", Role: message.RoleTool,
			Contents: []message.Content{
				message.FunctionResult{CallID: "call_8f3a2b1c9d", Result: `{"city":"Paris","days":[{"date":"2025-04-10","high_c":17,"low_c":8,"sky":"sunny"},{"date":"2025-04-11","high_c":15,"low_c":9,"sky":"showers"},{"date":"2025-04-12","high_c":18,"low_c":10,"sky":"cloudy"}]}`},
			},
			CreatedAt: created,
		}},
		{"assistant_full", message.Message{
			ID: "msg_01jpbx8e4y0k7w5p1s6g9t3mf", Role: message.RoleAssistant,
			Contents: []message.Content{
				message.Reasoning{Text: "The user wants a plan; the forecast says day two is rainy, so put the museum there.", Protected: "c2lnbmF0dXJlLXYxLWV4YW1wbGUtcGF5bG9hZA=="},
				message.Text{Text: strings.Repeat("Day one: the Louvre in the morning, then the Marais. ", 4)},
				message.Usage{InputTokens: 1200, OutputTokens: 385, TotalTokens: 1585, CachedInputTokens: 1024},
			},
			CreatedAt: created,
			Metadata:  map[string]any{"model": "gpt-4.1", "request_id": "req_42", "latency_ms": json.Number("1312")},
		}},
	}
}

func BenchmarkUnmarshal(b *testing.B) {
	for _, bm := range benchMessages() {
		data, err := json.Marshal(bm.msg)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				var m message.Message
				if err := m.UnmarshalJSON(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMarshal compares the hand-written encoder, through MarshalJSON
// and appending to a reused buffer, with the encoding/json reference it
// replaced.
func BenchmarkMarshal(b *testing.B) {
	for _, bm := range benchMessages() {
		data, err := bm.msg.MarshalJSON()
		if err != nil {
			b.Fatal(err)
		}
		for _, enc := range []struct {
			name    string
			marshal func(buf []byte) ([]byte, error)
		}{
			{"encoding_json", func([]byte) ([]byte, error) { return message.MarshalSlow(bm.msg) }},
			{"MarshalJSON", func([]byte) ([]byte, error) { return bm.msg.MarshalJSON() }},
			{"AppendJSON", func(buf []byte) ([]byte, error) { return bm.msg.AppendJSON(buf[:0]) }},
		} {
			b.Run(bm.name+"/"+enc.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(data)))
				buf := make([]byte, 0, len(data))
				for b.Loop() {
					var err error
					if buf, err = enc.marshal(buf); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
