package worklog

import (
	"testing"

	"github.com/loomthreads/loom/internal/sessionrec"
	"github.com/loomthreads/loom/thread"
)

// The threads a Log keeps in a DB, its items' and its sessions', are
// loom's own (thread.Own, with thread.LabelOwner): listings leave them out
// by default.
func TestThreadsAreLoomsOwn(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	l, err := OpenDB(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Create(ctx, CreateOptions{Text: "an item"}); err != nil {
		t.Fatal(err)
	}
	started(t, l, "s1")
	n := 0
	for th, err := range db.Threads(ctx, thread.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if r := th.Record(); !thread.Own(&r) || r.Labels[thread.LabelOwner] != Owner {
			t.Errorf("%s: labels %v, want %s=%s", r.ID, r.Labels, thread.LabelOwner, Owner)
		}
	}
	if n != 2 {
		t.Fatalf("%d threads, want the items' and the sessions'", n)
	}
	for th, err := range db.Threads(ctx, thread.ListOptions{Internal: thread.InternalExclude}) {
		t.Fatalf("InternalExclude listed %v, %v", th, err)
	}
}

// A work log's threads made before thread.LabelOwner are loom's own by
// their project labels.
func TestLegacyThreadsAreLoomsOwn(t *testing.T) {
	for _, l := range []string{LabelProject, sessionrec.LabelProject} {
		if !thread.Own(&thread.Record{Kind: thread.KindLocal, Labels: map[string]string{l: "p"}}) {
			t.Errorf("a thread with %s is not loom's own", l)
		}
	}
}
