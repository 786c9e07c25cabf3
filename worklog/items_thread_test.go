package worklog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/loomthreads/loom/internal/sessionrec"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// TestLogOnThreads runs the package's tests again with the items in loom
// threads (see onThreads): every rule of creation, listing, resolution
// and aggregation holds for both ways of keeping them.
func TestLogOnThreads(t *testing.T) {
	if onThreads {
		t.Skip("running on threads already")
	}
	if testing.Short() {
		t.Skip("re-runs the package's tests")
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^Test", "-test.skip=^(TestLogOnThreads|TestChildCreate)$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LOOM_WORKLOG_ITEMS=thread")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the tests on threads failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "PASS") {
		t.Fatalf("no tests ran:\n%s", out)
	}
}

// dbLog opens a Log on db's thread for the default project, on clk.
func dbLog(t *testing.T, db *thread.DB, clk *clock) *Log {
	t.Helper()
	l, err := OpenDB(db, &Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// OpenDB without a SessionStore keeps the session records in the DB, in
// the thread ThreadSessions reads.
func TestOpenDBKeepsSessionsInTheDB(t *testing.T) {
	db := thread.New(thread.NewMemoryStore(), &thread.Options{Tenant: "acme"})
	l, err := OpenDB(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	started(t, l, "s1")
	if _, err := l.SessionClose(t.Context(), CloseOptions{SessionID: "s1", OpenThreads: []json.RawMessage{json.RawMessage(`"carried"`)}}); err != nil {
		t.Fatal(err)
	}
	got, err := NewThreadSessions(db).ClosedSessions(t.Context(), ClosedOptions{Project: DefaultProject})
	if err != nil || len(got) != 1 || got[0].ID != "s1" {
		t.Fatalf("the DB's sessions: %+v, %v", got, err)
	}
	if _, err := db.Thread(t.Context(), sessionrec.ThreadID(DefaultProject)); err != nil {
		t.Errorf("the sessions' thread: %v", err)
	}
	if _, err := OpenDB(db, &Options{Project: "a\x00b", Sessions: NewMemorySessions()}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad project: %v, want ErrInvalid", err)
	}
}

// Another Log on the same thread reads only what changed, and reads
// everything again when the thread went back in time.
func TestThreadItemsFollowOtherWriters(t *testing.T) {
	clk := newClock()
	db := thread.New(thread.NewMemoryStore(), nil)
	a, b := dbLog(t, db, clk), dbLog(t, db, clk)
	first := mustCreate(t, a, "First")
	if got := listAll(t, b); len(got) != 1 || got[0].ID != first.ID {
		t.Fatalf("b sees %+v", got)
	}
	th, err := db.Thread(t.Context(), ThreadID("", DefaultProject))
	if err != nil {
		t.Fatal(err)
	}
	v := th.Version()
	for _, s := range []string{"Second", "Third"} {
		mustCreate(t, a, s)
	}
	// A person's note in the work log's thread is no event: skipped.
	if _, err := th.Append(t.Context(), message.User("a note, not an item")); err != nil {
		t.Fatal(err)
	}
	if got := listAll(t, b); len(got) != 3 {
		t.Fatalf("b sees %d items, want 3", len(got))
	}
	if bt := b.items.(*threadItems).cached(); bt.n != 4 {
		t.Errorf("b folded %d messages, want 4", bt.n)
	}
	res, err := b.List(t.Context(), ListOptions{})
	if err != nil || !res.Performance.CacheHit {
		t.Errorf("a second list: %v, cache hit %v", err, res != nil && res.Performance.CacheHit)
	}
	// Time travel on the work log: back to one item.
	if err := th.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := th.Restore(t.Context(), v); err != nil {
		t.Fatal(err)
	}
	if got := listAll(t, b); len(got) != 1 || got[0].ID != first.ID {
		t.Fatalf("after the restore b sees %+v", got)
	}
	if it := mustCreate(t, a, "Fourth"); it.Text != "Fourth" {
		t.Fatal(it)
	}
	if got := listAll(t, a); len(got) != 2 {
		t.Errorf("a sees %d items after the restore and a create, want 2", len(got))
	}
}

// Logs with their own caches on one thread, many goroutines each: every
// create lands (conflicts are read and tried again).
func TestThreadItemsConcurrentWritersLoseNothing(t *testing.T) {
	clk := newClock()
	db := thread.New(thread.NewMemoryStore(), nil)
	logs := []*Log{dbLog(t, db, clk), dbLog(t, db, clk), dbLog(t, db, clk)}
	const per = 15
	var wg sync.WaitGroup
	errs := make(chan error, len(logs)*4*per)
	for i, l := range logs {
		for g := range 4 {
			wg.Go(func() {
				for k := range per {
					if _, err := l.Create(t.Context(), CreateOptions{Text: fmt.Sprintf("log %d goroutine %d item %d", i, g, k)}); err != nil {
						errs <- err
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := listAll(t, dbLog(t, db, clk))
	if len(got) != len(logs)*4*per {
		t.Fatalf("%d items, want %d", len(got), len(logs)*4*per)
	}
	seen := map[string]bool{}
	for _, it := range got {
		if seen[it.ID] {
			t.Errorf("id %s twice", it.ID)
		}
		seen[it.ID] = true
	}
}

// A change too big for one message is several messages of one commit.
func TestThreadItemsLargeChangeSplits(t *testing.T) {
	clk := newClock()
	db := thread.New(thread.NewMemoryStore(), nil)
	l := dbLog(t, db, clk)
	var open []json.RawMessage
	for i := range 200 {
		open = append(open, json.RawMessage(fmt.Sprintf("%q", fmt.Sprintf("item %d %s", i, strings.Repeat("x", 2900)))))
	}
	started(t, l, "big")
	if _, err := l.SessionClose(t.Context(), CloseOptions{SessionID: "big", OpenThreads: open}); err != nil {
		t.Fatal(err)
	}
	th, err := db.Thread(t.Context(), ThreadID("", DefaultProject))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := th.Len(t.Context()); n < 2 {
		t.Errorf("%d messages, want the change split", n)
	}
	if got := listAll(t, dbLog(t, db, clk)); len(got) != 200 {
		t.Errorf("%d items read back, want 200", len(got))
	}
}

// TestEventMessagesEncoding checks that an event's data is the JSON of
// the event as encoding/json writes it without HTML escapes (put, then
// drop), each message within the budget unless one item is over it, the
// drops in the first message only, and the items put in order.
func TestEventMessagesEncoding(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var items []Item
	for i := range 7 {
		items = append(items, Item{ID: fmt.Sprintf("t-%08x", i), Text: fmt.Sprintf("item %d <&> \u2028 \"q\" %s", i, strings.Repeat("é", 40*i)),
			Status: StatusOpen, CreatedAt: at, SourceSession: "s1"})
	}
	items[3].Status, items[3].ResolvedAt, items[3].ResolutionNote = StatusResolved, at, "done"
	for _, c := range []struct {
		name   string
		put    []Item
		drop   []string
		budget int
	}{
		{"put", items, nil, 1 << 20},
		{"drop", nil, []string{"t-00000001", "t-00000002"}, 1 << 20},
		{"both", items[:2], []string{"t-0000000a"}, 1 << 20},
		{"split", items, []string{"t-0000000a"}, 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			msgs := eventMessages(c.put, c.drop, c.budget)
			var put []Item
			for i, m := range msgs {
				var d message.Data
				for _, part := range m.Contents {
					if x, ok := part.(message.Data); ok {
						d = x
					}
				}
				if m.Role != EventRole || d.MediaType != EventMediaType {
					t.Fatalf("message %d: role %q, data %q", i, m.Role, d.MediaType)
				}
				var ev event
				if err := json.Unmarshal(d.Data, &ev); err != nil {
					t.Fatalf("message %d: %v: %s", i, err, d.Data)
				}
				var want bytes.Buffer
				enc := json.NewEncoder(&want)
				enc.SetEscapeHTML(false)
				if err := enc.Encode(ev); err != nil {
					t.Fatal(err)
				}
				if got := string(d.Data); got != strings.TrimSuffix(want.String(), "\n") {
					t.Errorf("message %d data\n%s\nwant\n%s", i, got, want.String())
				}
				if i == 0 && !slices.Equal(ev.Drop, c.drop) || i > 0 && ev.Drop != nil {
					t.Errorf("message %d drops %v, want %v in the first message only", i, ev.Drop, c.drop)
				}
				if size := len(d.Data); len(ev.Put) > 1 && size > c.budget+200 {
					t.Errorf("message %d: %d bytes of data for a budget of %d", i, size, c.budget)
				}
				put = append(put, ev.Put...)
			}
			if c.name == "split" && len(msgs) < 2 {
				t.Errorf("%d messages, want the change split", len(msgs))
			}
			if len(put) != len(c.put) {
				t.Fatalf("%d items put, want %d", len(put), len(c.put))
			}
			for i := range put {
				if !put[i].equal(c.put[i]) {
					t.Errorf("item %d put = %+v, want %+v", i, put[i], c.put[i])
				}
			}
		})
	}
}

func TestThreadItemsRefuseOtherThreads(t *testing.T) {
	db := thread.New(thread.NewMemoryStore(), nil)
	if _, err := db.Create(t.Context(), thread.CreateOptions{ID: ThreadID("", DefaultProject)}); err != nil {
		t.Fatal(err)
	}
	l := dbLog(t, db, newClock())
	if _, err := l.List(t.Context(), ListOptions{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("list on a thread that is no work log: %v, want ErrInvalid", err)
	}
	if _, err := l.Create(t.Context(), CreateOptions{Text: "x"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("create on a thread that is no work log: %v, want ErrInvalid", err)
	}
}

// Each tenant and project of a Logs has its own items and sessions.
func TestLogsKeepTenantsApart(t *testing.T) {
	clk := newClock()
	db := thread.New(thread.NewMemoryStore(), nil)
	ls := NewLogs(db, &LogsOptions{Now: clk.Now, MaxLogs: 2})
	get := func(tenant, project string) *Log {
		l, err := ls.Log(tenant, project)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	mustCreate(t, get("acme", ""), "Acme's item")
	mustCreate(t, get("globex", ""), "Globex's item")
	mustCreate(t, get("acme", "other"), "Acme's other project")
	for _, c := range []struct{ tenant, project, want string }{
		{"acme", "default", "Acme's item"}, {"globex", "", "Globex's item"}, {"acme", "other", "Acme's other project"},
	} {
		got := listAll(t, get(c.tenant, c.project)) // some were evicted (MaxLogs 2): read again
		if len(got) != 1 || got[0].Text != c.want {
			t.Errorf("%s/%s: %+v, want %q", c.tenant, c.project, got, c.want)
		}
	}
	// The same session id in two tenants: two sessions.
	for _, tenant := range []string{"acme", "globex"} {
		l := get(tenant, "")
		if _, err := l.SessionStart(t.Context(), StartOptions{SessionID: "s1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := l.SessionClose(t.Context(), CloseOptions{SessionID: "s1"}); err != nil {
			t.Fatal(err)
		}
		// Shared Logs have no current session.
		if it := mustCreate(t, l, "After "+tenant+"'s session"); it.SourceSession != "" {
			t.Errorf("item of a shared Log got session %q", it.SourceSession)
		}
	}
	clk.Advance(1)
	res, err := get("globex", "").SessionStart(t.Context(), StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range res.OpenThreads {
		if strings.Contains(it.Text, "Acme") {
			t.Errorf("globex's session start carries acme's item %+v", it)
		}
	}
	if _, err := ls.Log("acme", strings.Repeat("p", 201)); !errors.Is(err, ErrInvalid) {
		t.Errorf("long project: %v", err)
	}
}

// A shared Log (a server's) has no current session: closing without an
// id closes a new session, never the one another caller started.
func TestSharedLogHasNoCurrentSession(t *testing.T) {
	clk := newClock()
	ls := NewLogs(thread.New(thread.NewMemoryStore(), nil), &LogsOptions{Now: clk.Now})
	l, err := ls.Log("", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.SessionStart(t.Context(), StartOptions{SessionID: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	if l.Session() != "" {
		t.Errorf("shared Log's current session %q", l.Session())
	}
	res, err := l.SessionClose(t.Context(), CloseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.SessionID == "someone-else" {
		t.Error("closing without an id closed another caller's session")
	}
}

// Errors quote what they were given shortened, however long it was.
func TestErrorsShortenInput(t *testing.T) {
	l := newLog(t, newClock())
	mustCreate(t, l, "Alpha")
	long := strings.Repeat("z", 100000)
	_, err := l.Resolve(t.Context(), ResolveOptions{TextMatch: long})
	if !errors.Is(err, ErrNotFound) || len(err.Error()) > 400 {
		t.Errorf("error of %d bytes: %.200v", len(err.Error()), err)
	}
	_, err = l.Create(t.Context(), CreateOptions{Text: "x", Session: long})
	if !errors.Is(err, ErrInvalid) || len(err.Error()) > 400 {
		t.Errorf("error of %d bytes: %.200v", len(err.Error()), err)
	}
}

// FuzzFold feeds arbitrary event data to fold: it never panics, and the
// items it makes have distinct ids and texts, whatever the thread holds.
func FuzzFold(f *testing.F) {
	f.Add([]byte(`{"put":[{"id":"t-00000001","text":"a","status":"open"}]}`), []byte(`{"drop":["t-00000001"],"put":[{"id":"t-00000002","text":"b","status":"resolved"}]}`))
	f.Add([]byte(`{"put":[{"id":"","text":"a"}]}`), []byte(`not json`))
	f.Add([]byte(`{"put":[{"id":"t-1","text":" "},{"id":"t-1","text":"x","status":"weird"}]}`), []byte(`{"drop":[]}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		msgs := []message.Message{
			message.New(EventRole, message.Data{MediaType: EventMediaType, Data: a}),
			message.User("a note"),
			message.New(EventRole, message.Data{MediaType: EventMediaType, Data: b}),
		}
		first := fold(nil, msgs[:1])
		all := fold(first, msgs[1:])
		if again := fold(nil, msgs); len(again) != len(all) {
			t.Fatalf("folding at once gives %d items, in two steps %d", len(again), len(all))
		}
		seen := map[string]bool{}
		for _, e := range all {
			if e.it.ID == "" || seen[e.it.ID] || strings.TrimSpace(e.it.Text) == "" {
				t.Fatalf("item %+v (seen %v)", e.it, seen[e.it.ID])
			}
			if e.it.Status != StatusOpen && e.it.Status != StatusResolved {
				t.Fatalf("status %q", e.it.Status)
			}
			seen[e.it.ID] = true
		}
	})
}

// A DB with a small message limit gets its changes in smaller messages,
// and an item over the limits of an item (carried from a session record
// another tool wrote) is cut to them instead of making every later change
// fail.
func TestThreadItemsFitTheDB(t *testing.T) {
	clk := newClock()
	db := thread.New(thread.NewMemoryStore(), &thread.Options{Limits: thread.Limits{MessageBytes: 32 << 10}})
	sessions := NewMemorySessions()
	l, err := OpenDB(db, &Options{Now: clk.Now, Sessions: sessions})
	if err != nil {
		t.Fatal(err)
	}
	var open []json.RawMessage
	for i := range 40 {
		open = append(open, json.RawMessage(fmt.Sprintf("%q", fmt.Sprintf("item %d %s", i, strings.Repeat("y", 2900)))))
	}
	started(t, l, "s1")
	if _, err := l.SessionClose(t.Context(), CloseOptions{SessionID: "s1", OpenThreads: open}); err != nil {
		t.Fatalf("a change of 40 long items under a 32 KiB message limit: %v", err)
	}
	huge := fmt.Sprintf(`{"id":"t-0000beef","text":%q,"status":"open","resolution_note":%q}`, strings.Repeat("z", 200000), strings.Repeat("n", 50000))
	if err := sessions.CloseSession(t.Context(), Session{ID: "other-tool", Project: DefaultProject, StartedAt: clk.Now(), ClosedAt: clk.Now(),
		OpenThreads: []json.RawMessage{json.RawMessage(huge)}}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if _, err := l.SessionStart(t.Context(), StartOptions{}); err != nil {
		t.Fatalf("session start carrying a 200,000-character item: %v", err)
	}
	var got Item
	for _, it := range listAll(t, dbLog(t, db, clk)) {
		if it.ID == "t-0000beef" {
			got = it
		}
	}
	if n := utf8.RuneCountInString(got.Text); n == 0 || n > MaxTextLen+1 || utf8.RuneCountInString(got.ResolutionNote) > MaxNoteLen+1 {
		t.Errorf("the carried item has %d characters of text, %d of note", n, utf8.RuneCountInString(got.ResolutionNote))
	}
	mustCreate(t, l, "Still writable")
}

// A change whose items are mostly '<', '>' and '&' (code, markup) must fit
// in the thread's messages: the event's data is what was measured, not
// six times more once JSON escapes those characters for HTML.
func TestThreadItemsMarkupChangeFits(t *testing.T) {
	clk := newClock()
	db := thread.New(thread.NewMemoryStore(), nil)
	l := dbLog(t, db, clk)
	var open []json.RawMessage
	for i := range 100 {
		b, _ := json.Marshal(fmt.Sprintf("item %d %s", i, strings.Repeat("<&>", 990)))
		open = append(open, b)
	}
	started(t, l, "markup")
	if _, err := l.SessionClose(t.Context(), CloseOptions{SessionID: "markup", OpenThreads: open}); err != nil {
		t.Fatal(err)
	}
	got := listAll(t, dbLog(t, db, clk))
	if len(got) != 100 || !strings.HasSuffix(got[0].Text, "<&>") {
		t.Fatalf("%d items read back", len(got))
	}
}

// After its own write, a Log knows the id of the last message it folded,
// so that another process's later change is folded alone: the entries of
// the items nobody changed stay those it had.
func TestThreadItemsFoldOnlyNewAfterOwnWrite(t *testing.T) {
	clk := newClock()
	db := thread.New(thread.NewMemoryStore(), nil)
	a, b := dbLog(t, db, clk), dbLog(t, db, clk)
	mustCreate(t, a, "First")  // made by Create
	mustCreate(t, a, "Second") // by Commit
	ta := a.items.(*threadItems)
	th, err := db.Thread(t.Context(), ta.id)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := th.Messages(t.Context(), thread.ReadOptions{Last: 1})
	if err != nil {
		t.Fatal(err)
	}
	if c := ta.cached(); c.last != msgs[0].ID {
		t.Errorf("a's cache says the last message is %q, the thread's is %q", c.last, msgs[0].ID)
	}
	before := ta.cached().s.entries
	mustCreate(t, b, "Third")
	listAll(t, a)
	after := ta.cached().s.entries
	if len(after) != 3 || after[0] != before[0] || after[1] != before[1] {
		t.Errorf("a read the whole thread again for one new message")
	}
}

// A write that finds the thread deleted under it makes it again, as the
// first write does, rather than failing as "not found".
func TestThreadItemsWriteAfterDelete(t *testing.T) {
	clk := newClock()
	db := thread.New(thread.NewMemoryStore(), nil)
	l := dbLog(t, db, clk)
	mustCreate(t, l, "First")
	ti := l.items.(*threadItems)
	deleted := false
	_, err := ti.update(t.Context(), func(s *snapshot) ([]*entry, bool, error) {
		if !deleted {
			deleted = true
			if err := db.Delete(t.Context(), ti.id); err != nil {
				t.Fatal(err)
			}
		}
		return append(slices.Clip(s.entries), newEntry(Item{ID: NewID(), Text: "Second", Status: StatusOpen, CreatedAt: clk.Now()})), true, nil
	})
	if err != nil {
		t.Fatalf("write after a delete: %v", err)
	}
	if got := listAll(t, dbLog(t, db, clk)); len(got) != 1 || got[0].Text != "Second" {
		t.Errorf("after the delete and a write: %+v", got)
	}
}

// The tenant "" is a tenant like the others on a server with keys: it
// neither reads another tenant's sessions (through a project named
// "tenant/…", the form a shared session table once used) nor writes into
// them (through a session id "tenant:…"): such names are its own.
func TestLogsDefaultTenantSessionsApart(t *testing.T) {
	clk := newClock()
	ls := NewLogs(thread.New(thread.NewMemoryStore(), nil), &LogsOptions{Now: clk.Now})
	get := func(tenant, project string) *Log {
		l, err := ls.Log(tenant, project)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	acme := get("acme", "")
	if _, err := acme.SessionStart(t.Context(), StartOptions{SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	secret, _ := json.Marshal("Acme's secret work")
	if _, err := acme.SessionClose(t.Context(), CloseOptions{SessionID: "s1", OpenThreads: []json.RawMessage{secret}}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(1000)

	// Reading: the tenant "" starts a session in the project "acme/default".
	spy := get("", "acme/"+DefaultProject)
	res, err := spy.SessionStart(t.Context(), StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.SessionsAggregated != 0 || len(res.OpenThreads) != 0 {
		t.Errorf("the tenant \"\" aggregated %d of acme's sessions: %+v", res.SessionsAggregated, res.OpenThreads)
	}
	if got := listAll(t, spy); len(got) != 0 {
		t.Errorf("the tenant \"\" got acme's items: %+v", got)
	}

	// Writing: the tenant "" closes sessions named as acme's.
	evil, _ := json.Marshal("Injected by the tenant \"\"")
	for _, id := range []string{"acme:s1", "acme:s2"} {
		started(t, spy, id)
		if _, err := spy.SessionClose(t.Context(), CloseOptions{SessionID: id, OpenThreads: []json.RawMessage{evil}}); err != nil {
			t.Errorf("the tenant \"\" closing its own session %s: %v", id, err)
		}
	}
	clk.Advance(1000)
	res, err = acme.SessionStart(t.Context(), StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range res.OpenThreads {
		if strings.Contains(it.Text, "Injected") {
			t.Errorf("acme's session start carries %q", it.Text)
		}
	}
	if res.SessionsAggregated != 1 {
		t.Errorf("acme aggregated %d sessions, want its own 1", res.SessionsAggregated)
	}
	// The tenant "" keeps its own sessions, ids with ':' that name no
	// tenant, and projects with '/'.
	own := get("", "org/repo")
	for _, id := range []string{"plain", ":colon-first"} {
		started(t, own, id)
		if _, err := own.SessionClose(t.Context(), CloseOptions{SessionID: id, OpenThreads: []json.RawMessage{evil}}); err != nil {
			t.Errorf("the tenant \"\" closing its session %s: %v", id, err)
		}
	}
	clk.Advance(1000)
	if res, err := own.SessionStart(t.Context(), StartOptions{}); err != nil || res.SessionsAggregated != 2 {
		t.Errorf("the tenant \"\"'s own sessions: %v, %d aggregated", err, res.SessionsAggregated)
	}
}
