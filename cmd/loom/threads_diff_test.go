package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

func TestThreadsDiff(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	th := newThread(t, store, "--id", "trip")
	say(t, store, th.ID, "Plan a trip.")
	loom(t, "threads", "append", th.ID, "--store", store, "--role", "assistant", "Where to?").ok(t)
	loom(t, "threads", "fork", th.ID, "--store", store, "--id", "alt").ok(t)
	say(t, store, th.ID, "Rome.")
	say(t, store, "alt", "Lisbon,", "please.")
	say(t, store, "alt", "By train.")

	// A thread and its fork, for people.
	out := loom(t, "threads", "diff", th.ID, "--to", "alt", "--store", store).ok(t).stdout
	want := "--- trip  version 4  (3 messages)\n" +
		"+++ alt  version 3  (4 messages)\n" +
		"@@ messages after 2 shared messages @@\n" +
		"- user: Rome.\n" +
		"+ user: Lisbon, please.\n" +
		"+ user: By train.\n"
	if out != want {
		t.Errorf("diff --to alt printed\n%s\nwant\n%s", out, want)
	}

	// Two versions of one thread, as JSON: the API's answer.
	var d thread.Diff
	loom(t, "threads", "diff", th.ID, "--version", "2", "--store", store, "--json").ok(t).decode(t, &d)
	if d.From != (thread.DiffSide{Thread: "trip", Version: 2, Messages: 1}) || d.To != (thread.DiffSide{Thread: "trip", Version: 4, Messages: 3}) ||
		d.Shared != 1 || len(d.Entries) != 2 || d.Entries[0].Change != thread.DiffAdded || d.Entries[1].To.Text() != "Rome." || d.Truncated {
		t.Errorf("diff --version 2 --json = %+v", d)
	}
	// The fork at its first version against the thread's head, cut.
	loom(t, "threads", "diff", "alt", "--to", th.ID, "--to-version", "3", "--limit", "1", "--store", store, "--json").ok(t).decode(t, &d)
	if d.Shared != 2 || len(d.Entries) != 1 || d.Entries[0].From.Text() != "Lisbon, please." || !d.Truncated {
		t.Errorf("diff alt --to trip --to-version 3 --limit 1 = %+v", d)
	}
	out = loom(t, "threads", "diff", "alt", "--to", th.ID, "--limit", "1", "--store", store).ok(t).stdout
	if !strings.HasSuffix(out, "- user: Lisbon, please.\n… cut at 1 messages or state keys (--limit)\n") {
		t.Errorf("a cut diff printed\n%s", out)
	}

	// Nothing differs.
	out = loom(t, "threads", "diff", th.ID, "--store", store).ok(t).stdout
	if !strings.HasSuffix(out, "no differences: 3 messages shared\n") {
		t.Errorf("a head with itself printed\n%s", out)
	}
}

// TestThreadsDiffState: the state's keys show as - and + lines, and a
// changed message (one id, other contents) as its - and + lines.
func TestThreadsDiffState(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	db := openStore(t, store)
	ctx := t.Context()
	for _, c := range []struct {
		id, text string
		state    string
	}{
		{"a", "the same", `{"city":"\"Rome\"","gone":"1"}`},
		{"b", "other\nlines", `{"city":"\"Lisbon\"","new":"[1]"}`},
	} {
		th, err := db.Create(ctx, thread.CreateOptions{ID: c.id})
		if err != nil {
			t.Fatal(err)
		}
		m := userWithID("m1", "hello")
		m2 := userWithID("m2", c.text)
		if _, err := th.Append(ctx, m, m2); err != nil {
			t.Fatal(err)
		}
		if _, err := th.SetState(ctx, stateOf(t, c.state)); err != nil {
			t.Fatal(err)
		}
	}
	out := loom(t, "threads", "diff", "a", "--to", "b", "--store", store).ok(t).stdout
	want := "--- a  version 3  (2 messages)\n" +
		"+++ b  version 3  (2 messages)\n" +
		"@@ messages after 1 shared message @@\n" +
		"- user: the same\n" +
		"+ user: other\n" +
		"+   lines\n" +
		"@@ state @@\n" +
		"- city: \"Rome\"\n" +
		"+ city: \"Lisbon\"\n" +
		"- gone: 1\n" +
		"+ new: [1]\n"
	if out != want {
		t.Errorf("diff printed\n%s\nwant\n%s", out, want)
	}
}

func TestThreadsDiffErrors(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	th := newThread(t, store)
	say(t, store, th.ID, "hi")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"nope"}, 1, `thread "nope" not found`},
		{[]string{th.ID, "--to", "nope"}, 1, `thread "nope" not found`},
		{[]string{th.ID, "--version", "7"}, 1, "version 7: not found"},
		{[]string{th.ID, "--to-version", "9"}, 1, "version 9: not found"},
		{[]string{th.ID, "--version", "-1"}, 2, "must not be negative"},
		{[]string{th.ID, "--limit", "0"}, 2, "--limit must be 1 to 10000"},
		{[]string{th.ID, "--limit", "10001"}, 2, "--limit must be 1 to 10000"},
		{[]string{}, 2, "missing the thread ID"},
		{[]string{th.ID, "other"}, 2, ""},
	} {
		r := loom(t, append([]string{"threads", "diff", "--store", store}, c.args...)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("threads diff %v: exit %d, stderr %q, stdout %q; want %d and %q", c.args, r.code, r.stderr, r.stdout, c.code, c.want)
		}
	}
}

func userWithID(id, text string) message.Message {
	m := message.User(text)
	m.ID = id
	return m
}

// stateOf reads a JSON object whose values are JSON texts.
func stateOf(t *testing.T, s string) map[string]json.RawMessage {
	t.Helper()
	var texts map[string]string
	if err := json.Unmarshal([]byte(s), &texts); err != nil {
		t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	for k, v := range texts {
		out[k] = json.RawMessage(v)
	}
	return out
}
