package oaiitem_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/loomthreads/loom/internal/oaiitem"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return cmp.Equal(x, y)
}

func TestFromItems(t *testing.T) {
	for _, tc := range []struct {
		name string
		item string
		want message.Message // ID and Metadata not compared
		kept bool            // the item is kept whole in Metadata
		read string          // the item read back; "" for item itself
	}{
		{
			name: "easy message with string content",
			item: `{"id":"m1","role":"user","content":"hello"}`,
			want: message.User("hello"),
			read: `{"id":"m1","type":"message","role":"user","content":[{"type":"input_text","text":"hello"}],"status":"completed"}`,
		},
		{
			name: "assistant string content reads as output_text",
			item: `{"id":"m1","type":"message","role":"assistant","content":"hi"}`,
			want: message.Assistant("hi"),
			read: `{"id":"m1","type":"message","role":"assistant","content":[{"type":"output_text","text":"hi","annotations":[],"logprobs":[]}],"status":"completed"}`,
		},
		{
			name: "developer message with parts",
			item: `{"id":"m1","type":"message","role":"developer","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}],"status":"completed"}`,
			want: message.New("developer", message.Text{Text: "a"}, message.Text{Text: "b"}),
		},
		{
			name: "output_text without annotations gets them",
			item: `{"id":"m1","type":"message","role":"assistant","content":[{"type":"output_text","text":"x"}]}`,
			want: message.Assistant("x"),
			read: `{"id":"m1","type":"message","role":"assistant","content":[{"type":"output_text","text":"x","annotations":[],"logprobs":[]}],"status":"completed"}`,
		},
		{
			name: "output_text with annotations is kept",
			item: `{"id":"m1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"see","annotations":[{"type":"url_citation","url":"https://x.org","start_index":0,"end_index":3,"title":"X"}],"logprobs":[]}]}`,
			want: message.Assistant("see"),
			kept: true,
		},
		{
			name: "input_text in an assistant message is kept",
			item: `{"id":"m1","type":"message","role":"assistant","status":"completed","content":[{"type":"input_text","text":"x"}]}`,
			want: message.Assistant("x"),
			kept: true,
		},
		{
			name: "input_image by URL",
			item: `{"id":"m1","type":"message","role":"user","status":"completed","content":[{"type":"input_image","image_url":"https://x.org/cat.png","detail":"auto"}]}`,
			want: message.New(message.RoleUser, message.Data{URI: "https://x.org/cat.png", MediaType: "image/png"}),
		},
		{
			name: "input_image by URL without extension",
			item: `{"id":"m1","type":"message","role":"user","status":"completed","content":[{"type":"input_image","image_url":"https://x.org/cat","detail":"auto"}]}`,
			want: message.New(message.RoleUser, message.Data{URI: "https://x.org/cat", MediaType: "image/*"}),
		},
		{
			name: "input_image by data URL, detail high kept",
			item: `{"id":"m1","type":"message","role":"user","status":"completed","content":[{"type":"input_text","text":"what?"},{"type":"input_image","image_url":"data:image/jpeg;base64,/9j/4AAQ","detail":"high"}]}`,
			want: message.New(message.RoleUser, message.Text{Text: "what?"}, message.Data{URI: "data:image/jpeg;base64,/9j/4AAQ", MediaType: "image/jpeg"}),
			kept: true,
		},
		{
			name: "input_image by file id",
			item: `{"id":"m1","type":"message","role":"user","status":"completed","content":[{"type":"input_image","file_id":"file-abc","detail":"auto"}]}`,
			want: message.New(message.RoleUser, message.Data{URI: "file-abc", MediaType: "image/*"}),
		},
		{
			name: "input_file by id",
			item: `{"id":"m1","type":"message","role":"user","status":"completed","content":[{"type":"input_file","file_id":"file-1","filename":"a.pdf"}]}`,
			want: message.New(message.RoleUser, message.Data{URI: "file-1", Name: "a.pdf", MediaType: "application/pdf"}),
		},
		{
			name: "input_file by data",
			item: `{"id":"m1","type":"message","role":"user","status":"completed","content":[{"type":"input_file","file_data":"data:application/pdf;base64,JVBERi0=","filename":"a.pdf"}]}`,
			want: message.New(message.RoleUser, message.Data{URI: "data:application/pdf;base64,JVBERi0=", Name: "a.pdf", MediaType: "application/pdf"}),
		},
		{
			name: "input_file by URL",
			item: `{"id":"m1","type":"message","role":"user","status":"completed","content":[{"type":"input_file","file_url":"https://x.org/a.pdf"}]}`,
			want: message.New(message.RoleUser, message.Data{URI: "https://x.org/a.pdf", MediaType: "application/pdf"}),
		},
		{
			name: "refusal",
			item: `{"id":"m1","type":"message","role":"assistant","status":"completed","content":[{"type":"refusal","refusal":"no"}]}`,
			want: message.New(message.RoleAssistant, message.Unknown{Raw: []byte(`{"refusal":"no","type":"refusal"}`)}),
		},
		{
			name: "function_call",
			item: `{"type":"function_call","id":"fc_1","call_id":"call_1","name":"add","arguments":"{\"a\":1}"}`,
			want: message.ToolCall("call_1", "add", `{"a":1}`),
			read: `{"type":"function_call","id":"fc_1","call_id":"call_1","name":"add","arguments":"{\"a\":1}","status":"completed"}`,
		},
		{
			name: "function_call_output string",
			item: `{"type":"function_call_output","id":"fco_1","call_id":"call_1","output":"3","status":"completed"}`,
			want: message.ToolResult("call_1", "3"),
		},
		{
			name: "function_call_output array",
			item: `{"type":"function_call_output","id":"fco_1","call_id":"call_1","output":[{"type":"input_text","text":"3"},{"type":"input_image","image_url":"https://x.org/a.png"}],"status":"completed"}`,
			want: message.ToolResult("call_1", "3"),
			kept: true,
		},
		{
			name: "reasoning without summary",
			item: `{"type":"reasoning","id":"rs_1","summary":[]}`,
			want: message.New(message.RoleAssistant, message.Reasoning{}),
			read: `{"type":"reasoning","id":"rs_1","summary":[],"status":"completed"}`,
		},
		{
			name: "reasoning with one summary and encrypted content",
			item: `{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"think"}],"encrypted_content":"gAAA","status":"completed"}`,
			want: message.New(message.RoleAssistant, message.Reasoning{Text: "think", Protected: "gAAA"}),
		},
		{
			name: "reasoning with two summaries is kept",
			item: `{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"a"},{"type":"summary_text","text":"b"}],"status":"completed"}`,
			want: message.New(message.RoleAssistant, message.Reasoning{Text: "a\n\nb"}),
			kept: true,
		},
		{
			name: "reasoning with null encrypted content",
			item: `{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":null,"status":"completed"}`,
			want: message.New(message.RoleAssistant, message.Reasoning{}),
			read: `{"type":"reasoning","id":"rs_1","summary":[],"status":"completed"}`,
		},
		{
			name: "web_search_call",
			item: `{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"loom"}}`,
			want: message.New(message.RoleAssistant, message.Unknown{Raw: []byte(`{"action":{"query":"loom","type":"search"},"id":"ws_1","status":"completed","type":"web_search_call"}`)}),
		},
		{
			name: "invented output type",
			item: `{"type":"hologram_call_output","id":"h_1","call_id":"c","beams":[1,2.50,3e3]}`,
			want: message.New(message.RoleTool, message.Unknown{Raw: []byte(`{"beams":[1,2.50,3e3],"call_id":"c","id":"h_1","type":"hologram_call_output"}`)}),
		},
		{
			name: "invented type with a role",
			item: `{"type":"whisper","id":"w_1","role":"user","text":"psst <b>"}`,
			want: message.New(message.RoleUser, message.Unknown{Raw: []byte(`{"id":"w_1","role":"user","text":"psst \u003cb\u003e","type":"whisper"}`)}),
		},
		{
			name: "extra member is kept",
			item: `{"type":"function_call","id":"fc_1","call_id":"c","name":"f","arguments":"{}","status":"completed","namespace":"x"}`,
			want: message.ToolCall("c", "f", "{}"),
			kept: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := oaiitem.FromItems([]json.RawMessage{json.RawMessage(tc.item)})
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != 1 {
				t.Fatalf("got %d messages", len(msgs))
			}
			m := msgs[0]
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want.Contents, m.Contents); diff != "" || m.Role != tc.want.Role {
				t.Errorf("role %s (want %s), contents (-want +got):\n%s", m.Role, tc.want.Role, diff)
			}
			if _, kept := m.Metadata[oaiitem.MetadataKey]; kept != tc.kept {
				t.Errorf("kept = %v, want %v (metadata %v)", kept, tc.kept, m.Metadata)
			}
			// Through JSON, as a store keeps it.
			data, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			var stored message.Message
			if err := json.Unmarshal(data, &stored); err != nil {
				t.Fatal(err)
			}
			items := oaiitem.Items([]message.Message{stored})
			if len(items) != 1 {
				t.Fatalf("read %d items: %+v", len(items), items)
			}
			want := tc.read
			if want == "" {
				want = tc.item
			}
			if !jsonEqual(t, items[0].JSON, []byte(want)) {
				t.Errorf("read back\n %s\nwant\n %s", items[0].JSON, want)
			}
			if items[0].ID != m.ID || items[0].Message != m.ID {
				t.Errorf("item id %q message %q, want %q", items[0].ID, items[0].Message, m.ID)
			}
		})
	}
}

