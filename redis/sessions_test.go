package redis_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/redis"
	"github.com/loomthreads/loom/worklog"
	"github.com/loomthreads/loom/worklog/sessiontest"
)

func openSessions(t testing.TB, url string) *redis.Sessions {
	t.Helper()
	s, err := redis.OpenSessions(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSessions(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) worklog.SessionStore { return openSessions(t, testserver.Redis(t)) })
}

var sessionTime = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func closedIDs(t *testing.T, st worklog.SessionStore, opts worklog.ClosedOptions) []string {
	t.Helper()
	ss, err := st.ClosedSessions(t.Context(), opts)
	if err != nil {
		t.Fatalf("ClosedSessions(%+v): %v", opts, err)
	}
	var out []string
	for _, s := range ss {
		if s.Project != opts.Project {
			t.Errorf("ClosedSessions(%+v) returned %s of project %q", opts, s.ID, s.Project)
		}
		out = append(out, s.ID)
	}
	return out
}

// TestSessionsReopen: what a store recorded is there for a new client, and
// worklog.OpenSessions knows the schemes.
func TestSessionsReopen(t *testing.T) {
	url := testserver.Redis(t)
	st := openSessions(t, url+"?prefix=app")
	threads := []json.RawMessage{json.RawMessage(`{"id":"t-00000001","text":"a <b> & c","status":"open"}`), json.RawMessage(`"plain"`)}
	s := worklog.Session{ID: "s1", Project: "p", StartedAt: sessionTime, ClosedAt: sessionTime.Add(time.Hour), OpenThreads: threads}
	if err := st.CloseSession(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2, err := worklog.OpenSessions(t.Context(), url+"?prefix=app")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.(*redis.Sessions).Close() })
	got, err := st2.ClosedSessions(t.Context(), worklog.ClosedOptions{Project: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !reflect.DeepEqual(got[0], s) {
		t.Fatalf("after reopening: %+v, want %+v", got, s)
	}
	if schemes := worklog.SessionSchemes(); !slices.Contains(schemes, "redis") || !slices.Contains(schemes, "rediss") {
		t.Errorf("session schemes %v, want redis and rediss among them", schemes)
	}
	// Another prefix is another store.
	if got := closedIDs(t, openSessions(t, url), worklog.ClosedOptions{Project: "p"}); got != nil {
		t.Errorf("sessions under the default prefix: %v", got)
	}
}

// TestSessionsProjectsApart: two projects' sessions, even with the same
// ids, never mix; each project's keys share one hash tag.
func TestSessionsProjectsApart(t *testing.T) {
	st := openSessions(t, testserver.Redis(t))
	ctx := t.Context()
	projects := []string{"site", "acme/site", "a {b} c", "{", "site2"}
	for i, p := range projects {
		for j := range 3 {
			s := worklog.Session{ID: fmt.Sprintf("s%d", j), Project: p, StartedAt: sessionTime, ClosedAt: sessionTime.Add(time.Duration(i*10+j) * time.Minute),
				OpenThreads: []json.RawMessage{json.RawMessage(fmt.Sprintf("%q", p))}}
			if err := st.CloseSession(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.StartSession(ctx, worklog.Session{ID: "only-" + fmt.Sprint(i), Project: p, StartedAt: sessionTime}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range projects {
		ss, err := st.ClosedSessions(ctx, worklog.ClosedOptions{Project: p, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(ss) != 3 {
			t.Errorf("project %q: %d sessions, want 3", p, len(ss))
		}
		for _, s := range ss {
			var v string
			if s.Project != p || len(s.OpenThreads) != 1 || json.Unmarshal(s.OpenThreads[0], &v) != nil || v != p {
				t.Errorf("project %q: session %+v", p, s)
			}
		}
	}
	keys, err := st.Client().Keys(ctx, "loom:s:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]int{}
	for _, k := range keys {
		open, close := strings.IndexByte(k, '{'), strings.IndexByte(k, '}')
		if open < 0 || close < open {
			t.Fatalf("key %q has no hash tag", k)
		}
		tags[k[open+1:close]]++
	}
	// Each project: 3 closed records, 1 open one, the closed set, the counter.
	if len(tags) != len(projects) {
		t.Errorf("%d hash tags for %d projects: %v", len(tags), len(projects), tags)
	}
	for tag, n := range tags {
		if n != 6 {
			t.Errorf("tag %q has %d keys, want 6", tag, n)
		}
	}
}

// TestSessionsTiesAndSince: sessions closed at the same millisecond come
// in the order they were first recorded, also where the limit cuts them;
// Since counts at the millisecond.
func TestSessionsTiesAndSince(t *testing.T) {
	st := openSessions(t, testserver.Redis(t))
	ctx := t.Context()
	at := sessionTime.Add(time.Hour)
	if err := st.StartSession(ctx, worklog.Session{ID: "zz", Project: "p", StartedAt: sessionTime}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"m", "zz", "a", "q"} {
		if err := st.CloseSession(ctx, worklog.Session{ID: id, Project: "p", ClosedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CloseSession(ctx, worklog.Session{ID: "newest", Project: "p", ClosedAt: at.Add(time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opts worklog.ClosedOptions
		want []string
	}{
		{worklog.ClosedOptions{Project: "p", Limit: 10}, []string{"newest", "zz", "m", "a", "q"}},
		{worklog.ClosedOptions{Project: "p", Limit: 3}, []string{"newest", "zz", "m"}},
		{worklog.ClosedOptions{Project: "p", Limit: 1}, []string{"newest"}},
		{worklog.ClosedOptions{Project: "p", Limit: 2}, []string{"newest", "zz"}},
		{worklog.ClosedOptions{Project: "p", Limit: 10, Since: at.Add(time.Millisecond)}, []string{"newest"}},
		{worklog.ClosedOptions{Project: "p", Limit: 10, Since: at.Add(time.Microsecond)}, []string{"newest"}},
		{worklog.ClosedOptions{Project: "p", Limit: 10, Since: at}, []string{"newest", "zz", "m", "a", "q"}},
		{worklog.ClosedOptions{Project: "p", Limit: 1 << 62}, []string{"newest", "zz", "m", "a", "q"}},
	} {
		if got := closedIDs(t, st, tc.opts); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ClosedSessions(limit %d, since %v) = %v, want %v", tc.opts.Limit, tc.opts.Since, got, tc.want)
		}
	}
	// Times are kept to the millisecond.
	if err := st.CloseSession(ctx, worklog.Session{ID: "fine", Project: "r", StartedAt: sessionTime.Add(1500 * time.Microsecond), ClosedAt: at.Add(2500 * time.Microsecond)}); err != nil {
		t.Fatal(err)
	}
	ss, err := st.ClosedSessions(ctx, worklog.ClosedOptions{Project: "r"})
	if err != nil || len(ss) != 1 || !ss[0].StartedAt.Equal(sessionTime.Add(time.Millisecond)) || !ss[0].ClosedAt.Equal(at.Add(2*time.Millisecond)) {
		t.Errorf("times to the millisecond: %+v, %v", ss, err)
	}
}

// TestSessionsCloseRacesStart: however a start and closes of one session
// interleave, the session ends closed, with its last close's items, the
// first start recorded, and once in the listing.
func TestSessionsCloseRacesStart(t *testing.T) {
	st := openSessions(t, testserver.Redis(t))
	ctx := t.Context()
	for round := range 20 {
		id := fmt.Sprintf("s%d", round)
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := st.StartSession(ctx, worklog.Session{ID: id, Project: "p", StartedAt: sessionTime}); err != nil {
				t.Error(err)
			}
		})
		for i := range 4 {
			wg.Go(func() {
				s := worklog.Session{ID: id, Project: "p", StartedAt: sessionTime, ClosedAt: sessionTime.Add(time.Duration(round) * time.Hour),
					OpenThreads: []json.RawMessage{json.RawMessage(`"same"`)}}
				if i == 0 {
					s.StartedAt = time.Time{} // a close that knows no start
				}
				if err := st.CloseSession(ctx, s); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	ss, err := st.ClosedSessions(ctx, worklog.ClosedOptions{Project: "p", Limit: 100})
	if err != nil || len(ss) != 20 {
		t.Fatalf("%d sessions, %v; want 20", len(ss), err)
	}
	for _, s := range ss {
		if !s.StartedAt.Equal(sessionTime) || len(s.OpenThreads) != 1 || string(s.OpenThreads[0]) != `"same"` {
			t.Errorf("session %+v", s)
		}
	}
}

func TestSessionsBadURL(t *testing.T) {
	url := testserver.Redis(t)
	for _, bad := range []string{url + "?prefix=a{b}", url + "?bogus=1", url + "?cluster=maybe", "::"} {
		if s, err := redis.OpenSessions(t.Context(), bad, nil); err == nil {
			s.Close()
			t.Errorf("open %q: no error", bad)
		} else if !errors.Is(err, worklog.ErrInvalid) {
			t.Errorf("open %q: %v, want worklog.ErrInvalid", bad, err)
		}
	}
}
