package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loomthreads/loom/worklog"
)

// createItem creates an item in dir through the CLI and returns it.
func createItem(t *testing.T, dir string, text ...string) worklog.Item {
	t.Helper()
	var res worklog.CreateResult
	loom(t, append([]string{"items", "create", "--dir", dir, "--json"}, text...)...).ok(t).decode(t, &res)
	return res.Thread
}

// listItems lists the items of dir through the CLI, with extra flags.
func listItems(t *testing.T, dir string, flags ...string) worklog.ListResult {
	t.Helper()
	var res worklog.ListResult
	loom(t, append([]string{"items", "list", "--dir", dir, "--json"}, flags...)...).ok(t).decode(t, &res)
	return res
}

func itemTexts(items []worklog.Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Text)
	}
	return out
}

func TestItemsCreateListResolveByID(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), ".gitmem")
	r := loom(t, "items", "create", "--dir", dir, "Write", "the", "release", "notes").ok(t)
	if !strings.HasPrefix(r.stdout, "created t-") || !strings.Contains(r.stdout, "Write the release notes") {
		t.Errorf("create:\n%s", r.stdout)
	}
	long := createItem(t, dir, strings.Repeat("very long text ", 20))

	r = loom(t, "items", "list", "--dir", dir).ok(t)
	if !strings.HasPrefix(r.stdout, "ID") || !strings.Contains(r.stdout, "STATUS") || !strings.Contains(r.stdout, "CREATED") ||
		!strings.Contains(r.stdout, "Write the release notes") || !strings.Contains(r.stdout, long.ID) ||
		!strings.Contains(r.stdout, "…") || strings.Contains(r.stdout, long.Text) || !strings.Contains(r.stdout, "2 open, 0 resolved") {
		t.Errorf("list (the long text clipped):\n%s", r.stdout)
	}

	r = loom(t, "items", "resolve", "--dir", dir, long.ID, "--note", "done").ok(t)
	if !strings.Contains(r.stdout, "resolved "+long.ID) {
		t.Errorf("resolve:\n%s", r.stdout)
	}
	if got := itemTexts(listItems(t, dir).Threads); !slices.Equal(got, []string{"Write the release notes"}) {
		t.Errorf("open after resolve = %q", got)
	}
	resolved := listItems(t, dir, "--status", "resolved")
	if len(resolved.Threads) != 1 || resolved.Threads[0].ID != long.ID || resolved.Threads[0].ResolutionNote != "done" {
		t.Errorf("resolved = %+v", resolved.Threads)
	}
	if all := listItems(t, dir, "--all"); len(all.Threads) != 2 || all.TotalOpen != 1 || all.TotalResolved != 1 {
		t.Errorf("--all = %+v", all)
	}
	r = loom(t, "items", "resolve", "--dir", dir, long.ID).ok(t)
	if !strings.Contains(r.stdout, "already resolved") {
		t.Errorf("resolving again:\n%s", r.stdout)
	}
	r = loom(t, "items", "resolve", "--dir", dir, "t-00000000")
	if r.code != 1 || !strings.Contains(r.stderr, "no item t-00000000") {
		t.Errorf("unknown id: %d %s", r.code, r.stderr)
	}
}

func TestItemsResolveByNumber(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	createItem(t, dir, "first")
	second := createItem(t, dir, "second")
	createItem(t, dir, "third")
	var res worklog.ResolveResult
	loom(t, "items", "resolve", "--dir", dir, "#2", "--json").ok(t).decode(t, &res)
	if res.ResolvedThread.ID != second.ID || res.ResolvedThread.Status != worklog.StatusResolved {
		t.Errorf("#2 resolved %+v, want %s", res.ResolvedThread, second.ID)
	}
	if got := itemTexts(listItems(t, dir).Threads); !slices.Equal(got, []string{"first", "third"}) {
		t.Errorf("open = %q", got)
	}
	if r := loom(t, "items", "resolve", "--dir", dir, "#9"); r.code != 1 {
		t.Errorf("#9 past the end: exit %d, %s", r.code, r.stderr)
	}
}

func TestItemsResolveByMatchAndAmbiguousMatchListsCandidates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notes := createItem(t, dir, "Write the release notes")
	script := createItem(t, dir, "Fix the release script")
	createItem(t, dir, "Answer the issue")

	r := loom(t, "items", "resolve", "--dir", dir, "--match", "release")
	if r.code != 1 || !strings.Contains(r.stderr, notes.ID) || !strings.Contains(r.stderr, script.ID) ||
		!strings.Contains(r.stderr, "Fix the release script") || strings.Contains(r.stderr, "Answer") {
		t.Errorf("ambiguous match: exit %d\n%s", r.code, r.stderr)
	}
	if open := listItems(t, dir); open.TotalOpen != 3 {
		t.Errorf("an ambiguous match changed the items: %+v", open)
	}

	r = loom(t, "items", "resolve", "--dir", dir, "--match", "RELEASE NOTES", "--note", "written").ok(t)
	if !strings.Contains(r.stdout, "resolved "+notes.ID) {
		t.Errorf("match:\n%s", r.stdout)
	}
	if r := loom(t, "items", "resolve", "--dir", dir, "--match", "nothing like it"); r.code != 1 {
		t.Errorf("no match: exit %d", r.code)
	}
}

