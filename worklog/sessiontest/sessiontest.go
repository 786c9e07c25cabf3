// Package sessiontest is the contract of worklog.SessionStore: one suite
// that every store runs, so that the local file, memory and the session
// records kept in threads (of any thread store) behave alike.
//
//	func TestSessionStore(t *testing.T) {
//		sessiontest.Run(t, func(t *testing.T) worklog.SessionStore { return openStore(t) })
//	}
//
// open must return an empty store each time it is called. Times in the
// suite are whole milliseconds; open_threads values are compared as JSON
// values (a jsonb column may reorder keys and drop white space).
package sessiontest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/loomthreads/loom/worklog"
)

// Run runs the suite against the stores open returns.
func Run(t *testing.T, open func(t *testing.T) worklog.SessionStore) {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(h int) time.Time { return base.Add(time.Duration(h) * time.Hour) }
	item := func(id, text string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"id":%q,"text":%q,"status":"open","created_at":"2026-02-01T00:00:00.000Z"}`, id, text))
	}

	t.Run("StartedIsNotClosed", func(t *testing.T) {
		st := open(t)
		mustStart(t, st, worklog.Session{ID: "s1", Project: "p", StartedAt: at(0)})
		got := closed(t, st, worklog.ClosedOptions{Project: "p"})
		if len(got) != 0 {
			t.Fatalf("a session that only started is listed as closed: %+v", got)
		}
	})

	t.Run("CloseRecordsOpenThreads", func(t *testing.T) {
		st := open(t)
		mustStart(t, st, worklog.Session{ID: "s1", Project: "p", StartedAt: at(0)})
		threads := []json.RawMessage{item("t-00000001", "one"), json.RawMessage(`"a plain string"`), item("t-00000002", "two")}
		mustClose(t, st, worklog.Session{ID: "s1", Project: "p", StartedAt: at(5), ClosedAt: at(1), OpenThreads: threads})
		got := closed(t, st, worklog.ClosedOptions{Project: "p"})
		if len(got) != 1 {
			t.Fatalf("%d closed sessions, want 1", len(got))
		}
		s := got[0]
		if s.ID != "s1" || s.Project != "p" || !s.ClosedAt.Equal(at(1)) {
			t.Errorf("closed session %s of %q at %v, want s1 of p at %v", s.ID, s.Project, s.ClosedAt, at(1))
		}
		if !s.StartedAt.Equal(at(0)) {
			t.Errorf("started at %v, want the start recorded, %v", s.StartedAt, at(0))
		}
		sameJSON(t, s.OpenThreads, threads)
	})

	t.Run("CloseWithoutStart", func(t *testing.T) {
		st := open(t)
		mustClose(t, st, worklog.Session{ID: "s1", Project: "p", StartedAt: at(0), ClosedAt: at(1), OpenThreads: []json.RawMessage{item("t-00000001", "one")}})
		got := closed(t, st, worklog.ClosedOptions{Project: "p"})
		if len(got) != 1 || got[0].ID != "s1" || !got[0].StartedAt.Equal(at(0)) {
			t.Fatalf("got %+v, want s1 started at %v", got, at(0))
		}
	})

	t.Run("StartTwiceKeepsFirst", func(t *testing.T) {
		st := open(t)
		mustClose(t, st, worklog.Session{ID: "s1", Project: "p", StartedAt: at(0), ClosedAt: at(1)})
		mustStart(t, st, worklog.Session{ID: "s1", Project: "p", StartedAt: at(3)})
		got := closed(t, st, worklog.ClosedOptions{Project: "p"})
		if len(got) != 1 || !got[0].ClosedAt.Equal(at(1)) || !got[0].StartedAt.Equal(at(0)) {
			t.Fatalf("starting a recorded session changed it: %+v", got)
		}
	})

	t.Run("CloseAgainReplaces", func(t *testing.T) {
		st := open(t)
		mustClose(t, st, worklog.Session{ID: "s1", Project: "p", StartedAt: at(0), ClosedAt: at(1), OpenThreads: []json.RawMessage{item("t-00000001", "one")}})
		mustClose(t, st, worklog.Session{ID: "s1", Project: "p", StartedAt: at(0), ClosedAt: at(2), OpenThreads: []json.RawMessage{item("t-00000002", "two")}})
		got := closed(t, st, worklog.ClosedOptions{Project: "p"})
		if len(got) != 1 || !got[0].ClosedAt.Equal(at(2)) {
			t.Fatalf("got %+v, want one session closed at %v", got, at(2))
		}
		sameJSON(t, got[0].OpenThreads, []json.RawMessage{item("t-00000002", "two")})
	})

	t.Run("Session", func(t *testing.T) {
		st := open(t)
		ctx := t.Context()
		mustStart(t, st, worklog.Session{ID: "started", Project: "p", StartedAt: at(0)})
		mustClose(t, st, worklog.Session{ID: "closed", Project: "p", StartedAt: at(1), ClosedAt: at(2), OpenThreads: []json.RawMessage{item("t-00000001", "one")}})
		if s, err := st.Session(ctx, "p", "started"); err != nil || s.ID != "started" || s.Project != "p" || !s.StartedAt.Equal(at(0)) || s.Closed() {
			t.Errorf("Session(p, started) = %+v, %v; want it started at %v, open", s, err, at(0))
		}
		if s, err := st.Session(ctx, "p", "closed"); err != nil || !s.ClosedAt.Equal(at(2)) || len(s.OpenThreads) != 0 {
			t.Errorf("Session(p, closed) = %+v, %v; want it closed at %v, without its open threads", s, err, at(2))
		}
		for _, q := range [][2]string{{"p", "never"}, {"q", "started"}} {
			if _, err := st.Session(ctx, q[0], q[1]); !errors.Is(err, worklog.ErrNotFound) {
				t.Errorf("Session(%s, %s) = %v, want ErrNotFound", q[0], q[1], err)
			}
		}
	})

	t.Run("NewestFirstSinceLimitProject", func(t *testing.T) {
		st := open(t)
		for i, h := range []int{3, 1, 7, 5, 2, 6, 4} {
			mustClose(t, st, worklog.Session{ID: fmt.Sprintf("s%d", h), Project: "p", StartedAt: at(h - 1), ClosedAt: at(h)})
			if i%2 == 0 {
				mustClose(t, st, worklog.Session{ID: fmt.Sprintf("other%d", h), Project: "q", StartedAt: at(h - 1), ClosedAt: at(h)})
			}
		}
		mustStart(t, st, worklog.Session{ID: "open", Project: "p", StartedAt: at(8)})
		ids := func(ss []worklog.Session) []string {
			var out []string
			for _, s := range ss {
				out = append(out, s.ID)
			}
			return out
		}
		cases := []struct {
			opts worklog.ClosedOptions
			want []string
		}{
			{worklog.ClosedOptions{Project: "p", Limit: 10}, []string{"s7", "s6", "s5", "s4", "s3", "s2", "s1"}},
			{worklog.ClosedOptions{Project: "p"}, []string{"s7", "s6", "s5", "s4", "s3"}},
			{worklog.ClosedOptions{Project: "p", Limit: 2}, []string{"s7", "s6"}},
			{worklog.ClosedOptions{Project: "p", Limit: 10, Since: at(4)}, []string{"s7", "s6", "s5", "s4"}},
			// Project q has every other session: those closed at 3, 7, 2 and 4.
			{worklog.ClosedOptions{Project: "q", Limit: 10}, []string{"other7", "other4", "other3", "other2"}},
			{worklog.ClosedOptions{Project: "none"}, nil},
		}
		for _, c := range cases {
			if got := ids(closed(t, st, c.opts)); !reflect.DeepEqual(got, c.want) {
				t.Errorf("ClosedSessions(%+v) = %v, want %v", c.opts, got, c.want)
			}
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		st := open(t)
		ctx := t.Context()
		for _, s := range []worklog.Session{
			{ID: "", Project: "p", StartedAt: at(0)},
			{ID: "has space", Project: "p", StartedAt: at(0)},
			{ID: "s1", Project: "", StartedAt: at(0)},
		} {
			if err := st.StartSession(ctx, s); !errors.Is(err, worklog.ErrInvalid) {
				t.Errorf("StartSession(%+v) = %v, want ErrInvalid", s, err)
			}
			s.ClosedAt = at(1)
			if err := st.CloseSession(ctx, s); !errors.Is(err, worklog.ErrInvalid) {
				t.Errorf("CloseSession(%+v) = %v, want ErrInvalid", s, err)
			}
		}
	})

	t.Run("InvalidCloses", func(t *testing.T) {
		st := open(t)
		ctx := t.Context()
		mustStart(t, st, worklog.Session{ID: "s1", Project: "p", StartedAt: at(0)})
		for name, s := range map[string]worklog.Session{
			"no close time":         {ID: "s1", Project: "p", StartedAt: at(0)},
			"open_threads not JSON": {ID: "s1", Project: "p", StartedAt: at(0), ClosedAt: at(1), OpenThreads: []json.RawMessage{json.RawMessage(`{"id":`)}},
		} {
			if err := st.CloseSession(ctx, s); !errors.Is(err, worklog.ErrInvalid) {
				t.Errorf("CloseSession with %s = %v, want ErrInvalid", name, err)
			}
		}
		if got := closed(t, st, worklog.ClosedOptions{Project: "p"}); len(got) != 0 {
			t.Errorf("refused closes recorded a close: %+v", got)
		}
	})

	t.Run("SameCloseTimeKeepsOrder", func(t *testing.T) {
		st := open(t)
		for _, id := range []string{"first", "second", "third"} {
			mustClose(t, st, worklog.Session{ID: id, Project: "p", StartedAt: at(0), ClosedAt: at(1)})
		}
		got := closed(t, st, worklog.ClosedOptions{Project: "p", Limit: 10})
		if len(got) != 3 {
			t.Fatalf("%d sessions, want 3", len(got))
		}
		seen := map[string]bool{}
		for _, s := range got {
			seen[s.ID] = true
		}
		if !seen["first"] || !seen["second"] || !seen["third"] {
			t.Errorf("sessions closed at the same instant: %+v", got)
		}
		// Ties are in the order the sessions were first recorded, also
		// when the limit cuts among them.
		for _, limit := range []int{10, 2} {
			got := closed(t, st, worklog.ClosedOptions{Project: "p", Limit: limit})
			var ids []string
			for _, s := range got {
				ids = append(ids, s.ID)
			}
			if want := []string{"first", "second", "third"}[:min(limit, 3)]; !reflect.DeepEqual(ids, want) {
				t.Errorf("ClosedSessions(Limit %d) of sessions closed at the same instant = %v, want %v", limit, ids, want)
			}
		}
	})

	t.Run("ConcurrentCloses", func(t *testing.T) {
		st := open(t)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				s := worklog.Session{ID: fmt.Sprintf("c%d", i), Project: "p", StartedAt: at(0), ClosedAt: at(i + 1),
					OpenThreads: []json.RawMessage{item(fmt.Sprintf("t-0000000%d", i), fmt.Sprint("item ", i))}}
				if err := st.CloseSession(t.Context(), s); err != nil {
					t.Errorf("close %s: %v", s.ID, err)
				}
			})
		}
		wg.Wait()
		if got := closed(t, st, worklog.ClosedOptions{Project: "p", Limit: 100}); len(got) != 8 {
			t.Fatalf("%d sessions after 8 concurrent closes", len(got))
		}
	})
}

func mustStart(t *testing.T, st worklog.SessionStore, s worklog.Session) {
	t.Helper()
	if err := st.StartSession(t.Context(), s); err != nil {
		t.Fatalf("StartSession(%s): %v", s.ID, err)
	}
}

func mustClose(t *testing.T, st worklog.SessionStore, s worklog.Session) {
	t.Helper()
	if err := st.CloseSession(t.Context(), s); err != nil {
		t.Fatalf("CloseSession(%s): %v", s.ID, err)
	}
}

func closed(t *testing.T, st worklog.SessionStore, opts worklog.ClosedOptions) []worklog.Session {
	t.Helper()
	ss, err := st.ClosedSessions(t.Context(), opts)
	if err != nil {
		t.Fatalf("ClosedSessions(%+v): %v", opts, err)
	}
	return ss
}

// sameJSON checks that got and want hold the same JSON values.
func sameJSON(t *testing.T, got, want []json.RawMessage) {
	t.Helper()
	decode := func(rs []json.RawMessage) []any {
		out := make([]any, len(rs))
		for i, r := range rs {
			if err := json.Unmarshal(r, &out[i]); err != nil {
				t.Fatalf("open_threads[%d] %s: %v", i, r, err)
			}
		}
		return out
	}
	if g, w := decode(got), decode(want); !reflect.DeepEqual(g, w) {
		t.Errorf("open_threads = %v, want %v", g, w)
	}
}
