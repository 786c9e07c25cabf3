package worklog_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
	"github.com/loomthreads/loom/worklog/sessiontest"
)

func TestFileSessions(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) worklog.SessionStore {
		return worklog.NewFileSessions(t.TempDir(), &worklog.Options{NoSync: true})
	})
}

func TestFileSessionsPrunes(t *testing.T) {
	st := worklog.NewFileSessions(t.TempDir(), &worklog.Options{NoSync: true})
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range worklog.MaxFileSessions + 5 {
		at := base.Add(time.Duration(i) * time.Minute)
		if err := st.CloseSession(t.Context(), worklog.Session{ID: fmt.Sprint("s", i), Project: "p", StartedAt: at, ClosedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.ClosedSessions(t.Context(), worklog.ClosedOptions{Project: "p", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != worklog.MaxFileSessions || got[len(got)-1].ID != "s5" {
		t.Errorf("%d sessions, oldest %s; want %d, oldest s5", len(got), got[len(got)-1].ID, worklog.MaxFileSessions)
	}
}

func TestMemorySessions(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) worklog.SessionStore { return worklog.NewMemorySessions() })
}

func TestThreadSessions(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) worklog.SessionStore {
		return worklog.NewThreadSessions(thread.New(thread.NewMemoryStore(), nil))
	})
}

// A tenant's sessions keep the contract too, in its own namespace.
func TestThreadSessionsOfATenant(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) worklog.SessionStore {
		return worklog.NewThreadSessions(thread.New(thread.NewMemoryStore(), &thread.Options{Tenant: "acme"}))
	})
}

// A close whose open threads are more than a message holds is split across
// the messages of one commit and reads back whole.
func TestThreadSessionsBigClose(t *testing.T) {
	st := worklog.NewThreadSessions(thread.New(thread.NewMemoryStore(), nil))
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var open []json.RawMessage
	for i := range 1000 {
		open = append(open, json.RawMessage(fmt.Sprintf(`"item %d %s"`, i, strings.Repeat("x", 2900))))
	}
	if err := st.CloseSession(t.Context(), worklog.Session{ID: "big", Project: "p", StartedAt: at, ClosedAt: at, OpenThreads: open}); err != nil {
		t.Fatal(err)
	}
	for _, fresh := range []bool{false, true} {
		s := st
		if fresh { // no cache: the records are folded from the thread
			s = worklog.NewThreadSessions(thread.New(st.DB().Store(), nil))
		}
		got, err := s.ClosedSessions(t.Context(), worklog.ClosedOptions{Project: "p"})
		if err != nil || len(got) != 1 || len(got[0].OpenThreads) != 1000 || string(got[0].OpenThreads[999]) != string(open[999]) {
			t.Fatalf("fresh %v: %d sessions, %v", fresh, len(got), err)
		}
	}
}

// The records' open threads are read from the thread's tail for the
// sessions returned, by position: a message appended by hand between
// records, a re-close and another process's writes leave them right.
func TestThreadSessionsReadOpenThreadsByPosition(t *testing.T) {
	db := thread.New(thread.NewMemoryStore(), nil)
	a, b := worklog.NewThreadSessions(db), worklog.NewThreadSessions(db)
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	closeAt := func(st *worklog.ThreadSessions, id string, min int, carried string) {
		t.Helper()
		err := st.CloseSession(t.Context(), worklog.Session{ID: id, Project: "p", StartedAt: at, ClosedAt: at.Add(time.Duration(min) * time.Minute),
			OpenThreads: []json.RawMessage{json.RawMessage(`"` + carried + `"`)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	closeAt(a, "s1", 1, "one")
	th, err := db.Thread(t.Context(), worklog.SessionsThreadID("p"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.Append(t.Context(), message.User("a note by hand")); err != nil {
		t.Fatal(err)
	}
	closeAt(b, "s2", 2, "two")
	closeAt(a, "s1", 3, "one again") // a re-close: its newest record wins
	for _, st := range []*worklog.ThreadSessions{a, b, worklog.NewThreadSessions(db)} {
		got, err := st.ClosedSessions(t.Context(), worklog.ClosedOptions{Project: "p"})
		if err != nil || len(got) != 2 || got[0].ID != "s1" || string(got[0].OpenThreads[0]) != `"one again"` ||
			got[1].ID != "s2" || string(got[1].OpenThreads[0]) != `"two"` || len(got[0].OpenThreads) != 1 {
			t.Fatalf("%+v, %v", got, err)
		}
	}
}
