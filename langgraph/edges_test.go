package langgraph_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/loomthreads/loom/langgraph"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// light runs f on the memory and sqlite stores only.
func light(t *testing.T, f func(t *testing.T, s *langgraph.Saver, db *thread.DB)) {
	for _, name := range []string{"memory", "sqlite"} {
		t.Run(name, func(t *testing.T) {
			url := "memory://"
			if name == "sqlite" {
				url = "sqlite://" + filepath.Join(t.TempDir(), "loom.db")
			}
			db, err := thread.Open(context.Background(), url, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			f(t, langgraph.New(db), db)
		})
	}
}

func stepOf(t *testing.T, tu *langgraph.Tuple) string {
	t.Helper()
	var values map[string]langgraph.Value
	if err := json.Unmarshal(tu.Checkpoint["channel_values"], &values); err != nil {
		t.Fatal(err)
	}
	if values["step"].Blob == nil {
		return ""
	}
	return string(values["step"].Blob.Data)
}

// A namespace whose name is not printable (LangGraph's checkpoint_ns is
// any string; checkConfig accepts any UTF-8) is labelled with its hash, so
// namespaces() compares th.ID() with ThreadKey(threadID, "sha256:…") and
// skips it: DeleteThread leaves it behind.
func TestDeleteThreadNonPrintableNS(t *testing.T) {
	light(t, func(t *testing.T, s *langgraph.Saver, db *thread.DB) {
		ctx := context.Background()
		put(t, s, "t-ns", "", "", "cp-1", 1, []json.RawMessage{human("m1", "hi")}, nil)
		ns := "tools\tsub"
		put(t, s, "t-ns", ns, "", "cp-1", 1, []json.RawMessage{human("m2", "hi")}, nil)
		if err := s.DeleteThread(ctx, "t-ns"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, langgraph.Config{ThreadID: "t-ns", CheckpointNS: ns}, nil); !errors.Is(err, thread.ErrNotFound) {
			t.Fatalf("namespace %q survives DeleteThread: get err %v", ns, err)
		}
	})
}

// A namespace longer than 200 bytes is labelled with its hash; List by
// thread answers that hash as the tuple's checkpoint_ns.
func TestListLongNamespace(t *testing.T) {
	light(t, func(t *testing.T, s *langgraph.Saver, db *thread.DB) {
		ctx := context.Background()
		ns := strings.Repeat("agent:1f0a|", 20) + "x"
		put(t, s, "t-long", ns, "", "cp-1", 1, []json.RawMessage{human("m1", "hi")}, nil)
		list, err := s.List(ctx, langgraph.ListRequest{ThreadID: "t-long"})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 {
			t.Fatalf("%d tuples", len(list))
		}
		if got := list[0].Config.CheckpointNS; got != ns {
			t.Fatalf("checkpoint_ns %q, want the namespace put", clipS(got))
		}
	})
}

func clipS(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// Copy, then delete the source: every checkpoint of the copy — on the
// line, on an abandoned branch, with writes to an old one — still reads.
func TestCopyThenDeleteSource(t *testing.T) {
	light(t, func(t *testing.T, s *langgraph.Saver, db *thread.DB) {
		ctx := context.Background()
		m := []json.RawMessage{human("m1", "a"), human("m2", "b"), human("m3", "c"), human("m4", "d")}
		c1 := put(t, s, "src", "", "", "cp-1", 1, m[:1], nil)
		c2 := put(t, s, "src", "", c1.CheckpointID, "cp-2", 2, m[:2], nil)
		put(t, s, "src", "", c2.CheckpointID, "cp-3", 3, m[:3], nil)
		// a branch from cp-2 that edits m2
		put(t, s, "src", "", c2.CheckpointID, "cp-4", 4, []json.RawMessage{m[0], human("m2", "B"), m[3]}, nil)
		if err := s.PutWrites(ctx, langgraph.WritesRequest{Config: c1, TaskID: "t1", Writes: []langgraph.Write{{Channel: "step", Value: langgraph.Value{Blob: &langgraph.Blob{Type: "json", Data: []byte("9")}}}}}); err != nil {
			t.Fatal(err)
		}
		before := map[string]string{}
		for _, id := range []string{"cp-1", "cp-2", "cp-3", "cp-4"} {
			tu, err := s.Get(ctx, langgraph.Config{ThreadID: "src", CheckpointID: id}, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(tu)
			before[id] = strings.ReplaceAll(string(b), `"src"`, `"dst"`)
		}
		if err := s.CopyThread(ctx, "src", "dst"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteThread(ctx, "src"); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"cp-1", "cp-2", "cp-3", "cp-4"} {
			tu, err := s.Get(ctx, langgraph.Config{ThreadID: "dst", CheckpointID: id}, nil)
			if err != nil {
				t.Fatalf("%s of the copy: %v", id, err)
			}
			b, _ := json.Marshal(tu)
			if string(b) != before[id] {
				t.Fatalf("%s of the copy:\n got %s\nwant %s", id, b, before[id])
			}
		}
		// and the copy goes on, from an old checkpoint too
		put(t, s, "dst", "", "cp-3", "cp-5", 5, m[:4], nil)
		put(t, s, "dst", "", "cp-1", "cp-6", 6, []json.RawMessage{m[0], human("m9", "z")}, nil)
		if err := s.Prune(ctx, []string{"dst"}, langgraph.KeepLatest); err != nil {
			t.Fatal(err)
		}
		tu, err := s.Get(ctx, langgraph.Config{ThreadID: "dst"}, nil)
		if err != nil || tu.Config.CheckpointID != "cp-6" {
			t.Fatalf("latest after prune %v %v", tu, err)
		}
		sameJSON(t, messagesOf(t, tu), []json.RawMessage{m[0], human("m9", "z")})
	})
}

// LangGraph's latest is the greatest checkpoint id. A re-put of an old
// checkpoint id (an upsert, as the savers do) moves the head to it, and
// getTuple without an id then answers the old checkpoint.
func TestRePutOldCheckpointKeepsLatest(t *testing.T) {
	light(t, func(t *testing.T, s *langgraph.Saver, db *thread.DB) {
		ctx := context.Background()
		m := []json.RawMessage{human("m1", "a"), human("m2", "b"), human("m3", "c")}
		c1 := put(t, s, "t-re", "", "", "cp-1", 1, m[:1], nil)
		c2 := put(t, s, "t-re", "", c1.CheckpointID, "cp-2", 2, m[:2], nil)
		put(t, s, "t-re", "", c2.CheckpointID, "cp-3", 3, m[:3], nil)
		put(t, s, "t-re", "", c1.CheckpointID, "cp-2", 7, m[:2], nil) // re-put cp-2 with step 7
		got, err := s.Get(ctx, langgraph.Config{ThreadID: "t-re", CheckpointID: "cp-2"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if stepOf(t, got) != "7" {
			t.Fatalf("cp-2 step %s, want the re-put's 7", stepOf(t, got))
		}
		latest, err := s.Get(ctx, langgraph.Config{ThreadID: "t-re"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if latest.Config.CheckpointID != "cp-3" {
			t.Fatalf("latest %s, want cp-3 (the greatest id, as list's first)", latest.Config.CheckpointID)
		}
	})
}

// The same put sent twice at once (a client's retry after a timeout):
// both succeed, and the checkpoint holds its messages once.
func TestConcurrentSamePut(t *testing.T) {
	light(t, func(t *testing.T, s *langgraph.Saver, db *thread.DB) {
		ctx := context.Background()
		for round := range 10 {
			tid := fmt.Sprintf("t-dup-%d", round)
			m := []json.RawMessage{human("m1", "a"), human("m2", "b"), human("m3", "c")}
			c1 := put(t, s, tid, "", "", "cp-1", 1, m[:1], nil)
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req := langgraph.PutRequest{
						Config:        c1,
						Checkpoint:    map[string]json.RawMessage{"v": raw(1), "id": raw("cp-2"), "ts": raw("x"), "channel_versions": raw(map[string]int{"messages": 2, "step": 2})},
						Metadata:      map[string]json.RawMessage{},
						NewVersions:   map[string]json.RawMessage{"messages": raw(2), "step": raw(2)},
						ChannelValues: map[string]langgraph.Value{"messages": {Messages: m}, "step": {Blob: &langgraph.Blob{Type: "json", Data: []byte("2")}}},
					}
					_, errs[i] = s.Put(ctx, req)
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("round %d put %d: %v", round, i, err)
				}
			}
			tu, err := s.Get(ctx, langgraph.Config{ThreadID: tid, CheckpointID: "cp-2"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, messagesOf(t, tu), m)
		}
	})
}

// CopyThread names each copy ThreadKey(dst, the ns label): for a
// namespace labelled with its hash the copy is not where Get looks.
func TestCopyLongNamespace(t *testing.T) {
	light(t, func(t *testing.T, s *langgraph.Saver, db *thread.DB) {
		ctx := context.Background()
		ns := strings.Repeat("agent:1f0a|", 20) + "x"
		put(t, s, "c-src", "", "", "cp-1", 1, []json.RawMessage{human("m1", "hi")}, nil)
		put(t, s, "c-src", ns, "", "cp-1", 1, []json.RawMessage{human("m2", "hi")}, nil)
		if err := s.CopyThread(ctx, "c-src", "c-dst"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, langgraph.Config{ThreadID: "c-dst", CheckpointNS: ns}, nil); err != nil {
			t.Fatalf("the copy's namespace: %v", err)
		}
	})
}

// Removal, then an extension of the shortened list with extends, writes
// to an old checkpoint, deleteForRuns of the latest and a get with a known
// prefix: every checkpoint keeps reading as it was put.
func TestRemovalWritesOldDeleteRuns(t *testing.T) {
	light(t, func(t *testing.T, s *langgraph.Saver, db *thread.DB) {
		ctx := context.Background()
		m1, m2, m3, m4 := human("m1", "a"), human("m2", "b"), human("m3", "c"), human("m4", "d")
		c1 := put(t, s, "t-rm", "", "", "cp-1", 1, []json.RawMessage{m1, m2, m3}, map[string]any{"run_id": "r1"})
		c2 := put(t, s, "t-rm", "", c1.CheckpointID, "cp-2", 2, []json.RawMessage{m1, m3}, map[string]any{"run_id": "r1"})
		g2, err := s.Get(ctx, c2, nil)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]langgraph.Value
		json.Unmarshal(g2.Checkpoint["channel_values"], &v)
		sum := v["messages"].Sum
		req := langgraph.PutRequest{
			Config:        c2,
			Checkpoint:    map[string]json.RawMessage{"v": raw(1), "id": raw("cp-3"), "ts": raw("x"), "channel_versions": raw(map[string]int{"messages": 3, "step": 2})},
			Metadata:      map[string]json.RawMessage{"run_id": raw("r2")},
			NewVersions:   map[string]json.RawMessage{"messages": raw(3)},
			ChannelValues: map[string]langgraph.Value{"messages": {Messages: []json.RawMessage{m4}, Extends: sum}},
		}
		if _, err := s.Put(ctx, req); err != nil {
			t.Fatal(err)
		}
		c3 := langgraph.Config{ThreadID: "t-rm", CheckpointID: "cp-3"}
		g3, err := s.Get(ctx, c3, nil)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, messagesOf(t, g3), []json.RawMessage{m1, m3, m4})
		if stepOf(t, g3) != "2" {
			t.Fatalf("cp-3 step %q, want cp-2's 2", stepOf(t, g3))
		}
		// get with the client's known prefix
		g3k, err := s.Get(ctx, c3, sum)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, messagesOf(t, g3k), []json.RawMessage{m4})
		// writes to cp-1 (old): latest stays cp-3
		if err := s.PutWrites(ctx, langgraph.WritesRequest{Config: c1, TaskID: "t", Writes: []langgraph.Write{{Channel: "messages", Value: langgraph.Value{Messages: []json.RawMessage{human("m9", "w")}}}}}); err != nil {
			t.Fatal(err)
		}
		latest, err := s.Get(ctx, langgraph.Config{ThreadID: "t-rm"}, nil)
		if err != nil || latest.Config.CheckpointID != "cp-3" {
			t.Fatalf("latest %v %v", latest, err)
		}
		g1, err := s.Get(ctx, c1, nil)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, messagesOf(t, g1), []json.RawMessage{m1, m2, m3})
		if len(g1.PendingWrites) != 1 {
			t.Fatalf("cp-1 writes %v", g1.PendingWrites)
		}
		// drop run r2 (cp-3, the latest): cp-2 is the latest
		if err := s.DeleteForRuns(ctx, []string{"r2"}); err != nil {
			t.Fatal(err)
		}
		latest, err = s.Get(ctx, langgraph.Config{ThreadID: "t-rm"}, nil)
		if err != nil || latest.Config.CheckpointID != "cp-2" {
			t.Fatalf("latest after deleteForRuns %v %v", latest, err)
		}
		sameJSON(t, messagesOf(t, latest), []json.RawMessage{m1, m3})
		// and a put after cp-3 (now unknown) still works
		put(t, s, "t-rm", "", "cp-3", "cp-4", 4, []json.RawMessage{m1, m3, m4, human("m5", "e")}, nil)
		g4, err := s.Get(ctx, langgraph.Config{ThreadID: "t-rm"}, nil)
		if err != nil || g4.Config.CheckpointID != "cp-4" {
			t.Fatalf("latest %v %v", g4, err)
		}
		sameJSON(t, messagesOf(t, g4), []json.RawMessage{m1, m3, m4, human("m5", "e")})
		list, err := s.List(ctx, langgraph.ListRequest{ThreadID: "t-rm"})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, tu := range list {
			ids = append(ids, tu.Config.CheckpointID)
		}
		if strings.Join(ids, ",") != "cp-4,cp-2,cp-1" {
			t.Fatalf("list %v", ids)
		}
	})
}

// Parallel tasks write to one checkpoint at once (parallel tool calls),
// then the next checkpoint takes their messages in task order.
func TestParallelWrites(t *testing.T) {
	light(t, func(t *testing.T, s *langgraph.Saver, db *thread.DB) {
		ctx := context.Background()
		for round := range 5 {
			tid := fmt.Sprintf("t-par-%d", round)
			m1 := human("m1", "a")
			c1 := put(t, s, tid, "", "", "cp-1", 1, []json.RawMessage{m1}, nil)
			var wg sync.WaitGroup
			errs := make([]error, 6)
			for i := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = s.PutWrites(ctx, langgraph.WritesRequest{Config: c1, TaskID: fmt.Sprintf("task-%d", i), TaskPath: "p",
						Writes: []langgraph.Write{{Channel: "messages", Value: langgraph.Value{Messages: []json.RawMessage{toolMsg(fmt.Sprintf("w%d", i), "c", "r")}}}}})
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("round %d writes %d: %v", round, i, err)
				}
			}
			g1, err := s.Get(ctx, c1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(g1.PendingWrites) != 6 {
				t.Fatalf("round %d: %d writes", round, len(g1.PendingWrites))
			}
			want := []json.RawMessage{m1}
			for i := range 6 {
				want = append(want, toolMsg(fmt.Sprintf("w%d", i), "c", "r"))
			}
			c2 := put(t, s, tid, "", c1.CheckpointID, "cp-2", 2, want, nil)
			g2, err := s.Get(ctx, c2, nil)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, messagesOf(t, g2), want)
			g1, err = s.Get(ctx, c1, nil)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, messagesOf(t, g1), []json.RawMessage{m1})
		}
	})
}