func TestItemsJSONShapes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var list map[string]any
	loom(t, "items", "list", "--dir", dir, "--json").ok(t).decode(t, &list)
	if threads, ok := list["threads"].([]any); !ok || len(threads) != 0 || list["total_open"] != 0.0 || list["performance"] == nil {
		t.Errorf("empty list = %v", list)
	}

	var created map[string]any
	loom(t, "items", "create", "--dir", dir, "--json", "one").ok(t).decode(t, &created)
	item, _ := created["thread"].(map[string]any)
	if item["text"] != "one" || item["status"] != "open" || !strings.HasPrefix(item["id"].(string), "t-") {
		t.Errorf("create = %v", created)
	}
	var again worklog.CreateResult
	loom(t, "items", "create", "--dir", dir, "--json", "One.").ok(t).decode(t, &again)
	if !again.Deduplicated || again.Thread.ID != item["id"] {
		t.Errorf("the same text again = %+v", again)
	}

	var resolved map[string]any
	loom(t, "--json", "items", "resolve", "--dir", dir, "#1").ok(t).decode(t, &resolved)
	if resolved["success"] != true || resolved["resolved_thread"].(map[string]any)["status"] != "resolved" {
		t.Errorf("resolve = %v", resolved)
	}
	loom(t, "items", "list", "--dir", dir, "--all", "--json").ok(t).decode(t, &list)
	if len(list["threads"].([]any)) != 1 || list["total_resolved"] != 1.0 {
		t.Errorf("list --all = %v", list)
	}
}

func TestSessionCloseThenStartCarriesOpenItems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kept := createItem(t, dir, "Kept from before")

	loom(t, "session", "start", "--dir", dir, "--id", "s-1").ok(t)
	var closed worklog.CloseResult
	loom(t, "session", "close", "--dir", dir, "--id", "s-1", "--json",
		"--open", "Docs still to write", "--open", "PROJECT STATE: loom: CLI done").ok(t).decode(t, &closed)
	if closed.SessionID != "s-1" || !slices.Contains(itemTexts(closed.Created), "Docs still to write") ||
		!slices.Equal(itemTexts(closed.OpenThreads), []string{"Docs still to write", "Kept from before"}) {
		t.Errorf("close = %+v", closed)
	}

	// The next session, with the local file gone: the session record
	// carries the items.
	if err := os.Remove(filepath.Join(dir, worklog.ThreadsFile)); err != nil {
		t.Fatal(err)
	}
	r := loom(t, "session", "start", "--dir", dir, "--id", "s-2").ok(t)
	for _, want := range []string{"session s-2 started", "1 closed session aggregated", "Open items (2)", kept.ID,
		"Kept from before", "Docs still to write", "Project state:", "PROJECT STATE: loom: CLI done"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("session start lacks %q:\n%s", want, r.stdout)
		}
	}
	var started worklog.StartResult
	loom(t, "session", "start", "--dir", dir, "--json").ok(t).decode(t, &started)
	if len(started.OpenThreads) != 2 || len(started.ProjectState) != 1 || started.SessionID == "" {
		t.Errorf("start --json = %+v", started)
	}
	if open := listItems(t, dir); open.TotalOpen != 2 {
		t.Errorf("items after start = %+v", open)
	}
}

func TestSessionStartWithNothingToCarry(t *testing.T) {
	t.Parallel()
	r := loom(t, "session", "start", "--dir", t.TempDir()).ok(t)
	if !strings.Contains(r.stdout, "No open items.") {
		t.Errorf("session start:\n%s", r.stdout)
	}
}

// Not parallel: it changes the working directory.
func TestItemsDirDefaultsToGitmem(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	loom(t, "items", "create", "here").ok(t)
	if _, err := os.Stat(filepath.Join(dir, worklog.DefaultDir, worklog.ThreadsFile)); err != nil {
		t.Errorf("no %s/%s: %v", worklog.DefaultDir, worklog.ThreadsFile, err)
	}
}

func TestItemsAndSessionUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"items"},
		{"items", "nope"},
		{"session"},
		{"items", "create", "--dir", dir},
		{"items", "create", "--dir", dir, " "},
		{"items", "list", "--dir", dir, "--status", "done"},
		{"items", "list", "--dir", dir, "extra"},
		{"items", "resolve", "--dir", dir},
		{"items", "resolve", "--dir", dir, "t-00000000", "--match", "x"},
		{"items", "resolve", "--dir", dir, "a", "b"},
		{"items", "resolve", "--dir", dir, "--bogus"},
		{"session", "start", "--dir", dir, "extra"},
		{"session", "close", "--dir", dir, "--open", ""},
	} {
		r := loom(t, args...)
		if r.code != 2 || r.stderr == "" {
			t.Errorf("loom %q: exit %d, want 2\n%s", args, r.code, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, worklog.ThreadsFile)); err == nil {
		t.Errorf("a usage error wrote %s", worklog.ThreadsFile)
	}
}

