package webui_test

// The workflow page in the browser: input to waiting steps, checkpoints,
// restore, fork, past versions and a stalled workflow, driven from the
// page while a runner in the test process runs the workflow as its
// program would.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// postGraph drafts, asks whether to publish (a text answer), asks how
// many copies (a JSON answer), and publishes that many on "main".
func postGraph() *workflow.Graph {
	return workflow.NewGraph().
		Add("draft", func(ctx context.Context, s *workflow.Step) (any, error) {
			th, err := s.SubThread(ctx, workflow.MainKey)
			if err != nil {
				return nil, err
			}
			_, err = th.Append(ctx, message.Assistant("a draft"))
			return "a draft", err
		}, "review").
		Add("review", func(ctx context.Context, s *workflow.Step) (any, error) {
			answer, err := s.Ask("Publish the draft? (yes or no)")
			if err != nil {
				return nil, err
			}
			var yes string
			if err := json.Unmarshal(answer, &yes); err != nil {
				return nil, err
			}
			return yes, nil
		}, "copies").
		Add("copies", func(ctx context.Context, s *workflow.Step) (any, error) {
			answer, err := s.Ask(map[string]any{"question": "How many copies?", "format": "json"})
			if err != nil {
				return nil, err
			}
			var n int
			if err := json.Unmarshal(answer, &n); err != nil {
				return nil, err
			}
			return n, nil
		}, "publish").
		Add("publish", func(ctx context.Context, s *workflow.Step) (any, error) {
			out, _ := s.Output("copies")
			th, err := s.SubThread(ctx, workflow.MainKey)
			if err != nil {
				return nil, err
			}
			_, err = th.Append(ctx, message.Assistant("published: "+string(out)+" copies"))
			return "published", err
		})
}

// keepRunning runs workflow id on g in the test process, as its program
// would: it runs it, and while it waits for input, watches for the input
// and runs it again, until it is done or the test ends. The channel closes
// when it stops.
func keepRunning(t *testing.T, db *thread.DB, id string, g *workflow.Graph) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	t.Cleanup(func() { cancel(); <-stopped })
	w, err := workflow.Open(ctx, db, id)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(stopped)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			ex, err := w.Run(ctx, g, nil)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("run %s: %v", id, err)
				}
				return
			}
			if ex.Status == workflow.StatusDone {
				return
			}
			for w.Status() == workflow.StatusWaiting {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if err := w.Refresh(ctx); err != nil {
					if ctx.Err() == nil {
						t.Errorf("refresh %s: %v", id, err)
					}
					return
				}
			}
		}
	}()
	return stopped
}

// factsHave is an expression: the workflow's facts show text.
func factsHave(text string) string {
	return fmt.Sprintf(`(document.querySelector('#workflow-facts')?.innerText || '').includes(%s)`, jsString(text))
}

// statusIs is an expression: the facts say the workflow's status is s.
func statusIs(s string) string {
	return fmt.Sprintf(`document.querySelector('#workflow-facts .status')?.textContent === %s`, jsString(s))
}

// noNonsense is an expression: the page's main text has no "null",
// "undefined" or "NaN" in it (values a page printed without looking).
const noNonsense = `!/\b(null|undefined|NaN)\b/.test(document.querySelector('#main').innerText)`

func workflowVersion(t *testing.T, base, id string) int64 {
	t.Helper()
	var w struct{ Version int64 }
	call(t, base, "", "GET", "/v1/workflows/"+id, nil, &w)
	return w.Version
}

