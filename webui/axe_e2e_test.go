package webui_test

// The accessibility and page-text audit: every page of the app, on a store
// seeded with what a real one holds, at a desktop and a phone size, checked
// with axe-core (npm, pinned by webui/testdata/axe/package-lock.json and
// installed by scripts/webui-deps) and read for text a bug would leave.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/httpapi"
	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
	"github.com/loomthreads/loom/worklog"
)

// axeScript returns axe-core's axe.min.js. Without it the test is skipped,
// unless LOOM_REQUIRE_SERVERS=1 (CI), which makes that a failure.
func axeScript(t testing.TB) string {
	t.Helper()
	path := filepath.Join("testdata", "axe", "node_modules", "axe-core", "axe.min.js")
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		return string(b)
	case !errors.Is(err, os.ErrNotExist):
		t.Fatal(err)
	case os.Getenv(testserver.RequireEnv) == "1":
		t.Fatalf("axe-core is required (%s=1) but webui/%s is missing; install it with scripts/webui-deps (npm ci in webui/testdata/axe)", testserver.RequireEnv, filepath.ToSlash(path))
	default:
		t.Skipf("skipping: no webui/%s (scripts/webui-deps installs axe-core)", filepath.ToSlash(path))
	}
	return ""
}

// newDemoEnv is newEnv with the demo model of `loom serve --provider
// scripted` (scripted.Demo: it streams slowly and compacts when asked) for
// both runs and live conversations.
func newDemoEnv(t testing.TB) *env {
	t.Helper()
	model := scripted.Demo()
	// The server runs one workflow by name: the failed import, which the
	// page offers to resume, and the list's form to start.
	reg := workflow.NewRegistry()
	if err := reg.Register("import-orders", importGraph(), &workflow.RegisterOptions{Title: "Import orders", Description: "reads last month's orders file"}); err != nil {
		t.Fatal(err)
	}
	rn := workflow.NewRunner(reg, &workflow.RunnerOptions{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { rn.Close() })
	return serveEnv(t, func(db *thread.DB) httpapi.Options {
		return httpapi.Options{Agent: agent.New(model, &agent.Options{Name: "loom"}), Chat: model, Worklog: worklog.NewLogs(db, nil), Workflows: rn}
	})
}

// seeded says where newSeeded put things the pages show.
type seeded struct {
	past int64 // a version of thread "drafts" that a rollback left behind
}

// seed fills e's store with what a store in use holds: threads with forks,
// checkpoints, tool calls, an image, long texts and a rolled-back version;
// a workflow waiting for input, a done and a failed one; a project's work
// items and closed sessions; a live conversation with a fork.
func seed(t testing.TB, e *env) seeded {
	t.Helper()
	u := e.url
	seedSupport(t, u)

	// Long texts: a long title, a long paragraph, words longer than a phone.
	long := strings.Repeat("The shipment left the warehouse in Leipzig and was scanned at the hub twice, once on arrival and once on departure. ", 30)
	call(t, u, "", "POST", "/v1/threads", map[string]any{"id": "long-texts",
		"title":  "A thread with a very long title, as people write them when they paste the first line of a bug report: checkout fails on Safari 17 with a blank page",
		"labels": map[string]string{"team": "web", "priority": "high", "customer": "acme-corporation-international"},
		"messages": []any{
			textMsg("user", long),
			textMsg("assistant", "The log line was https://logs.example.com/search?query=checkout-failure&from=2026-11-01T00:00:00Z&to=2026-11-28T00:00:00Z&service=checkout-frontend&level=error and the hash "+strings.Repeat("9f86d081884c7d65", 8)),
		}}, nil)

	// A rolled-back version: the draft is in version past, not in the head.
	makeThread(t, u, "drafts", "Write the release notes for 2.4.", "Here is a first outline.")
	call(t, u, "", "POST", "/v1/threads/drafts/checkpoints", map[string]any{"name": "outline"}, nil)
	appendMsg(t, u, "drafts", "assistant", "A draft nobody wanted, full of marketing words.")
	var rec struct{ Version int64 }
	call(t, u, "", "GET", "/v1/threads/drafts", nil, &rec)
	call(t, u, "", "POST", "/v1/threads/drafts/rollback", map[string]any{"checkpoint": "outline"}, nil)
	appendMsg(t, u, "drafts", "assistant", "A plain draft: what changed, what broke, how to upgrade.")

	for i := range 12 {
		makeThread(t, u, fmt.Sprintf("ticket-%02d", i), fmt.Sprintf("Question number %d about an order", i), "An answer.")
	}

	seedWorkflows(t, e)

	// A project's work items and sessions.
	call(t, u, "", "POST", "/v1/items?project=web", map[string]any{"text": "fix the flaky deploy"}, nil)
	call(t, u, "", "POST", "/v1/items?project=web", map[string]any{"text": "the checkout page is blank on Safari 17; reproduce it with the customer's cart and add a test"}, nil)
	call(t, u, "", "POST", "/v1/sessions?project=web", map[string]any{"session_id": "sess-web-1"}, nil)
	call(t, u, "", "POST", "/v1/sessions/sess-web-1/close?project=web", map[string]any{"open_threads": []any{"carry this on"}}, nil)

	seedConversation(t, u)
	return seeded{past: rec.Version}
}

// seedWorkflows makes three workflows: "refund-4172" waits for input (a
// checkpoint marks where it asked), "trip" is done, with sub-threads, and
// "import" failed.
func seedWorkflows(t testing.TB, e *env) {
	t.Helper()
	ctx := context.Background()
	mk := func(want workflow.Status, opts workflow.CreateOptions, g *workflow.Graph) *workflow.Workflow {
		t.Helper()
		w, err := workflow.Create(ctx, e.db, opts)
		if err != nil {
			t.Fatal(err)
		}
		ex, err := w.Run(ctx, g, nil)
		if ex == nil || ex.Status != want {
			t.Fatalf("workflow %s: %+v, %v; want it %s", opts.ID, ex, err, want)
		}
		return w
	}
	refund := mk(workflow.StatusWaiting, workflow.CreateOptions{ID: "refund-4172", Title: "Approve a refund for order 4172", Input: map[string]any{"order": 4172, "amount": "40 EUR"}},
		workflow.NewGraph().
			Add("check", func(ctx context.Context, s *workflow.Step) (any, error) {
				th, err := s.SubThread(ctx, "checks")
				if err != nil {
					return nil, err
				}
				_, err = th.Append(ctx, message.Assistant("Order 4172 was paid on 2 November and shipped late."))
				return map[string]any{"paid": true, "late_days": 3}, err
			}, "approve").
			Add("approve", func(ctx context.Context, s *workflow.Step) (any, error) {
				answer, err := s.Ask("Refund 40 EUR to the customer of order 4172?")
				if err != nil {
					return nil, err
				}
				return "approved: " + string(answer), nil
			}))
	if _, err := refund.Checkpoint(ctx, "asked"); err != nil {
		t.Fatal(err)
	}
	research := func(topic string) workflow.StepFunc {
		return func(ctx context.Context, s *workflow.Step) (any, error) {
			th, err := s.SubThread(ctx, topic)
			if err != nil {
				return nil, err
			}
			_, err = th.Append(ctx, message.Assistant(topic+" in Lisbon: three found"))
			return topic + " found", err
		}
	}
	mk(workflow.StatusDone, workflow.CreateOptions{ID: "trip", Title: "Plan a trip to Lisbon", Input: map[string]string{"to": "Lisbon"}},
		workflow.NewGraph().
			Add("hotels", research("hotels"), "write").
			Add("food", research("food"), "write").
			Add("write", func(ctx context.Context, s *workflow.Step) (any, error) {
				return "A three-day plan: Alfama, Belém, Sintra.", nil
			}))
	mk(workflow.StatusFailed, workflow.CreateOptions{ID: "import", Title: "Import last month's orders", Labels: map[string]string{workflow.LabelName: "import-orders"}},
		importGraph())
}

// importGraph fails in its one step.
func importGraph() *workflow.Graph {
	return workflow.NewGraph().Add("fetch", func(ctx context.Context, s *workflow.Step) (any, error) {
		return nil, errors.New("the orders file has no header line")
	})
}

// seedConversation opens the live conversation "launch", has a turn with
// the demo model, and forks it.
func seedConversation(t testing.TB, u string) {
	t.Helper()
	call(t, u, "", "POST", "/v1/conversations", map[string]any{"id": "launch", "title": "Plan the launch"}, nil)
	turn := func(text string) {
		t.Helper()
		call(t, u, "", "POST", "/v1/conversations/launch/commands", map[string]any{"command": "send", "text": text}, nil)
		var c struct {
			Status   struct{ Kind string }
			Messages []any
		}
		// Polls the API: the page's server has nothing else to wait on.
		if !testwait.Within(20*time.Second, func() bool {
			c.Status.Kind, c.Messages = "", nil
			call(t, u, "", "GET", "/v1/conversations/launch", nil, &c)
			return c.Status.Kind != "streaming" && len(c.Messages) > 0
		}) {
			t.Fatalf("the conversation's turn did not end: %+v", c.Status)
		}
	}
	turn("Which channels should the launch post go to?")
	turn("And in which order?")
	call(t, u, "", "POST", "/v1/conversations/launch/commands", map[string]any{"command": "fork", "text": "Try a shorter plan"}, nil)
}

// installSettle makes every document of the tab count its fetches in
// flight, for settle.
func installSettle(ctx context.Context) error {
	return chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `
window.__inflight = 0;
const fetch0 = window.fetch;
window.fetch = function (...args) {
  window.__inflight++;
  const p = fetch0.apply(this, args);
  const done = () => { window.__inflight--; };
  p.then(done, done);
  return p;
};`})
		return err
	}))
}

