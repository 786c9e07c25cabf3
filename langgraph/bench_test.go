package langgraph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomthreads/loom/langgraph"
	"github.com/loomthreads/loom/thread"
)

// turn plays one turn of a chat agent with a tool the way LangGraph
// checkpoints it (the input checkpoint, then one per step: start, agent,
// tools, agent; each step's writes before the next checkpoint), sending
// what the turn adds as LoomSaver does. It returns the raw bytes of the
// turn's messages.
type chat struct {
	s      *langgraph.Saver
	tid    string
	parent string
	sum    *langgraph.MessagesSum
	n      int // messages so far
	step   int
	cp     int
}

func (c *chat) put(t testing.TB, newMsgs []json.RawMessage, versions map[string]int, newV map[string]int, blobs map[string]string) {
	c.cp++
	id := fmt.Sprintf("1ef%013d", c.cp)
	vals := map[string]langgraph.Value{}
	for ch, b := range blobs {
		vals[ch] = langgraph.Value{Blob: &langgraph.Blob{Type: "msgpack", Data: []byte(b)}}
	}
	if newMsgs != nil {
		vals["messages"] = langgraph.Value{Messages: newMsgs, Extends: c.sum}
	}
	seen := map[string]map[string]int{"__input__": {}, "__start__": {"__start__": versions["__start__"]}, "agent": {"branch:to:agent": versions["branch:to:agent"]}, "tools": {"branch:to:tools": versions["branch:to:tools"]}}
	req := langgraph.PutRequest{
		Config:        langgraph.Config{ThreadID: c.tid, CheckpointID: c.parent},
		Checkpoint:    map[string]json.RawMessage{"v": raw(4), "id": raw(id), "ts": raw("2026-11-27T20:20:20.123456+00:00"), "channel_versions": raw(versions), "versions_seen": raw(seen), "updated_channels": raw([]string{"messages"})},
		Metadata:      map[string]json.RawMessage{"source": raw("loop"), "step": raw(c.step), "parents": raw(map[string]string{})},
		NewVersions:   map[string]json.RawMessage{},
		ChannelValues: vals,
	}
	for k, v := range newV {
		req.NewVersions[k] = raw(v)
	}
	res, err := c.s.Put(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	c.parent, c.sum = id, res.Messages
	c.step++
}

func (c *chat) write(t testing.TB, task string, msgs []json.RawMessage) {
	err := c.s.PutWrites(context.Background(), langgraph.WritesRequest{Config: langgraph.Config{ThreadID: c.tid, CheckpointID: c.parent}, TaskID: task,
		Writes: []langgraph.Write{{Idx: 0, Channel: "messages", Value: langgraph.Value{Messages: msgs}}}})
	if err != nil {
		t.Fatal(err)
	}
}

func (c *chat) turn(t testing.TB, i int) int {
	pad := func(n int) string { return strings.Repeat("lorem ipsum ", n/12) }
	u := human(fmt.Sprintf("u%d", i), pad(200))
	call := aiCall(fmt.Sprintf("a%d", i), fmt.Sprintf("call_%d", i))
	res := toolMsg(fmt.Sprintf("t%d", i), fmt.Sprintf("call_%d", i), pad(300))
	ans := raw(map[string]any{"type": "ai", "data": map[string]any{"content": pad(800), "type": "ai", "id": fmt.Sprintf("b%d", i), "tool_calls": []any{}, "invalid_tool_calls": []any{}, "additional_kwargs": map[string]any{}, "response_metadata": map[string]any{}}})
	v := 5 * i
	c.put(t, nil, map[string]int{"messages": v, "__start__": v + 1}, map[string]int{"__start__": v + 1}, map[string]string{"__start__": `{"messages":[` + string(u) + `]}`})
	c.write(t, "start", []json.RawMessage{u})
	c.put(t, []json.RawMessage{u}, map[string]int{"messages": v + 2, "__start__": v + 1, "branch:to:agent": v + 2}, map[string]int{"messages": v + 2, "branch:to:agent": v + 2}, map[string]string{"branch:to:agent": "\xc0"})
	c.write(t, "agent", []json.RawMessage{call})
	c.put(t, []json.RawMessage{call}, map[string]int{"messages": v + 3, "branch:to:tools": v + 3}, map[string]int{"messages": v + 3, "branch:to:tools": v + 3}, map[string]string{"branch:to:tools": "\xc0"})
	c.write(t, "tools", []json.RawMessage{res})
	c.put(t, []json.RawMessage{res}, map[string]int{"messages": v + 4, "branch:to:agent": v + 4}, map[string]int{"messages": v + 4, "branch:to:agent": v + 4}, map[string]string{"branch:to:agent": "\xc0"})
	c.write(t, "agent2", []json.RawMessage{ans})
	c.put(t, []json.RawMessage{ans}, map[string]int{"messages": v + 5}, map[string]int{"messages": v + 5}, nil)
	return len(u) + len(call) + len(res) + len(ans)
}

// BenchmarkTurn is one chat turn (five checkpoints, four writes) on a
// SQLite store at a thread of 0 or 500 turns: a turn costs what it adds.
// It reports the bytes on disk per raw message byte after the turns.
func BenchmarkTurn(b *testing.B) {
	for _, before := range []int{0, 500} {
		b.Run(fmt.Sprintf("after=%d", before), func(b *testing.B) {
			dir := b.TempDir()
			db, err := thread.Open(context.Background(), "sqlite://"+filepath.Join(dir, "loom.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			c := &chat{s: langgraph.New(db), tid: "bench"}
			rawBytes := 0
			for i := range before {
				rawBytes += c.turn(b, i)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rawBytes += c.turn(b, before+i)
			}
			b.StopTimer()
			// Bytes at rest: the store closed, its WAL folded in.
			db.Close()
			size := int64(0)
			filepath.Walk(dir, func(_ string, fi os.FileInfo, _ error) error {
				if fi != nil && !fi.IsDir() {
					size += fi.Size()
				}
				return nil
			})
			b.ReportMetric(float64(size)/float64(rawBytes), "disk/raw")
		})
	}
}
