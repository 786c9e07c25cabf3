package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// result is what a run of loom left: its exit code and output.
type result struct {
	code           int
	stdout, stderr string
}

// loomOpts tune a test run.
type loomOpts struct {
	stdin string
	// terminal makes stdin and stdout look like a terminal.
	terminal bool
	env      map[string]string
}

// loom runs loom with args (no stdin, no terminal, an empty environment).
func loom(t testing.TB, args ...string) result {
	t.Helper()
	return loomWith(t, loomOpts{}, args...)
}

func loomWith(t testing.TB, o loomOpts, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &Env{
		Stdin:      strings.NewReader(o.stdin),
		Stdout:     &stdout,
		Stderr:     &stderr,
		Getenv:     func(k string) string { return o.env[k] },
		IsTerminal: func(any) bool { return o.terminal },
	}
	code := e.Main(context.Background(), args)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// ok fails the test unless r exited with 0.
func (r result) ok(t testing.TB) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit code %d, want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	return r
}

// decode reads r's stdout as one JSON document into v.
func (r result) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, r.stdout)
	}
}

// lines reads r's stdout as JSON lines.
func lines[T any](t testing.TB, r result) []T {
	t.Helper()
	var out []T
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %q is not JSON: %v", line, err)
		}
		out = append(out, v)
	}
	return out
}

// sqliteStore returns the URL of a fresh SQLite file.
func sqliteStore(t testing.TB) string {
	t.Helper()
	return "sqlite://" + filepath.Join(t.TempDir(), "loom.db")
}