// settle waits until the page has no fetch in flight and its DOM has not
// changed for 300 ms (or 5 s have passed: a live page may never be still).
var settle = chromedp.Evaluate[chromedp.Void](`new Promise((resolve) => {
  let last = Date.now();
  const obs = new MutationObserver(() => { last = Date.now(); });
  obs.observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
  const start = Date.now();
  const tick = setInterval(() => {
    const now = Date.now();
    if ((window.__inflight === 0 && now - last >= 300) || now - start > 5000) {
      clearInterval(tick); obs.disconnect(); resolve();
    }
  }, 50);
})`, chromedp.EvalAwaitPromise)

// mainHas is an expression: the page's main shows text.
func mainHas(text string) string {
	return fmt.Sprintf(`!!document.querySelector('main')?.innerText.includes(%s)`, jsString(text))
}

// auditPage is one page of the audit: its address, what shows it has
// loaded, and what to do then (open a dialog); keyed pages are served by a
// server that wants an API key.
type auditPage struct {
	name, hash, ready string
	then              string
	keyed             bool
}

// withDOM is an expression: js run with m, the page's own dom.js module.
func withDOM(js string) string {
	return `import(document.querySelector('link[rel=modulepreload][href$="/dom.js"]').href).then((m) => {` + js + `})`
}