// A LangChain message id that is no loom id (here with ':') is left in
// metadata and the message gets a fresh loom id on append, which toStored
// then writes over data.id: the message reads back with another id, and
// the stored form the put's chain sum was made of is not what is read.
func TestMessageIDNotLoomID(t *testing.T) {
	light(t, func(t *testing.T, s *langgraph.Saver, db *thread.DB) {
		ctx := context.Background()
		m := []json.RawMessage{human("user:1", "hi")}
		c1 := put(t, s, "t-id", "", "", "cp-1", 1, m, nil)
		g, err := s.Get(ctx, c1, nil)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, messagesOf(t, g), m)
		// the next turn, as a client with the whole list sends it
		m2 := append(m, human("m2", "again"))
		c2 := put(t, s, "t-id", "", c1.CheckpointID, "cp-2", 2, m2, nil)
		g2, err := s.Get(ctx, c2, nil)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, messagesOf(t, g2), m2)
	})
}

// hookStore runs hook once, before the first Checkpoints listing after
// arm is set.
type hookStore struct {
	store.Store
	arm  bool
	hook func()
}

func (h *hookStore) Checkpoints(ctx context.Context, id string) iter.Seq2[thread.Checkpoint, error] {
	if h.arm {
		h.arm = false
		h.hook()
	}
	return h.Store.Checkpoints(ctx, id)
}