func TestFromItemsIDs(t *testing.T) {
	msgs, err := oaiitem.FromItems([]json.RawMessage{
		json.RawMessage(`{"role":"user","content":"a"}`),
		json.RawMessage(`{"type":"function_call","call_id":"c","name":"f"}`),
		json.RawMessage(`{"type":"function_call_output","call_id":"c","output":"x"}`),
		json.RawMessage(`{"type":"reasoning","summary":[]}`),
		json.RawMessage(`{"type":"web_search_call","id":""}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, prefix := range []string{"msg_", "fc_", "fco_", "rs_", "item_"} {
		if id := msgs[i].ID; !strings.HasPrefix(id, prefix) || len(id) != len(prefix)+26 {
			t.Errorf("message %d id %q, want %s + 26 characters", i, id, prefix)
		}
	}
	items := oaiitem.Items(msgs)
	for i, it := range items {
		var obj map[string]any
		json.Unmarshal(it.JSON, &obj)
		if obj["id"] != msgs[i].ID {
			t.Errorf("item %d JSON id %v, want %s", i, obj["id"], msgs[i].ID)
		}
	}
}

func TestFromItemsErrors(t *testing.T) {
	for _, tc := range []struct{ items, param string }{
		{`[1]`, "items[0]"},
		{`[{}]`, "items[0].type"},
		{`[{"type":""}]`, "items[0].type"},
		{`[{"type":"message","role":"user","content":"a"},{"type":"message","role":"wizard","content":"x"}]`, "items[1].role"},
		{`[{"type":"message","role":"user"}]`, "items[0].content"},
		{`[{"type":"message","role":"user","content":7}]`, "items[0].content"},
		{`[{"type":"message","role":"user","content":[{"type":"input_text"}]}]`, "items[0].content[0].text"},
		{`[{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image"}]}]`, "items[0].content[1].image_url"},
		{`[{"type":"message","role":"user","content":[{"type":"input_image","image_url":5}]}]`, "items[0].content[0].image_url"},
		{`[{"type":"message","role":"user","content":[{"type":"input_image","image_url":"not a url"}]}]`, "items[0].content[0].image_url"},
		{`[{"type":"message","role":"user","content":[{"type":"input_image","image_url":"ftp://x.org/a.png"}]}]`, "items[0].content[0].image_url"},
		{`[{"type":"message","role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64"}]}]`, "items[0].content[0].image_url"},
		{`[{"type":"message","role":"user","content":[{"type":"input_file","file_url":"/etc/passwd"}]}]`, "items[0].content[0].file_url"},
		{`[{"type":"message","role":"user","content":[{"type":"input_file","file_data":"%%%"}]}]`, "items[0].content[0].file_data"},
		{`[{"type":"message","role":"user","content":[{"type":"data"}]}]`, "items[0].content[0].type"},
		{`[{"type":"message","role":"user","content":["x"]}]`, "items[0].content[0]"},
		{`[{"type":"function_call","name":"f"}]`, "items[0].call_id"},
		{`[{"type":"function_call","call_id":"c"}]`, "items[0].name"},
		{`[{"type":"function_call","call_id":"c","name":"f","arguments":{}}]`, "items[0].arguments"},
		{`[{"type":"function_call_output","call_id":"c"}]`, "items[0].output"},
		{`[{"type":"function_call_output","call_id":"c","output":3}]`, "items[0].output"},
		{`[{"type":"reasoning","summary":"x"}]`, "items[0].summary"},
		{`[{"type":"reasoning","summary":[{"type":"summary_text"}]}]`, "items[0].summary[0].text"},
		{`[{"type":"reasoning","summary":[],"encrypted_content":1}]`, "items[0].encrypted_content"},
		{`[{"type":"usage"}]`, "items[0].type"},
		{`[{"type":"message","id":"no/slash","role":"user","content":"a"}]`, "items[0].id"},
		{`[{"type":"message","id":"x","role":"user","content":"a"},{"type":"message","id":"x","role":"user","content":"b"}]`, "items[1].id"},
	} {
		var items []json.RawMessage
		if err := json.Unmarshal([]byte(tc.items), &items); err != nil {
			t.Fatal(err)
		}
		_, err := oaiitem.FromItems(items)
		var e *oaiitem.Error
		if !errors.As(err, &e) || !errors.Is(err, thread.ErrInvalid) || e.Param != tc.param {
			t.Errorf("%s: error %v, want one about %s wrapping thread.ErrInvalid", tc.items, err, tc.param)
		}
	}
}

// TestRoundTrip checks FromItems → Items gives back random items (ids
// and statuses filled in), through the JSON a store keeps.
func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		var items []json.RawMessage
		for range 1 + r.IntN(6) {
			items = append(items, randomItem(r))
		}
		msgs, err := oaiitem.FromItems(items)
		if err != nil {
			t.Fatalf("%s: %v", items, err)
		}
		data, _ := json.Marshal(msgs)
		var stored []message.Message
		if err := json.Unmarshal(data, &stored); err != nil {
			t.Fatal(err)
		}
		got := oaiitem.Items(stored)
		if len(got) != len(items) {
			t.Fatalf("%d items read, %d given", len(got), len(items))
		}
		for i, it := range got {
			var given map[string]any
			json.Unmarshal(items[i], &given)
			for k, v := range given {
				if v == nil {
					delete(given, k)
				}
			}
			if given["type"] == nil {
				given["type"] = "message"
			}
			given["id"] = msgs[i].ID
			var read map[string]any
			json.Unmarshal(it.JSON, &read)
			switch given["type"] {
			case "message", "function_call", "function_call_output", "reasoning":
				if given["status"] == nil {
					given["status"] = "completed"
				}
			}
			// Normalization is allowed to fill in defaults; compare what
			// was given.
			if s, ok := given["content"].(string); ok {
				if read["content"].([]any)[0].(map[string]any)["text"] != s {
					t.Errorf("string content %q read as %s", s, it.JSON)
				}
				delete(given, "content")
				delete(read, "content")
			}
			if given["type"] == "function_call" && given["arguments"] == nil {
				given["arguments"] = ""
			}
			if given["type"] == "reasoning" && given["summary"] == nil {
				given["summary"] = []any{}
			}
			if !cmp.Equal(given, read) {
				t.Errorf("item\n %s\nread back as\n %s", items[i], it.JSON)
			}
		}
	}
}

func randomItem(r *rand.Rand) json.RawMessage {
	texts := []string{"", "hi", "<&>", "héllo\u2028", `"q"`}
	text := func() string { return texts[r.IntN(len(texts))] }
	maybe := func(s string) string {
		if r.IntN(2) == 0 {
			return ""
		}
		return s
	}
	var obj map[string]any
	switch r.IntN(6) {
	case 0:
		role := []string{"user", "assistant", "system", "developer"}[r.IntN(4)]
		obj = map[string]any{"role": role, "content": text()}
		if r.IntN(2) == 0 {
			obj["type"] = "message"
			var parts []any
			for range r.IntN(4) {
				switch r.IntN(5) {
				case 0:
					parts = append(parts, map[string]any{"type": "input_text", "text": text()})
				case 1:
					parts = append(parts, map[string]any{"type": "output_text", "text": text(), "annotations": []any{}, "logprobs": []any{}})
				case 2:
					parts = append(parts, map[string]any{"type": "input_image", "image_url": "https://x.org/" + text(), "detail": []string{"auto", "low"}[r.IntN(2)]})
				case 3:
					parts = append(parts, map[string]any{"type": "refusal", "refusal": text()})
				case 4:
					parts = append(parts, map[string]any{"type": "input_file", "file_id": "file-1", "filename": maybe("x.txt")})
				}
			}
			if parts == nil {
				parts = []any{}
			}
			obj["content"] = parts
		}
	case 1:
		obj = map[string]any{"type": "function_call", "call_id": "c" + text(), "name": "f", "arguments": text()}
	case 2:
		obj = map[string]any{"type": "function_call_output", "call_id": "c", "output": text()}
		if r.IntN(3) == 0 {
			obj["output"] = []any{map[string]any{"type": "input_text", "text": text()}}
		}
	case 3:
		var sum []any
		for range r.IntN(3) {
			sum = append(sum, map[string]any{"type": "summary_text", "text": text()})
		}
		obj = map[string]any{"type": "reasoning", "summary": sum, "encrypted_content": maybe("enc")}
	case 4:
		obj = map[string]any{"type": "computer_call", "call_id": "c", "action": map[string]any{"x": 1.5}}
	case 5:
		obj = map[string]any{"type": "message", "role": "user", "content": []any{}, "status": []string{"in_progress", "completed"}[r.IntN(2)]}
	}
	if r.IntN(2) == 0 {
		obj["id"] = "given_" + string(rune('a'+r.IntN(26))) + text2(r)
	}
	if r.IntN(4) == 0 {
		obj["extra"] = text()
	}
	for k, v := range obj {
		if v == "" && k != "text" && k != "content" && k != "arguments" && k != "output" && k != "refusal" {
			delete(obj, k)
		}
		if v == nil {
			delete(obj, k)
		}
	}
	data, _ := json.Marshal(obj)
	return data
}

func text2(r *rand.Rand) string {
	var b strings.Builder
	for range 12 {
		b.WriteByte("abcdefghijklmnopqrstuvwxyz0123456789"[r.IntN(36)])
	}
	return b.String()
}

// TestLoomMessages reads messages loom made itself, with no kept item.
func TestLoomMessages(t *testing.T) {
	msgs := []message.Message{
		{ID: "msg_u", Role: message.RoleUser, Contents: []message.Content{message.Text{Text: "add"}, message.Data{MediaType: "image/png", Data: []byte{1, 2}}}},
		{ID: "msg_a", Role: message.RoleAssistant, Contents: []message.Content{
			message.Reasoning{Text: "hm"},
			message.Text{Text: "calling"},
			message.FunctionCall{CallID: "c1", Name: "add", Arguments: `{"a":1}`},
			message.FunctionCall{CallID: "c2", Name: "sub", Arguments: `{}`},
			message.Usage{InputTokens: 3, OutputTokens: 4},
		}},
		{ID: "msg_t", Role: message.RoleTool, Contents: []message.Content{
			message.FunctionResult{CallID: "c1", Result: "1"},
			message.FunctionResult{CallID: "c2", Result: "boom", IsError: true},
		}},
		{ID: "msg_u2", Role: message.RoleAssistant, Contents: []message.Content{message.Usage{TotalTokens: 1}, message.Error{Message: "x"}}},
	}
	items := oaiitem.Items(msgs)
	want := []struct{ id, msg, json string }{
		{"msg_u", "msg_u", `{"id":"msg_u","type":"message","role":"user","status":"completed","content":[{"type":"input_text","text":"add"},{"type":"input_image","image_url":"data:image/png;base64,AQI=","detail":"auto"}]}`},
		{"msg_a", "msg_a", `{"id":"msg_a","type":"reasoning","summary":[{"type":"summary_text","text":"hm"}],"status":"completed"}`},
		{"msg_a.1", "msg_a", `{"id":"msg_a.1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"calling","annotations":[],"logprobs":[]}]}`},
		{"msg_a.2", "msg_a", `{"id":"msg_a.2","type":"function_call","call_id":"c1","name":"add","arguments":"{\"a\":1}","status":"completed"}`},
		{"msg_a.3", "msg_a", `{"id":"msg_a.3","type":"function_call","call_id":"c2","name":"sub","arguments":"{}","status":"completed"}`},
		{"msg_t", "msg_t", `{"id":"msg_t","type":"function_call_output","call_id":"c1","output":"1","status":"completed"}`},
		{"msg_t.1", "msg_t", `{"id":"msg_t.1","type":"function_call_output","call_id":"c2","output":"boom","status":"completed"}`},
	}
	if len(items) != len(want) {
		t.Fatalf("got %d items, want %d: %+v", len(items), len(want), items)
	}
	for i, w := range want {
		if items[i].ID != w.id || items[i].Message != w.msg || !jsonEqual(t, items[i].JSON, []byte(w.json)) {
			t.Errorf("item %d: %s %s %s\nwant %s %s %s", i, items[i].ID, items[i].Message, items[i].JSON, w.id, w.msg, w.json)
		}
	}
	// Three contents, three items: the ids are <id>, <id>.1, <id>.2.
	three := oaiitem.Items([]message.Message{{ID: "m", Role: message.RoleAssistant, Contents: []message.Content{
		message.Text{Text: "t"}, message.FunctionCall{CallID: "a", Name: "f"}, message.FunctionCall{CallID: "b", Name: "f"}}}})
	if len(three) != 3 || three[0].ID != "m" || three[1].ID != "m.1" || three[2].ID != "m.2" {
		t.Errorf("ids of [Text, FunctionCall, FunctionCall]: %+v", three)
	}
}

func TestParseID(t *testing.T) {
	for _, tc := range []struct {
		id, msg string
		k       int
		ok      bool
	}{
		{"m.2", "m", 2, true}, {"m", "m", 0, false}, {"m.0", "m.0", 0, false}, {"m.02", "m.02", 0, false},
		{"a.b.3", "a.b", 3, true}, {".3", ".3", 0, false}, {"m.x", "m.x", 0, false},
	} {
		msg, k, ok := oaiitem.ParseID(tc.id)
		if msg != tc.msg || k != tc.k || ok != tc.ok {
			t.Errorf("ParseID(%q) = %q %d %v", tc.id, msg, k, ok)
		}
		if ok && oaiitem.SubID(msg, k) != tc.id {
			t.Errorf("SubID(%q, %d) != %q", msg, k, tc.id)
		}
	}
}

func TestSplit(t *testing.T) {
	m := message.Message{ID: "msg_x", Role: message.RoleAssistant, Metadata: map[string]any{"k": "v"}, Contents: []message.Content{
		message.Reasoning{Text: "r"}, message.Text{Text: "a"}, message.Text{Text: "b"},
		message.FunctionCall{CallID: "c1", Name: "f"}, message.Usage{TotalTokens: 9},
	}}
	parts := oaiitem.Split(m)
	if len(parts) != 3 {
		t.Fatalf("split into %d: %+v", len(parts), parts)
	}
	for i, prefix := range []string{"rs_", "msg_", "fc_"} {
		if !strings.HasPrefix(parts[i].ID, prefix) || parts[i].Metadata["k"] != "v" || parts[i].Role != message.RoleAssistant {
			t.Errorf("part %d: %+v", i, parts[i])
		}
	}
	if diff := cmp.Diff([]message.Content{message.Text{Text: "a"}, message.Text{Text: "b"}}, parts[1].Contents); diff != "" {
		t.Error(diff)
	}
	if diff := cmp.Diff([]message.Content{message.FunctionCall{CallID: "c1", Name: "f"}, message.Usage{TotalTokens: 9}}, parts[2].Contents); diff != "" {
		t.Error(diff)
	}
	if len(m.Contents) != 5 {
		t.Error("Split changed its message")
	}
	one := oaiitem.Split(message.Assistant("x"))
	if len(one) != 1 || !strings.HasPrefix(one[0].ID, "msg_") {
		t.Errorf("one item: %+v", one)
	}
	// Split then Coalesce is the message's contents again.
	back := oaiitem.Coalesce(parts)
	if len(back) != 1 || !cmp.Equal(back[0].Contents, m.Contents) {
		t.Errorf("coalesced: %+v", back)
	}
}

func TestCoalesce(t *testing.T) {
	msgs, err := oaiitem.FromItems([]json.RawMessage{
		json.RawMessage(`{"role":"user","content":"q"}`),
		json.RawMessage(`{"role":"assistant","content":"let me see"}`),
		json.RawMessage(`{"type":"function_call","call_id":"a","name":"f","arguments":"{}"}`),
		json.RawMessage(`{"type":"function_call","call_id":"b","name":"f","arguments":"{}","extra":1}`),
		json.RawMessage(`{"type":"function_call_output","call_id":"a","output":"1"}`),
		json.RawMessage(`{"type":"function_call_output","call_id":"b","output":"2"}`),
		json.RawMessage(`{"role":"user","content":"thanks"}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	got := oaiitem.Coalesce(msgs)
	if len(got) != 4 {
		t.Fatalf("coalesced into %d messages", len(got))
	}
	if got[1].ID != msgs[1].ID || len(got[1].Calls()) != 2 || got[1].Text() != "let me see" || len(got[2].Results()) != 2 {
		t.Errorf("coalesced: %+v", got)
	}
	if len(msgs[1].Contents) != 1 {
		t.Error("Coalesce changed its input")
	}
}

func TestInput(t *testing.T) {
	msgs, err := oaiitem.Input(json.RawMessage(` "hi" `))
	if err != nil || len(msgs) != 1 || msgs[0].Text() != "hi" || msgs[0].Role != message.RoleUser || !strings.HasPrefix(msgs[0].ID, "msg_") {
		t.Fatalf("string input: %+v %v", msgs, err)
	}
	msgs, err = oaiitem.Input(json.RawMessage(`[{"role":"user","content":"a"},{"type":"function_call_output","call_id":"c","output":"x"}]`))
	if err != nil || len(msgs) != 2 {
		t.Fatalf("array input: %+v %v", msgs, err)
	}
	for _, in := range []string{``, `null`, `3`, `{}`, `[{"type":"message","role":"user"}]`} {
		_, err := oaiitem.Input(json.RawMessage(in))
		var e *oaiitem.Error
		if !errors.As(err, &e) || !strings.HasPrefix(e.Param, "input") || !errors.Is(err, thread.ErrInvalid) {
			t.Errorf("Input(%s): %v", in, err)
		}
	}
}

// TestFromItemsFresh: ids are fresh only when FromItems made them all,
// however the item spelled its id member.
func TestFromItemsFresh(t *testing.T) {
	for _, tc := range []struct {
		items string
		fresh bool
	}{
		{`[{"role":"user","content":"a"},{"type":"function_call","call_id":"c","name":"f"}]`, true},
		{`[{"role":"user","content":"a","id":null},{"role":"user","content":"b","id":""}]`, true},
		{`[{"role":"user","content":"a"},{"role":"user","content":"b","id":"mine"}]`, false},
		{`[{"role":"user","content":"a","\u0069d":"mine"}]`, false},
		{`[{"role":"user","content":"a","ID":"mine"}]`, true}, // JSON members are case-sensitive here: not an id
	} {
		var items []json.RawMessage
		if err := json.Unmarshal([]byte(tc.items), &items); err != nil {
			t.Fatal(err)
		}
		msgs, fresh, err := oaiitem.FromItemsFresh(items)
		if err != nil || fresh != tc.fresh {
			t.Errorf("%s: fresh %v, want %v (%v)", tc.items, fresh, tc.fresh, err)
		}
		if !tc.fresh && err == nil && msgs[len(msgs)-1].ID != "mine" {
			t.Errorf("%s: id %q", tc.items, msgs[len(msgs)-1].ID)
		}
	}
}

func TestCut(t *testing.T) {
	m := message.Message{ID: "m", Role: message.RoleAssistant, Metadata: map[string]any{"k": "v"}, Contents: []message.Content{
		message.Text{Text: "t"}, message.FunctionCall{CallID: "a", Name: "f"}, message.Usage{TotalTokens: 3}, message.FunctionCall{CallID: "b", Name: "g"}}}
	for _, tc := range []struct {
		k    int
		ids  []string
		ok   bool
		last []message.Content
	}{
		{0, []string{"m.1", "m.2"}, true, []message.Content{message.FunctionCall{CallID: "b", Name: "g"}, message.Usage{TotalTokens: 3}}},
		{1, []string{"m", "m.2"}, true, []message.Content{message.FunctionCall{CallID: "b", Name: "g"}, message.Usage{TotalTokens: 3}}},
		{2, []string{"m", "m.1"}, true, []message.Content{message.FunctionCall{CallID: "a", Name: "f"}, message.Usage{TotalTokens: 3}}},
		{3, nil, false, nil},
	} {
		out, ok := oaiitem.Cut(m, tc.k)
		var ids []string
		for _, o := range out {
			ids = append(ids, o.ID)
			if o.Metadata["k"] != "v" || o.Role != message.RoleAssistant {
				t.Errorf("k=%d: %+v", tc.k, o)
			}
		}
		if ok != tc.ok || !cmp.Equal(ids, tc.ids) || (ok && !cmp.Equal(out[len(out)-1].Contents, tc.last)) {
			t.Errorf("Cut(m, %d) = %v %v %+v", tc.k, ok, ids, out)
		}
		// Each message left is one item, whose id is its message's.
		for _, it := range oaiitem.Items(out) {
			if it.ID != it.Message {
				t.Errorf("k=%d: item %s of message %s", tc.k, it.ID, it.Message)
			}
		}
	}
	if len(m.Contents) != 4 {
		t.Error("Cut changed its message")
	}
	one, ok := oaiitem.Cut(message.User("x"), 0)
	if !ok || len(one) != 0 {
		t.Errorf("Cut of a one-item message: %v %v", one, ok)
	}
}
