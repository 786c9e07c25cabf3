package worklog

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/thread"
)

func TestCreate(t *testing.T) {
	clk := newClock()
	l := newLog(t, clk)
	res, err := l.Create(t.Context(), CreateOptions{Text: "  Write the release notes  ", Session: "s-1"})
	if err != nil {
		t.Fatal(err)
	}
	it := res.Thread
	want := Item{ID: it.ID, Text: "Write the release notes", Status: StatusOpen, CreatedAt: clk.Now(), SourceSession: "s-1"}
	if d := diffItems(want, it); d != "" || !itemID(it.ID) {
		t.Errorf("(-want +got):\n%s", d)
	}
	if res.Deduplicated || res.Performance.ResultCount != 1 || res.Performance.TargetMS != 100 ||
		res.Performance.MeetsTarget != (res.Performance.LatencyMS <= 100) || !res.Performance.FullyLocal {
		t.Errorf("result %+v", res)
	}
	if d := diffItems([]Item{want}, listAll(t, l)); d != "" {
		t.Errorf("listed (-want +got):\n%s", d)
	}
}

func TestCreateRejects(t *testing.T) {
	l := newLog(t, newClock())
	for name, text := range map[string]string{
		"blank":    " \n\t ",
		"too long": strings.Repeat("é", MaxTextLen+1),
		"not UTF8": "bad \xff byte",
	} {
		if _, err := l.Create(t.Context(), CreateOptions{Text: text}); !errors.Is(err, ErrInvalid) || !errors.Is(err, thread.ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
	}
	if _, err := l.Create(t.Context(), CreateOptions{Text: strings.Repeat("é", MaxTextLen)}); err != nil {
		t.Errorf("a text of exactly %d characters: %v", MaxTextLen, err)
	}
	if _, err := l.Create(t.Context(), CreateOptions{Text: "x", Session: "bad session"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad session id: %v", err)
	}
}

func TestCreateDeduplicates(t *testing.T) {
	l := newLog(t, newClock())
	first := mustCreate(t, l, "Fix the flaky test.")
	res, err := l.Create(t.Context(), CreateOptions{Text: "fix the  FLAKY test"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Deduplicated || res.Thread.ID != first.ID || len(listAll(t, l)) != 1 {
		t.Errorf("result %+v, want the first item back", res)
	}
}

func TestCreateNormalizesText(t *testing.T) {
	l := newLog(t, newClock())
	if it := mustCreate(t, l, "t-05a7ecb6: Phase 2 release"); it.Text != "Phase 2 release" || it.ID == "t-05a7ecb6" {
		t.Errorf("item %+v: want the prefix stripped and a fresh id", it)
	}
	if it := mustCreate(t, l, `{"id":"t-12345678","text":"Inner","status":"resolved"}`); it.Text != "Inner" || !it.Open() || it.ID == "t-12345678" {
		t.Errorf("item %+v: want an open item with the inner text and a fresh id", it)
	}
}

func TestCreateUsesCurrentSession(t *testing.T) {
	l := newLog(t, newClock())
	start, err := l.SessionStart(t.Context(), StartOptions{SessionID: "s-current"})
	if err != nil {
		t.Fatal(err)
	}
	if it := mustCreate(t, l, "x"); it.SourceSession != start.SessionID || l.Session() != "s-current" {
		t.Errorf("source_session %q, want %q", it.SourceSession, start.SessionID)
	}
}

// seed gives l items: "#1 Alpha task" … , created a minute apart, the
// first ones oldest; it returns them in order.
func seed(t *testing.T, l *Log, clk *clock, texts ...string) []Item {
	t.Helper()
	var out []Item
	for _, text := range texts {
		out = append(out, mustCreate(t, l, text))
		clk.Advance(time.Minute)
	}
	return out
}

func TestListFilters(t *testing.T) {
	clk := newClock()
	l := newLog(t, clk)
	its := seed(t, l, clk, "One", "Two", "Three", "PROJECT STATE: loom: all good")
	if _, err := l.Resolve(t.Context(), ResolveOptions{ID: its[1].ID}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		opts ListOptions
		want []string
	}{
		{ListOptions{}, []string{its[0].ID, its[2].ID}},
		{ListOptions{Status: StatusOpen}, []string{its[0].ID, its[2].ID}},
		{ListOptions{Status: StatusResolved}, []string{its[1].ID}},
		{ListOptions{IncludeResolved: true}, []string{its[0].ID, its[1].ID, its[2].ID}},
		{ListOptions{Status: StatusResolved, IncludeResolved: true}, []string{its[0].ID, its[1].ID, its[2].ID}},
	} {
		res, err := l.List(t.Context(), c.opts)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(res.Threads), c.want) || res.TotalOpen != 2 || res.TotalResolved != 1 || res.Performance.ResultCount != len(c.want) {
			t.Errorf("List(%+v) = %v open %d resolved %d, want %v, 2 and 1", c.opts, ids(res.Threads), res.TotalOpen, res.TotalResolved, c.want)
		}
	}
	if _, err := l.List(t.Context(), ListOptions{Status: "closed"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown status: %v", err)
	}
}

func TestListOldestFirst(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, `[
  {"id": "t-00000002", "text": "Newer", "status": "open", "created_at": "2026-02-02T00:00:00.000Z"},
  {"id": "t-00000001", "text": "Older", "status": "open", "created_at": "2026-02-01T00:00:00.000Z"},
  {"id": "t-00000003", "text": "Same time as newer", "status": "open", "created_at": "2026-02-02T00:00:00.000Z"}
]`)
	l := openLog(t, dir, newClock(), nil)
	if got, want := ids(listAll(t, l)), []string{"t-00000001", "t-00000002", "t-00000003"}; !slices.Equal(got, want) {
		t.Errorf("ids %v, want %v", got, want)
	}
}

func TestListOtherProject(t *testing.T) {
	fileOnly(t)
	clk := newClock()
	shared := NewFileSessions(t.TempDir(), &Options{NoSync: true})
	a, err := Open(t.TempDir(), &Options{Project: "alpha", Sessions: shared, NoSync: true, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(t.TempDir(), &Options{Project: "beta", Sessions: shared, NoSync: true, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, b, "Beta's own work")
	started(t, b, "beta-1")
	if _, err := b.SessionClose(t.Context(), CloseOptions{SessionID: "beta-1"}); err != nil {
		t.Fatal(err)
	}
	res, err := a.List(t.Context(), ListOptions{Project: "beta"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Threads) != 1 || res.Threads[0].Text != "Beta's own work" {
		t.Errorf("alpha listing beta: %+v", res.Threads)
	}
	if got := listAll(t, a); len(got) != 0 {
		t.Errorf("alpha's own list: %+v", got)
	}
	if res, _ := a.List(t.Context(), ListOptions{Project: "alpha"}); len(res.Threads) != 0 {
		t.Errorf("alpha listing alpha: %+v", res.Threads)
	}
}

func TestResolveByID(t *testing.T) {
	clk := newClock()
	l := newLog(t, clk)
	its := seed(t, l, clk, "Alpha", "Beta")
	res, err := l.Resolve(t.Context(), ResolveOptions{ID: its[1].ID, Note: "done"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ResolvedThread.ID != its[1].ID || res.ResolvedThread.Open() || !res.Success || res.AlreadyResolved {
		t.Errorf("result %+v", res)
	}
	if _, err := l.Resolve(t.Context(), ResolveOptions{ID: "t-ffffffff"}); !errors.Is(err, ErrNotFound) || !errors.Is(err, thread.ErrNotFound) {
		t.Errorf("unknown id: %v, want ErrNotFound", err)
	}
}

func TestResolveExactIDWins(t *testing.T) {
	clk := newClock()
	l := newLog(t, clk)
	its := seed(t, l, clk, "Alpha", "Beta")
	// Another item's text holds the first one's id.
	other := mustCreate(t, l, "Follow up on "+its[0].ID)
	res, err := l.Resolve(t.Context(), ResolveOptions{TextMatch: its[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	if res.ResolvedThread.ID != its[0].ID {
		t.Errorf("resolved %s, want %s (exact id), not %s (text)", res.ResolvedThread.ID, its[0].ID, other.ID)
	}
	// The id wins over the text match when both are given.
	res, err = l.Resolve(t.Context(), ResolveOptions{ID: its[1].ID, TextMatch: "follow up"})
	if err != nil || res.ResolvedThread.ID != its[1].ID {
		t.Errorf("resolved %+v, %v; want %s", res, err, its[1].ID)
	}
	// An id that names nothing falls back to the text.
	res, err = l.Resolve(t.Context(), ResolveOptions{ID: "t-00000000", TextMatch: "follow up"})
	if err != nil || res.ResolvedThread.ID != other.ID {
		t.Errorf("resolved %+v, %v; want %s", res, err, other.ID)
	}
}

func TestResolveByText(t *testing.T) {
	clk := newClock()
	l := newLog(t, clk)
	its := seed(t, l, clk, "Publish the npm package", "Write the changelog")
	res, err := l.Resolve(t.Context(), ResolveOptions{TextMatch: "  NPM Package \n"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ResolvedThread.ID != its[0].ID {
		t.Errorf("resolved %s, want %s", res.ResolvedThread.ID, its[0].ID)
	}
}

func TestResolveTextOpenFirst(t *testing.T) {
	clk := newClock()
	l := newLog(t, clk)
	its := seed(t, l, clk, "Deploy the API", "Deploy the API docs")
	if _, err := l.Resolve(t.Context(), ResolveOptions{ID: its[0].ID}); err != nil {
		t.Fatal(err)
	}
	// Both texts contain "deploy the api"; only the second is open.
	res, err := l.Resolve(t.Context(), ResolveOptions{TextMatch: "deploy the api"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ResolvedThread.ID != its[1].ID || res.AlreadyResolved {
		t.Errorf("result %+v, want %s resolved now", res, its[1].ID)
	}
}

func TestResolveAmbiguous(t *testing.T) {
	clk := newClock()
	l := newLog(t, clk)
	its := seed(t, l, clk, "Fix login bug", "Fix logout bug", "Write docs")
	before := contentOf(t, l)
	_, err := l.Resolve(t.Context(), ResolveOptions{TextMatch: "fix"})
	var amb *AmbiguousError
	if !errors.As(err, &amb) || !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("err %v, want an *AmbiguousError", err)
	}
	if got := ids(amb.Candidates); !slices.Equal(got, []string{its[0].ID, its[1].ID}) {
		t.Errorf("candidates %v", got)
	}
	for _, s := range []string{its[0].ID, its[1].ID, "Fix login bug", "Fix logout bug"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q does not name %q", err, s)
		}
	}
	if after := contentOf(t, l); string(after) != string(before) {
		t.Error("an ambiguous resolve changed the file")
	}
	// Several resolved matches and no open one: ambiguous too.
	for _, it := range its[:2] {
		if _, err := l.Resolve(t.Context(), ResolveOptions{ID: it.ID}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Resolve(t.Context(), ResolveOptions{TextMatch: "bug"}); !errors.As(err, &amb) {
		t.Errorf("two resolved matches: %v, want ambiguous", err)
	}
}

func TestResolveNotFound(t *testing.T) {
	clk := newClock()
	l := newLog(t, clk)
	seed(t, l, clk, "Alpha", "PROJECT STATE: loom: nothing to see")
	for _, q := range []string{"gamma", "project state"} {
		if _, err := l.Resolve(t.Context(), ResolveOptions{TextMatch: q}); !errors.Is(err, ErrNotFound) {
			t.Errorf("%q: err %v, want ErrNotFound", q, err)
		}
	}
	if _, err := l.Resolve(t.Context(), ResolveOptions{TextMatch: "  "}); !errors.Is(err, ErrInvalid) {
		t.Errorf("no query: %v, want ErrInvalid", err)
	}
}

func TestResolveAlreadyResolved(t *testing.T) {
	clk := newClock()
	l := newLog(t, clk)
	its := seed(t, l, clk, "Alpha")
	first, err := l.Resolve(t.Context(), ResolveOptions{ID: its[0].ID, Note: "first"})
	if err != nil {
		t.Fatal(err)
	}
	before := contentOf(t, l)
	clk.Advance(time.Hour)
	res, err := l.Resolve(t.Context(), ResolveOptions{TextMatch: "alpha", Note: "second"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || !res.AlreadyResolved || !strings.Contains(res.Message, "already resolved") {
		t.Errorf("result %+v, want success saying it was already resolved", res)
	}
	if d := diffItems(first.ResolvedThread, res.ResolvedThread); d != "" {
		t.Errorf("the item changed (-first +second):\n%s", d)
	}
	if after := contentOf(t, l); string(after) != string(before) {
		t.Error("resolving a resolved item changed the file")
	}
}

func TestResolveRecords(t *testing.T) {
	clk := newClock()
	l := newLog(t, clk)
	its := seed(t, l, clk, "Alpha")
	clk.Advance(time.Hour)
	res, err := l.Resolve(t.Context(), ResolveOptions{ID: its[0].ID, Note: "Fixed in #12", Session: "s-resolver"})
	if err != nil {
		t.Fatal(err)
	}
	want := its[0]
	want.Status, want.ResolvedAt, want.ResolvedBySession, want.ResolutionNote = StatusResolved, clk.Now(), "s-resolver", "Fixed in #12"
	if d := diffItems(want, res.ResolvedThread); d != "" {
		t.Errorf("result (-want +got):\n%s", d)
	}
	if d := diffItems([]Item{want}, listAll(t, newLogAt(t, l.Dir()))); d != "" {
		t.Errorf("file (-want +got):\n%s", d)
	}
}

func newLogAt(t *testing.T, dir string) *Log { return openLog(t, dir, newClock(), nil) }

func TestResolveNoteLimit(t *testing.T) {
	clk := newClock()
	l := newLog(t, clk)
	its := seed(t, l, clk, "Alpha")
	if _, err := l.Resolve(t.Context(), ResolveOptions{ID: its[0].ID, Note: strings.Repeat("n", MaxNoteLen+1)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("long note: %v, want ErrInvalid", err)
	}
	if _, err := l.Resolve(t.Context(), ResolveOptions{ID: its[0].ID, Note: strings.Repeat("n", MaxNoteLen)}); err != nil {
		t.Errorf("note of %d characters: %v", MaxNoteLen, err)
	}
}

func TestResolveDuplicateOf(t *testing.T) {
	clk := newClock()
	l := newLog(t, clk)
	its := seed(t, l, clk, "Login fails on Safari", "Safari users cannot log in", "Unrelated")
	res, err := l.Resolve(t.Context(), ResolveOptions{ID: its[1].ID, Note: "Duplicate of " + strings.ToUpper(its[0].ID[2:]) + " — no: duplicate of " + its[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.AlsoResolved) != 1 || res.AlsoResolved[0].ID != its[0].ID || res.AlsoResolved[0].Open() {
		t.Fatalf("also resolved %+v, want %s", res.AlsoResolved, its[0].ID)
	}
	list, _ := l.List(t.Context(), ListOptions{})
	if got := ids(list.Threads); !slices.Equal(got, []string{its[2].ID}) {
		t.Errorf("open after: %v", got)
	}
	// A duplicate that is resolved already is left as it is.
	its2 := seed(t, l, clk, "Another one")
	res, err = l.Resolve(t.Context(), ResolveOptions{ID: its2[0].ID, Note: "duplicate of " + its[0].ID})
	if err != nil || len(res.AlsoResolved) != 0 {
		t.Errorf("result %+v, %v: want nothing else resolved", res, err)
	}
}

func TestResolveNth(t *testing.T) {
	dir := t.TempDir()
	// In the file, newest first: #N counts by creation time.
	writeFile(t, dir, `[
  {"id": "t-00000003", "text": "Third", "status": "open", "created_at": "2026-02-03T00:00:00.000Z"},
  {"id": "t-00000002", "text": "Second", "status": "resolved", "created_at": "2026-02-02T00:00:00.000Z"},
  {"id": "t-00000001", "text": "First", "status": "open", "created_at": "2026-02-01T00:00:00.000Z"},
  {"id": "t-00000004", "text": "PROJECT STATE: x", "status": "open", "created_at": "2026-01-01T00:00:00.000Z"}
]`)
	l := openLog(t, dir, newClock(), nil)
	res, err := l.Resolve(t.Context(), ResolveOptions{TextMatch: "#2"})
	if err != nil || res.ResolvedThread.ID != "t-00000003" {
		t.Fatalf("#2 resolved %+v, %v; want t-00000003", res, err)
	}
	res, err = l.Resolve(t.Context(), ResolveOptions{ID: "#1"})
	if err != nil || res.ResolvedThread.ID != "t-00000001" {
		t.Fatalf("#1 resolved %+v, %v; want t-00000001", res, err)
	}
	mustCreate(t, l, "Fourth")
	mustCreate(t, l, "Fifth")
	for _, q := range []string{"#3", "#0", "#99999999999999999999999"} {
		_, err := l.Resolve(t.Context(), ResolveOptions{TextMatch: q})
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "there are 2 open items") {
			t.Errorf("%s: %v, want not found saying there are 2", q, err)
		}
	}
}

func TestSessionStartAggregates(t *testing.T) {
	clk := newClock()
	l := newLog(t, clk)
	local := mustCreate(t, l, "Local open item")
	sessions := l.sessions.(*FileSessions)
	closeAt := func(id string, at time.Time, items ...any) {
		s := session(id, at, items...)
		s.Project = DefaultProject
		if err := sessions.CloseSession(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	closeAt("s-old", clk.Now().AddDate(0, 0, -20), "Too old to carry")
	for i := range 6 {
		closeAt(fmt.Sprint("s-", i), clk.Now().AddDate(0, 0, -1-i), fmt.Sprintf("From session %d", i))
	}
	closeAt("s-new", clk.Now().Add(-time.Hour), "PROJECT STATE: loom: OD-1done", "local open item.",
		resolved("t-77777777", "Resolved elsewhere", day(-3), day(-1)))

	res, err := l.SessionStart(t.Context(), StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, it := range res.OpenThreads {
		texts = append(texts, it.Text)
	}
	want := []string{"From session 3", "From session 2", "From session 1", "From session 0", "Local open item"}
	if !slices.Equal(texts, want) {
		t.Errorf("open %q, want %q", texts, want)
	}
	if res.SessionsAggregated != 5 || len(res.ProjectState) != 1 || len(res.RecentlyResolved) != 1 || res.SessionID == "" || l.Session() != res.SessionID {
		t.Errorf("result %+v", res)
	}
	// The merged list is written back: another Log sees it.
	got := listAll(t, newLogAt(t, l.Dir()))
	if len(got) != 6 || !slices.ContainsFunc(got, func(it Item) bool { return it.ID == local.ID }) {
		t.Errorf("file after session_start: %+v", got)
	}
	// Starting again changes nothing: the file is not rewritten.
	before := contentOf(t, l)
	if _, err := l.SessionStart(t.Context(), StartOptions{}); err != nil {
		t.Fatal(err)
	}
	if after := contentOf(t, l); string(after) != string(before) {
		t.Errorf("a second session_start rewrote the file")
	}
}

func TestSessionCloseAndCarry(t *testing.T) {
	// Two machines: each its own directory, one shared session store.
	clk := newClock()
	shared := NewFileSessions(t.TempDir(), &Options{NoSync: true})
	a := openLog(t, t.TempDir(), clk, shared)
	b := openLog(t, t.TempDir(), clk, shared)

	if _, err := a.SessionStart(t.Context(), StartOptions{SessionID: "a-1"}); err != nil {
		t.Fatal(err)
	}
	done := mustCreate(t, a, "Finished during the session")
	if _, err := a.Resolve(t.Context(), ResolveOptions{ID: done.ID}); err != nil {
		t.Fatal(err)
	}
	payload := []json.RawMessage{
		json.RawMessage(`"Plain payload item"`),
		json.RawMessage(`{"id":"t-0000abcd","note":"Noted item","status":"open"}`),
		json.RawMessage(`"PROJECT STATE: loom: OD-9~wip"`),
		json.RawMessage(`"finished during the session"`), // stale: resolved above
	}
	clk.Advance(time.Hour)
	res, err := a.SessionClose(t.Context(), CloseOptions{OpenThreads: payload})
	if err != nil {
		t.Fatal(err)
	}
	if res.SessionID != "a-1" || a.Session() != "" {
		t.Errorf("closed %s, current now %q", res.SessionID, a.Session())
	}
	var texts []string
	for _, it := range res.OpenThreads {
		texts = append(texts, it.Text)
		if it.SourceSession != "a-1" && it.ID != "t-0000abcd" {
			t.Errorf("item %+v: want source a-1", it)
		}
	}
	if want := []string{"Plain payload item", "Noted item"}; !slices.Equal(texts, want) {
		t.Errorf("recorded open %q, want %q", texts, want)
	}
	if len(res.Created) != 2 {
		t.Errorf("created %+v, want the two new items", res.Created)
	}
	// The local file has the payload's items, not the project state, and
	// the stale copy did not reopen the resolved item.
	if got := listAll(t, a); len(got) != 3 {
		t.Errorf("local items %+v", got)
	}

	// Machine b starts a session: it gets a's items, the resolution and
	// the project state.
	clk.Advance(time.Hour)
	start, err := b.SessionStart(t.Context(), StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	texts = nil
	for _, it := range start.OpenThreads {
		texts = append(texts, it.Text)
	}
	if want := []string{"Plain payload item", "Noted item"}; !slices.Equal(texts, want) {
		t.Errorf("b's open %q, want %q", texts, want)
	}
	if len(start.RecentlyResolved) != 1 || start.RecentlyResolved[0].ID != done.ID {
		t.Errorf("b's recently resolved %+v, want %s", start.RecentlyResolved, done.ID)
	}
	if len(start.ProjectState) != 1 || start.ProjectState[0].Text != "PROJECT STATE: loom: OD-9~wip" {
		t.Errorf("b's project state %+v", start.ProjectState)
	}
	// b resolves one and closes; a's next start sees it resolved.
	if _, err := b.Resolve(t.Context(), ResolveOptions{TextMatch: "noted"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SessionClose(t.Context(), CloseOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	start, err = a.SessionStart(t.Context(), StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(start.OpenThreads) != 1 || start.OpenThreads[0].Text != "Plain payload item" {
		t.Errorf("a's open after b resolved one: %+v", start.OpenThreads)
	}
}

func TestSessionCloseRejects(t *testing.T) {
	l := newLog(t, newClock())
	for _, raw := range []string{`null`, `"   "`, `"` + strings.Repeat("x", MaxTextLen+1) + `"`} {
		if _, err := l.SessionClose(t.Context(), CloseOptions{OpenThreads: []json.RawMessage{json.RawMessage(raw)}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%.20s: %v, want ErrInvalid", raw, err)
		}
	}
	if _, err := l.SessionClose(t.Context(), CloseOptions{SessionID: "no spaces allowed"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad session id: %v", err)
	}
	if got := listAll(t, l); len(got) != 0 {
		t.Errorf("a refused close added %+v", got)
	}
}

func TestPerformanceJSON(t *testing.T) {
	l := newLog(t, newClock())
	res, err := l.Create(t.Context(), CreateOptions{Text: "x"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]any
	json.Unmarshal(b, &got)
	for _, k := range []string{"latency_ms", "target_ms", "meets_target", "result_count", "cache_hit", "total_latency_ms", "network_calls_made", "fully_local"} {
		if _, ok := got["performance"][k]; !ok {
			t.Errorf("performance has no %s: %s", k, b)
		}
	}
	if got["thread"]["id"] != res.Thread.ID {
		t.Errorf("thread: %s", b)
	}
}
