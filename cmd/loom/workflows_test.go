package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/wftest"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/workflow"
)

// waitingWorkflow makes, in store, a workflow that drafted on its
// sub-thread "writer" and waits for a review.
func waitingWorkflow(t *testing.T, store, id string) {
	t.Helper()
	db := openStore(t, store)
	defer db.Close()
	ctx := t.Context()
	w, err := workflow.Create(ctx, db, workflow.CreateOptions{ID: id, Title: "a post"})
	if err != nil {
		t.Fatal(err)
	}
	g := workflow.NewGraph().
		Add("draft", func(ctx context.Context, s *workflow.Step) (any, error) {
			th, err := s.SubThread(ctx, "writer")
			if err != nil {
				return nil, err
			}
			_, err = th.Append(ctx, message.Assistant("the draft"))
			return "drafted", err
		}, "review").
		Add("review", func(ctx context.Context, s *workflow.Step) (any, error) {
			_, err := s.Ask("publish?")
			return nil, err
		})
	if ex, err := w.Run(ctx, g, nil); err != nil || ex.Status != workflow.StatusWaiting {
		t.Fatalf("run: %v", err)
	}
}

func TestWorkflowsCommands(t *testing.T) {
	st := sqliteStore(t)
	waitingWorkflow(t, st, "post")

	out := loom(t, "workflows", "list", "--store", st).ok(t).stdout
	if !strings.Contains(out, "post") || !strings.Contains(out, "waiting") || !strings.Contains(out, "main,writer") {
		t.Fatalf("list:\n%s", out)
	}
	var lines []workflowLine = lines[workflowLine](t, loom(t, "workflows", "list", "--store", st, "--json").ok(t))
	if len(lines) != 1 || lines[0].Status != workflow.StatusWaiting {
		t.Fatalf("list --json: %+v", lines)
	}
	out = loom(t, "workflows", "show", "post", "--store", st, "--last", "5").ok(t).stdout
	for _, want := range []string{"status    waiting", "review asks \"publish?\"", "1/draft#1", "drafted", "2/review#1", "writer:\n  assistant: the draft"} {
		if !strings.Contains(out, want) {
			t.Fatalf("show lacks %q:\n%s", want, out)
		}
	}
	out = loom(t, "workflows", "checkpoint", "post", "drafted", "--store", st).ok(t).stdout
	if !strings.Contains(out, `checkpoint "drafted" of workflow post and its 2 sub-threads`) {
		t.Fatalf("checkpoint: %s", out)
	}
	if r := loom(t, "workflows", "checkpoint", "post", "drafted", "--store", st); r.code != 1 || !strings.Contains(r.stderr, "conflict") {
		t.Fatalf("checkpoint twice: %+v", r)
	}
	if out := loom(t, "workflows", "checkpoint", "post", "--list", "--store", st).ok(t).stdout; !strings.Contains(out, "drafted") {
		t.Fatalf("checkpoint --list: %s", out)
	}
	out = loom(t, "workflows", "history", "post", "--store", st, "--limit", "3").ok(t).stdout
	if !strings.Contains(out, "checkpoint drafted") || strings.Count(out, "\n") != 4 {
		t.Fatalf("history:\n%s", out)
	}

	// Move the workflow on, then back, then fork it.
	db := openStore(t, st)
	w, err := workflow.Open(t.Context(), db, "post")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Provide(t.Context(), "review", true); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if out := loom(t, "workflows", "show", "post", "--store", st).ok(t).stdout; !strings.Contains(out, "status    running") {
		t.Fatalf("after the input:\n%s", out)
	}
	out = loom(t, "workflows", "restore", "post", "drafted", "--store", st).ok(t).stdout
	if !strings.Contains(out, "restored workflow post to checkpoint drafted: waiting") {
		t.Fatalf("restore: %s", out)
	}
	out = loom(t, "workflows", "fork", "post", "drafted", "--id", "post-b", "--store", st).ok(t).stdout
	if !strings.Contains(out, "forked workflow post at checkpoint drafted into post-b: waiting") {
		t.Fatalf("fork: %s", out)
	}
	if out := loom(t, "threads", "show", "post-b.writer", "--store", st).ok(t).stdout; !strings.Contains(out, "post.writer") || !strings.Contains(out, "the draft") {
		t.Fatalf("the fork's sub-thread:\n%s", out)
	}
	// At version 2 the workflow had not made its writer yet.
	loom(t, "workflows", "fork", "post", "--version", "2", "--id", "post-c", "--store", st).ok(t)
	if r := loom(t, "threads", "show", "post-c.writer", "--store", st); r.code != 1 {
		t.Fatalf("a sub-thread made after the fork point: %+v", r)
	}
	if out := loom(t, "workflows", "show", "post", "--store", st, "--checkpoint", "drafted", "--json").ok(t).stdout; !strings.Contains(out, `"status": "waiting"`) {
		t.Fatalf("show --checkpoint --json:\n%s", out)
	}

	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"workflows", "show"}, 2, "missing the workflow ID"},
		{[]string{"workflows", "show", "nope"}, 1, `workflow "nope" not found`},
		{[]string{"workflows", "show", "post.main"}, 1, `workflow "post.main" not found`},
		{[]string{"workflows", "restore", "post"}, 2, "missing the checkpoint NAME"},
		{[]string{"workflows", "restore", "post", "drafted", "--version", "2"}, 2, "not both"},
		{[]string{"workflows", "restore", "post", "nope"}, 1, "not found"},
		{[]string{"workflows", "fork", "post", "drafted", "--id", "post-b"}, 1, "conflict"},
		{[]string{"workflows", "checkpoint", "post"}, 2, "missing the checkpoint NAME"},
		{[]string{"workflows", "show", "post", "--version", "2", "--checkpoint", "drafted"}, 2, "do not go together"},
		{[]string{"workflow", "list"}, 2, `unknown command "workflow"`},
	} {
		r := loom(t, append(c.args, "--store", st)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("loom %s: exit %d, stderr %q; want %d and %q", strings.Join(c.args, " "), r.code, r.stderr, c.code, c.msg)
		}
	}
}