// Prune's group only drops names: it is not conditioned on the thread's
// version. A put that lands between Prune reading the latest and listing
// the names has its new checkpoint's name dropped, while the head stays on
// it: the latest checkpoint is gone from list, and writes to it fail.
func TestPruneRacesPut(t *testing.T) {
	ctx := context.Background()
	hs := &hookStore{Store: thread.NewMemoryStore()}
	db := thread.New(hs, nil)
	s := langgraph.New(db)
	m := []json.RawMessage{human("m1", "a"), human("m2", "b"), human("m3", "c")}
	c1 := put(t, s, "t-pr", "", "", "cp-1", 1, m[:1], nil)
	c2 := put(t, s, "t-pr", "", c1.CheckpointID, "cp-2", 2, m[:2], nil)
	hs.hook = func() { put(t, s, "t-pr", "", c2.CheckpointID, "cp-3", 3, m[:3], nil) }
	hs.arm = true
	if err := s.Prune(ctx, []string{"t-pr"}, langgraph.KeepLatest); err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx, langgraph.ListRequest{ThreadID: "t-pr"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tu := range list {
		ids = append(ids, tu.Config.CheckpointID)
	}
	latest, err := s.Get(ctx, langgraph.Config{ThreadID: "t-pr"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutWrites(ctx, langgraph.WritesRequest{Config: latest.Config, TaskID: "t", Writes: []langgraph.Write{{Channel: "step", Value: langgraph.Value{Blob: &langgraph.Blob{Type: "json", Data: []byte("1")}}}}}); err != nil {
		t.Errorf("writes to the latest, %s: %v", latest.Config.CheckpointID, err)
	}
	if len(ids) == 0 || ids[0] != latest.Config.CheckpointID {
		t.Fatalf("list %v, latest %s", ids, latest.Config.CheckpointID)
	}
}

// countStore runs hook before the n-th Checkpoints listing.
type countStore struct {
	store.Store
	n    int
	hook func()
}

func (h *countStore) Checkpoints(ctx context.Context, id string) iter.Seq2[thread.Checkpoint, error] {
	if h.n > 0 {
		h.n--
		if h.n == 0 {
			h.hook()
		}
	}
	return h.Store.Checkpoints(ctx, id)
}

// A re-put of cp-2 (parent cp-1) goes to replace, which refreshes the
// thread and commits the options made against the old state: writes to
// cp-1 that landed in between (a message) are under the re-put's
// commit, whose state counts the messages without them.
func TestReplaceAfterRefreshUsesStaleCommit(t *testing.T) {
	for n := 1; n <= 4; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx := context.Background()
			hs := &countStore{Store: thread.NewMemoryStore()}
			s := langgraph.New(thread.New(hs, nil))
			m := []json.RawMessage{human("m1", "a"), human("m2", "b")}
			c1 := put(t, s, "t-rp", "", "", "cp-1", 1, m[:1], nil)
			put(t, s, "t-rp", "", c1.CheckpointID, "cp-2", 2, m, nil)
			hs.hook = func() {
				if err := s.PutWrites(ctx, langgraph.WritesRequest{Config: c1, TaskID: "t", Writes: []langgraph.Write{{Channel: "messages", Value: langgraph.Value{Messages: []json.RawMessage{human("w1", "w")}}}}}); err != nil {
					t.Errorf("writes: %v", err)
				}
			}
			hs.n = n
			put(t, s, "t-rp", "", c1.CheckpointID, "cp-2", 2, m, nil) // the re-put
			g, err := s.Get(ctx, langgraph.Config{ThreadID: "t-rp", CheckpointID: "cp-2"}, nil)
			if err != nil {
				t.Fatalf("get cp-2 after the re-put: %v", err)
			}
			sameJSON(t, messagesOf(t, g), m)
		})
	}
}