// TestWorkflowPageDrive drives a workflow from the page: input to each
// waiting step (text, then JSON, a bad JSON refused in the form) while
// its runner goes on, a checkpoint, a restore (the dialog's cancel leaves
// it be), a fork at the head, reading a past version and forking from it.
func TestWorkflowPageDrive(t *testing.T) {
	browser := newBrowser(t)
	e := newEnv(t, nil)
	ctx := tab(t, browser, 90*time.Second)
	if _, err := workflow.Create(t.Context(), e.db, workflow.CreateOptions{ID: "post", Title: "A post", Input: map[string]string{"topic": "looms"}}); err != nil {
		t.Fatal(err)
	}
	done := keepRunning(t, e.db, "post", postGraph())

	run(t, ctx, "the waiting step's form",
		chromedp.Navigate(e.url+"/#/workflows/post"),
		chromedp.WaitVisible(chromedp.CSS(`#waiting form[data-step="review"] textarea`)),
		waitJS(`document.querySelector('#waiting form[data-step="review"] .wf-prompt').textContent === 'Publish the draft? (yes or no)'`),
		waitJS(`document.querySelector('#mode-review').value === 'text'`),
		waitJS(statusIs("waiting")),
		waitJS(factsHave("Steps ended")+` && `+factsHave("draft")),
		waitJS(`document.querySelector('#live').textContent.includes('live')`),
		waitJS(noNonsense),
	)
	run(t, ctx, "a checkpoint while it waits",
		chromedp.SendKeys(chromedp.CSS(`#cp-name`), "at-review"),
		chromedp.Click(chromedp.CSS(`#cp-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#checkpoints li[data-name="at-review"] button.restore`)),
	)
	run(t, ctx, "text input: the runner goes on to the next question",
		chromedp.SendKeys(chromedp.CSS(`#input-review`), "yes"),
		chromedp.Click(chromedp.CSS(`#waiting form[data-step="review"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#waiting form[data-step="copies"] textarea`)),
		waitJS(`document.querySelector('#mode-copies').value === 'json'`),
		waitJS(`document.querySelector('#waiting form[data-step="copies"] .wf-prompt').textContent === 'How many copies?'`),
		waitJS(`!document.querySelector('#waiting form[data-step="review"]')`),
	)
	run(t, ctx, "bad JSON is refused in the form",
		chromedp.SendKeys(chromedp.CSS(`#input-copies`), "{oops"),
		chromedp.Click(chromedp.CSS(`#waiting form[data-step="copies"] button[type=submit]`)),
		waitJS(`document.querySelector('#error-copies').textContent.startsWith('Not JSON') && document.querySelector('#input-copies').getAttribute('aria-invalid') === 'true'`),
	)
	askedCopies := workflowVersion(t, e.url, "post") // it waits for the copies
	var wf struct{ Execution workflow.Execution }
	call(t, e.url, "", "GET", "/v1/workflows/post", nil, &wf)
	if wf.Execution.Status != workflow.StatusWaiting || len(wf.Execution.Waiting) != 1 || wf.Execution.Waiting[0].Step != "copies" {
		t.Fatalf("the bad JSON reached the server: %+v", wf.Execution)
	}
	run(t, ctx, "JSON input: the workflow ends",
		chromedp.SetValue(chromedp.CSS(`#input-copies`), "3"),
		chromedp.Click(chromedp.CSS(`#waiting form[data-step="copies"] button[type=submit]`)),
		waitJS(statusIs("done")),
		waitJS(factsHave("draft, review, copies, publish")),
		waitJS(`document.querySelector('#waiting').hidden && document.querySelector('#stalled').hidden`),
		waitJS(`document.querySelector('#steps tr[data-step="4/publish#1"]')?.innerText.includes('done')`),
		waitJS(noNonsense),
	)
	<-done
	var msgs struct{ Messages []message.Message }
	call(t, e.url, "", "GET", "/v1/threads/post.main/messages", nil, &msgs)
	if n := len(msgs.Messages); n == 0 || msgs.Messages[n-1].Text() != "published: 3 copies" {
		t.Fatalf("main sub-thread: %+v", msgs.Messages)
	}
	doneVersion := workflowVersion(t, e.url, "post")

	run(t, ctx, "a restore cancelled changes nothing",
		chromedp.Click(chromedp.CSS(`#checkpoints li[data-name="at-review"] button.restore`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-dialog[open] #confirm-cancel`)),
		waitJS(`document.querySelector('#confirm-message').textContent.includes('at-review')`),
		chromedp.Click(chromedp.CSS(`#confirm-cancel`)),
		waitJS(`!document.querySelector('#confirm-dialog').open`),
	)
	if v := workflowVersion(t, e.url, "post"); v != doneVersion {
		t.Fatalf("version %d after a cancelled restore, was %d", v, doneVersion)
	}
	run(t, ctx, "restore to the checkpoint: it waits for the review again",
		chromedp.Click(chromedp.CSS(`#checkpoints li[data-name="at-review"] button.restore`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-dialog[open] #confirm-ok`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
		waitJS(statusIs("waiting")),
		chromedp.WaitVisible(chromedp.CSS(`#waiting form[data-step="review"] textarea`)),
		waitJS(`document.querySelector('#history li:first-child .op')?.textContent === 'rollback'`),
	)
	call(t, e.url, "", "GET", "/v1/threads/post.main/messages", nil, &msgs)
	if n := len(msgs.Messages); n != 1 || msgs.Messages[0].Text() != "a draft" {
		t.Fatalf("main sub-thread after the restore: %+v", msgs.Messages)
	}

	run(t, ctx, "fork at the head: the page goes to the fork",
		chromedp.SendKeys(chromedp.CSS(`#fork-id`), "post-copy"),
		waitJS(`document.querySelector('#fork-button').textContent === 'Fork at the head'`),
		chromedp.Click(chromedp.CSS(`#fork-button`)),
		waitJS(`location.hash === '#/workflows/post-copy'`),
		waitJS(`document.querySelector('#workflow-meta code')?.textContent === 'post-copy'`),
		chromedp.WaitVisible(chromedp.CSS(`#waiting form[data-step="review"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#sub-threads a[href="#/threads/post-copy.main"]`)),
		waitJS(noNonsense),
	)

	run(t, ctx, "a past version from the timeline",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/workflows/post'`),
		waitJS(`document.querySelector('#workflow-meta code')?.textContent === 'post'`),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#history a[data-version="%d"]`, doneVersion))),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#history a[data-version="%d"]`, doneVersion))),
		waitJS(fmt.Sprintf(`location.hash === '#/workflows/post?v=%d'`, doneVersion)),
		chromedp.WaitVisible(chromedp.CSS(`#past-banner`)),
		waitJS(fmt.Sprintf(`document.querySelector('#past-banner').innerText.includes('Past version %d')`, doneVersion)),
		waitJS(statusIs("done")),
		waitJS(`document.querySelector('#waiting').hidden && document.querySelector('#cp-form').hidden`),
		waitJS(fmt.Sprintf(`document.querySelector('#history a[aria-current]')?.dataset.version === '%d'`, doneVersion)),
		waitJS(fmt.Sprintf(`document.querySelector('#fork-button').textContent === 'Fork at version %d'`, doneVersion)),
		waitJS(noNonsense),
		chromedp.Click(chromedp.CSS(`#back-to-head`)),
		waitJS(`document.querySelector('#past-banner').hidden && location.hash === '#/workflows/post'`),
		waitJS(statusIs("waiting")),
		chromedp.WaitVisible(chromedp.CSS(`#waiting form[data-step="review"]`)),
	)
	ctx = tab(t, browser, 30*time.Second)
	run(t, ctx, "?v= in the address opens that version; fork from it",
		chromedp.Navigate(fmt.Sprintf("%s/#/workflows/post?v=%d", e.url, doneVersion)),
		chromedp.WaitVisible(chromedp.CSS(`#past-banner`)),
		waitJS(statusIs("done")),
		chromedp.Click(chromedp.CSS(`#fork-button`)),
		waitJS(`location.hash.startsWith('#/workflows/wf_')`),
		waitJS(statusIs("done")+` && `+factsHave("draft, review, copies, publish")),
		waitJS(`document.querySelector('#past-banner').hidden`),
	)
	var forkMsgs struct{ Messages []message.Message }
	hash, err := chromedp.Run(ctx, chromedp.Evaluate[string](`decodeURIComponent(location.hash.slice('#/workflows/'.length))`))
	if err != nil {
		t.Fatal(err)
	}
	call(t, e.url, "", "GET", "/v1/threads/"+hash+".main/messages", nil, &forkMsgs)
	if n := len(forkMsgs.Messages); n == 0 || forkMsgs.Messages[n-1].Text() != "published: 3 copies" {
		t.Fatalf("the fork at version %d: %+v", doneVersion, forkMsgs.Messages)
	}

	run(t, ctx, "restore to a past version from its banner",
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = '#/workflows/post?v=%d'`, askedCopies)),
		waitJS(fmt.Sprintf(`document.querySelector('#past-banner').innerText.includes('Past version %d')`, askedCopies)),
		waitJS(`document.querySelector('#waiting h2')?.textContent === 'Was waiting for input' && !document.querySelector('#waiting form')`),
		chromedp.Click(chromedp.CSS(`#restore-version`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-dialog[open] #confirm-ok`)),
		waitJS(fmt.Sprintf(`document.querySelector('#confirm-message').textContent.includes('version %d')`, askedCopies)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
		waitJS(`location.hash === '#/workflows/post' && document.querySelector('#past-banner').hidden`),
		chromedp.WaitVisible(chromedp.CSS(`#waiting form[data-step="copies"]`)),
		waitJS(statusIs("waiting")+` && `+factsHave("draft, review")),
	)
	run(t, ctx, "fork from a checkpoint",
		chromedp.Click(chromedp.CSS(`#checkpoints li[data-name="at-review"] button.fork`)),
		waitJS(`location.hash.startsWith('#/workflows/wf_')`),
		chromedp.WaitVisible(chromedp.CSS(`#waiting form[data-step="review"]`)),
		waitJS(`document.querySelectorAll('#waiting form').length === 1`),
	)
}

// TestWorkflowPageStalled: a runner that goes silent in the middle of a
// step (its clock stops, so it renews its lease no more) shows as running,
// then, once its lease runs out and with no change to tell of it, as
// stalled, with why and what to do; the list says so too.
func TestWorkflowPageStalled(t *testing.T) {
	browser := newBrowser(t)
	e := newEnv(t, nil)
	ctx := tab(t, browser, 60*time.Second)
	w, err := workflow.Create(t.Context(), e.db, workflow.CreateOptions{ID: "hung", Title: "Hangs"})
	if err != nil {
		t.Fatal(err)
	}
	var frozen atomic.Pointer[time.Time]
	clock := func() time.Time {
		if f := frozen.Load(); f != nil {
			return *f
		}
		return time.Now()
	}
	inStep := make(chan struct{})
	g := workflow.NewGraph().Add("work", func(ctx context.Context, s *workflow.Step) (any, error) {
		close(inStep)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	rctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		w.Run(rctx, g, &workflow.RunOptions{LeaseTTL: 1500 * time.Millisecond, Now: clock})
	}()
	t.Cleanup(func() { cancel(); <-stopped })
	<-inStep

	run(t, ctx, "running, with its runner",
		chromedp.Navigate(e.url+"/#/workflows/hung"),
		waitJS(statusIs("running")),
		waitJS(factsHave("Runner")+` && `+factsHave("work (running)")),
		waitJS(`document.querySelector('#stalled').hidden`),
	)
	now := time.Now()
	frozen.Store(&now)
	run(t, ctx, "stalled once the lease runs out",
		chromedp.WaitVisible(chromedp.CSS(`#stalled h2 time`)),
		waitJS(`document.querySelector('#stalled h2').textContent.startsWith('Stalled since')`),
		waitJS(`document.querySelector('#stalled').innerText.includes('run the workflow again from its program')`),
		waitJS(`document.querySelector('#stalled').innerText.includes('This server cannot run this workflow')`),
		waitJS(`document.querySelector('#workflow-facts .status-stalled')?.textContent === 'stalled'`),
		waitJS(factsHave("work (to run again)")),
		waitJS(noNonsense),
	)
	var got struct {
		Stalled *struct{ Since time.Time }
	}
	call(t, e.url, "", "GET", "/v1/workflows/hung", nil, &got)
	if got.Stalled == nil {
		t.Fatal("the API does not say stalled")
	}
	iso, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#stalled h2 time').getAttribute('datetime')`))
	if err != nil {
		t.Fatal(err)
	}
	if since, err := time.Parse(time.RFC3339Nano, iso); err != nil || !since.Equal(got.Stalled.Since) {
		t.Errorf("the page says since %q, the API %v", iso, got.Stalled.Since)
	}
	run(t, ctx, "the list says stalled",
		chromedp.Navigate(e.url+"/#/workflows"),
		waitJS(`document.querySelector('#workflows tr[data-id="hung"] .status-stalled')?.textContent === 'stalled'`),
		waitJS(`document.querySelector('#workflows tr[data-id="hung"] .status-running') !== null`),
		waitJS(noNonsense),
	)
}

// TestWorkflowPagesShowNoNonsense reads the text of the workflows list, a
// workflow page in each state, and the work-items page: none prints
// "null", "undefined" or "NaN" (the pages once printed "nullnull" and
// "null"), and a done workflow says which steps ended, not a dash.
func TestWorkflowPagesShowNoNonsense(t *testing.T) {
	browser := newBrowser(t)
	e := newEnv(t, nil)
	db := e.db
	if _, err := workflow.Create(t.Context(), db, workflow.CreateOptions{ID: "pending"}); err != nil {
		t.Fatal(err)
	}
	var w *workflow.Workflow
	for _, id := range []string{"waits", "ends"} {
		var err error
		if w, err = workflow.Create(t.Context(), db, workflow.CreateOptions{ID: id, Title: "post " + id}); err != nil {
			t.Fatal(err)
		}
		if ex, err := w.Run(t.Context(), postGraph(), nil); err != nil || ex.Status != workflow.StatusWaiting {
			t.Fatalf("run %s: %v", id, err)
		}
	}
	if err := w.Provide(t.Context(), "review", "yes"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Run(t.Context(), postGraph(), nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Provide(t.Context(), "copies", 2); err != nil {
		t.Fatal(err)
	}
	if ex, err := w.Run(t.Context(), postGraph(), nil); err != nil || ex.Status != workflow.StatusDone {
		t.Fatalf("run to the end: %v", err)
	}
	call(t, e.url, "", "POST", "/v1/items?project=default", map[string]any{"text": "read every page"}, nil)

	for _, c := range []struct{ hash, ready string }{
		{"#/workflows", `document.querySelectorAll('#workflows tbody tr').length === 3`},
		{"#/workflows/pending", statusIs("pending") + ` && ` + factsHave("none: it has not run yet")},
		{"#/workflows/waits", statusIs("waiting") + ` && !!document.querySelector('#waiting form')`},
		{"#/workflows/ends", statusIs("done") + ` && ` + factsHave("Steps ended") + ` && ` + factsHave("draft, review, copies, publish") + ` && !` + factsHave("—")},
		{"#/workflows/ends?v=2", `!document.querySelector('#past-banner').hidden`},
		{"#/workflows/nope", `document.querySelector('#main h1')?.textContent === 'Workflow not found'`},
		{"#/items", `(document.querySelector('#items')?.innerText || '').includes('read every page')`},
	} {
		// A tab each: a navigation that changes only the hash is no load.
		run(t, tab(t, browser, 30*time.Second), c.hash,
			chromedp.Navigate(e.url+"/"+c.hash),
			waitJS(c.ready),
			waitJS(noNonsense),
		)
	}
}
