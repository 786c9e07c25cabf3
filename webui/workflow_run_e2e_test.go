package webui_test

// Workflows the server runs, in the browser: one started from the list's
// form, followed step by step by its progress stream, given the input its
// waiting step asks for and resumed from the page.

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loomthreads/loom/httpapi"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// progressHas is an expression: the progress list has an event of kind
// (of step, when not "").
func progressHas(kind, step string) string {
	sel := `#progress li[data-kind="` + kind + `"]`
	if step == "" {
		return `!!document.querySelector('` + sel + `')`
	}
	return `[...document.querySelectorAll('` + sel + `')].some((li) => li.innerText.includes(` + jsString(step) + `))`
}

func TestWorkflowPageStartAndResume(t *testing.T) {
	browser := newBrowser(t)
	reg := workflow.NewRegistry()
	g := workflow.NewGraph().
		Add("draft", func(context.Context, *workflow.Step) (any, error) { return "a draft", nil }, "review").
		Add("review", func(_ context.Context, s *workflow.Step) (any, error) {
			answer, err := s.Ask("Publish the draft? (yes or no)")
			if err != nil {
				return nil, err
			}
			return string(answer), nil
		}, "publish").
		Add("publish", func(context.Context, *workflow.Step) (any, error) { return "published", nil })
	if err := reg.Register("post", g, &workflow.RegisterOptions{Title: "A post", Description: "drafts, asks, publishes"}); err != nil {
		t.Fatal(err)
	}
	rn := workflow.NewRunner(reg, &workflow.RunnerOptions{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { rn.Close() })
	e := serveEnv(t, func(*thread.DB) httpapi.Options {
		return httpapi.Options{Workflows: rn, WorkflowPoll: 20 * time.Millisecond}
	})
	ctx := tab(t, browser, 90*time.Second)

	run(t, ctx, "the list offers to start one",
		chromedp.Navigate(e.url+"/#/workflows"),
		chromedp.WaitVisible(chromedp.CSS(`#start-form select#start-name`)),
		waitJS(`document.querySelector('#start-about').textContent === 'drafts, asks, publishes'`),
	)
	run(t, ctx, "an input that is not JSON is refused in the form",
		chromedp.SendKeys(chromedp.CSS(`#start-input`), "{oops"),
		chromedp.Click(chromedp.CSS(`#start-form button[type=submit]`)),
		waitJS(`document.querySelector('#start-error').textContent.startsWith('Not JSON') && document.querySelector('#start-input').getAttribute('aria-invalid') === 'true'`),
	)
	run(t, ctx, "started: its progress to the waiting step",
		chromedp.SetValue(chromedp.CSS(`#start-input`), `{"topic": "looms"}`),
		chromedp.SendKeys(chromedp.CSS(`#start-id`), "run1"),
		chromedp.Click(chromedp.CSS(`#start-form button[type=submit]`)),
		waitJS(`location.hash === '#/workflows/run1'`),
		waitJS(progressHas("step_done", "1/draft#1")),
		waitJS(progressHas("step_waiting", "2/review#1")),
		waitJS(progressHas("workflow_waiting", "")),
		chromedp.WaitVisible(chromedp.CSS(`#waiting form[data-step="review"] textarea`)),
		waitJS(statusIs("waiting")),
		waitJS(`document.querySelector('#workflow-resume').hidden`),
		waitJS(noNonsense),
	)
	run(t, ctx, "given input, it is resumed from the page to its end",
		chromedp.SendKeys(chromedp.CSS(`#input-review`), "yes"),
		chromedp.Click(chromedp.CSS(`#waiting form[data-step="review"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#resume-button`)),
		waitJS(`document.querySelector('#stalled').innerText.includes('Resume it on this server')`),
		chromedp.Click(chromedp.CSS(`#resume-button`)),
		waitJS(progressHas("step_done", "2/review#2")),
		waitJS(progressHas("workflow_done", "")),
		waitJS(statusIs("done")),
		waitJS(`document.querySelector('#workflow-resume').hidden && document.querySelector('#stalled').hidden`),
		waitJS(noNonsense),
	)
	// Reloaded, the page replays the whole progress, each event once.
	run(t, ctx, "reloaded: the progress replayed",
		chromedp.Reload(),
		waitJS(progressHas("workflow_done", "")),
		waitJS(`document.querySelectorAll('#progress li').length === 10`),
		waitJS(`new Set([...document.querySelectorAll('#progress li')].map((li) => li.dataset.cursor)).size === 10`),
	)
}