func TestHelpAndCompletionListItemsAndSession(t *testing.T) {
	t.Parallel()
	top := loom(t, "help").ok(t).stdout
	for _, name := range []string{"items list", "items create", "items resolve", "session start", "session close"} {
		if !strings.Contains(top, name) {
			t.Errorf("help lacks %q", name)
		}
	}
	if r := loom(t, "items", "--help").ok(t); !strings.Contains(r.stdout, "resolve") {
		t.Errorf("items --help:\n%s", r.stdout)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{""}, "items"},
		{[]string{""}, "session"},
		{[]string{"items", ""}, "resolve"},
		{[]string{"items", "resolve", "--"}, "--match"},
		{[]string{"session", "close", "--"}, "--open"},
	} {
		if offered := completions(t, tc.args...); !slices.Contains(offered, tc.want) {
			t.Errorf("completion of %q offers %v, not %q", tc.args, offered, tc.want)
		}
	}
}

// TestSessionsCarryThroughARemoteStore closes a session in one directory and
// starts one in another (another machine) that shares only the SQLite
// session store of --sessions: the open items come across.
func TestSessionsCarryThroughARemoteStore(t *testing.T) {
	sessions := "sqlite://" + filepath.Join(t.TempDir(), "sessions.db")
	here, there := t.TempDir(), t.TempDir()
	if r := loom(t, "items", "create", "--dir", here, "--sessions", sessions, "carry me across"); r.code != 0 {
		t.Fatalf("create: %d %s", r.code, r.stderr)
	}
	loom(t, "session", "start", "--dir", here, "--sessions", sessions, "--id", "s1").ok(t)
	if r := loom(t, "session", "close", "--dir", here, "--sessions", sessions, "--id", "s1"); r.code != 0 {
		t.Fatalf("close: %d %s", r.code, r.stderr)
	}
	r := loom(t, "session", "start", "--dir", there, "--sessions", sessions, "--json")
	if r.code != 0 || !strings.Contains(r.stdout, "carry me across") {
		t.Fatalf("start elsewhere: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := loom(t, "items", "list", "--dir", there, "--sessions", "nope://x"); r.code == 0 {
		t.Fatalf("an unknown session store scheme was accepted")
	}
}

// With --in-store the commands work on the store's work log, the one loom
// serve keeps for /v1/items: what the CLI writes, a server's Logs read,
// tenant by tenant, and sessions carry items between invocations.
func TestItemsInStore(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "loom.db")
	store := "sqlite://" + path
	in := func(args ...string) []string {
		return append(args, "--store", store, "--in-store", "--json")
	}
	var created worklog.CreateResult
	loom(t, in("items", "create", "--tenant", "acme", "--project", "site", "Renew", "the", "certificate")...).ok(t).decode(t, &created)
	loom(t, in("items", "create", "--tenant", "globex", "--project", "site", "Globex's own item")...).ok(t)

	var list worklog.ListResult
	loom(t, in("items", "list", "--tenant", "acme", "--project", "site")...).ok(t).decode(t, &list)
	if got := itemTexts(list.Threads); !slices.Equal(got, []string{"Renew the certificate"}) {
		t.Errorf("acme's items %q", got)
	}
	if _, err := os.Stat(filepath.Join(t.TempDir(), ".gitmem")); err == nil {
		t.Error("--in-store wrote a .gitmem directory")
	}

	// What loom serve would serve.
	db := openStore(t, store)
	l, err := worklog.NewLogs(db, nil).Log("acme", "site")
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.List(t.Context(), worklog.ListOptions{})
	if err != nil || len(res.Threads) != 1 || res.Threads[0].ID != created.Thread.ID {
		t.Fatalf("the server's view of acme's items: %+v, %v", res, err)
	}

	// A session closed by the CLI is carried by the next one, in its tenant.
	loom(t, in("session", "start", "--tenant", "acme", "--project", "site", "--id", "s-1")...).ok(t)
	loom(t, in("session", "close", "--tenant", "acme", "--project", "site", "--id", "s-1", "--open", "Left for next time")...).ok(t)
	var start worklog.StartResult
	loom(t, in("session", "start", "--tenant", "acme", "--project", "site")...).ok(t).decode(t, &start)
	if got := itemTexts(start.OpenThreads); !slices.Contains(got, "Left for next time") || start.SessionsAggregated != 1 {
		t.Errorf("session start carried %q from %d sessions", got, start.SessionsAggregated)
	}
	loom(t, in("session", "start", "--tenant", "globex", "--project", "site")...).ok(t).decode(t, &start)
	if got := itemTexts(start.OpenThreads); slices.Contains(got, "Left for next time") || start.SessionsAggregated != 0 {
		t.Errorf("globex's session start carried %q from %d sessions", got, start.SessionsAggregated)
	}

	// The session records are the store's: --sessions does not apply.
	r := loom(t, "items", "list", "--store", store, "--in-store", "--sessions", "sqlite://"+filepath.Join(t.TempDir(), "s.db"))
	if r.code == 0 || !strings.Contains(r.stderr, "--sessions does not apply") {
		t.Errorf("--in-store with --sessions: code %d, %s", r.code, r.stderr)
	}
}
