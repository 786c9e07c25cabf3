package langgraph

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/loomthreads/loom/message"
)

var storedCases = []string{
	`{"type":"human","data":{"content":"hi","additional_kwargs":{},"response_metadata":{},"type":"human","name":null,"id":"m1","example":false}}`,
	`{"type":"human","data":{"content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}],"type":"human","id":"m2"}}`,
	`{"type":"ai","data":{"content":"","type":"ai","id":"run-1-0","tool_calls":[{"name":"search","args":{"q":"loom","n":3,"deep":{"x":[1,2.5,null]}},"id":"call_1","type":"tool_call"}],"invalid_tool_calls":[],"usage_metadata":{"input_tokens":10,"output_tokens":2,"total_tokens":12},"additional_kwargs":{},"response_metadata":{"model_name":"fake","finish_reason":"tool_calls"}}}`,
	`{"type":"ai","data":{"content":"calling","type":"ai","id":"run-2","tool_calls":[{"name":"f","args":{},"id":"c2","type":"tool_call","extra":1}]}}`,
	`{"type":"tool","data":{"content":"42","type":"tool","id":"t-1","tool_call_id":"call_1","name":"search","status":"success","artifact":{"rows":[1,2]},"additional_kwargs":{},"response_metadata":{}}}`,
	`{"type":"tool","data":{"content":"","type":"tool","id":"t-2","tool_call_id":"call_2"}}`,
	`{"type":"system","data":{"content":"be brief","type":"system","id":"s 1 with spaces/and:colons"}}`,
	`{"type":"chat","data":{"content":"x","role":"critic","type":"chat","id":"c-1"}}`,
	`{"type":"AIMessageChunk","data":{"content":"chunk","type":"AIMessageChunk","id":"k1"}}`,
	// LangChain.js's stored form: no type in data.
	`{"type":"ai","data":{"content":"from js","id":"js-1","tool_calls":[],"additional_kwargs":{},"response_metadata":{}}}`,
	`{"type":"chat","data":{"content":"x","role":"critic","id":"js-2"}}`,
}

// A LangChain message kept as a loom message gives back its data as it
// came, whatever it holds.
func TestStoredRoundTrip(t *testing.T) {
	for _, c := range storedCases {
		m, err := fromStored(json.RawMessage(c))
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		// Through the message's own JSON, as a store keeps it.
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var back message.Message
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		got, err := toStored(back)
		if err != nil {
			t.Fatal(err)
		}
		var a, w any
		json.Unmarshal(got, &a)
		json.Unmarshal([]byte(c), &w)
		if !reflect.DeepEqual(a, w) {
			t.Fatalf("round trip\n got %s\nwant %s", got, c)
		}
	}
}

// The parts a loom message has fields for are those fields: a person
// reading the thread in loom's page sees the text, calls and results.
func TestStoredAsLoomMessage(t *testing.T) {
	m, err := fromStored(json.RawMessage(storedCases[2]))
	if err != nil {
		t.Fatal(err)
	}
	calls := m.Calls()
	if m.Role != message.RoleAssistant || len(calls) != 1 || calls[0].Name != "search" || calls[0].CallID != "call_1" || m.ID != "run-1-0" {
		t.Fatalf("ai message as %+v", m)
	}
	m, _ = fromStored(json.RawMessage(storedCases[4]))
	if rs := m.Results(); m.Role != message.RoleTool || len(rs) != 1 || rs[0].Result != "42" {
		t.Fatalf("tool message as %+v", m)
	}
	for _, bad := range []string{`{}`, `{"type":"human","data":{"content":"x"}}`, `{"type":"human","data":{"id":""}}`, `[1]`} {
		if _, err := fromStored(json.RawMessage(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// A message that came into the thread another way reads as the
// LangChain message of its role.
func TestLoomMessageAsStored(t *testing.T) {
	m := message.Assistant("hello")
	m.ID = "a1"
	got, err := toStored(m)
	if err != nil {
		t.Fatal(err)
	}
	var s stored
	json.Unmarshal(got, &s)
	if s.Type != "ai" || string(s.Data["content"]) != `"hello"` || string(s.Data["id"]) != `"a1"` {
		t.Fatalf("%s", got)
	}
}

func FuzzFromStored(f *testing.F) {
	for _, c := range storedCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := fromStored(b)
		if err != nil {
			return
		}
		got, err := toStored(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := fromStored(got)
		if err != nil {
			t.Fatalf("its own stored form %s: %v", got, err)
		}
		again, _ := toStored(m2)
		if string(again) != string(got) {
			t.Fatalf("not stable:\n%s\n%s", got, again)
		}
	})
}