// openConfirm opens the page's confirmation dialog as a rollback does;
// showAlert shows an error as a refused request does.
var (
	openConfirm = withDOM(`m.confirmDialog('Roll back to "looked-up"?', 'The thread goes back to version 2; later versions stay in its history.', 'Roll back')`)
	showAlert   = withDOM(`m.showError(new Error('runs need a model: start loom serve with --provider scripted'))`)
)

// auditPages are every page of the app on the seeded store.
func auditPages(s seeded) []auditPage {
	return []auditPage{
		{"ThreadsList", "#/", mainHas("Order 4172 is late"), "", false},
		{"Thread", "#/threads/support-4172", mainHas("same address"), "", false},
		{"ThreadLongTexts", "#/threads/long-texts", mainHas("Leipzig"), "", false},
		{"ThreadPastVersion", fmt.Sprintf("#/threads/drafts?v=%d", s.past), mainHas("A draft nobody wanted"), "", false},
		{"Diff", "#/threads/support-4172/diff?to=support-4172-express", mainHas("same address"), "", false},
		{"Workflows", "#/workflows", mainHas("Plan a trip to Lisbon") + ` && !!document.querySelector('#start-form')`, "", false},
		{"WorkflowWaiting", "#/workflows/refund-4172", mainHas("Approve a refund"), "", false},
		{"WorkflowDone", "#/workflows/trip", mainHas("Plan a trip to Lisbon"), "", false},
		{"WorkflowFailed", "#/workflows/import", mainHas("Import last month") + ` && !!document.querySelector('#resume-button') && !!document.querySelector('#progress li[data-kind="workflow_failed"]')`, "", false},
		{"Conversations", "#/conversations", mainHas("Plan the launch"), "", false},
		{"Conversation", "#/conversations/launch", mainHas("Which channels"), "", false},
		{"WorkItems", "#/items?project=web", mainHas("fix the flaky deploy"), "", false},
		{"NotFound", "#/no/such/page", mainHas("Not found"), "", false},
		{"ConfirmDialog", "#/threads/support-4172", mainHas("same address"), openConfirm, false},
		{"ErrorAlert", "#/no/such/page", mainHas("Not found"), showAlert, false},
		{"KeyDialog", "#/", `!!document.querySelector('#key-dialog[open]')`, "", true},
	}
}

