package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testwait"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// TestGC: loom gc reports what it would drop without dropping it, then
// drops it: a thread past its own TTL, and the versions past --keep-last
// of the others, every tenant's.
func TestGC(t *testing.T) {
	ctx := context.Background()
	store := "sqlite://" + filepath.Join(t.TempDir(), "gc.db")
	db, err := thread.Open(ctx, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Create(ctx, thread.CreateOptions{ID: "gone", Labels: map[string]string{thread.LabelTTL: "1ns"}}); err != nil {
		t.Fatal(err)
	}
	long, err := db.WithTenant("acme").Create(ctx, thread.CreateOptions{ID: "long"})
	if err != nil {
		t.Fatal(err)
	}
	for range 9 {
		if _, err := long.Append(ctx, message.User("hi")); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	var dry struct {
		DryRun bool `json:"dry_run"`
		thread.GCReport
	}
	loom(t, "gc", "--store", store, "--keep-last", "3", "--dry-run", "--json").ok(t).decode(t, &dry)
	if !dry.DryRun || dry.Threads != 2 || dry.Expired != 1 || dry.Pruned != 1 || dry.Versions != 7 {
		t.Errorf("dry run: %+v; want 2 threads, 1 expired, 7 versions of 1 thread", dry)
	}
	loom(t, "threads", "show", "gone", "--store", store).ok(t)

	r := loom(t, "gc", "--store", store, "--keep-last", "3").ok(t)
	if want := "2 threads looked at; dropped 1 expired threads and 7 versions of 1 threads\n"; r.stdout != want {
		t.Errorf("gc said %q; want %q", r.stdout, want)
	}
	if r := loom(t, "threads", "show", "gone", "--store", store); r.code == 0 {
		t.Errorf("the expired thread is still there: %s", r.stdout)
	}
	db, err = thread.Open(ctx, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	long, err = db.WithTenant("acme").Thread(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	var vs []int64
	for e, err := range long.History(ctx, thread.HistoryOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, e.Version)
	}
	if len(vs) != 3 || vs[0] != 10 || vs[2] != 8 {
		t.Errorf("history after gc --keep-last 3: %v; want [10 9 8]", vs)
	}
	if msgs, err := long.Messages(ctx, thread.ReadOptions{}); err != nil || len(msgs) != 9 {
		t.Errorf("messages after gc: %d, %v; want all 9", len(msgs), err)
	}

	if r := loom(t, "gc", "--store", store, "--ttl", "-1s"); r.code != 2 {
		t.Errorf("a negative --ttl: exit %d, want 2 (usage)\n%s", r.code, r.stderr)
	}
}

// TestServeCollects: loom serve applies retention in the background: a
// thread past its own TTL goes, and a thread's history is cut to the
// server's --keep-last, while the server serves.
func TestServeCollects(t *testing.T) {
	store := "sqlite://" + filepath.Join(t.TempDir(), "serve-gc.db")
	s := startServer(t, store, "--gc-every", "20ms", "--keep-last", "2")
	status := func(path string) int {
		res, err := http.Get(s.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		io.Copy(io.Discard, res.Body)
		return res.StatusCode
	}
	if code, err := post(s.url+"/v1/threads", "", map[string]any{"id": "brief", "labels": map[string]string{thread.LabelTTL: "1ns"}}); err != nil || code != http.StatusCreated {
		t.Fatalf("create brief: %d, %v", code, err)
	}
	if code, err := post(s.url+"/v1/threads", "", map[string]any{"id": "long"}); err != nil || code != http.StatusCreated {
		t.Fatalf("create long: %d, %v", code, err)
	}
	for range 5 {
		if code, err := post(s.url+"/v1/threads/long/messages", "", map[string]any{"messages": []any{
			map[string]any{"role": "user", "contents": []any{map[string]any{"type": "text", "text": "hi"}}}}}); err != nil || code != http.StatusCreated {
			t.Fatalf("append: %d, %v", code, err)
		}
	}
	testwait.Until(t, 20*time.Second, "the expired thread goes", func() bool { return status("/v1/threads/brief") == http.StatusNotFound })
	testwait.Until(t, 20*time.Second, "the history is cut to 2 versions", func() bool {
		res, err := http.Get(s.url + "/v1/threads/long/history")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var h struct {
			Entries []struct {
				Version int64 `json:"version"`
			} `json:"entries"`
		}
		json.NewDecoder(res.Body).Decode(&h)
		return len(h.Entries) == 2 && h.Entries[0].Version == 6
	})
	if code := status("/v1/threads/long/messages"); code != http.StatusOK {
		t.Errorf("long's messages after gc: %d", code)
	}
	s.stop(t)
	if !strings.Contains(s.stderr.String(), `"msg":"gc"`) {
		t.Errorf("the server logged no gc:\n%s", s.stderr.String())
	}
}

// TestThreadsRetention: loom threads retention shows the retention and
// expiry, sets the thread's own field by field (a 0 given overrides the
// default), and --clear goes back to the default.
func TestThreadsRetention(t *testing.T) {
	store := "sqlite://" + filepath.Join(t.TempDir(), "ret.db")
	loom(t, "threads", "create", "--id", "r", "--store", store).ok(t)
	var got retentionJSON
	loom(t, "threads", "retention", "r", "--store", store, "--json").ok(t).decode(t, &got)
	if got.TTL != "0" || got.KeepLast != 0 || !got.ExpiresAt.IsZero() {
		t.Errorf("a new thread: %+v; want no retention", got)
	}
	loom(t, "threads", "retention", "r", "--ttl", "720h", "--store", store, "--json").ok(t).decode(t, &got)
	if got.TTL != "720h0m0s" || got.ExpiresAt.IsZero() || got.Version != 2 {
		t.Errorf("after --ttl 720h: %+v", got)
	}
	loom(t, "threads", "retention", "r", "--keep-last", "10", "--store", store, "--json").ok(t).decode(t, &got)
	if got.TTL != "720h0m0s" || got.KeepLast != 10 {
		t.Errorf("after --keep-last 10: %+v; want the TTL kept", got)
	}
	r := loom(t, "threads", "show", "r", "--store", store, "--json").ok(t)
	if !strings.Contains(r.stdout, `"loom.keep_last": "10"`) {
		t.Errorf("the labels do not hold the retention: %s", r.stdout)
	}
	loom(t, "threads", "retention", "r", "--clear", "--store", store, "--json").ok(t).decode(t, &got)
	if got.TTL != "0" || got.KeepLast != 0 {
		t.Errorf("after --clear: %+v", got)
	}
	if r := loom(t, "threads", "retention", "r", "--clear", "--ttl", "1h", "--store", store); r.code != 2 {
		t.Errorf("--clear with --ttl: exit %d, want 2", r.code)
	}
	if r := loom(t, "threads", "retention", "nope", "--store", store); r.code == 0 {
		t.Errorf("an unknown thread: exit 0")
	}
}
