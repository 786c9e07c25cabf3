package message_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/message"
)

// fullMessage returns a message with every content variant and nested
// metadata, as testdata/message_full.json holds it. Each call returns fresh
// values, so a test can keep one copy as the expected value.
func fullMessage() message.Message {
	return message.Message{
		ID:         "msg_01jpbx5b8qc3v0f4nyk2r7s9wd",
		Role:       message.RoleAssistant,
		AuthorName: "forecaster",
		Contents: []message.Content{
			message.Text{Text: "Let me check the weather in Paris."},
			message.Reasoning{Text: "The user wants today's weather; call the tool.", Protected: "c2lnbmF0dXJlLXYx"},
			message.FunctionCall{CallID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`},
			message.FunctionResult{CallID: "call_1", Result: `{"temp_c":21}`},
			message.FunctionResult{CallID: "call_2", Result: "timeout after 30s", IsError: true},
			message.Data{MediaType: "image/png", URI: "https://example.com/paris.png"},
			message.Data{MediaType: "image/png", Data: []byte("\x89PNG\r\n\x1a\n"), Name: "pixel.png"},
			message.Usage{InputTokens: 1200, OutputTokens: 85, TotalTokens: 1285, CachedInputTokens: 1024, ReasoningTokens: 40},
			message.Error{Code: "rate_limited", Message: "Too many requests; retry in 20s."},
			message.Unknown{Raw: []byte(`{"type":"citation","url":"https://example.com/paris","spans":[1,2]}`)},
		},
		CreatedAt: time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC),
		Metadata: map[string]any{
			"request_id": "req_42",
			"big":        json.Number("12345678901234567890"),
			"ratio":      json.Number("0.25"),
			"cached":     true,
			"none":       nil,
			"tags":       []any{"weather", "paris"},
			"trace": map[string]any{
				"spans": []any{json.Number("1"), map[string]any{"name": "tool", "ms": json.Number("312")}},
			},
		},
	}
}

func TestBuilders(t *testing.T) {
	tests := []struct {
		name string
		got  message.Message
		want message.Message
	}{
		{"User", message.User("hi"),
			message.Message{Role: message.RoleUser, Contents: []message.Content{message.Text{Text: "hi"}}}},
		{"Assistant", message.Assistant("hello"),
			message.Message{Role: message.RoleAssistant, Contents: []message.Content{message.Text{Text: "hello"}}}},
		{"System", message.System("be brief"),
			message.Message{Role: message.RoleSystem, Contents: []message.Content{message.Text{Text: "be brief"}}}},
		{"ToolCall", message.ToolCall("call_1", "weather", `{"city":"Paris"}`),
			message.Message{Role: message.RoleAssistant, Contents: []message.Content{
				message.FunctionCall{CallID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`}}}},
		{"ToolResult", message.ToolResult("call_1", `{"temp_c":21}`),
			message.Message{Role: message.RoleTool, Contents: []message.Content{
				message.FunctionResult{CallID: "call_1", Result: `{"temp_c":21}`}}}},
		{"ToolError", message.ToolError("call_1", "timeout"),
			message.Message{Role: message.RoleTool, Contents: []message.Content{
				message.FunctionResult{CallID: "call_1", Result: "timeout", IsError: true}}}},
		{"New without contents", message.New("critic"),
			message.Message{Role: "critic"}},
		{"New with parallel calls", message.New(message.RoleAssistant,
			message.FunctionCall{CallID: "a", Name: "f"}, message.FunctionCall{CallID: "b", Name: "g"}),
			message.Message{Role: message.RoleAssistant, Contents: []message.Content{
				message.FunctionCall{CallID: "a", Name: "f"}, message.FunctionCall{CallID: "b", Name: "g"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("builder mismatch (-want +got):\n%s", diff)
			}
			if err := tt.got.Validate(); err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
		})
	}
}

func TestNewID(t *testing.T) {
	a, b := message.NewID(), message.NewID()
	for _, id := range []string{a, b} {
		if !strings.HasPrefix(id, "msg_") || !ids.Valid(id) {
			t.Errorf("NewID() = %q, want a valid id starting with msg_", id)
		}
	}
	if a == b {
		t.Errorf("NewID() returned %q twice", a)
	}
}