// violation is what axe reports of a rule a page breaks.
type violation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target  string `json:"target"`
		HTML    string `json:"html"`
		Summary string `json:"summary"`
	} `json:"nodes"`
}

// runAxe is an action: axe-core's violations on the page (axe injected
// through the DevTools protocol, which the page's CSP does not restrict).
func runAxe(script string) chromedp.Action[[]violation] {
	return func(ctx context.Context, tg *chromedp.Target) ([]violation, error) {
		loaded, err := chromedp.Evaluate[bool](`typeof axe === 'object'`)(ctx, tg)
		if err != nil {
			return nil, err
		}
		if !loaded {
			if _, err := chromedp.Evaluate[chromedp.Void](script)(ctx, tg); err != nil {
				return nil, fmt.Errorf("inject axe: %w", err)
			}
		}
		return chromedp.Evaluate[[]violation](`axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations.map((v) => ({
  id: v.id, impact: v.impact || '', help: v.help,
  nodes: v.nodes.map((n) => ({ target: n.target.join(' '), html: n.html.slice(0, 160), summary: n.failureSummary || '' })),
})))`, chromedp.EvalAwaitPromise)(ctx, tg)
	}
}

// badWords are words a page shows only when code printed a missing value.
var badWords = regexp.MustCompile(`\b(null|undefined|NaN)\b`)

// overflowers is an expression, given a width: the elements that reach
// past it, innermost first, as selectors.
const overflowers = `(() => {
  const w = %d, out = [];
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.right <= w + 1) continue;
    if ([...el.children].some((c) => c.getBoundingClientRect().right > w + 1)) continue;
    let sel = '', n = el;
    for (let i = 0; n && n !== document.body && i < 4; i++, n = n.parentElement) {
      sel = n.tagName.toLowerCase() + (n.id ? '#' + n.id : '') + (n.classList.length ? '.' + [...n.classList].join('.') : '') + (sel ? ' > ' + sel : '');
    }
    out.push(sel + ' (right ' + Math.round(r.right) + ')');
    if (out.length === 8) break;
  }
  return out;
})()`

