package worklog

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/loomthreads/loom/thread"
)

// TestSessionCloseRefusesASessionNeverStarted: closing a session id that
// no session_start recorded (in this project) is ErrNotFound and changes
// nothing, neither the items nor the session records; a started session
// closes, and closes again.
func TestSessionCloseRefusesASessionNeverStarted(t *testing.T) {
	clk := newClock()
	l := newLog(t, clk)
	open := []json.RawMessage{json.RawMessage(`"Rotate the API keys"`)}
	_, err := l.SessionClose(t.Context(), CloseOptions{SessionID: "s-1", OpenThreads: open})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("closing a session never started: %v, want ErrNotFound", err)
	}
	if items := listAll(t, l); len(items) != 0 {
		t.Errorf("the refused close left items: %+v", items)
	}
	if ss, err := l.ClosedSessions(t.Context(), 0); err != nil || len(ss) != 0 {
		t.Errorf("the refused close left session records: %+v, %v", ss, err)
	}

	// A session started in another project of the same store is not one
	// of this project's.
	other, err := OpenDB(dbOf(t, l), &Options{Project: "other", Now: clk.Now, Sessions: l.sessions})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.SessionStart(t.Context(), StartOptions{SessionID: "s-other"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.SessionClose(t.Context(), CloseOptions{SessionID: "s-other"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("closing another project's session: %v, want ErrNotFound", err)
	}

	start, err := l.SessionStart(t.Context(), StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		res, err := l.SessionClose(t.Context(), CloseOptions{SessionID: start.SessionID, OpenThreads: open})
		if err != nil {
			t.Fatalf("closing the session started: %v", err)
		}
		if len(res.OpenThreads) != 1 || res.OpenThreads[0].Text != "Rotate the API keys" {
			t.Fatalf("close: %+v", res)
		}
	}
	// Without an id, a Log closes its current session, or one of its own.
	if _, err := l.SessionClose(t.Context(), CloseOptions{}); err != nil {
		t.Fatalf("closing without an id: %v", err)
	}
}

// dbOf returns a thread.DB for a second Log beside l: l's own when its
// items are in threads, else a fresh one (the sessions are l's either way).
func dbOf(tb testing.TB, l *Log) *thread.DB {
	tb.Helper()
	if ti, ok := l.items.(*threadItems); ok {
		return ti.db
	}
	return thread.New(thread.NewMemoryStore(), nil)
}

// started records in l's SessionStore that session id started, as
// SessionStart does, without SessionStart's aggregation, so that a test of
// what a close does can close it.
func started(tb testing.TB, l *Log, id string) {
	tb.Helper()
	if err := l.sessions.StartSession(tb.Context(), Session{ID: id, Project: l.project, StartedAt: l.clock()}); err != nil {
		tb.Fatalf("start session %s: %v", id, err)
	}
}
