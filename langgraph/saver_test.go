package langgraph_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	_ "github.com/loomthreads/loom/jsonfile"
	"github.com/loomthreads/loom/langgraph"
	_ "github.com/loomthreads/loom/postgres"
	_ "github.com/loomthreads/loom/redis"
	_ "github.com/loomthreads/loom/sqlite"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/thread"
)

func TestMain(m *testing.M) { testserver.Main(m) }

// stores runs f on a Saver over each of loom's stores.
func stores(t *testing.T, f func(t *testing.T, s *langgraph.Saver, db *thread.DB)) {
	urls := map[string]func(t *testing.T) string{
		"memory":   func(*testing.T) string { return "memory://" },
		"sqlite":   func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "loom.db") },
		"jsonfile": func(t *testing.T) string { return "file://" + t.TempDir() },
		"postgres": func(t *testing.T) string { return testserver.Postgres(t) },
		"redis":    func(t *testing.T) string { return testserver.Redis(t) },
	}
	for _, name := range []string{"memory", "sqlite", "jsonfile", "postgres", "redis"} {
		t.Run(name, func(t *testing.T) {
			db, err := thread.Open(context.Background(), urls[name](t), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			f(t, langgraph.New(db), db)
		})
	}
}

func raw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func human(id, text string) json.RawMessage {
	return raw(map[string]any{"type": "human", "data": map[string]any{"content": text, "additional_kwargs": map[string]any{}, "response_metadata": map[string]any{}, "type": "human", "name": nil, "id": id}})
}

func aiCall(id, callID string) json.RawMessage {
	return raw(map[string]any{"type": "ai", "data": map[string]any{"content": "", "type": "ai", "id": id,
		"tool_calls":        []any{map[string]any{"name": "search", "args": map[string]any{"q": "loom", "n": 3}, "id": callID, "type": "tool_call"}},
		"usage_metadata":    map[string]any{"input_tokens": 10, "output_tokens": 2, "total_tokens": 12},
		"additional_kwargs": map[string]any{}, "response_metadata": map[string]any{"model": "fake"}, "invalid_tool_calls": []any{}}})
}

func toolMsg(id, callID, text string) json.RawMessage {
	return raw(map[string]any{"type": "tool", "data": map[string]any{"content": text, "type": "tool", "id": id, "tool_call_id": callID, "name": "search", "status": "success", "artifact": nil, "additional_kwargs": map[string]any{}, "response_metadata": map[string]any{}}})
}

// put stores checkpoint id after parent with the messages channel at
// version v and the blob channel "step".
func put(t *testing.T, s *langgraph.Saver, tid, ns, parent, id string, v int, msgs []json.RawMessage, meta map[string]any) langgraph.Config {
	t.Helper()
	ctx := context.Background()
	req := langgraph.PutRequest{
		Config:        langgraph.Config{ThreadID: tid, CheckpointNS: ns, CheckpointID: parent},
		Checkpoint:    map[string]json.RawMessage{"v": raw(1), "id": raw(id), "ts": raw("2026-11-27T00:00:00Z"), "channel_versions": raw(map[string]int{"messages": v, "step": v}), "versions_seen": raw(map[string]any{"agent": map[string]int{"messages": v}})},
		Metadata:      map[string]json.RawMessage{},
		NewVersions:   map[string]json.RawMessage{"messages": raw(v), "step": raw(v)},
		ChannelValues: map[string]langgraph.Value{"messages": {Messages: msgs}, "step": {Blob: &langgraph.Blob{Type: "json", Data: []byte(fmt.Sprint(v))}}},
	}
	for k, x := range meta {
		req.Metadata[k] = raw(x)
	}
	res, err := s.Put(ctx, req)
	if err != nil {
		t.Fatalf("put %s: %v", id, err)
	}
	return res.Config
}

func messagesOf(t *testing.T, tu *langgraph.Tuple) []json.RawMessage {
	t.Helper()
	var values map[string]langgraph.Value
	if err := json.Unmarshal(tu.Checkpoint["channel_values"], &values); err != nil {
		t.Fatal(err)
	}
	return values["messages"].Messages
}

