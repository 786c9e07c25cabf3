package worklog_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/loomthreads/loom/worklog"
	"github.com/loomthreads/loom/worklog/sessiontest"
)

func TestOpenSessionsFile(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) worklog.SessionStore {
		u := url.URL{Scheme: "file", Path: t.TempDir()}
		st, err := worklog.OpenSessions(t.Context(), u.String())
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := st.(*worklog.FileSessions); !ok {
			t.Fatalf("OpenSessions(%s) = %T, want *FileSessions", u.String(), st)
		}
		return st
	})
}

func TestOpenSessionsErrors(t *testing.T) {
	for _, raw := range []string{"nosuch://x", "file://", "file:///tmp/x?opt=1", "%zz"} {
		_, err := worklog.OpenSessions(t.Context(), raw)
		if !errors.Is(err, worklog.ErrInvalid) {
			t.Errorf("OpenSessions(%q) = %v, want ErrInvalid", raw, err)
		}
	}
	_, err := worklog.OpenSessions(t.Context(), "nosuch://x")
	if err == nil || !strings.Contains(err.Error(), "file") {
		t.Errorf("error %v does not name the known schemes", err)
	}
}