// TestWorkflowsStalled: list and show say a workflow whose runner's lease
// ran out is stalled since its last commit, and --json carries the HTTP
// API's "stalled" object; a workflow whose runner lives is not stalled.
func TestWorkflowsStalled(t *testing.T) {
	st := sqliteStore(t)
	wftest.Hold(t, openStore(t, st), "live", nil)
	wftest.Hold(t, openStore(t, st), "expired", wftest.HourBehind)
	w, err := workflow.Open(t.Context(), openStore(t, st), "expired")
	if err != nil {
		t.Fatal(err)
	}
	updated := w.Thread().Record().UpdatedAt
	since := "running, stalled since " + formatTime(updated)

	out := loom(t, "workflows", "list", "--store", st).ok(t).stdout
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "expired ") != strings.Contains(line, since) || strings.HasPrefix(line, "live ") && strings.Contains(line, "stalled") {
			t.Errorf("list:\n%s", out)
		}
	}
	listed := lines[workflowLine](t, loom(t, "workflows", "list", "--store", st, "--json").ok(t))
	if len(listed) != 2 {
		t.Fatalf("list --json: %+v", listed)
	}
	for _, l := range listed {
		if l.Status != workflow.StatusRunning || (l.Stalled != nil) != (l.ID == "expired") || l.Stalled != nil && !l.Stalled.Since.Equal(updated) {
			t.Errorf("list --json: %s is %s, stalled %+v; want since %v for expired only", l.ID, l.Status, l.Stalled, updated)
		}
	}

	out = loom(t, "workflows", "show", "expired", "--store", st).ok(t).stdout
	if !strings.Contains(out, "status    "+since+"\n") || !strings.Contains(out, "when its program runs it again") {
		t.Errorf("show expired lacks %q:\n%s", since, out)
	}
	if out := loom(t, "workflows", "show", "live", "--store", st).ok(t).stdout; !strings.Contains(out, "status    running\n") {
		t.Errorf("show live:\n%s", out)
	}
	out = loom(t, "workflows", "show", "expired", "--store", st, "--json").ok(t).stdout
	if want := `"stalled": {` + "\n" + `    "since": "` + updated.Format(time.RFC3339Nano) + `"`; !strings.Contains(out, want) {
		t.Errorf("show --json has no %s:\n%s", want, out)
	}
	if out := loom(t, "workflows", "show", "live", "--store", st, "--json").ok(t).stdout; strings.Contains(out, `"stalled"`) {
		t.Errorf("show live --json:\n%s", out)
	}
	// A past version is what it was: never stalled.
	past := strconv.FormatInt(w.Version()-1, 10)
	if out := loom(t, "workflows", "show", "expired", "--store", st, "--version", past).ok(t).stdout; strings.Contains(out, "stalled") {
		t.Errorf("show --version %s:\n%s", past, out)
	}
}
