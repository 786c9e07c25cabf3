package worklog

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/loomthreads/loom/thread"
)

// A change whose items are mostly '<', '>' and '&' (code, markup) must fit
// in the thread's messages: the event's data is what was measured, not
// six times more once JSON escapes those characters for HTML.
func TestReviewThreadItemsMarkupChangeFits(t *testing.T) {
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
func TestReviewThreadItemsFoldOnlyNewAfterOwnWrite(t *testing.T) {
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
func TestReviewThreadItemsWriteAfterDelete(t *testing.T) {
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
func TestReviewLogsDefaultTenantSessionsApart(t *testing.T) {
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