// TestAxe audits every page at 1400×900 and at 390×844 (and at 1400×900
// in the dark colour scheme): no axe-core violation of impact serious or
// critical, no "null", "undefined" or "NaN" in the text, and on the phone
// no page wider than the screen.
// LOOM_AXE_SHOTS=DIR saves a screenshot of each page audited in DIR.
func TestAxe(t *testing.T) {
	t.Parallel()
	script := axeScript(t)
	browser := newBrowser(t)
	e := newDemoEnv(t)
	pages := auditPages(seed(t, e))
	keys := new(auth.Keys)
	if err := keys.Add("key-for-the-audit-0123456789", "acme"); err != nil {
		t.Fatal(err)
	}
	keyed := newEnv(t, keys)
	for _, vp := range []struct {
		name        string
		w, h        int64
		phone, dark bool
	}{{"1400x900", 1400, 900, false, false}, {"390x844", 390, 844, true, false}, {"1400x900-dark", 1400, 900, false, true}} {
		t.Run(vp.name, func(t *testing.T) {
			ctx := tab(t, browser, 3*time.Minute)
			opts := []chromedp.EmulateViewportOption{}
			if vp.phone {
				opts = append(opts, chromedp.EmulateMobile)
			}
			if err := installSettle(ctx); err != nil {
				t.Fatal(err)
			}
			run(t, ctx, "viewport", chromedp.EmulateViewport(vp.w, vp.h, opts...))
			if vp.dark {
				run(t, ctx, "dark", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
					_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
						Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
					return err
				}))
			}
			for i, p := range pages {
				t.Run(p.name, func(t *testing.T) {
					// A new query loads the page afresh (a new hash would not).
					base := e.url
					if p.keyed {
						base = keyed.url
					}
					run(t, ctx, "open "+p.hash,
						chromedp.Navigate(fmt.Sprintf("%s/?load=%d%s", base, i, p.hash)),
						waitJS(p.ready),
						settle,
					)
					if p.then != "" {
						run(t, ctx, p.name, chromedp.Evaluate[chromedp.Void](p.then, chromedp.EvalAwaitPromise),
							waitJS(`!!document.querySelector('dialog[open], #alert:not([hidden])')`), settle)
					}
					audit(t, ctx, script, vp.w, vp.phone)
					if dir := os.Getenv("LOOM_AXE_SHOTS"); dir != "" {
						shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
						if err != nil {
							t.Fatal(err)
						}
						if err := os.WriteFile(filepath.Join(dir, vp.name+"-"+p.name+".png"), shot, 0o644); err != nil {
							t.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// audit checks the page the tab shows.
func audit(t *testing.T, ctx context.Context, script string, width int64, phone bool) {
	t.Helper()
	vs, err := chromedp.Run(ctx, runAxe(script))
	if err != nil {
		t.Fatalf("axe: %v", err)
	}
	for _, v := range vs {
		if v.Impact != "serious" && v.Impact != "critical" {
			var where []string
			for _, n := range v.Nodes[:min(len(v.Nodes), 3)] {
				where = append(where, n.Target)
			}
			t.Logf("axe (%s, not failing): %s — %s (%d nodes: %s)", v.Impact, v.ID, v.Help, len(v.Nodes), strings.Join(where, "; "))
			continue
		}
		var b strings.Builder
		for i, n := range v.Nodes {
			if i == 10 {
				fmt.Fprintf(&b, "\n    … and %d more", len(v.Nodes)-i)
				break
			}
			fmt.Fprintf(&b, "\n    %s  %s\n      %s", n.Target, n.HTML, strings.ReplaceAll(n.Summary, "\n", "\n      "))
		}
		t.Errorf("axe %s: %s — %s (%d nodes):%s", v.Impact, v.ID, v.Help, len(v.Nodes), b.String())
	}
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(text) {
		if w := badWords.FindString(line); w != "" {
			t.Errorf("the page shows %q: %q", w, strings.TrimSpace(line))
		}
	}
	if !phone {
		return
	}
	// A phone shows a page wider than itself zoomed out (innerWidth grows
	// with it): both are held to the screen's width.
	var size struct{ Scroll, Inner int64 }
	size, err = chromedp.Run(ctx, chromedp.Evaluate[struct{ Scroll, Inner int64 }](`({scroll: document.documentElement.scrollWidth, inner: window.innerWidth})`))
	if err != nil {
		t.Fatal(err)
	}
	if size.Scroll > size.Inner || size.Inner > width {
		wide, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](fmt.Sprintf(overflowers, width)))
		t.Errorf("the page is %d px wide on a %d px screen; past the edge:\n    %s", max(size.Scroll, size.Inner), width, strings.Join(wide, "\n    "))
	}
}
