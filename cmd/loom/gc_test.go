package main

import (
	"context"
	"path/filepath"
	"testing"

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
