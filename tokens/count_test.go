package tokens

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/loomthreads/loom/message"
)

func TestCount(t *testing.T) {
	enc := O200kBase
	n := enc.Count
	user := n("user")
	tests := []struct {
		name string
		m    message.Message
		want int
	}{
		{"text", message.User("hello world"), 3 + user + 2},
		{"empty", message.New(message.RoleUser), 3 + user},
		{"name", message.Message{Role: message.RoleUser, AuthorName: "alice", Contents: []message.Content{message.Text{Text: "hi"}}},
			3 + user + 1 + n("alice") + n("hi")},
		{"call", message.ToolCall("call_1", "weather", `{"city":"Paris"}`),
			3 + n("assistant") + n("weather") + n(`{"city":"Paris"}`)},
		{"result", message.ToolResult("call_1", `{"temp_c":21}`), 3 + n("tool") + n(`{"temp_c":21}`)},
		{"reasoning", message.New(message.RoleAssistant, message.Reasoning{Text: "think", Protected: "c2lnbmF0dXJl"}),
			3 + n("assistant") + n("think")},
		{"image", message.New(message.RoleUser, message.Data{MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}}),
			3 + user + DefaultDataTokens},
		{"image uri", message.New(message.RoleUser, message.Data{MediaType: "image/jpeg", URI: "https://example.com/a.jpg"}),
			3 + user + DefaultDataTokens},
		{"text file", message.New(message.RoleUser, message.Data{MediaType: "text/plain; charset=utf-8", Data: []byte("hello world")}),
			3 + user + 2},
		{"json file", message.New(message.RoleUser, message.Data{MediaType: "application/json", Data: []byte(`{"a":1}`)}),
			3 + user + n(`{"a":1}`)},
		{"binary text", message.New(message.RoleUser, message.Data{MediaType: "text/plain", Data: []byte{0xff}}),
			3 + user + DefaultDataTokens},
		{"error", message.New(message.RoleAssistant, message.Error{Code: "rate_limited", Message: "slow down"}),
			3 + n("assistant") + n("rate_limited") + n("slow down")},
		{"unknown", message.New(message.RoleAssistant, message.Unknown{Raw: []byte(`{"type":"audio","id":"a1"}`)}),
			3 + n("assistant") + n(`{"type":"audio","id":"a1"}`)},
		{"usage", message.New(message.RoleAssistant, message.Usage{InputTokens: 10}), 3 + n("assistant")},
	}
	c := NewCounter(nil)
	for _, tt := range tests {
		if got := c.Count(tt.m, enc); got != tt.want {
			t.Errorf("%s: Count = %d, want %d", tt.name, got, tt.want)
		}
	}
	if got, want := c.CountRequest([]message.Message{tests[0].m, tests[2].m}, enc), 3+tests[0].want+tests[2].want; got != want {
		t.Errorf("CountRequest = %d, want %d", got, want)
	}
	if c.len() != 0 {
		t.Errorf("messages without ids were cached: %d", c.len())
	}
	c = NewCounter(&CounterOptions{DataTokens: 85})
	if got := c.Count(tests[6].m, enc); got != 3+user+85 {
		t.Errorf("DataTokens 85: Count = %d", got)
	}
}

// TestCountContentsCovered checks that Count has a case for every content
// type the message package reads, by counting one of each read from JSON.
func TestCountContentsCovered(t *testing.T) {
	data := `{"role":"user","contents":[` +
		`{"type":"text","text":"a"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},` +
		`{"type":"function_result","call_id":"c","result":"r"},{"type":"data","uri":"https://x/y.png"},` +
		`{"type":"reasoning","text":"t"},{"type":"usage","input_tokens":1},{"type":"error","message":"e"},` +
		`{"type":"new_thing","x":1}]}`
	var m message.Message
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		t.Fatal(err)
	}
	for _, ct := range m.Contents {
		if c := NewCounter(nil).Count(message.New(m.Role, ct), O200kBase); c <= 3+1 && ct.Type() != "usage" {
			t.Errorf("%T counts nothing", ct)
		}
	}
}

func TestCountCache(t *testing.T) {
	c := NewCounter(&CounterOptions{CacheSize: 100})
	m := message.User("hello world")
	m.ID = "msg_1"
	want := c.Count(m, O200kBase)
	if got := c.Count(m, O200kBase); got != want || c.len() != 1 {
		t.Errorf("second count = %d with %d cached, want %d from one entry", got, c.len(), want)
	}
	// A different message under the same id is counted, not remembered:
	// the cache checks the message's size as a fingerprint.
	other := message.User("a much longer message than the first one")
	other.ID = "msg_1"
	if got, want := c.Count(other, O200kBase), NewCounter(nil).count(other, O200kBase); got != want {
		t.Errorf("count of another message with the id = %d, want %d", got, want)
	}
	// The encoding is part of the key.
	if got, want := c.Count(other, Cl100kBase), NewCounter(nil).count(other, Cl100kBase); got != want {
		t.Errorf("cl100k count = %d, want %d", got, want)
	}
	// The cache is bounded.
	for i := range 1000 {
		m := message.User(fmt.Sprint("message ", i))
		m.ID = fmt.Sprint("msg_", i)
		c.Count(m, O200kBase)
	}
	if n := c.len(); n > 100 {
		t.Errorf("cache holds %d counts, more than 100", n)
	}
	// A recently used count survives insertions; one never used again does
	// not.
	c = NewCounter(&CounterOptions{CacheSize: 64})
	hot := message.User("hot")
	hot.ID = "hot"
	c.Count(hot, O200kBase)
	for i := range 1000 {
		c.Count(hot, O200kBase)
		m := message.User("cold")
		m.ID = fmt.Sprint("cold_", i)
		c.Count(m, O200kBase)
	}
	if _, ok := c.shards[0].get(cacheKey{"hot", o200k}, hot.Size()); !ok {
		t.Error("the hot count was evicted")
	}
	cold0 := message.User("cold")
	cold0.ID = "cold_0"
	if _, ok := c.shards[0].get(cacheKey{"cold_0", o200k}, cold0.Size()); ok {
		t.Error("the first cold count was not evicted")
	}
	// No cache.
	c = NewCounter(&CounterOptions{CacheSize: -1})
	c.Count(m, O200kBase)
	if c.len() != 0 {
		t.Error("CacheSize -1 caches")
	}
}

func TestCountConcurrent(t *testing.T) {
	c := NewCounter(&CounterOptions{CacheSize: 256})
	msgs := make([]message.Message, 500)
	want := make([]int, len(msgs))
	for i := range msgs {
		msgs[i] = message.User(fmt.Sprintf("message number %d, %s", i, english[:i]))
		msgs[i].ID = fmt.Sprint("msg_", i)
		want[i] = c.count(msgs[i], Cl100kBase)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for k := range 2000 {
				i := (k*7 + g*13) % len(msgs)
				if got := c.Count(msgs[i], Cl100kBase); got != want[i] {
					t.Errorf("message %d: %d, want %d", i, got, want[i])
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestCacheTellsMessagesWithOneIDApart(t *testing.T) {
	c := NewCounter(nil)
	a := message.User("hi")
	a.ID = "1"
	b := message.User("a much longer message from another thread that happens to reuse the id")
	b.ID = "1"
	want := NewCounter(&CounterOptions{CacheSize: -1}).Count(b, O200kBase)
	c.Count(a, O200kBase)
	if got := c.Count(b, O200kBase); got != want {
		t.Fatalf("a message sharing another's id counts %d, want %d", got, want)
	}
}
