package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/migratetest"
	"github.com/loomthreads/loom/internal/sessionrec"
	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
)

// TestImportFileSessions carries the session records that serve kept in
// DIR/worklog/sessions.json for a file://DIR store — as the release before
// this one wrote them: a FileSessions holding other tenants' sessions as
// "tenant:id" in "tenant/project" — into the store's threads, each in its
// tenant's namespace, once.
func TestImportFileSessions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "threads")
	store := "file://" + dir
	db, err := thread.Open(t.Context(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	legacy := worklog.NewFileSessions(filepath.Join(dir, worklogSessionsDir), nil)
	at := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	carried := json.RawMessage(`{"id":"t-0000abcd","text":"acme's open item","status":"open","created_at":"2026-11-20T09:00:00Z"}`)
	for _, s := range []worklog.Session{
		{ID: "acme:s1", Project: "acme/site", StartedAt: at, ClosedAt: at.Add(time.Hour), OpenThreads: []json.RawMessage{carried}},
		{ID: "acme:s2", Project: "acme/site", StartedAt: at.Add(2 * time.Hour)},
		{ID: "s0", Project: "default", StartedAt: at, ClosedAt: at.Add(time.Minute)},
	} {
		if s.Closed() {
			err = legacy.CloseSession(t.Context(), s)
		} else {
			err = legacy.StartSession(t.Context(), s)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	if err := importFileSessions(t.Context(), store, db, log); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged.String(), "sessions=3") {
		t.Errorf("logged %s", logged.String())
	}
	acme, err := worklog.NewThreadSessions(db.WithTenant("acme")).ClosedSessions(t.Context(), worklog.ClosedOptions{Project: "site"})
	if err != nil || len(acme) != 1 || acme[0].ID != "s1" || string(acme[0].OpenThreads[0]) != string(carried) || !acme[0].StartedAt.Equal(at) {
		t.Fatalf("acme's sessions: %+v, %v", acme, err)
	}
	def, err := worklog.NewThreadSessions(db).ClosedSessions(t.Context(), worklog.ClosedOptions{Project: "default"})
	if err != nil || len(def) != 1 || def[0].ID != "s0" {
		t.Fatalf("the default tenant's sessions: %+v, %v", def, err)
	}
	// acme's open session came too, in its thread.
	th, err := db.WithTenant("acme").Thread(t.Context(), sessionrec.ThreadID("site"))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := th.Len(t.Context()); n != 2 {
		t.Errorf("acme's sessions thread holds %d records, want 2", n)
	}
	// Once: the file is renamed, and a second start carries nothing.
	if _, err := os.Stat(filepath.Join(dir, worklogSessionsDir, worklog.SessionsFile+worklog.ImportedSuffix)); err != nil {
		t.Error(err)
	}
	logged.Reset()
	if err := importFileSessions(t.Context(), store, db, log); err != nil || logged.Len() != 0 {
		t.Errorf("second import: %v, logged %s", err, logged.String())
	}
	// Other stores have nothing to import.
	if err := importFileSessions(t.Context(), "memory://", db, log); err != nil {
		t.Error(err)
	}
}

// TestServedSessionsLiveInTheStore: serve's work log keeps its session
// records in the store's threads, for a store that used to keep them in
// tables or keys of its own (Redis here), in each tenant's namespace.
func TestServedSessionsLiveInTheStore(t *testing.T) {
	store := testserver.Redis(t) + "?prefix=app"
	db, err := thread.Open(t.Context(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l, err := worklog.NewLogs(db, nil).Log("acme", "p")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.SessionStart(t.Context(), worklog.StartOptions{SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.SessionClose(t.Context(), worklog.CloseOptions{SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	// Another server on the same Redis sees them; another tenant does not.
	db2, err := thread.Open(t.Context(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	for tenant, want := range map[string]int{"acme": 1, "globex": 0} {
		got, err := worklog.NewThreadSessions(db2.WithTenant(tenant)).ClosedSessions(t.Context(), worklog.ClosedOptions{Project: "p"})
		if err != nil || len(got) != want {
			t.Errorf("%s's sessions: %+v, %v; want %d", tenant, got, err, want)
		}
	}
}

// TestServeOpensReleaseFileStore: a file:// store written by the release
// before this one (jsonfile/testdata), with the session records serve kept
// in DIR/worklog/sessions.json then, is whole when serve opens it: every
// thread, version, checkpoint, work item, and the session records carried
// into the store's threads.
func TestServeOpensReleaseFileStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.CopyFS(dir, os.DirFS("../../jsonfile/testdata/release-26c53b2")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"commits", "refs", "threads", "history"} { // git keeps no empty directory
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	store := "file://" + dir
	db, err := thread.Open(t.Context(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := importFileSessions(t.Context(), store, db, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	migratetest.Check(t, db.Store(), migratetest.Options{Sessions: true})
}
