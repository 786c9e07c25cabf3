package thread_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// TestDBAppend checks DB.Append against Thread.Commit: the same commit on
// the same head, the record after it, a thread's own tenant only, and the
// options a pure append does not take going the handle's way.
func TestDBAppend(t *testing.T) {
	ctx := t.Context()
	s := thread.NewMemoryStore()
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	c1, rec, err := db.Append(ctx, "a", thread.CommitOptions{Messages: []message.Message{message.User("one")}})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Version != 2 || rec.Head != c1.ID || rec.ID != "a" || rec.CreatedAt.IsZero() {
		t.Errorf("record after append = %+v, commit %s", rec, c1.ID)
	}
	// The handle opened before sees it after a refresh, and appends on it.
	c2, err := th.Append(ctx, message.User("two"))
	if err != nil {
		t.Fatal(err)
	}
	if c2.Parent != c1.ID {
		t.Errorf("the handle's append went on %q, not on %q", c2.Parent, c1.ID)
	}
	c3, rec, err := db.Append(ctx, "a", thread.CommitOptions{Messages: []message.Message{message.Assistant("three")}, Metadata: map[string]string{"run": "r1"}})
	if err != nil {
		t.Fatal(err)
	}
	if c3.Parent != c2.ID || rec.Version != 4 || c3.Metadata["run"] != "r1" {
		t.Errorf("third append: parent %q version %d metadata %v", c3.Parent, rec.Version, c3.Metadata)
	}
	if err := th.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if msgs, err := th.Messages(ctx, thread.ReadOptions{}); err != nil || len(msgs) != 3 {
		t.Fatalf("messages = %d, %v; want 3", len(msgs), err)
	}

	// IfVersion goes through the handle: a stale one is a conflict and
	// changes nothing; the current one appends.
	_, _, err = db.Append(ctx, "a", thread.CommitOptions{Messages: []message.Message{message.User("x")}, IfVersion: 2})
	if !errors.Is(err, thread.ErrConflict) {
		t.Errorf("stale IfVersion: %v, want ErrConflict", err)
	}
	if _, rec, err = db.Append(ctx, "a", thread.CommitOptions{Messages: []message.Message{message.User("x")}, IfVersion: 4}); err != nil || rec.Version != 5 {
		t.Errorf("current IfVersion: version %d, %v", rec.Version, err)
	}
	// State patches too.
	if _, rec, err = db.Append(ctx, "a", thread.CommitOptions{State: map[string]json.RawMessage{"k": json.RawMessage(`1`)}}); err != nil || rec.Version != 6 {
		t.Errorf("state: version %d, %v", rec.Version, err)
	}

	for _, bad := range []struct {
		name string
		db   *thread.DB
		id   string
		want error
	}{
		{"unknown", db, "nosuch", thread.ErrNotFound},
		{"another tenant's", db.WithTenant("t1"), "a", thread.ErrNotFound},
		{"a key", db, "t1/a", thread.ErrInvalid},
		{"empty", db, "", thread.ErrInvalid},
	} {
		_, _, err := bad.db.Append(ctx, bad.id, thread.CommitOptions{Messages: []message.Message{message.User("no")}})
		if !errors.Is(err, bad.want) {
			t.Errorf("%s thread: %v, want %v", bad.name, err, bad.want)
		}
	}
	if _, rec, err := db.WithTenant("t1").Append(ctx, "a", thread.CommitOptions{}); err == nil {
		t.Errorf("an append of nothing went in: %+v", rec)
	}
	if err := th.Refresh(ctx); err != nil || th.Version() != 6 {
		t.Errorf("after the refused appends the thread is at %d, %v; want 6", th.Version(), err)
	}
}
