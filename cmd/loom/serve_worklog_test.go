package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/redis"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
)

func TestSessionsURL(t *testing.T) {
	for _, tc := range []struct {
		store, want string
		volatile    bool
	}{
		{store: "sqlite:///var/loom/loom.db", want: "sqlite:///var/loom/loom.db"},
		{store: "sqlite://./loom.db?sync=full&busy_timeout=5s", want: "sqlite://./loom.db?sync=full&busy_timeout=5s"},
		{store: "sqlite:rel.db", want: "sqlite:rel.db"},
		{store: "postgres://u:pw@db:5432/loom?sslmode=disable", want: "postgres://u:pw@db:5432/loom?sslmode=disable"},
		{store: "postgresql://db/loom", want: "postgresql://db/loom"},
		{store: "memory://", want: "memory://"},
		{store: "file:///var/loom", want: "file:///var/loom/worklog"},
		{store: "file:///var/loom/?nosync=true", want: "file:///var/loom/worklog"},
		{store: "file:///my%20threads", want: "file:///my%20threads/worklog"},
		{store: "file://./threads", want: "file:threads/worklog"},
		{store: "file:threads", want: "file:threads/worklog"},
		{store: "redis://localhost:6379/0", want: "redis://localhost:6379/0"},
		{store: "rediss://u:pw@cache.example:6380/1?prefix=app", want: "rediss://u:pw@cache.example:6380/1?prefix=app"},
		{store: "custom://host/x", want: "memory://", volatile: true},
	} {
		got, volatile, err := sessionsURL(tc.store)
		if err != nil || got != tc.want || volatile != tc.volatile {
			t.Errorf("sessionsURL(%s) = %q, %v, %v; want %q, %v", tc.store, got, volatile, err, tc.want, tc.volatile)
		}
	}
	for _, bad := range []string{"%zz", "file://", "file:///var/loom?bogus=1"} {
		if got, _, err := sessionsURL(bad); !errors.Is(err, thread.ErrInvalid) {
			t.Errorf("sessionsURL(%s) = %q, %v; want an ErrInvalid error", bad, got, err)
		}
	}
}

// TestSessionsBesideFileStore keeps the session records of a file:// store
// in DIR/worklog, relative directories too, where the store does not mind
// them.
func TestSessionsBesideFileStore(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, store := range []string{"file://" + filepath.Join(t.TempDir(), "threads"), "file:rel/threads"} {
		db, err := thread.Open(t.Context(), store, nil)
		if err != nil {
			t.Fatal(err)
		}
		st, closeSessions, err := openSessions(t.Context(), "", store, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("%s: %v", store, err)
		}
		at := time.Now().UTC().Truncate(time.Millisecond)
		if err := st.CloseSession(t.Context(), worklog.Session{ID: "s1", Project: "p", StartedAt: at, ClosedAt: at}); err != nil {
			t.Fatal(err)
		}
		closeSessions()
		dir := strings.TrimPrefix(strings.TrimPrefix(store, "file://"), "file:")
		if _, err := os.Stat(filepath.Join(dir, "worklog", worklog.SessionsFile)); err != nil {
			t.Errorf("%s: %v", store, err)
		}
		db.Close()
		// The store opens again, and lists no thread of it.
		db, err = thread.Open(t.Context(), store, nil)
		if err != nil {
			t.Fatalf("%s: reopen beside the sessions: %v", store, err)
		}
		for r, err := range db.Threads(t.Context(), thread.ListOptions{}) {
			t.Errorf("%s: thread %+v, %v", store, r, err)
		}
		db.Close()
	}
}

// TestOpenSessionsWarnsWhenVolatile: a store whose session records go to
// memory says so at startup, unless --sessions names where they go.
func TestOpenSessionsWarnsWhenVolatile(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	st, closeSessions, err := openSessions(t.Context(), "", "custom://:secret@localhost:6379/0", log)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSessions()
	if _, ok := st.(*worklog.MemorySessions); !ok {
		t.Errorf("sessions of a store of unknown kind: %T, want *worklog.MemorySessions", st)
	}
	if out := logged.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "will not survive a restart") ||
		!strings.Contains(out, "--sessions") || strings.Contains(out, "secret") {
		t.Errorf("warning: %s", out)
	}

	logged.Reset()
	path := filepath.Join(t.TempDir(), "sessions.db")
	st, closeSessions2, err := openSessions(t.Context(), "sqlite://"+path, "custom://localhost:6379/0", log)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSessions2()
	if _, ok := st.(*worklog.MemorySessions); ok || logged.Len() != 0 {
		t.Errorf("with --sessions: %T, logged %s", st, logged.String())
	}

	if _, _, err := openSessions(context.Background(), "nosuch://x", "memory://", log); err == nil || !strings.Contains(err.Error(), "open sessions nosuch://x") {
		t.Errorf("an unknown --sessions scheme: %v", err)
	}
}

// TestSessionsInRedisStore keeps the session records of a redis:// store in
// that Redis, under the store's prefix, without a warning.
func TestSessionsInRedisStore(t *testing.T) {
	store := testserver.Redis(t) + "?prefix=app"
	var logged bytes.Buffer
	st, closeSessions, err := openSessions(t.Context(), "", store, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer closeSessions()
	rs, ok := st.(*redis.Sessions)
	if !ok || rs.Prefix() != "app" || logged.Len() != 0 {
		t.Fatalf("sessions of a redis store: %T, logged %s", st, logged.String())
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	if err := st.CloseSession(t.Context(), worklog.Session{ID: "s1", Project: "p", StartedAt: at, ClosedAt: at}); err != nil {
		t.Fatal(err)
	}
	// The thread store opens on the same database and prefix beside them.
	db, err := thread.Open(t.Context(), store, nil)
	if err != nil {
		t.Fatalf("open the store beside the sessions: %v", err)
	}
	defer db.Close()
	for r, err := range db.Threads(t.Context(), thread.ListOptions{}) {
		t.Errorf("thread %+v, %v", r, err)
	}
}
