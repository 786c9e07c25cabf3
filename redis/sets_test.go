package redis_test

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"slices"
	"testing"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/redis"
	"github.com/loomthreads/loom/thread"
)

// forksOf returns the ids Forks yields for parent, sorted.
func forksOf(t *testing.T, s *redis.Store, parent string) []string {
	t.Helper()
	var out []string
	for r, err := range s.Forks(t.Context(), parent) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.ID)
	}
	slices.Sort(out)
	return out
}

// labelled returns the ids the default tenant lists with labels.
func labelled(t *testing.T, s *redis.Store, labels map[string]string) []string {
	t.Helper()
	var out []string
	for r, err := range s.Threads(t.Context(), thread.ListOptions{Labels: labels}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.ID)
	}
	return out
}

// TestSetsFollowThreads checks the fork and label sets themselves: a
// label set holds exactly the threads with that label as they change,
// and the sets go with the last thread they list, in both modes.
func TestSetsFollowThreads(t *testing.T) {
	url := testserver.Redis(t)
	for _, cluster := range []bool{false, true} {
		prefix := fmt.Sprint("sets", cluster)
		s := open(t, url+"?prefix="+prefix, &redis.Options{Cluster: cluster})
		ctx := t.Context()
		db := thread.New(s, nil)
		root, err := db.Create(ctx, thread.CreateOptions{ID: "root", Labels: map[string]string{"k": "v"}, Messages: []message.Message{message.User("x")}})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"a", "b"} {
			if _, err := root.Fork(ctx, thread.ForkOptions{ID: id}); err != nil {
				t.Fatal(err)
			}
		}
		if got := forksOf(t, s, "root"); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("cluster %v: forks of root %v", cluster, got)
		}
		sum := sha1.Sum([]byte("\x00k\x00v"))
		key := prefix + ":b:" + hex.EncodeToString(sum[:])
		members := func() []string {
			m, err := s.Client().ZRange(ctx, key, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		want := []string{"a", "b", "root"} // forks keep their source's labels
		if cluster {
			want = nil // a cluster store keeps no label sets and scans
		}
		if got := members(); !slices.Equal(got, want) {
			t.Errorf("cluster %v: label set k=v holds %v, want %v", cluster, got, want)
		}
		if err := root.Update(ctx, thread.UpdateOptions{Labels: map[string]string{"k": "w"}}); err != nil {
			t.Fatal(err)
		}
		if want != nil {
			want = want[:2]
		}
		if got := members(); !slices.Equal(got, want) {
			t.Errorf("cluster %v: label set k=v after a relabel of root holds %v, want %v", cluster, got, want)
		}
		if got := labelled(t, s, map[string]string{"k": "w"}); !slices.Equal(got, []string{"root"}) {
			t.Errorf("cluster %v: k=w lists %v", cluster, got)
		}
		for _, id := range []string{"root", "a", "b"} {
			if err := db.Delete(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		keys, err := s.Client().Keys(ctx, prefix+":*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 1 || keys[0] != prefix+":schema" {
			t.Errorf("cluster %v: keys left after every thread went: %q", cluster, keys)
		}
	}
}

// TestMigrateSets opens data of schema 2 (the sets and the records' field
// s taken away): Open lists every thread in its sets again.
func TestMigrateSets(t *testing.T) {
	url := testserver.Redis(t)
	s := open(t, url, nil)
	ctx := t.Context()
	db := thread.New(s, nil)
	root, err := db.Create(ctx, thread.CreateOptions{ID: "root", Messages: []message.Message{message.User("x")}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 { // more than a page of the migration
		_, err := root.Fork(ctx, thread.ForkOptions{ID: fmt.Sprintf("f%03d", i), Labels: map[string]string{"n": fmt.Sprint(i % 7)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	rdb := s.Client()
	for _, pattern := range []string{"loom:f:*", "loom:b:*"} {
		keys, err := rdb.Keys(ctx, pattern).Result()
		if err != nil || len(keys) == 0 {
			t.Fatalf("keys %s: %q, %v", pattern, keys, err)
		}
		rdb.Del(ctx, keys...)
	}
	recs, _ := rdb.Keys(ctx, "loom:{*}:r:*").Result()
	for _, k := range recs {
		rdb.HDel(ctx, k, "s")
	}
	rdb.Set(ctx, "loom:schema", 2, 0)
	s2 := open(t, url, nil)
	if got := forksOf(t, s2, "root"); len(got) != 300 {
		t.Fatalf("forks of root after the migration: %d, want 300", len(got))
	}
	if got := labelled(t, s2, map[string]string{"n": "3"}); len(got) != 43 || got[0] != "f003" {
		t.Fatalf("n=3 after the migration lists %d threads from %v", len(got), got[:min(len(got), 1)])
	}
	// The field s came back: a relabel leaves the old label's set.
	th, err := thread.New(s2, nil).Thread(ctx, "f003")
	if err != nil {
		t.Fatal(err)
	}
	if err := th.Update(ctx, thread.UpdateOptions{Labels: map[string]string{"n": "x"}}); err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum([]byte("\x00n\x003"))
	if _, err := rdb.ZRank(ctx, "loom:b:"+hex.EncodeToString(sum[:]), "f003").Result(); err == nil {
		t.Fatal("f003 stays in the set of n=3 after its relabel")
	}
	if got := labelled(t, s2, map[string]string{"n": "3"}); len(got) != 42 || got[0] != "f010" {
		t.Fatalf("n=3 after the relabel lists %d threads from %v", len(got), got[:min(len(got), 1)])
	}
}

// TestDescendants walks a fork tree: every thread forked from the root or
// from its forks, and none other, after a deletion in the middle too.
func TestDescendants(t *testing.T) {
	s := open(t, testserver.Redis(t), nil)
	ctx := t.Context()
	db := thread.New(s, nil)
	made := map[string]*thread.Thread{}
	mk := func(id, from string) {
		var th *thread.Thread
		var err error
		if from == "" {
			th, err = db.Create(ctx, thread.CreateOptions{ID: id, Messages: []message.Message{message.User(id)}})
		} else {
			th, err = made[from].Fork(ctx, thread.ForkOptions{ID: id})
		}
		if err != nil {
			t.Fatal(err)
		}
		made[id] = th
	}
	mk("root", "")
	mk("a", "root")
	mk("b", "root")
	mk("c", "a")
	mk("d", "c")
	mk("other", "")
	mk("e", "other")
	desc := func(root string) []string {
		var out []string
		for r, err := range s.Descendants(ctx, root) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r.ID)
		}
		slices.Sort(out)
		return out
	}
	if got := desc("root"); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Errorf("descendants of root %v", got)
	}
	if got := desc("a"); !slices.Equal(got, []string{"c", "d"}) {
		t.Errorf("descendants of a %v", got)
	}
	if err := db.Delete(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if got := desc("root"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("descendants of root after deleting c %v", got)
	}
	if got := desc("c"); !slices.Equal(got, []string{"d"}) {
		t.Errorf("descendants of the deleted c %v", got)
	}
	if got := desc("nosuch"); len(got) != 0 {
		t.Errorf("descendants of nosuch %v", got)
	}
}
