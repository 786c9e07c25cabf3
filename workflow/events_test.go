package workflow_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/loomthreads/loom/internal/wftest"
	_ "github.com/loomthreads/loom/sqlite"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// approvalGraph is draft → (facts, style) → review, which asks for an
// approval, → publish.
func approvalGraph() *workflow.Graph {
	out := func(v string) workflow.StepFunc {
		return func(context.Context, *workflow.Step) (any, error) { return v, nil }
	}
	return workflow.NewGraph().
		Add("draft", out("a draft"), "facts", "style").
		Add("facts", out("checked"), "review").
		Add("style", out("polished"), "review").
		Add("review", func(_ context.Context, s *workflow.Step) (any, error) {
			ok, err := s.Ask("publish?")
			if err != nil {
				return nil, err
			}
			return string(ok), nil
		}, "publish").
		Add("publish", out("published"))
}

// waitingPost creates the workflow "post" on db and runs approvalGraph on
// it to where review waits for its approval.
func waitingPost(t *testing.T, db *thread.DB) (*workflow.Workflow, *workflow.Graph) {
	t.Helper()
	w, err := workflow.Create(t.Context(), db, workflow.CreateOptions{ID: "post"})
	if err != nil {
		t.Fatal(err)
	}
	g := approvalGraph()
	if _, err := w.Run(t.Context(), g, nil); err != nil {
		t.Fatal(err)
	}
	return w, g
}

// approve provides answer to review on w and runs g to its end.
func approve(t *testing.T, w *workflow.Workflow, g *workflow.Graph, answer any) {
	t.Helper()
	if err := w.Provide(t.Context(), "review", answer); err != nil {
		t.Fatal(err)
	}
	if ex, err := w.Run(t.Context(), g, nil); err != nil || ex.Status != workflow.StatusDone {
		t.Fatalf("run after the input: %v", err)
	}
}

