package postgres

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/worklog"
	"github.com/loomthreads/loom/worklog/sessiontest"
)

func openSessionsT(t *testing.T, dsn string) *Sessions {
	t.Helper()
	s, err := OpenSessions(t.Context(), dsn)
	if err != nil {
		t.Fatalf("open sessions: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSessions(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) worklog.SessionStore {
		return openSessionsT(t, testserver.Postgres(t))
	})
}

// TestSessionsOpenURL opens the store through worklog.OpenSessions, beside
// the thread tables of a Store, and checks what jsonb cannot hold.
func TestSessionsOpenURL(t *testing.T) {
	dsn := testserver.Postgres(t)
	open(t, dsn, nil) // the thread tables first
	st, err := worklog.OpenSessions(t.Context(), dsn)
	if err != nil {
		t.Fatalf("OpenSessions: %v", err)
	}
	s, ok := st.(*Sessions)
	if !ok {
		t.Fatalf("OpenSessions = %T, want *Sessions", st)
	}
	defer s.Close()
	open(t, dsn, nil) // and again after
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ses := worklog.Session{ID: "s1", Project: "p", StartedAt: at, ClosedAt: at.Add(time.Hour),
		OpenThreads: []json.RawMessage{json.RawMessage(`"nul \u0000 here"`)}}
	if err := s.CloseSession(t.Context(), ses); !errors.Is(err, worklog.ErrInvalid) {
		t.Errorf("close with a \\u0000 item = %v, want ErrInvalid", err)
	}
	if _, err := worklog.OpenSessions(t.Context(), "postgres://h:notaport/db"); !errors.Is(err, worklog.ErrInvalid) {
		t.Errorf("bad dsn: %v, want ErrInvalid", err)
	}
}
