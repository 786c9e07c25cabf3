package agent_test

import (
	"errors"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/storetest"
)

// TestRunInputIDsChecked checks that the ids the agent makes for its input
// spare the thread's line a look (thread.CommitOptions.FreshIDs), while an
// input id the client chose is looked up all the same: one the thread
// holds fails the run before anything is written.
func TestRunInputIDsChecked(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	client := scripted.New(scripted.Text("ok"))
	client.Repeat = true
	a := agent.New(client, nil)
	th, err := a.NewThread(ctx, db, thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in := message.User("hello")
	in.ID = "client-1"
	if _, err := a.Run(ctx, th, in); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, th, message.User("no id")); err != nil {
		t.Fatal(err)
	}
	v := th.Version()
	again := message.User("hello again")
	again.ID = "client-1"
	if _, err := a.Run(ctx, th, again); !errors.Is(err, thread.ErrDuplicateID) {
		t.Fatalf("a run whose input id the thread holds: %v, want ErrDuplicateID", err)
	}
	if err := th.Refresh(ctx); err != nil || th.Version() != v {
		t.Fatalf("the refused run moved the thread to version %d (%v), want %d", th.Version(), err, v)
	}
	if n := len(messages(t, th)); n != 4 {
		t.Fatalf("%d messages, want 4", n)
	}
}

// TestRunMadeIDsReadNoLine checks that a run's input whose ids the agent
// makes costs no look among the thread's ids (thread.CommitOptions.
// FreshIDs) — with a DB that remembers no line, a look is a walk of the
// line — while input with a client's id costs one.
func TestRunMadeIDsReadNoLine(t *testing.T) {
	ctx := t.Context()
	st := storetest.NewCountingStore()
	db := thread.New(st, &thread.Options{MessageIDCache: -1})
	client := scripted.New(scripted.Text("ok"))
	client.Repeat = true
	a := agent.New(client, nil)
	th, err := a.NewThread(ctx, db, thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	walks := func(in message.Message) int64 {
		t.Helper()
		before := st.Walks.Load()
		if _, err := a.Run(ctx, th, in); err != nil {
			t.Fatal(err)
		}
		return st.Walks.Load() - before
	}
	walks(message.User("warm"))
	made := walks(message.User("no id"))
	own := message.User("client's id")
	own.ID = "client-2"
	if chosen := walks(own); made != chosen-1 {
		t.Errorf("a run with ids the agent made walked lines %d times, one with a client's id %d: want one walk less", made, chosen)
	}
}
