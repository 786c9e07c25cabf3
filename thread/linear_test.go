package thread_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

func TestLinearServiceThreadRefusesGoingBack(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := db.Create(ctx, thread.CreateOptions{Kind: thread.KindService})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.Commit(ctx, thread.CommitOptions{Messages: []message.Message{message.User("before")}, Mirror: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := th.Checkpoint(ctx, "before"); err != nil {
		t.Fatal(err)
	}
	if _, err := th.Commit(ctx, thread.CommitOptions{Messages: []message.Message{message.User("in conversation")},
		State: map[string]json.RawMessage{thread.StateLinear: json.RawMessage("true")}, Mirror: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := th.Checkpoint(ctx, "after"); err != nil {
		t.Fatal(err)
	}
	v := th.Version()
	if _, err := th.Commit(ctx, thread.CommitOptions{Messages: []message.Message{message.User("more")}, Mirror: true}); err != nil {
		t.Fatal(err)
	}
	for name, op := range map[string]func() error{
		"fork":     func() error { _, err := th.Fork(ctx, thread.ForkOptions{}); return err },
		"copy":     func() error { _, err := th.Copy(ctx, thread.ForkOptions{}); return err },
		"rollback": func() error { return th.Rollback(ctx, "after") },
		"restore":  func() error { return th.Restore(ctx, v) },
	} {
		if err := op(); !errors.Is(err, thread.ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", name, err)
		}
	}
	// Before the service's conversation began, nothing contradicts it.
	if err := th.Rollback(ctx, "before"); err != nil {
		t.Fatalf("rollback to before the conversation: %v", err)
	}
	// A local thread with the same state key is not affected.
	local, _ := db.Create(ctx, thread.CreateOptions{Kind: thread.KindLocal, Messages: []message.Message{message.User("x")},
		State: map[string]json.RawMessage{thread.StateLinear: json.RawMessage("true")}})
	if _, err := local.Fork(ctx, thread.ForkOptions{}); err != nil {
		t.Fatalf("local fork: %v", err)
	}
}

func TestCheckCommit(t *testing.T) {
	db := thread.New(thread.NewMemoryStore(), &thread.Options{Limits: thread.Limits{MessageBytes: 150}})
	if db.Limits().MessageBytes != 150 || db.Limits().StateBytes == 0 {
		t.Fatalf("limits %+v", db.Limits())
	}
	big := message.User(string(make([]byte, 200)))
	dup1, dup2 := message.User("a"), message.User("b")
	dup1.ID, dup2.ID = message.NewID(), ""
	dup2.ID = dup1.ID
	for name, opts := range map[string]thread.CommitOptions{
		"over the message limit": {Messages: []message.Message{big}},
		"repeated id":            {Messages: []message.Message{dup1, dup2}},
		"empty metadata key":     {Metadata: map[string]string{"": "x"}},
		"state not JSON":         {State: map[string]json.RawMessage{"k": json.RawMessage("{")}},
		"bad op":                 {Messages: []message.Message{message.User("ok")}, Op: "Not An Op"},
	} {
		if err := db.CheckCommit(opts); !errors.Is(err, thread.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if err := db.CheckCommit(thread.CommitOptions{Messages: []message.Message{message.User("ok")}, Metadata: map[string]string{"run": "r"}}); err != nil {
		t.Fatal(err)
	}
}
