package worklog

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

func open(id, text string, created time.Time) Item {
	return Item{ID: id, Text: text, Status: StatusOpen, CreatedAt: created}
}

func resolved(id, text string, created, at time.Time) Item {
	return Item{ID: id, Text: text, Status: StatusResolved, CreatedAt: created, ResolvedAt: at, ResolvedBySession: "s-res", ResolutionNote: "done"}
}

func day(n int) time.Time { return t0.AddDate(0, 0, n) }

func ids(items []Item) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.ID)
	}
	return out
}

func TestMergeDedupesByID(t *testing.T) {
	// The seed's known gap: one id, two texts (a "note" version and the
	// original) must be one item.
	got := Merge(
		[]Item{open("t-00000001", "Rotate the keys", day(-3))},
		[]Item{open("t-00000001", "Rotate the API keys (note)", day(-3))},
	)
	if d := diffItems([]Item{open("t-00000001", "Rotate the keys", day(-3))}, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestMergeDedupesByNormalizedText(t *testing.T) {
	got := Merge([]Item{
		open("t-00000001", "Fix the flaky test.", day(-3)),
		open("t-00000002", "  fix THE   flaky test ", day(-2)),
		open("t-00000003", "Fix the flaky test!?", day(-1)),
		open("t-00000004", "Fix the flaky tests", day(-1)),
	})
	if want := []string{"t-00000001", "t-00000004"}; !slices.Equal(ids(got), want) {
		t.Errorf("ids %v, want %v", ids(got), want)
	}
}

func TestMergeFirstSeenWins(t *testing.T) {
	first := Item{ID: "t-00000001", Text: "Write the docs", Status: StatusOpen, CreatedAt: day(-5), SourceSession: "s-first"}
	got := Merge([]Item{first}, []Item{{ID: "t-00000009", Text: "write the docs.", Status: StatusOpen, CreatedAt: day(-9), SourceSession: "s-second"}})
	if d := diffItems([]Item{first}, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestMergeResolvedBeatsOpen(t *testing.T) {
	o := open("t-00000001", "Upgrade the SDK", day(-5))
	r := resolved("t-00000001", "Upgrade the SDK", day(-5), day(-1))
	t.Run("resolved later", func(t *testing.T) {
		got := Merge([]Item{o}, []Item{r})
		if d := diffItems([]Item{r}, got); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
	})
	t.Run("resolved first", func(t *testing.T) {
		got := Merge([]Item{r}, []Item{o})
		if d := diffItems([]Item{r}, got); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
	})
	t.Run("same text other id", func(t *testing.T) {
		other := resolved("t-00000002", "upgrade the sdk.", day(-6), day(-1))
		got := Merge([]Item{o}, []Item{other})
		want := o
		want.Status, want.ResolvedAt, want.ResolvedBySession, want.ResolutionNote = StatusResolved, day(-1), "s-res", "done"
		if d := diffItems([]Item{want}, got); d != "" {
			t.Errorf("the first seen keeps its id and takes the resolution (-want +got):\n%s", d)
		}
	})
}

func TestMergeReturnIsNewItem(t *testing.T) {
	// The same text created again after the first was resolved is new
	// work, not the old item.
	old := resolved("t-00000001", "Renew the certificate", day(-60), day(-30))
	again := open("t-00000002", "Renew the certificate", day(-1))
	got := Merge([]Item{old, again})
	if d := diffItems([]Item{old, again}, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	// And it is the one a later copy merges into.
	got = Merge([]Item{old, again}, []Item{resolved("t-00000002", "Renew the certificate", day(-1), day(0))})
	if got[1].Open() {
		t.Errorf("the return's resolution went elsewhere: %+v", got)
	}
}

func TestMergeUnknownCreationIsNotAReturn(t *testing.T) {
	// A plain string from an old session record has no created_at: it is
	// the resolved item, not its return, so it is not resurrected.
	old := resolved("t-00000001", "Renew the certificate", day(-60), day(-30))
	stale := Item{ID: "t-00000005", Text: "Renew the certificate", Status: StatusOpen}
	got := Merge([]Item{old}, []Item{stale})
	if d := diffItems([]Item{old}, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestMergeAliasesID(t *testing.T) {
	// An item dropped for its text leaves its id pointing at the one kept.
	got := Merge(
		[]Item{open("t-00000001", "Tidy the logs", day(-3))},
		[]Item{open("t-00000002", "tidy the logs", day(-3))},
		[]Item{resolved("t-00000002", "Tidy the logs, differently worded", day(-3), day(0))},
	)
	if len(got) != 1 || got[0].ID != "t-00000001" || got[0].Open() {
		t.Errorf("got %+v, want t-00000001 resolved", got)
	}
}

func session(id string, closed time.Time, items ...any) Session {
	s := Session{ID: id, Project: "p", StartedAt: closed.Add(-time.Hour), ClosedAt: closed}
	for _, it := range items {
		var b []byte
		switch v := it.(type) {
		case Item:
			b, _ = v.MarshalJSON()
		default:
			b, _ = json.Marshal(v)
		}
		s.OpenThreads = append(s.OpenThreads, b)
	}
	return s
}

func sessionIDs(ss []Session) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return out
}

func TestSelectSessionsLastFive(t *testing.T) {
	var ss []Session
	for i := range 8 {
		ss = append(ss, session(fmt.Sprint("s", i), day(-i)))
	}
	got := SelectSessions(ss, AggregateOptions{Now: t0})
	if want := []string{"s0", "s1", "s2", "s3", "s4"}; !slices.Equal(sessionIDs(got), want) {
		t.Errorf("got %v, want %v", sessionIDs(got), want)
	}
}

func TestSelectSessionsWithin14Days(t *testing.T) {
	ss := []Session{
		session("edge", t0.Add(-14*24*time.Hour)),
		session("past", t0.Add(-14*24*time.Hour-time.Millisecond)),
		session("recent", day(-1)),
	}
	got := SelectSessions(ss, AggregateOptions{Now: t0})
	if want := []string{"recent", "edge"}; !slices.Equal(sessionIDs(got), want) {
		t.Errorf("got %v, want %v", sessionIDs(got), want)
	}
}

func TestSelectSessionsClosedOnly(t *testing.T) {
	running := session("running", time.Time{})
	running.StartedAt = day(-1)
	got := SelectSessions([]Session{running, session("closed", day(-2))}, AggregateOptions{Now: t0})
	if want := []string{"closed"}; !slices.Equal(sessionIDs(got), want) {
		t.Errorf("got %v, want %v", sessionIDs(got), want)
	}
}

func TestSelectSessionsNewestFirst(t *testing.T) {
	got := SelectSessions([]Session{session("b", day(-2)), session("c", day(-1)), session("a", day(-3))}, AggregateOptions{Now: t0})
	if want := []string{"c", "b", "a"}; !slices.Equal(sessionIDs(got), want) {
		t.Errorf("got %v, want %v", sessionIDs(got), want)
	}
}

func TestSelectSessionsOfProject(t *testing.T) {
	other := session("other", day(-1))
	other.Project = "q"
	got := SelectSessions([]Session{other, session("mine", day(-2))}, AggregateOptions{Now: t0, Project: "p"})
	if want := []string{"mine"}; !slices.Equal(sessionIDs(got), want) {
		t.Errorf("got %v, want %v", sessionIDs(got), want)
	}
}

func TestAggregateProjectStateApart(t *testing.T) {
	local := []Item{
		open("t-00000001", "Local work", day(-3)),
		open("t-00000002", "PROJECT STATE: loom: OD-1 done (local)", day(-4)),
	}
	ss := []Session{
		session("new", day(-1), "PROJECT STATE: loom: OD-1done OD-2~wip", "Session work"),
		session("old", day(-2), "PROJECT STATE: loom: OD-1~wip", "project state: lower case is work"),
	}
	a := Aggregate(local, ss, AggregateOptions{Now: t0})
	var state []string
	for _, it := range a.ProjectState {
		state = append(state, it.Text)
	}
	if want := []string{"PROJECT STATE: loom: OD-1done OD-2~wip", "PROJECT STATE: loom: OD-1~wip", "PROJECT STATE: loom: OD-1 done (local)"}; !slices.Equal(state, want) {
		t.Errorf("project state %q, want %q", state, want)
	}
	var open []string
	for _, it := range a.Open() {
		open = append(open, it.Text)
	}
	if want := []string{"Local work", "Session work", "project state: lower case is work"}; !slices.Equal(open, want) {
		t.Errorf("open %q, want %q", open, want)
	}
	// The local project state stays in the file, where it was.
	if a.Items[1].ID != "t-00000002" || len(a.Items) != 4 {
		t.Errorf("items %v", ids(a.Items))
	}
}

func TestAggregateLocalFirst(t *testing.T) {
	local := []Item{open("t-00000001", "Ship the release", day(-10))}
	ss := []Session{session("s1", day(-1), open("t-0000000a", "ship the release.", day(-12)))}
	a := Aggregate(local, ss, AggregateOptions{Now: t0})
	if d := diffItems(local, a.Items); d != "" {
		t.Errorf("the local item, first seen, wins (-want +got):\n%s", d)
	}
}

func TestAggregateNewestSessionFirst(t *testing.T) {
	ss := []Session{
		session("older", day(-2), open("t-00000001", "Text from the older session", day(-5))),
		session("newer", day(-1), open("t-00000001", "Text from the newer session", day(-5))),
	}
	a := Aggregate(nil, ss, AggregateOptions{Now: t0})
	if len(a.Items) != 1 || a.Items[0].Text != "Text from the newer session" {
		t.Errorf("items %+v, want the newer session's", a.Items)
	}
}

func TestAggregateResolvedBeatsOpen(t *testing.T) {
	// Resolved on another machine: the close record carries it resolved.
	local := []Item{open("t-00000001", "Migrate the database", day(-10))}
	ss := []Session{session("s1", day(-1), resolved("t-00000001", "Migrate the database", day(-10), day(-1)))}
	a := Aggregate(local, ss, AggregateOptions{Now: t0})
	if len(a.Items) != 1 || a.Items[0].Open() || len(a.Open()) != 0 {
		t.Fatalf("items %+v, want t-00000001 resolved", a.Items)
	}
	if len(a.RecentlyResolved) != 1 || a.RecentlyResolved[0].ID != "t-00000001" {
		t.Errorf("recently resolved %+v", a.RecentlyResolved)
	}
	// Resolved here, still open in an older record: it stays resolved.
	local = []Item{resolved("t-00000001", "Migrate the database", day(-10), day(0))}
	ss = []Session{session("s1", day(-1), open("t-00000001", "Migrate the database", day(-10)), "Migrate the database")}
	a = Aggregate(local, ss, AggregateOptions{Now: t0})
	if len(a.Items) != 1 || a.Items[0].Open() {
		t.Errorf("items %+v, want t-00000001 resolved, alone", a.Items)
	}
}

func TestAggregateNormalizesEveryFormat(t *testing.T) {
	ss := []Session{session("s1", day(-1),
		"Plain string",
		`{"id":"t-00000002","text":"JSON text","status":"open"}`,
		`{"id":"t-00000003","note":"JSON note","status":"open"}`,
		map[string]string{"item": "Legacy item", "context": "ctx"},
		"{broken",
		"t-00000006: Prefixed",
		42, nil, "",
	)}
	a := Aggregate(nil, ss, AggregateOptions{Now: t0})
	var texts []string
	for _, it := range a.Items {
		texts = append(texts, it.Text)
		if it.CreatedAt.IsZero() || !itemID(it.ID) && it.ID != "t-00000002" {
			t.Errorf("item %+v", it)
		}
	}
	if want := []string{"Plain string", "JSON text", "JSON note", "Legacy item", "{broken", "Prefixed"}; !slices.Equal(texts, want) {
		t.Errorf("texts %q, want %q", texts, want)
	}
	if a.Items[0].SourceSession != "s1" || !a.Items[0].CreatedAt.Equal(day(-1)) {
		t.Errorf("a plain string's item %+v: want source s1, created at the close", a.Items[0])
	}
	if a.Items[5].ID != "t-00000006" {
		t.Errorf("prefixed item %+v, want the prefix's id", a.Items[5])
	}
}

func TestAggregateRecentlyResolved(t *testing.T) {
	local := []Item{
		resolved("t-00000001", "Long ago", day(-60), day(-30)),
		resolved("t-00000002", "Yesterday", day(-3), day(-1)),
		resolved("t-00000003", "Today", day(-3), day(0)),
		open("t-00000004", "Open", day(-3)),
	}
	a := Aggregate(local, nil, AggregateOptions{Now: t0})
	if want := []string{"t-00000003", "t-00000002"}; !slices.Equal(ids(a.RecentlyResolved), want) {
		t.Errorf("recently resolved %v, want %v", ids(a.RecentlyResolved), want)
	}
}