func sameJSON(t *testing.T, got, want []json.RawMessage) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d messages, want %d", len(got), len(want))
	}
	for i := range got {
		var a, b any
		json.Unmarshal(got[i], &a)
		json.Unmarshal(want[i], &b)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("message %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

func TestCheckpointsKeepMessagesOnce(t *testing.T) {
	stores(t, func(t *testing.T, s *langgraph.Saver, db *thread.DB) {
		ctx := context.Background()
		m := []json.RawMessage{human("m1", "hi"), aiCall("m2", "call_1"), toolMsg("m3", "call_1", "found it"), human("m4", "thanks")}
		c1 := put(t, s, "t-1", "", "", "cp-1", 1, m[:1], map[string]any{"source": "input", "step": -1})
		c2 := put(t, s, "t-1", "", c1.CheckpointID, "cp-2", 2, m[:3], map[string]any{"source": "loop", "step": 0})
		c3 := put(t, s, "t-1", "", c2.CheckpointID, "cp-3", 3, m[:4], map[string]any{"source": "loop", "step": 1})

		latest, err := s.Get(ctx, langgraph.Config{ThreadID: "t-1"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if latest.Config.CheckpointID != "cp-3" || latest.ParentConfig == nil || latest.ParentConfig.CheckpointID != "cp-2" {
			t.Fatalf("latest %+v parent %+v", latest.Config, latest.ParentConfig)
		}
		sameJSON(t, messagesOf(t, latest), m)
		old, err := s.Get(ctx, c2, nil)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, messagesOf(t, old), m[:3])

		// Each message is stored once: the thread's commits hold four.
		th, err := db.Thread(ctx, langgraph.ThreadKey("t-1", ""))
		if err != nil {
			t.Fatal(err)
		}
		stored := 0
		for c, err := range db.Store().Ancestors(ctx, th.Record().Head, -1) {
			if err != nil {
				t.Fatal(err)
			}
			stored += len(c.Messages)
		}
		if stored != 4 {
			t.Fatalf("the thread holds %d messages, want 4", stored)
		}

		// A branch from cp-2 (updateState on an old checkpoint) that drops
		// the tool result: a new line from cp-1's prefix, cp-3 untouched.
		edited := []json.RawMessage{m[0], m[1], toolMsg("m3", "call_1", "corrected"), human("m5", "again")}
		put(t, s, "t-1", "", c2.CheckpointID, "cp-4", 4, edited, nil)
		b, err := s.Get(ctx, langgraph.Config{ThreadID: "t-1"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, messagesOf(t, b), edited)
		again, err := s.Get(ctx, c3, nil)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, messagesOf(t, again), m)

		list, err := s.List(ctx, langgraph.ListRequest{ThreadID: "t-1"})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tu := range list {
			got = append(got, tu.Config.CheckpointID)
		}
		if strings.Join(got, ",") != "cp-4,cp-3,cp-2,cp-1" {
			t.Fatalf("list %v", got)
		}
		f, err := s.List(ctx, langgraph.ListRequest{ThreadID: "t-1", Filter: map[string]json.RawMessage{"source": raw("loop"), "step": raw(1)}})
		if err != nil || len(f) != 1 || f[0].Config.CheckpointID != "cp-3" {
			t.Fatalf("filtered list %v %v", f, err)
		}
		page, err := s.List(ctx, langgraph.ListRequest{ThreadID: "t-1", Before: "cp-3", Limit: 1})
		if err != nil || len(page) != 1 || page[0].Config.CheckpointID != "cp-2" {
			t.Fatalf("page %v %v", page, err)
		}
	})
}

func TestPendingWrites(t *testing.T) {
	stores(t, func(t *testing.T, s *langgraph.Saver, db *thread.DB) {
		ctx := context.Background()
		c1 := put(t, s, "t-w", "", "", "cp-1", 1, []json.RawMessage{human("m1", "hi")}, nil)
		blob := func(s string) langgraph.Value {
			return langgraph.Value{Blob: &langgraph.Blob{Type: "json", Data: []byte(s)}}
		}
		write := func(task string, ws ...langgraph.Write) {
			t.Helper()
			if err := s.PutWrites(ctx, langgraph.WritesRequest{Config: c1, TaskID: task, Writes: ws}); err != nil {
				t.Fatal(err)
			}
		}
		write("task-b", langgraph.Write{Idx: 0, Channel: "messages", Value: langgraph.Value{Messages: []json.RawMessage{aiCall("m2", "c1")}}})
		write("task-a", langgraph.Write{Idx: 0, Channel: "x", Value: blob("1")}, langgraph.Write{Idx: 1, Channel: "y", Value: blob("2")})
		write("task-a", langgraph.Write{Idx: 0, Channel: "x", Value: blob("changed")}) // kept as it was
		write("task-a", langgraph.Write{Idx: -1, Channel: "__error__", Value: blob("first")})
		write("task-a", langgraph.Write{Idx: -1, Channel: "__error__", Value: blob("second")}) // replaces
		tu, err := s.Get(ctx, langgraph.Config{ThreadID: "t-w"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, w := range tu.PendingWrites {
			v := ""
			if w.Value.Blob != nil {
				v = string(w.Value.Blob.Data)
			} else {
				v = fmt.Sprint(len(w.Value.Messages))
			}
			got = append(got, fmt.Sprintf("%s/%d/%s=%s", w.TaskID, w.Idx, w.Channel, v))
		}
		want := "task-a/-1/__error__=second task-a/0/x=1 task-a/1/y=2 task-b/0/messages=1"
		if strings.Join(got, " ") != want {
			t.Fatalf("writes\n got %s\nwant %s", strings.Join(got, " "), want)
		}
		// The next checkpoint starts with none; the old one keeps its own.
		c2 := put(t, s, "t-w", "", c1.CheckpointID, "cp-2", 2, []json.RawMessage{human("m1", "hi"), aiCall("m2", "c1")}, nil)
		tu2, err := s.Get(ctx, c2, nil)
		if err != nil || len(tu2.PendingWrites) != 0 {
			t.Fatalf("new checkpoint writes %v %v", tu2, err)
		}
		tu1, err := s.Get(ctx, c1, nil)
		if err != nil || len(tu1.PendingWrites) != 4 {
			t.Fatalf("old checkpoint writes %v %v", tu1, err)
		}
		// A write to the older checkpoint leaves cp-2 the latest.
		write("task-c", langgraph.Write{Idx: 0, Channel: "z", Value: blob("3")})
		if l, err := s.Get(ctx, langgraph.Config{ThreadID: "t-w"}, nil); err != nil || l.Config.CheckpointID != "cp-2" {
			t.Fatalf("latest after a write to cp-1: %v %v", l, err)
		}
		if tu1, err = s.Get(ctx, c1, nil); err != nil || len(tu1.PendingWrites) != 5 {
			t.Fatalf("old checkpoint writes %v %v", tu1, err)
		}
		c3 := put(t, s, "t-w", "", "cp-2", "cp-3", 3, []json.RawMessage{human("m1", "hi"), aiCall("m2", "c1"), human("m3", "next")}, nil)
		if l, err := s.Get(ctx, langgraph.Config{ThreadID: "t-w"}, nil); err != nil || l.Config != c3 || len(messagesOf(t, l)) != 3 {
			t.Fatalf("latest %v %v", l, err)
		}
	})
}

func TestThreadsCopyPruneDelete(t *testing.T) {
	stores(t, func(t *testing.T, s *langgraph.Saver, db *thread.DB) {
		ctx := context.Background()
		for _, ns := range []string{"", "child:1"} {
			p := ""
			for i := 1; i <= 3; i++ {
				p = put(t, s, "src", ns, p, fmt.Sprintf("cp-%d", i), i, []json.RawMessage{human(fmt.Sprintf("m%d", i), "x")}[:1], map[string]any{"run_id": fmt.Sprintf("run-%d", i)}).CheckpointID
			}
		}
		if err := s.CopyThread(ctx, "src", "dst"); err != nil {
			t.Fatal(err)
		}
		ids := func(tid string, ns *string) string {
			t.Helper()
			l, err := s.List(ctx, langgraph.ListRequest{ThreadID: tid, CheckpointNS: ns})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, tu := range l {
				out = append(out, tu.Config.CheckpointNS+"/"+tu.Config.CheckpointID)
			}
			return strings.Join(out, " ")
		}
		if got, want := ids("dst", nil), ids("src", nil); got != want || got == "" {
			t.Fatalf("copy lists %q, source %q", got, want)
		}
		if err := s.CopyThread(ctx, "src", "dst"); !errors.Is(err, thread.ErrConflict) {
			t.Fatalf("copy onto a thread with checkpoints: %v", err)
		}
		if err := s.DeleteForRuns(ctx, []string{"run-3"}); err != nil {
			t.Fatal(err)
		}
		root := ""
		if got := ids("src", &root); got != "/cp-2 /cp-1" {
			t.Fatalf("after deleting run-3: %q", got)
		}
		if l, err := s.Get(ctx, langgraph.Config{ThreadID: "src"}, nil); err != nil || l.Config.CheckpointID != "cp-2" {
			t.Fatalf("latest after deleting run-3: %v %v", l, err)
		}
		if err := s.Prune(ctx, []string{"dst"}, langgraph.KeepLatest); err != nil {
			t.Fatal(err)
		}
		// run-3 was the copy's too: cp-2 is its latest now.
		if got := ids("dst", nil); got != "/cp-2 child:1/cp-2" && got != "child:1/cp-2 /cp-2" {
			t.Fatalf("after prune: %q", got)
		}
		if err := s.DeleteThread(ctx, "src"); err != nil {
			t.Fatal(err)
		}
		if got := ids("src", nil); got != "" {
			t.Fatalf("after delete: %q", got)
		}
		if _, err := s.Get(ctx, langgraph.Config{ThreadID: "src", CheckpointNS: "child:1"}, nil); !errors.Is(err, thread.ErrNotFound) {
			t.Fatalf("get after delete: %v", err)
		}
		if got := ids("dst", nil); got != "/cp-2 child:1/cp-2" && got != "child:1/cp-2 /cp-2" {
			t.Fatalf("the copy after the source's delete: %q", got)
		}
		if tu, err := s.Get(ctx, langgraph.Config{ThreadID: "dst"}, nil); err != nil || len(messagesOf(t, tu)) != 1 {
			t.Fatalf("the copy's latest after the source's delete: %v %v", tu, err)
		}
	})
}

// resolve gives each tuple of an answer its whole messages list, as a
// client rebuilds it from Shares and Extends (known: the list the request
// said it knows).
func resolve(t *testing.T, tuples []langgraph.Tuple, known []json.RawMessage) [][]json.RawMessage {
	t.Helper()
	out := make([][]json.RawMessage, len(tuples))
	for i := range tuples {
		var values map[string]langgraph.Value
		if err := json.Unmarshal(tuples[i].Checkpoint["channel_values"], &values); err != nil {
			t.Fatal(err)
		}
		v := values["messages"]
		var list []json.RawMessage
		switch {
		case v.Shares != nil:
			list = append(list, out[v.Shares.Tuple][:v.Shares.N]...)
		case v.Extends != nil:
			list = append(list, known[:v.Extends.N]...)
		}
		out[i] = append(list, v.Messages...)
		if v.Sum == nil || v.Sum.N != len(out[i]) {
			t.Fatalf("tuple %d: sum %+v for %d messages", i, v.Sum, len(out[i]))
		}
	}
	return out
}

// A turn sends and receives what it adds: a put extends its parent's
// list, a get answers only what the client does not know, and a listing
// sends each line once.
func TestMessagesSentOnce(t *testing.T) {
	stores(t, func(t *testing.T, s *langgraph.Saver, db *thread.DB) {
		ctx := context.Background()
		var all []json.RawMessage
		for i := range 6 {
			all = append(all, human(fmt.Sprintf("m%d", i), fmt.Sprintf("message %d", i)))
		}
		req := func(parent, id string, v int, val langgraph.Value) langgraph.PutRequest {
			return langgraph.PutRequest{
				Config:        langgraph.Config{ThreadID: "t-s", CheckpointID: parent},
				Checkpoint:    map[string]json.RawMessage{"id": raw(id), "channel_versions": raw(map[string]int{"messages": v})},
				NewVersions:   map[string]json.RawMessage{"messages": raw(v)},
				ChannelValues: map[string]langgraph.Value{"messages": val},
			}
		}
		r1, err := s.Put(ctx, req("", "cp-1", 1, langgraph.Value{Messages: all[:2]}))
		if err != nil || r1.Messages == nil || r1.Messages.N != 2 {
			t.Fatalf("put cp-1: %+v %v", r1, err)
		}
		r2, err := s.Put(ctx, req("cp-1", "cp-2", 2, langgraph.Value{Messages: all[2:4], Extends: r1.Messages}))
		if err != nil || r2.Messages.N != 4 {
			t.Fatalf("put cp-2 extending cp-1: %+v %v", r2, err)
		}
		// The same sum as sending the whole list.
		r2b, err := s.Put(ctx, req("cp-1", "cp-2b", 2, langgraph.Value{Messages: all[:4]}))
		if err != nil || *r2b.Messages != *r2.Messages {
			t.Fatalf("whole list %+v, extended %+v, %v", r2b.Messages, r2.Messages, err)
		}
		if _, err := s.Put(ctx, req("cp-2", "cp-3", 3, langgraph.Value{Messages: all[4:], Extends: r1.Messages})); !errors.Is(err, thread.ErrConflict) {
			t.Fatalf("extending a list that is not the parent's: %v", err)
		}
		r3, err := s.Put(ctx, req("cp-2", "cp-3", 3, langgraph.Value{Messages: all[4:], Extends: r2.Messages}))
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, langgraph.Config{ThreadID: "t-s", CheckpointID: "cp-3"}, r2.Messages)
		if err != nil {
			t.Fatal(err)
		}
		var values map[string]langgraph.Value
		json.Unmarshal(got.Checkpoint["channel_values"], &values)
		if v := values["messages"]; v.Extends == nil || v.Extends.N != 4 || len(v.Messages) != 2 || *v.Sum != *r3.Messages {
			t.Fatalf("get knowing cp-2's list: %+v", v)
		}
		sameJSON(t, resolve(t, []langgraph.Tuple{*got}, all[:4])[0], all)
		// A list the client says it knows but does not match: all of it.
		wrong := &langgraph.MessagesSum{N: 4, H: r1.Messages.H}
		got, err = s.Get(ctx, langgraph.Config{ThreadID: "t-s", CheckpointID: "cp-3"}, wrong)
		if err != nil {
			t.Fatal(err)
		}
		json.Unmarshal(got.Checkpoint["channel_values"], &values)
		if v := values["messages"]; v.Extends != nil || len(v.Messages) != 6 {
			t.Fatalf("get with a wrong known list: %+v", v)
		}

		list, err := s.List(ctx, langgraph.ListRequest{ThreadID: "t-s"})
		if err != nil {
			t.Fatal(err)
		}
		lists := resolve(t, list, nil)
		want := map[string][]json.RawMessage{"cp-3": all, "cp-2b": all[:4], "cp-2": all[:4], "cp-1": all[:2]}
		sent := 0
		for i, tu := range list {
			sameJSON(t, lists[i], want[tu.Config.CheckpointID])
			json.Unmarshal(tu.Checkpoint["channel_values"], &values)
			sent += len(values["messages"].Messages)
		}
		// cp-2b branched from cp-1 with two messages of its own.
		if sent != 8 {
			t.Fatalf("the listing sent %d messages for lines of 6 and 2", sent)
		}
	})
}