func TestHelpers(t *testing.T) {
	mixed := message.New(message.RoleAssistant,
		message.Text{Text: "Checking "},
		message.FunctionCall{CallID: "c1", Name: "weather"},
		message.Reasoning{Text: "not text"},
		message.FunctionResult{CallID: "c0", Result: "ok"},
		message.Text{Text: "both cities."},
		message.FunctionCall{CallID: "c2", Name: "time"},
		message.Unknown{Raw: []byte(`{"type":"citation","text":"not text either"}`)},
		message.FunctionResult{CallID: "c3", Result: "failed", IsError: true},
	)
	tests := []struct {
		name        string
		m           message.Message
		wantText    string
		wantCalls   []message.FunctionCall
		wantResults []message.FunctionResult
	}{
		{name: "empty", m: message.Message{}},
		{name: "user", m: message.User("hi"), wantText: "hi"},
		{name: "tool call", m: message.ToolCall("c", "f", "{}"),
			wantCalls: []message.FunctionCall{{CallID: "c", Name: "f", Arguments: "{}"}}},
		{name: "tool result", m: message.ToolResult("c", "42"),
			wantResults: []message.FunctionResult{{CallID: "c", Result: "42"}}},
		{name: "mixed", m: mixed,
			wantText:    "Checking both cities.",
			wantCalls:   []message.FunctionCall{{CallID: "c1", Name: "weather"}, {CallID: "c2", Name: "time"}},
			wantResults: []message.FunctionResult{{CallID: "c0", Result: "ok"}, {CallID: "c3", Result: "failed", IsError: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.Text(); got != tt.wantText {
				t.Errorf("Text() = %q, want %q", got, tt.wantText)
			}
			if diff := cmp.Diff(tt.wantCalls, tt.m.Calls()); diff != "" {
				t.Errorf("Calls() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantResults, tt.m.Results()); diff != "" {
				t.Errorf("Results() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	with := func(m message.Message, f func(*message.Message)) message.Message {
		f(&m)
		return m
	}
	good := []struct {
		name string
		m    message.Message
	}{
		{"user", message.User("hi")},
		{"fresh id", with(message.User("hi"), func(m *message.Message) { m.ID = message.NewID() })},
		{"every variant", fullMessage()},
		{"no contents", message.New(message.RoleAssistant)},
		{"other role", message.New("critic", message.Text{Text: "looks fine"})},
		{"role with underscore", message.New("tool_runner")},
		{"longest role", message.New(message.Role(strings.Repeat("r", message.MaxRoleLen)))},
		{"empty text", message.User("")},
		{"created_at with offset", with(message.User("hi"), func(m *message.Message) {
			m.CreatedAt = time.Date(2025, 1, 1, 0, 0, 0, 1, time.FixedZone("", -(23*3600+59*60)))
		})},
		{"unicode", with(message.User("héllo, 世界 👋"), func(m *message.Message) { m.AuthorName = "Zoë" })},
		{"function result without result", message.ToolResult("c", "")},
		{"empty data", message.New(message.RoleUser, message.Data{})},
		{"zero usage", message.New(message.RoleAssistant, message.Usage{})},
	}
	for _, tt := range good {
		t.Run("good/"+tt.name, func(t *testing.T) {
			if err := tt.m.Validate(); err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
		})
	}

	bad := []struct {
		name string
		m    message.Message
		want []string // substrings of the error, one per problem
	}{
		{"path id", with(message.User("hi"), func(m *message.Message) { m.ID = "../../etc" }), []string{`id "../../etc"`}},
		{"id with slash", with(message.User("hi"), func(m *message.Message) { m.ID = "a/b" }), []string{"not a valid id"}},
		{"capitalized role", message.New("User", message.Text{Text: "hi"}), []string{`role "User"`}},
		{"empty role", message.New("", message.Text{Text: "hi"}), []string{`role ""`}},
		{"role with dash", message.New("tool-runner"), []string{"role"}},
		{"role too long", message.New(message.Role(strings.Repeat("r", message.MaxRoleLen+1))), []string{"role"}},
		{"nil content", message.New(message.RoleUser, message.Text{Text: "a"}, nil), []string{"contents[1]: nil content"}},
		{"pointer content", message.New(message.RoleUser, &message.Text{Text: "a"}), []string{"contents[0]: content type *message.Text"}},
		{"call without call_id", message.ToolCall("", "weather", "{}"), []string{"call_id and name are required"}},
		{"call without name", message.ToolCall("call_1", "", "{}"), []string{"call_id and name are required"}},
		{"result without call_id", message.ToolResult("", "ok"), []string{"function_result: call_id is required"}},
		{"error without call_id", message.ToolError("", "boom"), []string{"function_result: call_id is required"}},
		{"text not UTF-8", message.User("caf\xe9"), []string{"contents[0]: text: not UTF-8"}},
		{"author not UTF-8", with(message.User("hi"), func(m *message.Message) { m.AuthorName = "\xff" }), []string{"author_name: not UTF-8"}},
		{"arguments not UTF-8", message.ToolCall("c", "f", "\xff"), []string{"function_call: not UTF-8"}},
		{"result not UTF-8", message.ToolResult("c", "\xff"), []string{"function_result: not UTF-8"}},
		{"data name not UTF-8", message.New(message.RoleUser, message.Data{Name: "\xff"}), []string{"data: not UTF-8"}},
		{"reasoning not UTF-8", message.New(message.RoleAssistant, message.Reasoning{Protected: "\xff"}), []string{"reasoning: not UTF-8"}},
		{"error not UTF-8", message.New(message.RoleAssistant, message.Error{Message: "\xff"}), []string{"error: not UTF-8"}},
		{"metadata value not UTF-8", with(message.User("hi"), func(m *message.Message) {
			m.Metadata = map[string]any{"a": []any{"ok", "\xff"}}
		}), []string{`metadata "a": not UTF-8`}},
		{"metadata key not UTF-8", with(message.User("hi"), func(m *message.Message) {
			m.Metadata = map[string]any{"a": map[string]any{"\xff": true}}
		}), []string{`metadata "a": a key is not UTF-8`}},
		{"metadata top-level key not UTF-8", with(message.User("hi"), func(m *message.Message) {
			m.Metadata = map[string]any{"\xff": true}
		}), []string{"metadata: a key is not UTF-8"}},
		{"metadata NaN", with(message.User("hi"), func(m *message.Message) {
			m.Metadata = map[string]any{"score": math.NaN()}
		}), []string{`metadata "score": not a finite number`}},
		{"metadata of a Go type JSON does not decode to", with(message.User("hi"), func(m *message.Message) {
			m.Metadata = map[string]any{"tags": []string{"shared", "with", "the", "caller"}}
		}), []string{`metadata "tags": a []string`}},
		{"metadata bytes", with(message.User("hi"), func(m *message.Message) {
			m.Metadata = map[string]any{"blob": []byte("x")}
		}), []string{`metadata "blob": a []uint8`}},
		{"metadata bad json.Number", with(message.User("hi"), func(m *message.Message) {
			m.Metadata = map[string]any{"n": json.Number("12abc")}
		}), []string{`metadata "n": json.Number`}},
		{"created_at after 9999", with(message.User("hi"), func(m *message.Message) {
			m.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
		}), []string{"created_at:"}},
		{"created_at offset of a day", with(message.User("hi"), func(m *message.Message) {
			m.CreatedAt = time.Date(2025, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))
		}), []string{"created_at:"}},
		{"unknown without type", message.New(message.RoleUser, message.Unknown{Raw: []byte(`{"url":"https://example.com"}`)}), []string{"content: missing type"}},
		{"unknown with empty type", message.New(message.RoleUser, message.Unknown{Raw: []byte(`{"type":""}`)}), []string{"content: missing type"}},
		{"unknown nil", message.New(message.RoleUser, message.Unknown{}), []string{"contents[0]: content:"}},
		{"unknown not JSON", message.New(message.RoleUser, message.Unknown{Raw: []byte(`{"type":"x",}`)}), []string{"contents[0]: content:"}},
		{"unknown not an object", message.New(message.RoleUser, message.Unknown{Raw: []byte(`["type"]`)}), []string{"contents[0]: content:"}},
		{"unknown of known type", message.New(message.RoleUser, message.Unknown{Raw: []byte(`{"type":"text","text":5}`)}), []string{`known type "text"`}},
		{"unknown not UTF-8", message.New(message.RoleUser, message.Unknown{Raw: []byte("{\"type\":\"citation\",\"url\":\"\xff\"}")}), []string{"citation: not UTF-8"}},
		{"several problems", message.Message{ID: "../x", Role: "User", Contents: []message.Content{nil, message.ToolCall("", "", "").Contents[0]}},
			[]string{"id", "role", "contents[0]: nil content", "contents[1]: function_call"}},
	}
	for _, tt := range bad {
		t.Run("bad/"+tt.name, func(t *testing.T) {
			err := tt.m.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want an error containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestClone(t *testing.T) {
	// Each mutation changes something the clone holds; applied to the clone
	// it must leave the original as it was, and applied to the original it
	// must leave the clone as it was.
	mutations := []struct {
		name   string
		mutate func(m *message.Message)
	}{
		{"replace content", func(m *message.Message) { m.Contents[0] = message.Text{Text: "changed"} }},
		{"data bytes", func(m *message.Message) { m.Contents[6].(message.Data).Data[0] = 'X' }},
		{"unknown raw bytes", func(m *message.Message) { copy(m.Contents[9].(message.Unknown).Raw, `{"type":"changed"`) }},
		{"metadata key", func(m *message.Message) { m.Metadata["added"] = "x"; delete(m.Metadata, "big") }},
		{"nested slice", func(m *message.Message) { m.Metadata["tags"].([]any)[0] = "changed" }},
		{"nested map", func(m *message.Message) { m.Metadata["trace"].(map[string]any)["added"] = true }},
		{"map in slice in map", func(m *message.Message) {
			span := m.Metadata["trace"].(map[string]any)["spans"].([]any)[1].(map[string]any)
			span["name"] = "changed"
		}},
		{"every field", func(m *message.Message) {
			m.ID, m.Role, m.AuthorName, m.CreatedAt = "other", "other", "other", time.Time{}
		}},
	}
	for _, mu := range mutations {
		t.Run(mu.name+"/in clone", func(t *testing.T) {
			orig := fullMessage()
			clone := orig.Clone()
			if diff := cmp.Diff(orig, clone); diff != "" {
				t.Fatalf("Clone() differs from the original (-orig +clone):\n%s", diff)
			}
			mu.mutate(&clone)
			if diff := cmp.Diff(fullMessage(), orig); diff != "" {
				t.Errorf("changing the clone changed the original (-want +got):\n%s", diff)
			}
		})
		t.Run(mu.name+"/in original", func(t *testing.T) {
			orig := fullMessage()
			clone := orig.Clone()
			mu.mutate(&orig)
			if diff := cmp.Diff(fullMessage(), clone); diff != "" {
				t.Errorf("changing the original changed the clone (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("nil stays nil", func(t *testing.T) {
		m := message.New(message.RoleUser, message.Data{URI: "https://example.com/a.png"}).Clone()
		if m.Metadata != nil {
			t.Errorf("Clone().Metadata = %#v, want nil", m.Metadata)
		}
		if d := m.Contents[0].(message.Data).Data; d != nil {
			t.Errorf("Clone() Data.Data = %#v, want nil", d)
		}
		if c := (message.Message{}).Clone().Contents; c != nil {
			t.Errorf("Clone().Contents = %#v, want nil", c)
		}
	})
	t.Run("empty stays empty", func(t *testing.T) {
		m := message.Message{Contents: []message.Content{}, Metadata: map[string]any{}}.Clone()
		if m.Contents == nil || m.Metadata == nil {
			t.Errorf("Clone() = %#v, want empty, non-nil Contents and Metadata", m)
		}
	})
}

func TestSize(t *testing.T) {
	empty := message.Message{}.Size()
	if empty <= 0 {
		t.Fatalf("Message{}.Size() = %d, want > 0", empty)
	}

	// Every variant adds to the size, even one with no data.
	variants := []message.Content{
		message.Text{}, message.FunctionCall{}, message.FunctionResult{}, message.Data{},
		message.Reasoning{}, message.Usage{}, message.Error{}, message.Unknown{},
	}
	m := message.Message{}
	prev := empty
	for _, c := range variants {
		m.Contents = append(m.Contents, c)
		if got := m.Size(); got <= prev {
			t.Errorf("adding %T: Size() = %d, want more than %d", c, got, prev)
		} else {
			prev = got
		}
	}

	// Every string and byte field counts in full: a longer value grows the
	// size by at least the added length.
	const long = 1000
	fields := []struct {
		name    string
		message func(s string) message.Message
	}{
		{"id", func(s string) message.Message { return message.Message{ID: "m" + s} }},
		{"role", func(s string) message.Message { return message.Message{Role: message.Role(s)} }},
		{"author_name", func(s string) message.Message { return message.Message{AuthorName: s} }},
		{"text", func(s string) message.Message { return message.User(s) }},
		{"function_call.call_id", func(s string) message.Message { return message.ToolCall(s, "f", "") }},
		{"function_call.name", func(s string) message.Message { return message.ToolCall("c", s, "") }},
		{"function_call.arguments", func(s string) message.Message { return message.ToolCall("c", "f", s) }},
		{"function_result.call_id", func(s string) message.Message { return message.ToolResult(s, "") }},
		{"function_result.result", func(s string) message.Message { return message.ToolResult("c", s) }},
		{"data.media_type", func(s string) message.Message { return message.New("", message.Data{MediaType: s}) }},
		{"data.uri", func(s string) message.Message { return message.New("", message.Data{URI: s}) }},
		{"data.name", func(s string) message.Message { return message.New("", message.Data{Name: s}) }},
		{"data.data", func(s string) message.Message { return message.New("", message.Data{Data: []byte(s)}) }},
		{"reasoning.text", func(s string) message.Message { return message.New("", message.Reasoning{Text: s}) }},
		{"reasoning.protected", func(s string) message.Message { return message.New("", message.Reasoning{Protected: s}) }},
		{"error.code", func(s string) message.Message { return message.New("", message.Error{Code: s}) }},
		{"error.message", func(s string) message.Message { return message.New("", message.Error{Message: s}) }},
		{"unknown", func(s string) message.Message {
			return message.New("", message.Unknown{Raw: []byte(`{"type":"x","v":"` + s + `"}`)})
		}},
		{"metadata key", func(s string) message.Message { return message.Message{Metadata: map[string]any{"k" + s: true}} }},
		{"metadata string", func(s string) message.Message { return message.Message{Metadata: map[string]any{"k": s}} }},
		{"metadata number", func(s string) message.Message {
			return message.Message{Metadata: map[string]any{"k": json.Number("1" + strings.Repeat("0", len(s)))}}
		}},
		{"metadata nested", func(s string) message.Message {
			return message.Message{Metadata: map[string]any{"k": []any{map[string]any{"k" + s: s}}}}
		}},
	}
	for _, f := range fields {
		t.Run(f.name, func(t *testing.T) {
			small, big := f.message("").Size(), f.message(strings.Repeat("a", long)).Size()
			if big-small < long {
				t.Errorf("Size() grew from %d to %d for %d more bytes, want at least %d more", small, big, long, long)
			}
		})
	}

	t.Run("grows with contents", func(t *testing.T) {
		m := message.Message{Role: message.RoleUser}
		prev := m.Size()
		for i := range 10 {
			m.Contents = append(m.Contents, message.Text{Text: strings.Repeat("x", i)})
			if got := m.Size(); got <= prev {
				t.Fatalf("after %d contents Size() = %d, want more than %d", i+1, got, prev)
			} else {
				prev = got
			}
		}
	})

	t.Run("close to the encoding", func(t *testing.T) {
		m := fullMessage()
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Size(); got < len(b)/2 || got > len(b)*2 {
			t.Errorf("Size() = %d, far from the %d bytes of JSON", got, len(b))
		}
	})
}
