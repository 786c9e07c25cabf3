package sqlite

import (
	"errors"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/loomthreads/loom/worklog"
	"github.com/loomthreads/loom/worklog/sessiontest"
)

func openSessionsT(t *testing.T, path string) *Sessions {
	t.Helper()
	s, err := OpenSessions(t.Context(), path)
	if err != nil {
		t.Fatalf("open sessions: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSessions(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) worklog.SessionStore {
		return openSessionsT(t, filepath.Join(t.TempDir(), "loom.db"))
	})
}

func TestSessionsOpenURL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	u := (&url.URL{Scheme: "sqlite", Path: path, RawQuery: "sync=full"}).String()
	st, err := worklog.OpenSessions(t.Context(), u)
	if err != nil {
		t.Fatalf("OpenSessions(%s): %v", u, err)
	}
	s, ok := st.(*Sessions)
	if !ok {
		t.Fatalf("OpenSessions(%s) = %T, want *Sessions", u, st)
	}
	defer s.Close()
	if s.Path() != path {
		t.Errorf("path %s, want %s", s.Path(), path)
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if err := s.CloseSession(t.Context(), worklog.Session{ID: "s1", Project: "p", StartedAt: at, ClosedAt: at.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ClosedSessions(t.Context(), worklog.ClosedOptions{Project: "p"})
	if err != nil || len(got) != 1 || got[0].ID != "s1" || !got[0].StartedAt.Equal(at) || !got[0].ClosedAt.Equal(at.Add(time.Hour)) {
		t.Errorf("ClosedSessions after a close: %+v, %v", got, err)
	}
	if _, err := worklog.OpenSessions(t.Context(), "sqlite://"); !errors.Is(err, worklog.ErrInvalid) {
		t.Errorf("OpenSessions(sqlite://) = %v, want ErrInvalid", err)
	}
}

// TestSessionsBesideThreads checks that the sessions table and the thread
// tables share a file, whichever is opened first, and that a session
// survives reopening.
func TestSessionsBesideThreads(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, threadsFirst := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "loom.db")
		if threadsFirst {
			st, err := Open(t.Context(), path, nil)
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
		}
		s := openSessionsT(t, path)
		if err := s.CloseSession(t.Context(), worklog.Session{ID: "s1", Project: "p", StartedAt: at, ClosedAt: at.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		st, err := Open(t.Context(), path, nil)
		if err != nil {
			t.Fatalf("threads first %v: open the thread store after the sessions: %v", threadsFirst, err)
		}
		st.Close()
		s = openSessionsT(t, path)
		got, err := s.ClosedSessions(t.Context(), worklog.ClosedOptions{Project: "p"})
		if err != nil || len(got) != 1 || got[0].ID != "s1" || !got[0].ClosedAt.Equal(at.Add(time.Hour)) {
			t.Fatalf("threads first %v: after reopening: %+v, %v", threadsFirst, got, err)
		}
	}
}
