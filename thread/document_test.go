package thread_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fakeClock ticks one millisecond per reading, so documents are reproducible.
func fakeClock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Millisecond)
		return t
	}
}

// goldenThread builds the same thread every time: fixed ids, a fixed clock,
// a checkpoint, state, a rollback left behind, a reset and a restore.
func goldenThread(t *testing.T) *thread.Thread {
	t.Helper()
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), &thread.Options{Now: fakeClock()})
	th, err := db.Create(ctx, thread.CreateOptions{ID: "trip", Kind: thread.KindLocal, Title: "Trip to Lisbon", Labels: map[string]string{"team": "travel"}})
	must(t, err)
	msg := func(m message.Message, id string) message.Message { m.ID = id; return m }
	_, err = th.Append(ctx, msg(message.System("Be brief."), "m1"), msg(message.User("Find me a train."), "m2"))
	must(t, err)
	_, err = th.Checkpoint(ctx, "asked")
	must(t, err)
	_, err = th.Commit(ctx, thread.CommitOptions{
		Messages: []message.Message{msg(message.ToolCall("call_1", "trains", `{"to":"Lisbon"}`), "m3"), msg(message.ToolResult("call_1", `[{"dep":"09:10"}]`), "m4")},
		State:    map[string]json.RawMessage{"ctx/memory": json.RawMessage(`{"city":"Lisbon"}`)},
		Metadata: map[string]string{"run": "run_1"},
	})
	must(t, err)
	_, err = th.Append(ctx, msg(message.Message{Role: message.RoleAssistant, Contents: []message.Content{
		message.Text{Text: "The 09:10 train."},
		message.Unknown{Raw: []byte(`{"type":"citation","url":"https://cp.pt","spans":[4,9]}`)},
	}}, "m5"))
	must(t, err)
	_, err = th.Checkpoint(ctx, "answered")
	must(t, err)
	_, err = th.Append(ctx, msg(message.User("Too early."), "m6"))
	must(t, err)
	_, err = th.Checkpoint(ctx, "abandoned")
	must(t, err)
	must(t, th.Rollback(ctx, "answered"))
	must(t, th.Reset(ctx))
	must(t, th.Restore(ctx, th.Version()-1))
	_, err = th.Append(ctx, msg(message.User("Anything later?"), "m7"))
	must(t, err)
	return th
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestDocumentGolden(t *testing.T) {
	for _, tc := range []struct {
		file    string
		history bool
	}{{"document.json", false}, {"document-history.json", true}} {
		t.Run(tc.file, func(t *testing.T) {
			ctx := t.Context()
			var got bytes.Buffer
			must(t, goldenThread(t).Save(ctx, &got, thread.SaveOptions{History: tc.history}))
			path := filepath.Join("testdata", tc.file)
			if *update {
				must(t, os.WriteFile(path, got.Bytes(), 0o644))
			}
			want, err := os.ReadFile(path)
			must(t, err)
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("Save differs from %s (run with -update to accept):\n%s", path, got.String())
			}
			// Load the golden file into a fresh store and save it again:
			// the same bytes.
			db := thread.New(thread.NewMemoryStore(), nil)
			th, err := db.Load(ctx, bytes.NewReader(want), thread.LoadOptions{})
			must(t, err)
			var again bytes.Buffer
			must(t, th.Save(ctx, &again, thread.SaveOptions{History: tc.history}))
			if !bytes.Equal(again.Bytes(), want) {
				t.Fatalf("load → save of %s differs:\n%s", path, again.String())
			}
			msgs, err := th.Messages(ctx, thread.ReadOptions{})
			must(t, err)
			if u, ok := msgs[4].Contents[1].(message.Unknown); !ok || u.Type() != "citation" {
				t.Fatalf("unknown content after load: %#v", msgs[4].Contents[1])
			}
			// The abandoned checkpoint is off the head's line: only the
			// history document keeps it.
			n := 0
			for cp, err := range th.Checkpoints(ctx) {
				must(t, err)
				n++
				if cp.Name == "abandoned" && !tc.history {
					t.Fatalf("a document without history kept the abandoned checkpoint")
				}
			}
			if want := map[bool]int{false: 2, true: 3}[tc.history]; n != want {
				t.Fatalf("%d checkpoints after load, want %d", n, want)
			}
			must(t, th.Rollback(ctx, "asked"))
			msgs, err = th.Messages(ctx, thread.ReadOptions{})
			must(t, err)
			if len(msgs) != 2 || msgs[1].ID != "m2" {
				t.Fatalf("rollback to asked after load: %d messages", len(msgs))
			}
			st, err := th.State(ctx, 0)
			must(t, err)
			if len(st) != 0 {
				t.Fatalf("state at checkpoint asked: %v, want none", st)
			}
		})
	}
}

func FuzzLoad(f *testing.F) {
	for _, name := range []string{"document.json", "document-history.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"format":"loom.thread/v1","thread":{"id":"x","kind":"local"},"messages":[]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		ctx := context.Background()
		db := thread.New(thread.NewMemoryStore(), nil)
		th, err := db.Load(ctx, bytes.NewReader(doc), thread.LoadOptions{})
		if err != nil {
			if !errors.Is(err, thread.ErrInvalid) {
				t.Fatalf("Load failed without ErrInvalid: %v", err)
			}
			// Nothing was written.
			for r, err := range db.Store().Threads(ctx, thread.ListOptions{AllTenants: true}) {
				t.Fatalf("a refused document left thread %v (%v)", r, err)
			}
			return
		}
		for _, hist := range []bool{false, true} {
			var first, second bytes.Buffer
			must(t, th.Save(ctx, &first, thread.SaveOptions{History: hist}))
			other := thread.New(thread.NewMemoryStore(), nil)
			th2, err := other.Load(ctx, bytes.NewReader(first.Bytes()), thread.LoadOptions{})
			if err != nil {
				t.Fatalf("a saved document does not load: %v\n%s", err, first.String())
			}
			must(t, th2.Save(ctx, &second, thread.SaveOptions{History: hist}))
			if !bytes.Equal(first.Bytes(), second.Bytes()) {
				t.Fatalf("save → load → save differs:\n%s\n%s", first.String(), second.String())
			}
		}
	})
}

func TestLoadDocumentLimit(t *testing.T) {
	ctx := t.Context()
	golden, err := os.ReadFile(filepath.Join("testdata", "document.json"))
	must(t, err)
	for _, tc := range []struct {
		limit int64
		ok    bool
	}{{math.MaxInt64, true}, {int64(len(golden)), true}, {int64(len(golden)) - 1, false}} {
		db := thread.New(thread.NewMemoryStore(), &thread.Options{Limits: thread.Limits{DocumentBytes: tc.limit}})
		_, err := db.Load(ctx, bytes.NewReader(golden), thread.LoadOptions{})
		if tc.ok && err != nil || !tc.ok && !errors.Is(err, thread.ErrInvalid) {
			t.Errorf("limit %d for a document of %d bytes: %v", tc.limit, len(golden), err)
		}
	}
}