// openStore opens store for the test to set up or check.
func openStore(t testing.TB, store string) *thread.DB {
	t.Helper()
	db, err := thread.Open(context.Background(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newThread creates a thread through the CLI and returns its record.
func newThread(t testing.TB, store string, args ...string) recordJSON {
	t.Helper()
	var r recordJSON
	loom(t, append([]string{"threads", "create", "--store", store, "--json"}, args...)...).ok(t).decode(t, &r)
	return r
}

// say appends a user message through the CLI.
func say(t testing.TB, store, id string, text ...string) {
	t.Helper()
	loom(t, append([]string{"threads", "append", id, "--store", store}, text...)...).ok(t)
}

func TestThreadsCreateListShow(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	a := newThread(t, store, "--title", "support chat", "--label", "app=support", "--label", "tier=gold", "--kind", "local")
	if a.Title != "support chat" || a.Kind != thread.KindLocal || a.Version != 1 || !cmp.Equal(a.Labels, map[string]string{"app": "support", "tier": "gold"}) {
		t.Errorf("create --json = %+v", a)
	}
	r := loom(t, "threads", "create", "--store", store, "--id", "th_named", "--title", "second").ok(t)
	if r.stdout != "created th_named\n" {
		t.Errorf("create printed %q", r.stdout)
	}
	say(t, store, "th_named", "hello", "there")

	out := loom(t, "threads", "list", "--store", store).ok(t).stdout
	for _, want := range []string{"ID", "TITLE", "KIND", "VERSION", "UPDATED", "LABELS", a.ID, "support chat", "app=support,tier=gold", "th_named", "second"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	// Most recently updated first: th_named had messages appended.
	recs := lines[recordJSON](t, loom(t, "threads", "list", "--store", store, "--json").ok(t))
	if len(recs) != 2 || recs[0].ID != "th_named" || recs[1].ID != a.ID || recs[0].Version != 2 {
		t.Errorf("list --json = %+v", recs)
	}
	recs = lines[recordJSON](t, loom(t, "threads", "list", "--store", store, "--json", "--label", "app=support").ok(t))
	if len(recs) != 1 || recs[0].ID != a.ID {
		t.Errorf("list --label app=support = %+v", recs)
	}
	recs = lines[recordJSON](t, loom(t, "threads", "list", "--store", store, "--json", "--kind", "undetermined").ok(t))
	if len(recs) != 1 || recs[0].ID != "th_named" {
		t.Errorf("list --kind undetermined = %+v", recs)
	}
	recs = lines[recordJSON](t, loom(t, "threads", "list", "--store", store, "--json", "--limit", "1").ok(t))
	if len(recs) != 1 {
		t.Errorf("list --limit 1 = %+v", recs)
	}

	out = loom(t, "threads", "show", "th_named", "--store", store).ok(t).stdout
	for _, want := range []string{"thread   th_named", "title    second", "version  2", "── user", "hello there"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	var shown struct {
		Thread   recordJSON        `json:"thread"`
		Version  int64             `json:"version"`
		Messages []message.Message `json:"messages"`
	}
	loom(t, "threads", "show", "th_named", "--store", store, "--json").ok(t).decode(t, &shown)
	if shown.Thread.ID != "th_named" || shown.Version != 2 || len(shown.Messages) != 1 || shown.Messages[0].Text() != "hello there" {
		t.Errorf("show --json = %+v", shown)
	}
}

func TestThreadsShowLastAndVersion(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	th := newThread(t, store)
	for _, s := range []string{"one", "two", "three"} {
		say(t, store, th.ID, s)
	}
	var shown struct {
		Version  int64             `json:"version"`
		State    map[string]any    `json:"state"`
		Messages []message.Message `json:"messages"`
	}
	loom(t, "threads", "show", th.ID, "--store", store, "--json", "--last", "2").ok(t).decode(t, &shown)
	if len(shown.Messages) != 2 || shown.Messages[0].Text() != "two" {
		t.Errorf("show --last 2 = %+v", shown.Messages)
	}
	loom(t, "threads", "show", th.ID, "--store", store, "--json", "--last", "1", "--before", shown.Messages[0].ID).ok(t).decode(t, &shown)
	if len(shown.Messages) != 1 || shown.Messages[0].Text() != "one" {
		t.Errorf("show --last 1 --before (two) = %+v", shown.Messages)
	}
	loom(t, "threads", "show", th.ID, "--store", store, "--json", "--version", "2").ok(t).decode(t, &shown)
	if shown.Version != 2 || len(shown.Messages) != 1 || shown.Messages[0].Text() != "one" {
		t.Errorf("show --version 2 = %+v", shown)
	}
	if out := loom(t, "threads", "show", th.ID, "--store", store, "--version", "2").ok(t).stdout; !strings.Contains(out, "showing version 2") {
		t.Errorf("show --version 2 does not say which version:\n%s", out)
	}
	// The state shows with the record.
	db := openStore(t, store)
	h, err := db.Thread(t.Context(), th.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.SetState(t.Context(), map[string]json.RawMessage{"wf/step": json.RawMessage(`3`)}); err != nil {
		t.Fatal(err)
	}
	if out := loom(t, "threads", "show", th.ID, "--store", store).ok(t).stdout; !strings.Contains(out, "wf/step = 3") {
		t.Errorf("show lacks the state:\n%s", out)
	}
	loom(t, "threads", "show", th.ID, "--store", store, "--json").ok(t).decode(t, &shown)
	if shown.State["wf/step"] != float64(3) {
		t.Errorf("show --json state = %v", shown.State)
	}
}

func TestThreadsAppendTextRoleAndJSON(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	th := newThread(t, store)
	if out := loom(t, "threads", "append", th.ID, "--store", store, "My", "order", "is", "late.").ok(t).stdout; out != "appended 1 message to "+th.ID+" (version 2)\n" {
		t.Errorf("append printed %q", out)
	}
	var got appendJSON
	loom(t, "threads", "append", th.ID, "--store", store, "--role", "assistant", "--json", "Let me check.").ok(t).decode(t, &got)
	if got.Thread != th.ID || got.Version != 3 || got.Commit == "" || len(got.Messages) != 1 ||
		got.Messages[0].Role != message.RoleAssistant || got.Messages[0].Text() != "Let me check." || got.Messages[0].ID == "" {
		t.Errorf("append --json = %+v", got)
	}
	// Text that looks like a flag goes after --.
	say(t, store, th.ID, "--", "-5", "degrees")
	msgs := messagesOf(t, store, th.ID)
	if len(msgs) != 3 || msgs[0].Text() != "My order is late." || msgs[2].Text() != "-5 degrees" {
		t.Errorf("messages = %v", texts(msgs))
	}
}

func TestThreadsAppendFileAndStdin(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	th := newThread(t, store)
	turn := `[{"role":"assistant","contents":[{"type":"function_call","call_id":"c1","name":"refund","arguments":"{\"order\":42}"}]},
	          {"role":"tool","contents":[{"type":"function_result","call_id":"c1","result":"\"ok\""}]}]`
	file := filepath.Join(t.TempDir(), "turn.json")
	if err := os.WriteFile(file, []byte(turn), 0o644); err != nil {
		t.Fatal(err)
	}
	loom(t, "threads", "append", th.ID, "--store", store, "--file", file).ok(t)
	r := loomWith(t, loomOpts{stdin: `[{"role":"user","contents":[{"type":"text","text":"thanks"}]}]`}, "threads", "append", th.ID, "--store", store, "--file", "-").ok(t)
	if !strings.Contains(r.stdout, "appended 1 message") {
		t.Errorf("append --file - printed %q", r.stdout)
	}
	msgs := messagesOf(t, store, th.ID)
	if len(msgs) != 3 || len(msgs[0].Calls()) != 1 || msgs[0].Calls()[0].Name != "refund" || len(msgs[1].Results()) != 1 || msgs[2].Text() != "thanks" {
		t.Errorf("messages = %+v", msgs)
	}
	out := loom(t, "threads", "show", th.ID, "--store", store).ok(t).stdout
	if !strings.Contains(out, `→ refund({"order":42})  [c1]`) || !strings.Contains(out, `← [c1] "ok"`) {
		t.Errorf("show does not render the tool call and result:\n%s", out)
	}

	r = loomWith(t, loomOpts{stdin: `{"role":"user"}`}, "threads", "append", th.ID, "--store", store, "--file", "-")
	if r.code != 1 || !strings.Contains(r.stderr, "a JSON array of messages") {
		t.Errorf("append of a malformed file: code %d, stderr %q", r.code, r.stderr)
	}
}

func TestThreadsAppendIfVersion(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	th := newThread(t, store)
	loom(t, "threads", "append", th.ID, "--store", store, "--if-version", "1", "first").ok(t)
	r := loom(t, "threads", "append", th.ID, "--store", store, "--if-version", "1", "stale")
	if r.code != 1 || !strings.Contains(r.stderr, "the thread is at version 2, not 1 (--if-version); nothing was appended") {
		t.Errorf("append on a stale version: code %d, stderr %q", r.code, r.stderr)
	}
	if msgs := messagesOf(t, store, th.ID); len(msgs) != 1 {
		t.Errorf("messages = %v", texts(msgs))
	}
}

func TestThreadsForkAndCopy(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	th := newThread(t, store, "--title", "trip", "--label", "app=x")
	say(t, store, th.ID, "one")
	say(t, store, th.ID, "two")
	say(t, store, th.ID, "three")
	msgs := messagesOf(t, store, th.ID)

	var f recordJSON
	loom(t, "threads", "fork", th.ID, "--store", store, "--json", "--at", msgs[1].ID, "--id", "th_fork", "--title", "what if").ok(t).decode(t, &f)
	if f.ID != "th_fork" || f.Title != "what if" || f.ForkedFrom.Thread != th.ID || f.ForkedFrom.Message != msgs[1].ID {
		t.Errorf("fork --json = %+v", f)
	}
	if got := texts(messagesOf(t, store, "th_fork")); !slices.Equal(got, []string{"one", "two"}) {
		t.Errorf("fork --at has %v", got)
	}
	out := loom(t, "threads", "fork", th.ID, "--store", store, "--version", "2", "--id", "th_v2").ok(t).stdout
	if out != "forked "+th.ID+" into th_v2\n" {
		t.Errorf("fork printed %q", out)
	}
	if got := texts(messagesOf(t, store, "th_v2")); !slices.Equal(got, []string{"one"}) {
		t.Errorf("fork --version 2 has %v", got)
	}

	var c recordJSON
	loom(t, "threads", "copy", th.ID, "--store", store, "--json", "--id", "th_copy").ok(t).decode(t, &c)
	if c.ID != "th_copy" || c.Title != "trip" || c.Labels["app"] != "x" || c.ForkedFrom.Thread != "" {
		t.Errorf("copy --json = %+v", c)
	}
	if got := texts(messagesOf(t, store, "th_copy")); !slices.Equal(got, []string{"one", "two", "three"}) {
		t.Errorf("copy has %v", got)
	}
	if out := loom(t, "threads", "copy", th.ID, "--store", store, "--title", "t2").ok(t).stdout; !strings.HasPrefix(out, "copied "+th.ID+" to th_") {
		t.Errorf("copy printed %q", out)
	}
}

func TestThreadsHistory(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	th := newThread(t, store)
	say(t, store, th.ID, "one")
	say(t, store, th.ID, "two")
	out := loom(t, "threads", "history", th.ID, "--store", store).ok(t).stdout
	for _, want := range []string{"VERSION", "OP", "COMMIT", "TIME", "append", "create", "(empty)"} {
		if !strings.Contains(out, want) {
			t.Errorf("history lacks %q:\n%s", want, out)
		}
	}
	entries := lines[historyJSON](t, loom(t, "threads", "history", th.ID, "--store", store, "--json").ok(t))
	if len(entries) != 3 || entries[0].Version != 3 || entries[0].Op != thread.OpAppend || entries[2].Op != thread.OpCreate || entries[0].Time.IsZero() {
		t.Errorf("history --json = %+v", entries)
	}
	entries = lines[historyJSON](t, loom(t, "threads", "history", th.ID, "--store", store, "--json", "--limit", "1").ok(t))
	if len(entries) != 1 || entries[0].Version != 3 {
		t.Errorf("history --limit 1 = %+v", entries)
	}
}

func TestThreadsCheckpointRollbackReset(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	th := newThread(t, store)
	say(t, store, th.ID, "one")
	if out := loom(t, "threads", "checkpoint", th.ID, "before", "--store", store).ok(t).stdout; out != `checkpoint "before" of `+th.ID+" at version 2\n" {
		t.Errorf("checkpoint printed %q", out)
	}
	var cp checkpointJSON
	loom(t, "threads", "checkpoint", th.ID, "second", "--store", store, "--json").ok(t).decode(t, &cp)
	if cp.Thread != th.ID || cp.Name != "second" || cp.Version != 2 || cp.Commit == "" {
		t.Errorf("checkpoint --json = %+v", cp)
	}
	cps := lines[checkpointJSON](t, loom(t, "threads", "checkpoint", th.ID, "--list", "--store", store, "--json").ok(t))
	if len(cps) != 2 || cps[0].Name != "before" || cps[1].Name != "second" {
		t.Errorf("checkpoint --list --json = %+v", cps)
	}
	if out := loom(t, "threads", "checkpoint", th.ID, "--list", "--store", store).ok(t).stdout; !strings.Contains(out, "NAME") || !strings.Contains(out, "before") {
		t.Errorf("checkpoint --list printed:\n%s", out)
	}
	loom(t, "threads", "checkpoint", th.ID, "--delete", "second", "--store", store).ok(t)
	if cps := lines[checkpointJSON](t, loom(t, "threads", "checkpoint", th.ID, "--list", "--store", store, "--json").ok(t)); len(cps) != 1 {
		t.Errorf("after --delete: %+v", cps)
	}

	say(t, store, th.ID, "two")
	var r recordJSON
	loom(t, "threads", "rollback", th.ID, "before", "--store", store, "--json").ok(t).decode(t, &r)
	if r.Version != 4 {
		t.Errorf("rollback --json = %+v", r)
	}
	if got := texts(messagesOf(t, store, th.ID)); !slices.Equal(got, []string{"one"}) {
		t.Errorf("after rollback: %v", got)
	}
	out := loom(t, "threads", "rollback", th.ID, "--version", "3", "--store", store).ok(t).stdout
	if !strings.Contains(out, "back to version 3 (now version 5)") {
		t.Errorf("rollback --version printed %q", out)
	}
	if got := texts(messagesOf(t, store, th.ID)); !slices.Equal(got, []string{"one", "two"}) {
		t.Errorf("after rollback --version 3: %v", got)
	}

	out = loom(t, "threads", "reset", th.ID, "--store", store).ok(t).stdout
	if !strings.Contains(out, "reset "+th.ID+" (now version 6)") || !strings.Contains(out, "--version 5") {
		t.Errorf("reset printed %q", out)
	}
	if got := messagesOf(t, store, th.ID); len(got) != 0 {
		t.Errorf("after reset: %v", texts(got))
	}
	loom(t, "threads", "reset", th.ID, "--store", store, "--json").ok(t).decode(t, &r)
	if r.Version != 7 {
		t.Errorf("reset --json = %+v", r)
	}
}

func TestThreadsView(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	th := newThread(t, store)
	for i := range 6 {
		say(t, store, th.ID, "question", strings.Repeat("word ", 20+i))
	}
	var v viewJSON
	loom(t, "threads", "view", th.ID, "--store", store, "--json", "--model", "gpt-4o", "--max-messages", "2").ok(t).decode(t, &v)
	if v.Thread != th.ID || len(v.Messages) != 2 || len(v.Dropped) != 4 || v.Tokens == 0 || v.Elided == nil {
		t.Errorf("view --max-messages 2 --json = %+v", v)
	}
	loom(t, "threads", "view", th.ID, "--store", store, "--json", "--strategy", "sliding_window:3").ok(t).decode(t, &v)
	if len(v.Messages) != 3 {
		t.Errorf("view --strategy sliding_window:3 kept %d messages", len(v.Messages))
	}
	loom(t, "threads", "view", th.ID, "--store", store, "--json", "--budget", "100", "--strategy", "elide_tool_results:1", "--strategy", "drop_oldest").ok(t).decode(t, &v)
	if v.Tokens > 100 || len(v.Dropped) == 0 {
		t.Errorf("view --budget 100 = %d tokens, %d dropped", v.Tokens, len(v.Dropped))
	}
	out := loom(t, "threads", "view", th.ID, "--store", store, "--budget", "100").ok(t).stdout
	if !strings.Contains(out, "tokens;") || !strings.Contains(out, "dropped") {
		t.Errorf("view printed:\n%s", out)
	}
	r := loom(t, "threads", "view", th.ID, "--store", store, "--budget", "5")
	if r.code != 1 || !strings.Contains(r.stderr, "over budget") {
		t.Errorf("view over budget: code %d, stderr %q", r.code, r.stderr)
	}
}

func TestThreadsDelete(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	th := newThread(t, store)
	if out := loom(t, "threads", "delete", th.ID, "--yes", "--store", store).ok(t).stdout; out != "deleted "+th.ID+"\n" {
		t.Errorf("delete printed %q", out)
	}
	if r := loom(t, "threads", "show", th.ID, "--store", store); r.code != 1 {
		t.Errorf("show after delete: code %d", r.code)
	}
	th = newThread(t, store)
	var got map[string]string
	loom(t, "threads", "delete", th.ID, "--yes", "--json", "--store", store).ok(t).decode(t, &got)
	if got["deleted"] != th.ID {
		t.Errorf("delete --json = %v", got)
	}
}

func TestThreadsDeleteRefusesWithoutYesWhenNotATerminal(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	th := newThread(t, store)
	r := loomWith(t, loomOpts{stdin: "y\n"}, "threads", "delete", th.ID, "--store", store)
	if r.code != 2 || !strings.Contains(r.stderr, "refusing to delete "+th.ID+" without --yes") {
		t.Errorf("delete without --yes: code %d, stderr %q", r.code, r.stderr)
	}
	loom(t, "threads", "show", th.ID, "--store", store).ok(t) // still there
}

func TestThreadsDeleteAsksOnATerminal(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	th := newThread(t, store, "--title", "keep me?")
	r := loomWith(t, loomOpts{stdin: "n\n", terminal: true}, "threads", "delete", th.ID, "--store", store)
	if r.code != 1 || !strings.Contains(r.stderr, `Delete thread `+th.ID+` ("keep me?")`) || !strings.Contains(r.stderr, "not deleted") {
		t.Errorf("delete answered n: code %d, stderr %q", r.code, r.stderr)
	}
	loom(t, "threads", "show", th.ID, "--store", store).ok(t)
	loomWith(t, loomOpts{stdin: "yes\n", terminal: true}, "threads", "delete", th.ID, "--store", store).ok(t)
	if r := loom(t, "threads", "show", th.ID, "--store", store); r.code != 1 {
		t.Errorf("show after delete: code %d", r.code)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	th := newThread(t, store)
	st := "--store=" + store
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no command given"},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"threads"}, "threads needs a subcommand"},
		{[]string{"threads", "nope"}, `unknown command "threads nope"`},
		{[]string{"--bogus", "threads", "list"}, "unknown global flag --bogus"},
		{[]string{"threads", "list", st, "--bogus"}, "unknown flag --bogus"},
		{[]string{"threads", "list", st, "extra"}, `unexpected argument "extra"`},
		{[]string{"threads", "list", st, "--label", "novalue"}, `loom: invalid --label "novalue": a label is key=value`},
		{[]string{"threads", "list", st, "--kind", "remote"}, `loom: invalid --kind "remote": a kind is undetermined, local, service or workflow`},
		{[]string{"threads", "list", st, "--limit", "many"}, `loom: invalid --limit "many": parse error`},
		{[]string{"threads", "show", st}, "missing the thread ID"},
		{[]string{"threads", "show", st, th.ID, "--last", "-1"}, "must not be negative"},
		{[]string{"threads", "append", st, th.ID}, "missing the message TEXT"},
		{[]string{"threads", "append", st, th.ID, "--file", "x.json", "text"}, "not both"},
		{[]string{"threads", "checkpoint", st, th.ID}, "missing the checkpoint NAME"},
		{[]string{"threads", "checkpoint", st, th.ID, "--list", "--delete", "x"}, "do not go together"},
		{[]string{"threads", "rollback", st, th.ID}, "missing the checkpoint NAME"},
		{[]string{"threads", "rollback", st, th.ID, "cp", "--version", "2"}, "not both"},
		{[]string{"threads", "view", st, th.ID, "--strategy", "summarize"}, "unknown strategy"},
		{[]string{"threads", "view", st, th.ID, "--strategy", "sliding_window:0"}, "needs N of 1 or more"},
		{[]string{"copy", st}, "missing --to URL"},
		{[]string{"copy", st, "--to", store}, "the same store"},
		{[]string{"bench", "--store", "memory://", "--duration", "0s"}, "--duration must be positive"},
		{[]string{"completion"}, "missing"},
		{[]string{"completion", "tcsh"}, `unknown shell "tcsh"`},
		{[]string{"help", "nope"}, `unknown command "nope"`},
	} {
		r := loom(t, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || !strings.HasPrefix(r.stderr, "loom: ") && !strings.Contains(r.stderr, "\nloom: ") {
			t.Errorf("loom %s: code %d, stderr:\n%s\nwant code 2 and loom: %s", strings.Join(tc.args, " "), r.code, r.stderr, tc.want)
		}
		if r.stdout != "" {
			t.Errorf("loom %s wrote to stdout:\n%s", strings.Join(tc.args, " "), r.stdout)
		}
	}
}

func TestUsageErrorShowsTheUsageLine(t *testing.T) {
	t.Parallel()
	r := loom(t, "threads", "show")
	want := "loom: missing the thread ID\nusage: loom threads show ID [--last N] [--version V]\nRun 'loom threads show --help' for more.\n"
	if r.code != 2 || r.stderr != want {
		t.Errorf("code %d, stderr:\n%s\nwant:\n%s", r.code, r.stderr, want)
	}
}

func TestNotFound(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	for _, args := range [][]string{
		{"threads", "show", "th_missing"},
		{"threads", "append", "th_missing", "hi"},
		{"threads", "fork", "th_missing"},
		{"threads", "copy", "th_missing"},
		{"threads", "history", "th_missing"},
		{"threads", "checkpoint", "th_missing", "cp"},
		{"threads", "rollback", "th_missing", "cp"},
		{"threads", "reset", "th_missing"},
		{"threads", "view", "th_missing"},
		{"threads", "delete", "th_missing", "--yes"},
		{"export", "th_missing"},
	} {
		r := loom(t, append(args, "--store", store)...)
		want := `loom: thread "th_missing" not found in ` + store + "\n"
		if r.code != 1 || r.stderr != want {
			t.Errorf("loom %s: code %d, stderr %q; want 1, %q", strings.Join(args, " "), r.code, r.stderr, want)
		}
	}
	// Other things not found say what.
	th := newThread(t, store)
	r := loom(t, "threads", "rollback", th.ID, "nope", "--store", store)
	if r.code != 1 || !strings.Contains(r.stderr, `checkpoint "nope"`) || !strings.Contains(r.stderr, "not found") {
		t.Errorf("rollback to a missing checkpoint: code %d, stderr %q", r.code, r.stderr)
	}
	r = loom(t, "threads", "show", th.ID, "--version", "9", "--store", store)
	if r.code != 1 || !strings.Contains(r.stderr, "version 9") {
		t.Errorf("show --version 9: code %d, stderr %q", r.code, r.stderr)
	}
	// Another tenant's thread is not there.
	r = loom(t, "threads", "show", th.ID, "--store", store, "--tenant", "other")
	if r.code != 1 || !strings.Contains(r.stderr, `(tenant "other")`) {
		t.Errorf("show in another tenant: code %d, stderr %q", r.code, r.stderr)
	}
}

func TestTenants(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	a := newThread(t, store, "--tenant", "acme")
	newThread(t, store)
	recs := lines[recordJSON](t, loom(t, "threads", "list", "--store", store, "--tenant", "acme", "--json").ok(t))
	if len(recs) != 1 || recs[0].ID != a.ID || recs[0].Tenant != "acme" {
		t.Errorf("list --tenant acme = %+v", recs)
	}
	if recs := lines[recordJSON](t, loom(t, "threads", "list", "--store", store, "--json").ok(t)); len(recs) != 1 || recs[0].ID == a.ID {
		t.Errorf("list of the default tenant = %+v", recs)
	}
}

func TestLoomStoreSetsTheDefaultStore(t *testing.T) {
	// Through run, as main calls it: the environment is the process's.
	store := sqliteStore(t)
	t.Setenv("LOOM_STORE", store)
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"threads", "create", "--id", "th_env"}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("code %d: %s", code, stderr.String())
	}
	if _, err := openStore(t, store).Thread(t.Context(), "th_env"); err != nil {
		t.Errorf("the thread is not in $LOOM_STORE: %v", err)
	}
	// --store still wins, and help shows the default in effect.
	other := sqliteStore(t)
	stdout.Reset()
	if code := run(t.Context(), []string{"threads", "list", "--store", other}, strings.NewReader(""), &stdout, &stderr); code != 0 || strings.Contains(stdout.String(), "th_env") {
		t.Errorf("--store did not win: code %d, %s", code, stdout.String())
	}
	stdout.Reset()
	run(t.Context(), []string{"threads", "list", "--help"}, strings.NewReader(""), &stdout, &stderr)
	if !strings.Contains(stdout.String(), "(default "+store+")") {
		t.Errorf("help does not show $LOOM_STORE as the default:\n%s", stdout.String())
	}
}

func TestDefaultStoreWithoutLoomStore(t *testing.T) {
	t.Parallel()
	c := &ThreadsListCommand{base: base{Env: &Env{Getenv: func(string) string { return "" }}, name: "threads list"}}
	c.Flags()
	if c.Store != "sqlite://./loom.db" {
		t.Errorf("default store %q", c.Store)
	}
	c = &ThreadsListCommand{base: base{Env: &Env{Getenv: func(string) string { return "memory://" }}, name: "threads list"}}
	c.Flags()
	if c.Store != "memory://" {
		t.Errorf("store with LOOM_STORE=memory:// is %q", c.Store)
	}
}

func TestGlobalFlagsAnywhere(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	th := newThread(t, store)
	say(t, store, th.ID, "hi")
	for _, args := range [][]string{
		{"--store", store, "--json", "threads", "show", th.ID},
		{"--store=" + store, "threads", "show", "--json", th.ID},
		{"threads", "show", th.ID, "--json", "--store", store},
	} {
		var shown showJSON
		loom(t, args...).ok(t).decode(t, &shown)
		if shown.Thread.ID != th.ID || len(shown.Messages) != 1 {
			t.Errorf("loom %v = %+v", args, shown)
		}
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		r := loom(t, args...).ok(t)
		if !strings.Contains(r.stdout, "threads list") || !strings.Contains(r.stdout, "bench") {
			t.Errorf("loom %v:\n%s", args, r.stdout)
		}
	}
	for _, s := range commands {
		args := append(strings.Fields(s.Name), "--help")
		r := loom(t, args...).ok(t)
		if !strings.HasPrefix(r.stdout, "Usage: "+usageLine(&s)) || !strings.Contains(r.stdout, "Examples:\n  ") ||
			!strings.Contains(r.stdout, "--store URL") || r.stderr != "" {
			t.Errorf("loom %s --help:\n%s", s.Name, r.stdout)
		}
	}
	r := loom(t, "help", "threads", "append").ok(t)
	if !strings.Contains(r.stdout, "--if-version V") || !strings.Contains(r.stdout, "--file FILE") {
		t.Errorf("help threads append:\n%s", r.stdout)
	}
	r = loom(t, "threads", "-h").ok(t)
	if !strings.Contains(r.stdout, "checkpoint") {
		t.Errorf("threads -h:\n%s", r.stdout)
	}
}

func TestExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	from, to := sqliteStore(t), sqliteStore(t)

	// A thread with messages, a tool turn, state, a checkpoint left behind
	// by a rollback and a history.
	src := openStore(t, from)
	th, err := src.Create(ctx, thread.CreateOptions{ID: "th_trip", Title: "trip", Labels: map[string]string{"app": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.Append(ctx, message.User("Find me a train."), message.ToolCall("c1", "search", `{"to":"Lisbon"}`), message.ToolResult("c1", `["09:10"]`)); err != nil {
		t.Fatal(err)
	}
	if _, err := th.SetState(ctx, map[string]json.RawMessage{"wf/step": json.RawMessage(`{"n":2}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := th.Checkpoint(ctx, "found"); err != nil {
		t.Fatal(err)
	}
	if _, err := th.Append(ctx, message.Assistant("There is one at 09:10.")); err != nil {
		t.Fatal(err)
	}

	doc := loom(t, "export", "th_trip", "--history", "--store", from).ok(t).stdout
	r := loomWith(t, loomOpts{stdin: doc}, "import", "-", "--store", to).ok(t)
	if r.stdout != "imported th_trip (4 messages)\n" {
		t.Errorf("import printed %q", r.stdout)
	}
	dst := openStore(t, to)
	got, err := dst.Thread(ctx, "th_trip")
	if err != nil {
		t.Fatal(err)
	}
	wantMsgs, _ := th.Messages(ctx, thread.ReadOptions{})
	gotMsgs, _ := got.Messages(ctx, thread.ReadOptions{})
	if diff := cmp.Diff(wantMsgs, gotMsgs); diff != "" {
		t.Errorf("messages differ (-want +got):\n%s", diff)
	}
	wantState, _ := th.State(ctx, 0)
	gotState, _ := got.State(ctx, 0)
	if diff := cmp.Diff(wantState, gotState); diff != "" {
		t.Errorf("state differs (-want +got):\n%s", diff)
	}
	if again := loom(t, "export", "th_trip", "--history", "--store", to).ok(t).stdout; again != doc {
		t.Errorf("export of the imported thread differs from the original:\n%s\n---\n%s", doc, again)
	}

	// -o FILE, then import FILE --id: a second copy; importing the same id
	// again is a conflict that says what to do.
	file := filepath.Join(t.TempDir(), "trip.json")
	if out := loom(t, "export", "th_trip", "-o", file, "--store", from).ok(t).stdout; out != "" {
		t.Errorf("export -o wrote to stdout: %q", out)
	}
	r = loom(t, "import", file, "--store", to)
	if r.code != 1 || !strings.Contains(r.stderr, "exists") || !strings.Contains(r.stderr, "--id") {
		t.Errorf("import of an existing id: code %d, stderr %q", r.code, r.stderr)
	}
	var rec recordJSON
	loom(t, "import", file, "--id", "th_trip2", "--store", to, "--json").ok(t).decode(t, &rec)
	if rec.ID != "th_trip2" || rec.Title != "trip" {
		t.Errorf("import --json = %+v", rec)
	}
	if got := messagesOf(t, to, "th_trip2"); len(got) != 4 {
		t.Errorf("th_trip2 has %d messages", len(got))
	}
	r = loomWith(t, loomOpts{stdin: "{not json"}, "import", "--store", to)
	if r.code != 1 || !strings.Contains(r.stderr, "loom: import -:") {
		t.Errorf("import of a malformed document: code %d, stderr %q", r.code, r.stderr)
	}
}

func TestCopyToFileStoreWithPlainProgressAndResume(t *testing.T) {
	t.Parallel()
	from := sqliteStore(t)
	to := "file://" + filepath.Join(t.TempDir(), "threads")
	a := newThread(t, from, "--id", "th_a")
	say(t, from, a.ID, "one")
	say(t, from, a.ID, "two")
	loom(t, "threads", "checkpoint", a.ID, "cp", "--store", from).ok(t)
	loom(t, "threads", "fork", a.ID, "--id", "th_b", "--store", from).ok(t)
	newThread(t, from, "--id", "th_other", "--tenant", "acme")

	r := loom(t, "copy", "--from", from, "--to", to).ok(t)
	want := []string{"copied th_a (2 commits)", "copied th_b (0 commits)"}
	got := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(got) != 3 || !slices.Equal(got[:2], want) || !strings.HasPrefix(got[2], "copied 2 threads (2 commits) to "+to+", skipped 0 already there") {
		t.Errorf("copy printed:\n%s", r.stdout)
	}
	// The copy reads the same, history and checkpoints included.
	for _, args := range [][]string{{"threads", "show", "th_a", "--json"}, {"threads", "history", "th_a", "--json"}, {"threads", "checkpoint", "th_a", "--list", "--json"}} {
		if a, b := loom(t, append(args, "--store", from)...).ok(t).stdout, loom(t, append(args, "--store", to)...).ok(t).stdout; a != b {
			t.Errorf("%v differs:\n%s\n---\n%s", args, a, b)
		}
	}

	r = loom(t, "copy", "--from", from, "--to", to).ok(t)
	want = []string{"skipped th_a (already in the destination)", "skipped th_b (already in the destination)",
		"copied 0 threads (0 commits) to " + to + ", skipped 2 already there"}
	got = strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(got) != 3 || !slices.Equal(got[:2], want[:2]) || !strings.HasPrefix(got[2], want[2]) {
		t.Errorf("second copy printed:\n%s", r.stdout)
	}

	// --all-tenants takes the other tenant's thread too, under its key in
	// the store (tenant/id, which sorts first here); --json is lines.
	events := lines[copyLineJSON](t, loom(t, "copy", "--from", from, "--to", to, "--all-tenants", "--json").ok(t))
	if len(events) != 4 || events[0].Thread != "acme/th_other" || events[0].Status != "copied" || events[3].Event != "summary" ||
		events[3].Copied != 1 || events[3].Skipped != 2 || events[3].Total != 3 {
		t.Errorf("copy --all-tenants --json = %+v", events)
	}
}

func TestCopySelectedThreadsDefaultsFromToStore(t *testing.T) {
	t.Parallel()
	from := sqliteStore(t)
	to := sqliteStore(t)
	newThread(t, from, "--id", "th_a")
	newThread(t, from, "--id", "th_b")
	r := loom(t, "copy", "--store", from, "--to", to, "--thread", "th_b").ok(t)
	if !strings.HasPrefix(r.stdout, "copied th_b (0 commits)\ncopied 1 thread") {
		t.Errorf("copy --thread th_b printed:\n%s", r.stdout)
	}
	if recs := lines[recordJSON](t, loom(t, "threads", "list", "--store", to, "--json").ok(t)); len(recs) != 1 || recs[0].ID != "th_b" {
		t.Errorf("destination holds %+v", recs)
	}
	r = loom(t, "copy", "--store", from, "--to", to, "--thread", "th_missing")
	if r.code != 1 || !strings.Contains(r.stderr, `thread "th_missing" not found in `+from) {
		t.Errorf("copy --thread th_missing: code %d, stderr %q", r.code, r.stderr)
	}
}

func TestCopyShowsAProgressBarOnATerminal(t *testing.T) {
	t.Parallel()
	from, to := sqliteStore(t), sqliteStore(t)
	newThread(t, from)
	newThread(t, from)
	r := loomWith(t, loomOpts{terminal: true}, "copy", "--from", from, "--to", to).ok(t)
	if strings.Count(r.stdout, "\r") != 2 || !strings.Contains(r.stdout, "2/2 threads") || !strings.Contains(r.stdout, "threads/s") ||
		!strings.Contains(r.stdout, "\ncopied 2 threads") || strings.Contains(r.stdout, "copied th_") {
		t.Errorf("copy on a terminal printed %q", r.stdout)
	}
}

func TestBenchPrintsEveryScenario(t *testing.T) {
	t.Parallel()
	r := loom(t, "bench", "--store", "memory://", "--duration", "200ms", "--writers", "4").ok(t)
	for _, want := range []string{"SCENARIO", "OPS/S", "P50", "P99",
		"append one message", "chat turn", "fork at head", "last 50 of 1,000 messages", "view of 8,000 tokens",
		"concurrent appends (4 writers, 4 threads)", "concurrent appends (4 writers, 1 thread)", "removed the"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("bench lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestBenchLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	newThread(t, store, "--id", "th_mine")
	var out benchJSON
	loom(t, "bench", "--store", store, "--duration", "20ms", "--writers", "2", "--json").ok(t).decode(t, &out)
	if len(out.Results) != 7 || !strings.HasPrefix(out.Tenant, "bench-") || out.Removed == 0 {
		t.Errorf("bench --json = %+v", out)
	}
	for _, r := range out.Results {
		if r.Ops == 0 || r.OpsPerSec <= 0 || r.P50Micros <= 0 || r.P99Micros < r.P50Micros {
			t.Errorf("result %+v", r)
		}
	}
	var ids []string
	for r, err := range openStore(t, store).Store().Threads(t.Context(), thread.ListOptions{AllTenants: true}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	if !slices.Equal(ids, []string{"th_mine"}) {
		t.Errorf("after bench the store holds %v", ids)
	}
}

// completions returns the words cobra's completion offers after args, as
// the shells' scripts ask for them (loom __complete ARGS… WORD).
func completions(t testing.TB, args ...string) []string {
	t.Helper()
	out := loom(t, append([]string{cobra.ShellCompRequestCmd}, args...)...).ok(t).stdout
	var words []string
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, ":") { // the directive ends the list
			break
		}
		word, _, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		words = append(words, word)
	}
	return words
}

func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	for shell, marker := range map[string]string{
		"bash":       "complete -o default -F __start_loom loom",
		"zsh":        "#compdef loom",
		"fish":       "complete -c loom",
		"powershell": "Register-ArgumentCompleter -CommandName 'loom'",
	} {
		script := loom(t, "completion", shell).ok(t).stdout
		// The scripts are cobra's: they ask loom what may follow.
		if !strings.Contains(script, marker) || !strings.Contains(script, "__complete") {
			t.Errorf("%s completion script:\n%.400s", shell, script)
		}
	}
}

func TestCompletionOffersEveryCommand(t *testing.T) {
	t.Parallel()
	for _, s := range commands {
		words := strings.Fields(s.Name)
		if offered := completions(t, append(words[:len(words)-1:len(words)-1], "")...); !slices.Contains(offered, words[len(words)-1]) {
			t.Errorf("completion does not offer %q: %v", s.Name, offered)
		}
		fs := s.New(base{Env: &Env{}, name: s.Name}).Flags()
		for _, name := range []string{"store", "tenant", "json"} {
			if fs.Lookup(name) == nil {
				t.Errorf("%s has no --%s", s.Name, name)
			}
		}
		offered := completions(t, append(words, "--")...)
		fs.VisitAll(func(f *pflag.Flag) {
			if !slices.Contains(offered, dashed(f.Name)) && !slices.Contains(offered, "--"+f.Name) {
				t.Errorf("completion of %s does not offer --%s: %v", s.Name, f.Name, offered)
			}
		})
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"threads", "append", "th_x", "--if"}, "--if-version"},
		{[]string{"threads", "view", "th_x", "--max"}, "--max-messages"},
		{[]string{"copy", "--all"}, "--all-tenants"},
		{[]string{"completion", ""}, "powershell"},
		{[]string{"help", "threads", ""}, "append"},
		{[]string{"--st"}, "--store"},
	} {
		if offered := completions(t, tc.args...); !slices.Contains(offered, tc.want) {
			t.Errorf("completion of %q offers %v, not %q", tc.args, offered, tc.want)
		}
	}
}

func TestTypoSuggestions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args      []string
		msg, hint string
	}{
		{[]string{"thread", "list"}, `unknown command "thread"`, `Did you mean "threads"?`},
		{[]string{"threads", "lst"}, `unknown command "threads lst"`, `Did you mean "list"?`},
		{[]string{"workflow"}, `unknown command "workflow"`, `Did you mean "workflows"?`},
		{[]string{"exprt", "th_x"}, `unknown command "exprt"`, `Did you mean "export"?`},
	} {
		r := loom(t, tc.args...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "loom: "+tc.msg+"\n"+tc.hint+"\n") && !strings.Contains(r.stderr, "\nloom: "+tc.msg+"\n"+tc.hint+"\n") {
			t.Errorf("loom %s: code %d, stderr:\n%s", strings.Join(tc.args, " "), r.code, r.stderr)
		}
	}
	if r := loom(t, "zzzzzz"); r.code != 2 || strings.Contains(r.stderr, "Did you mean") {
		t.Errorf("loom zzzzzz: code %d, stderr:\n%s", r.code, r.stderr)
	}
}

func TestHelpOnANestedCommand(t *testing.T) {
	t.Parallel()
	want := loom(t, "threads", "checkpoint", "--help").ok(t).stdout
	for _, args := range [][]string{
		{"threads", "checkpoint", "-h"},
		{"threads", "checkpoint", "th_x", "--list", "--help"},
		{"--store", "memory://", "threads", "checkpoint", "--help"},
		{"help", "threads", "checkpoint"},
	} {
		if r := loom(t, args...).ok(t); r.stdout != want || r.stderr != "" {
			t.Errorf("loom %s:\n%s\nwant:\n%s", strings.Join(args, " "), r.stdout, want)
		}
	}
	for _, s := range []string{
		"Usage: loom threads checkpoint ID (NAME | --list | --delete NAME)\n",
		"\nFlags:\n", "--delete NAME", "--list", "\nGlobal flags:\n", "--tenant T",
		"\nExamples:\n  loom threads checkpoint th_01jq… before-refund\n", "  loom threads checkpoint th_01jq… --list\n",
	} {
		if !strings.Contains(want, s) {
			t.Errorf("threads checkpoint --help lacks %q:\n%s", s, want)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	var stdout bytes.Buffer
	c := &VersionCommand{base: base{Env: &Env{Stdout: &stdout}, name: "version"}, buildInfo: func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/loomthreads/loom", Version: "v1.2.3"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}}, true
	}}
	if err := c.Run(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if out := stdout.String(); !strings.HasPrefix(out, "loom v1.2.3 (github.com/loomthreads/loom)\ngo1.26.0 ") || !strings.Contains(out, "commit abc123 (, modified)") {
		t.Errorf("version printed %q", out)
	}
	stdout.Reset()
	c.JSON = true
	if err := c.Run(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	var v versionJSON
	if err := json.Unmarshal(stdout.Bytes(), &v); err != nil || v.Version != "v1.2.3" || v.Go != "go1.26.0" || v.Revision != "abc123" || !v.Modified {
		t.Errorf("version --json = %+v, %v", v, err)
	}
	// Through the command line, with the test binary's build information.
	r := loom(t, "version").ok(t)
	if !strings.HasPrefix(r.stdout, "loom ") || !strings.Contains(r.stdout, "go1.") {
		t.Errorf("loom version printed %q", r.stdout)
	}
	if r := loom(t, "--version").ok(t); !strings.HasPrefix(r.stdout, "loom ") {
		t.Errorf("loom --version printed %q", r.stdout)
	}
}

// messagesOf reads a thread's messages from store.
func messagesOf(t testing.TB, store, id string) []message.Message {
	t.Helper()
	th, err := openStore(t, store).Thread(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := th.Messages(context.Background(), thread.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// texts returns the texts of msgs.
func texts(msgs []message.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Text())
	}
	return out
}

func TestSearch(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	th := newThread(t, store)
	say(t, store, th.ID, "the blue whale sings")
	say(t, store, th.ID, "a whale of a time")
	out := loom(t, "search", "whale", "--store", store).ok(t).stdout
	for _, want := range []string{"THREAD", "VERSION", "TEXT", th.ID, "the blue whale sings", "a whale of a time"} {
		if !strings.Contains(out, want) {
			t.Errorf("search lacks %q:\n%s", want, out)
		}
	}
	// Messages of the head have no version.
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if f := strings.Fields(line); len(f) < 3 || f[1] != "user" {
			t.Errorf("a hit in the head shows a version: %q", line)
		}
	}
	hits := lines[searchHitJSON](t, loom(t, "search", "WHALE", "--limit", "1", "--store", store, "--json").ok(t))
	if len(hits) != 1 || hits[0].Message.Text() != "a whale of a time" || hits[0].Cursor == "" || hits[0].Thread != th.ID {
		t.Fatalf("search --json = %+v", hits)
	}
	hits = lines[searchHitJSON](t, loom(t, "search", "whale", "--before", hits[0].Cursor, "--store", store, "--json").ok(t))
	if len(hits) != 1 || hits[0].Message.Text() != "the blue whale sings" {
		t.Fatalf("search --before = %+v", hits)
	}
	if out := loom(t, "search", "blue", "sings", "--store", store, "--json").ok(t).stdout; strings.Count(out, "\n") != 1 {
		t.Errorf("two words found %q", out)
	}
	if out := loom(t, "search", "whale", "--store", store, "--json").ok(t).stdout; strings.Contains(out, `"version"`) {
		t.Errorf("hits in the head carry a version: %s", out)
	}
	// A message a rollback took out of the head names the newest version
	// that held it.
	loom(t, "threads", "checkpoint", th.ID, "cp", "--store", store).ok(t)
	say(t, store, th.ID, "a lost narwhal") // v4
	loom(t, "threads", "rollback", th.ID, "cp", "--store", store).ok(t)
	out = loom(t, "search", "narwhal", "--store", store).ok(t).stdout
	if rows := strings.Split(strings.TrimSpace(out), "\n"); len(rows) != 2 || len(strings.Fields(rows[1])) < 3 || strings.Fields(rows[1])[1] != "4" {
		t.Errorf("search narwhal shows no version 4:\n%s", out)
	}
	hits = lines[searchHitJSON](t, loom(t, "search", "narwhal", "--store", store, "--json").ok(t))
	if len(hits) != 1 || hits[0].Version != 4 {
		t.Errorf("search narwhal --json = %+v, want version 4", hits)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"search"}, 2, "missing arguments"},
		{[]string{"search", "!!"}, 1, "at least one word"},
		{[]string{"search", "x", "--limit", "0"}, 2, "--limit"},
	} {
		r := loom(t, append(c.args, "--store", store)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: code %d, stderr %q; want %d and %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
}
