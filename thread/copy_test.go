package thread_test

import (
	"bytes"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

func TestCopyStoreToStore(t *testing.T) {
	ctx := t.Context()
	src := thread.NewMemoryStore()
	db := thread.New(src, nil)
	rich := goldenThread(t) // in its own store: copy it in through its document
	var doc bytes.Buffer
	must(t, rich.Save(ctx, &doc, thread.SaveOptions{History: true}))
	a, err := db.Load(ctx, &doc, thread.LoadOptions{})
	must(t, err)
	b, err := a.Fork(ctx, thread.ForkOptions{ID: "b"})
	must(t, err)
	_, err = b.Append(ctx, message.User("only in b"))
	must(t, err)
	other, err := db.WithTenant("acme").Create(ctx, thread.CreateOptions{ID: "acme-1", Messages: []message.Message{message.User("acme")}})
	must(t, err)

	dst := thread.NewMemoryStore()
	var last thread.CopyProgress
	calls := 0
	must(t, thread.Copy(ctx, dst, src, thread.CopyOptions{Filter: thread.ListOptions{AllTenants: true}, Progress: func(p thread.CopyProgress) { last = p; calls++ }}))
	if calls != 3 || last.Done != 3 || last.Total != 3 || last.Copied != 3 {
		t.Fatalf("progress: %d calls, last %+v", calls, last)
	}
	// b shares a's commits: each distinct commit the threads reach is
	// written exactly once.
	distinct := map[string]bool{}
	for r, err := range src.Threads(ctx, thread.ListOptions{AllTenants: true}) {
		must(t, err)
		var roots []string
		for e, err := range src.History(ctx, r.ID, thread.HistoryOptions{}) {
			must(t, err)
			roots = append(roots, e.Commit)
		}
		for cp, err := range src.Checkpoints(ctx, r.ID) {
			must(t, err)
			roots = append(roots, cp.Commit)
		}
		for _, root := range roots {
			if root == "" {
				continue
			}
			for c, err := range src.Ancestors(ctx, root, -1) {
				must(t, err)
				distinct[c.ID] = true
			}
		}
	}
	if last.Commits != len(distinct) {
		t.Fatalf("%d commits written for %d distinct commits", last.Commits, len(distinct))
	}
	// Every thread saves to the same bytes from both stores, history and all.
	ddb := thread.New(dst, nil)
	for _, pair := range []struct {
		db *thread.DB
		th *thread.Thread
	}{{ddb, a}, {ddb, b}, {ddb.WithTenant("acme"), other}} {
		copied, err := pair.db.Thread(ctx, pair.th.ID())
		must(t, err)
		var want, got bytes.Buffer
		must(t, pair.th.Save(ctx, &want, thread.SaveOptions{History: true}))
		must(t, copied.Save(ctx, &got, thread.SaveOptions{History: true}))
		if !bytes.Equal(want.Bytes(), got.Bytes()) {
			t.Fatalf("thread %s differs after the copy:\n%s\n---\n%s", pair.th.ID(), want.String(), got.String())
		}
		if copied.Record().Head != pair.th.Record().Head {
			t.Fatalf("thread %s: head %s, want the same commit id %s", pair.th.ID(), copied.Record().Head, pair.th.Record().Head)
		}
	}
	// Running it again copies nothing and changes nothing.
	must(t, thread.Copy(ctx, dst, src, thread.CopyOptions{Filter: thread.ListOptions{AllTenants: true}, Progress: func(p thread.CopyProgress) { last = p }}))
	if last.Skipped != 3 || last.Copied != 0 {
		t.Fatalf("second copy: %+v", last)
	}
	// Deleting a in the copy keeps b whole there.
	must(t, ddb.Delete(ctx, a.ID()))
	cb, err := ddb.Thread(ctx, "b")
	must(t, err)
	msgs, err := cb.Messages(ctx, thread.ReadOptions{})
	must(t, err)
	if len(msgs) != 7 || msgs[6].Text() != "only in b" {
		t.Fatalf("b after deleting a in the copy: %d messages", len(msgs))
	}
}
