package worklog_test

import (
	"fmt"
	"testing"
	"time"

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

// A tenant's view of a store keeps the contract too.
func TestTenantSessions(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) worklog.SessionStore {
		return worklog.TenantSessions(worklog.NewMemorySessions(), "acme")
	})
}