// The saver follows commit ids it reads from a thread's state (a
// channel's "at", "put", a header's base). State and metadata can be
// written with loom's ordinary API, and commit ids are shared by a store's
// tenants, so a tenant that knows another's commit id could forge a state
// that names it: the saver follows only commits its own tenant made.
func TestTenantCannotReadAnotherTenantsCommit(t *testing.T) {
	ctx := context.Background()
	root, err := thread.Open(ctx, "memory://", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	a, b := root.WithTenant("alice"), root.WithTenant("bob")
	sb := langgraph.New(b)
	req := langgraph.PutRequest{
		Config:        langgraph.Config{ThreadID: "secret"},
		Checkpoint:    map[string]json.RawMessage{"v": raw(1), "id": raw("cp-1"), "ts": raw("x"), "channel_versions": raw(map[string]int{"step": 1})},
		Metadata:      map[string]json.RawMessage{},
		NewVersions:   map[string]json.RawMessage{"step": raw(1)},
		ChannelValues: map[string]langgraph.Value{"step": {Blob: &langgraph.Blob{Type: "json", Data: []byte(`"bob's secret"`)}}},
	}
	if _, err := sb.Put(ctx, req); err != nil {
		t.Fatal(err)
	}
	bt, err := b.Thread(ctx, langgraph.ThreadKey("secret", ""))
	if err != nil {
		t.Fatal(err)
	}
	bobCommit := bt.Record().Head // known to alice somehow: a log, a shared link, a copy

	// alice forges a LangGraph thread of her own with loom's API
	at, err := a.Create(ctx, thread.CreateOptions{ID: langgraph.ThreadKey("mine", ""), Kind: thread.KindLocal})
	if err != nil {
		t.Fatal(err)
	}
	st := raw(map[string]any{"id": "cp-1", "ch": map[string]any{"step": map[string]any{"v": 1, "k": "lg.b0", "at": bobCommit}}})
	if _, err := at.Commit(ctx, thread.CommitOptions{State: map[string]json.RawMessage{"lg": st},
		Metadata: map[string]string{"lg.checkpoint": "cp-1", "lg.cp": `{"v":1,"id":"cp-1","channel_versions":{"step":1}}`, "lg.md": "{}"}}); err != nil {
		t.Skipf("loom's API refuses the forged commit: %v", err)
	}
	tu, err := langgraph.New(a).Get(ctx, langgraph.Config{ThreadID: "mine"}, nil)
	if errors.Is(err, thread.ErrNotFound) {
		return // the reference is refused
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("alice sees %s", tu.Checkpoint["channel_values"])
	if strings.Contains(string(tu.Checkpoint["channel_values"]), "secret") || strings.Contains(string(tu.Checkpoint["channel_values"]), "ImJvYidzIHNlY3JldCI") {
		t.Fatalf("alice reads bob's value: %s", tu.Checkpoint["channel_values"])
	}
}