func openDB(t *testing.T, url string) *thread.DB {
	t.Helper()
	db, err := thread.Open(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// collect reads the events of w with opts to their end.
func collect(t *testing.T, w *workflow.Workflow, opts workflow.EventsOptions) []workflow.Event {
	t.Helper()
	var out []workflow.Event
	for ev, err := range w.Events(t.Context(), opts) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// line is an event as a line: kind and step attempt.
func line(ev workflow.Event) string {
	if ev.Step != nil {
		return string(ev.Kind) + " " + ev.Step.ID
	}
	return string(ev.Kind)
}

func lines(evs []workflow.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = line(ev)
	}
	return out
}

// sortRounds sorts the lines of the events of one version that start or
// end concurrent steps, whose order within their commit is the runner's.
func sortedWithin(evs []workflow.Event) []string {
	out := lines(evs)
	for i := 0; i < len(evs); {
		j := i
		for j < len(evs) && evs[j].Version == evs[i].Version {
			j++
		}
		slices.Sort(out[i:j])
		i = j
	}
	return out
}

func TestEventsOfARun(t *testing.T) {
	w, g := waitingPost(t, openDB(t, "memory://"))
	evs := collect(t, w, workflow.EventsOptions{NoFollow: true})
	approve(t, w, g, true)
	all := collect(t, w, workflow.EventsOptions{NoFollow: true})
	if !slices.EqualFunc(evs, all[:len(evs)], func(a, b workflow.Event) bool { return cmp.Equal(a, b) }) {
		t.Fatal("the events replayed later differ from those read before")
	}
	want := []string{
		"step_started 1/draft#1",
		"step_done 1/draft#1", "step_started 2/facts#1", "step_started 2/style#1",
		// facts and style end in either order, each in its commit.
		"step_done 2/?#1",
		"step_done 2/?#1", "step_started 3/review#1",
		"step_waiting 3/review#1", "workflow_waiting",
		// Provide, then the second run: review runs again.
		"step_started 3/review#2",
		"step_done 3/review#2", "step_started 4/publish#1",
		"step_done 4/publish#1", "workflow_done",
	}
	got := sortedWithin(all)
	for i, l := range got {
		if strings.HasPrefix(l, "step_done 2/facts") || strings.HasPrefix(l, "step_done 2/style") {
			got[i] = "step_done 2/?#1"
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	for i, ev := range all {
		if ev.Workflow != "post" || ev.Cursor == "" || i > 0 && !before(t, all[i-1].Cursor, ev.Cursor) {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}
	if last := all[len(all)-1]; last.Status != workflow.StatusDone {
		t.Fatalf("last event: %+v", last)
	}
	if w := all[8]; len(w.Waiting) != 1 || w.Waiting[0].Step != "review" || string(w.Waiting[0].Prompt) != `"publish?"` {
		t.Fatalf("waiting event: %+v", w)
	}
}

// before reports whether cursor a comes before b.
func before(t *testing.T, a, b string) bool {
	t.Helper()
	ca, err := workflow.ParseCursor(a)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := workflow.ParseCursor(b)
	if err != nil {
		t.Fatal(err)
	}
	return ca.Version < cb.Version || ca.Version == cb.Version && ca.Index < cb.Index
}

func TestEventsResumeAfterACursor(t *testing.T) {
	ctx := t.Context()
	w, g := waitingPost(t, openDB(t, "memory://"))
	approve(t, w, g, "yes")
	all := collect(t, w, workflow.EventsOptions{NoFollow: true})
	for i, ev := range all {
		rest := collect(t, w, workflow.EventsOptions{After: ev.Cursor, NoFollow: true})
		if diff := cmp.Diff(all[i+1:], rest, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("after %s (-want +got):\n%s", ev.Cursor, diff)
		}
	}
	for _, bad := range []string{"x", "1", "0.0", "-1.0", "1.-1", "999.0"} {
		var got error
		for _, err := range w.Events(ctx, workflow.EventsOptions{After: bad, NoFollow: true}) {
			got = err
		}
		if !errors.Is(got, workflow.ErrCursor) || !errors.Is(got, thread.ErrInvalid) {
			t.Fatalf("cursor %q: %v", bad, got)
		}
	}
}

func TestEventsOfAnInterruptedAttemptAndARestore(t *testing.T) {
	ctx := t.Context()
	db := openDB(t, "memory://")
	w, err := workflow.Create(ctx, db, workflow.CreateOptions{ID: "cut"})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	first := true
	g := workflow.NewGraph().Add("slow", func(ctx context.Context, s *workflow.Step) (any, error) {
		if first {
			first = false
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return "ok", nil
	})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := w.Run(rctx, g, nil); done <- err }()
	<-started
	cancel()
	<-done
	if ex, err := w.Run(ctx, g, nil); err != nil || ex.Status != workflow.StatusDone {
		t.Fatalf("second run: %v", err)
	}
	if err := w.Restore(ctx, workflow.Point{Version: 2}); err != nil {
		t.Fatal(err)
	}
	got := lines(collect(t, w, workflow.EventsOptions{NoFollow: true}))
	want := []string{"step_started 1/slow#1", "step_interrupted 1/slow#1", "step_started 1/slow#2", "step_done 1/slow#2", "workflow_done", "workflow_moved"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

// TestEventsFollowAnotherProcess follows a workflow that another DB on
// the same SQLite file (as another process would) runs: SQLite tells no
// process of another's writes, so the events come by polling.
func TestEventsFollowAnotherProcess(t *testing.T) {
	ctx := t.Context()
	url := "sqlite://" + filepath.Join(t.TempDir(), "events.db")
	reader, writer := openDB(t, url), openDB(t, url)
	w, err := workflow.Create(ctx, writer, workflow.CreateOptions{ID: "far"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := workflow.Open(ctx, reader, "far")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		evs []workflow.Event
		err error
	}
	got := make(chan result, 1)
	go func() {
		var res result
		for ev, err := range r.Events(ctx, workflow.EventsOptions{UntilSettled: true, PollInterval: 5 * time.Millisecond}) {
			if err != nil {
				res.err = err
				break
			}
			res.evs = append(res.evs, ev)
		}
		got <- res
	}()
	g := approvalGraph()
	if _, err := w.Run(ctx, g, nil); err != nil {
		t.Fatal(err)
	}
	res := <-got
	if res.err != nil {
		t.Fatal(res.err)
	}
	want := lines(collect(t, w, workflow.EventsOptions{NoFollow: true}))
	if diff := cmp.Diff(want, lines(res.evs)); diff != "" {
		t.Fatalf("events heard from the other DB (-want +got):\n%s", diff)
	}
	if last := res.evs[len(res.evs)-1]; last.Kind != workflow.EventWaiting {
		t.Fatalf("ended at %s, want workflow_waiting", line(last))
	}
	// Resuming after the last event: the input and the second run, by the
	// other DB, are heard too.
	after := res.evs[len(res.evs)-1].Cursor
	go func() {
		var res result
		for ev, err := range r.Events(ctx, workflow.EventsOptions{After: after, PollInterval: 5 * time.Millisecond}) {
			if err != nil {
				res.err = err
				break
			}
			res.evs = append(res.evs, ev)
			if ev.Kind == workflow.EventDone {
				break
			}
		}
		got <- res
	}()
	if err := w.Provide(ctx, "review", true); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Run(ctx, g, nil); err != nil {
		t.Fatal(err)
	}
	res = <-got
	if res.err != nil {
		t.Fatal(res.err)
	}
	want = []string{"step_started 3/review#2", "step_done 3/review#2", "step_started 4/publish#1", "step_done 4/publish#1", "workflow_done"}
	if diff := cmp.Diff(want, lines(res.evs)); diff != "" {
		t.Fatalf("events after %s (-want +got):\n%s", after, diff)
	}
}

// FuzzParseCursor: a cursor that parses prints back as one that parses to
// the same place, and nothing panics.
func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "1.0", "12.3", "0.0", "1.-1", "x", "1", "99999999999999999999.1", "1.0.0", " 1.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := workflow.ParseCursor(s)
		if err != nil {
			if !errors.Is(err, workflow.ErrCursor) {
				t.Fatalf("%q: %v, not ErrCursor", s, err)
			}
			return
		}
		if s == "" {
			return
		}
		again, err := workflow.ParseCursor(c.String())
		if err != nil || again != c {
			t.Fatalf("%q → %v → %q → %v, %v", s, c, c.String(), again, err)
		}
	})
}

// TestEventsAfterRetention: once retention dropped a workflow's oldest
// versions, its events start after the oldest kept one (its state is where
// the derivation starts), the same events with the same cursors as before
// the drop; a cursor in a dropped version goes on from there too, rather
// than failing a reader that was behind.
func TestEventsAfterRetention(t *testing.T) {
	ctx := t.Context()
	db := openDB(t, "memory://")
	w, g := waitingPost(t, db)
	approve(t, w, g, true)
	all := collect(t, w, workflow.EventsOptions{NoFollow: true})
	th, err := db.Thread(ctx, "post")
	if err != nil {
		t.Fatal(err)
	}
	if err := th.SetRetention(ctx, thread.Retention{KeepLast: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GC(ctx, thread.GCOptions{}); err != nil {
		t.Fatal(err)
	}
	oldest := th.Version() - 3
	var want []workflow.Event
	for _, ev := range all {
		if ev.Version > oldest {
			want = append(want, ev)
		}
	}
	if len(want) == 0 || len(want) == len(all) {
		t.Fatalf("%d of %d events after version %d: the test keeps too much or too little", len(want), len(all), oldest)
	}
	got := collect(t, w, workflow.EventsOptions{NoFollow: true})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events after the drop (-want +got):\n%s", diff)
	}
	got = collect(t, w, workflow.EventsOptions{NoFollow: true, After: all[1].Cursor})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events after a cursor in a dropped version (-want +got):\n%s", diff)
	}
	// A cursor past the current version is still refused.
	for _, err := range w.Events(ctx, workflow.EventsOptions{NoFollow: true, After: "99.0"}) {
		if !errors.Is(err, workflow.ErrCursor) {
			t.Errorf("a cursor past the workflow: %v, want ErrCursor", err)
		}
	}
}

// A step whose runner went silent mid-step, ended by an edit: its attempt
// is interrupted, once, and the edit's attempt is done.
func TestEventsOfAnEditedRunningStep(t *testing.T) {
	ctx := t.Context()
	db := openDB(t, "memory://")
	wftest.Hold(t, db, "stalled", wftest.HourBehind)
	w, err := workflow.Open(ctx, db, "stalled")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Update(ctx, workflow.Point{}, workflow.Update{By: "ann", Outputs: map[string]any{"work": "by hand"}}); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range collect(t, w, workflow.EventsOptions{NoFollow: true}) {
		if ev.Step != nil {
			kinds = append(kinds, string(ev.Kind)+" "+ev.Step.ID)
		}
	}
	if want := []string{"step_started 1/work#1", "step_interrupted 1/work#1", "step_done 1/work#2"}; !slices.Equal(kinds, want) {
		t.Fatalf("events %q, want %q", kinds, want)
	}
}
