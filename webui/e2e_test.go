package webui_test

// End-to-end tests: the page in headless Chromium, driven with chromedp,
// against a real API server over SQLite (and, for the live feed across
// processes, two `loom serve` processes on one PostgreSQL).
//
// Chromium is found on PATH (chromium, chromium-browser, google-chrome);
// without it the tests are skipped, unless LOOM_REQUIRE_SERVERS=1, which
// makes that a failure. Subtests that need an API route the server
// lacks (search, family, events) fail and say which.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/httpapi"
	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/openaiapi"
	_ "github.com/loomthreads/loom/postgres"
	_ "github.com/loomthreads/loom/sqlite"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/webui"
	"github.com/loomthreads/loom/workflow"
	"github.com/loomthreads/loom/worklog"
)

// TestMain removes the loom binary the tests built and stops the
// PostgreSQL server they started.
func TestMain(m *testing.M) { testserver.Main(m, removeBinary) }

func removeBinary() {
	if built.path != "" {
		os.RemoveAll(filepath.Dir(built.path))
	}
}

// chromium returns the path of a Chromium or Chrome on PATH.
func chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(testserver.RequireEnv) == "1" {
		t.Fatalf("Chromium is required (%s=1) but is not on PATH; Debian: apt-get install chromium", testserver.RequireEnv)
	}
	t.Skip("skipping: no chromium on PATH (Debian: apt-get install chromium)")
	return ""
}

// newBrowser starts a headless browser for the test; each tab() is a new
// tab in it.
func newBrowser(t testing.TB) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // tests run as root in CI
		chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancel := chromedp.NewContext(actx)
	if err := chromedp.Do(bctx); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("starting %s: %v", chromium(t), err)
	}
	t.Cleanup(func() { cancel(); cancelAlloc() })
	return bctx
}

// tab opens a new tab that lives until the test ends (or timeout); the
// page's uncaught exceptions fail the test.
func tab(t *testing.T, browser context.Context, timeout time.Duration) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	ctx, cancelT := context.WithTimeout(ctx, timeout)
	var mu sync.Mutex
	var errs []string
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			msg := e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
			mu.Lock()
			errs = append(errs, msg)
			mu.Unlock()
		}
	}); err != nil {
		cancelT()
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancelT()
		cancel()
		mu.Lock()
		defer mu.Unlock()
		for _, e := range errs {
			t.Errorf("uncaught exception in the page: %s", e)
		}
	})
	return ctx
}

// run runs the actions, and on failure reports what the page showed.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		text, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
		t.Fatalf("%s: %v\npage:\n%s", what, err, text)
	}
}

// waitJS waits until the JavaScript expression is true.
func waitJS(expr string) chromedp.Action[chromedp.Void] {
	return pollJS(expr, 10*time.Second, 50*time.Millisecond)
}

// pollJS polls expr every interval until it is true or timeout passes.
// A poll started just after a navigation can be sent to the execution
// context of the page navigated away from, which chromedp has not yet
// seen destroyed ("Cannot find context with specified id"); the poll is
// then started again in the new one rather than failing the test.
func pollJS(expr string, timeout, interval time.Duration) chromedp.Action[chromedp.Void] {
	poll := chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(interval))
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		for tries := 0; ; tries++ {
			v, err := poll(ctx, t)
			if err == nil || tries == 20 || !staleContext(err) {
				return v, err
			}
			select {
			case <-ctx.Done():
				return v, err
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// staleContext reports whether err says the page's execution context
// went away under an evaluation (a navigation).
func staleContext(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Cannot find context with specified id") || strings.Contains(msg, "Execution context was destroyed")
}

// jsString quotes s for JavaScript.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// messagesContain is an expression: the messages shown include text.
func messagesContain(text string) string {
	return fmt.Sprintf(`document.querySelector('#messages')?.innerText.includes(%s)`, jsString(text))
}

// echo is the scripted model of `loom serve --provider scripted`: it says
// back the last user message.
func echo(_ context.Context, r scripted.Request) (*agent.ChatResponse, error) {
	last := ""
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == message.RoleUser {
			last = r.Messages[i].Text()
			break
		}
	}
	return &agent.ChatResponse{Messages: []message.Message{message.Assistant("You said: " + last)}, FinishReason: agent.FinishStop}, nil
}

// env is an API server with the page beside it.
type env struct {
	url string
	db  *thread.DB
	key string
}

// newEnv serves the API over a SQLite store in a temporary directory with
// the scripted agent, and the page at /; keys may be nil.
func newEnv(t testing.TB, keys *auth.Keys) *env {
	t.Helper()
	client := scripted.New(scripted.Step{Func: echo})
	client.Repeat, client.Record = true, false
	return serveEnv(t, func(db *thread.DB) httpapi.Options {
		return httpapi.Options{Keys: keys, Agent: agent.New(client, &agent.Options{Name: "loom"}), Chat: client, Worklog: worklog.NewLogs(db, nil)}
	})
}

// serveEnv serves the API with the options opts gives for a SQLite store in
// a temporary directory (their DB, Logger and Heartbeat set here), beside
// the OpenAI-compatible API and the page at /.
func serveEnv(t testing.TB, opts func(db *thread.DB) httpapi.Options) *env {
	t.Helper()
	db, err := thread.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "loom.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	o := opts(db)
	o.DB, o.Logger, o.Heartbeat = db, slog.New(slog.DiscardHandler), time.Second
	api := httpapi.New(o)
	t.Cleanup(func() { api.Close() })
	mux := http.NewServeMux()
	mux.Handle("/v1/", api)
	mux.Handle(openaiapi.Prefix+"/", openaiapi.Errors(api.Protect(openaiapi.New(openaiapi.Options{DB: db, Chat: o.Chat}))))
	mux.Handle("/", webui.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.CloseClientConnections)
	t.Cleanup(srv.Close)
	return &env{url: srv.URL, db: db}
}

// call makes an API call and decodes its answer into out, failing unless
// the status is 2xx.
func call(t testing.TB, base, key, method, path string, body, out any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

func textMsg(role, text string) map[string]any {
	return map[string]any{"role": role, "contents": []any{map[string]any{"type": "text", "text": text}}}
}

// makeThread creates a thread with messages, alternately user and assistant.
func makeThread(t testing.TB, base, id string, texts ...string) {
	t.Helper()
	msgs := []any{}
	for i, s := range texts {
		msgs = append(msgs, textMsg([]string{"user", "assistant"}[i%2], s))
	}
	call(t, base, "", "POST", "/v1/threads", map[string]any{"id": id, "title": "thread " + id, "messages": msgs}, nil)
}

func appendMsg(t testing.TB, base, id, role, text string) {
	t.Helper()
	call(t, base, "", "POST", "/v1/threads/"+id+"/messages", map[string]any{"messages": []any{textMsg(role, text)}}, nil)
}

// hasRoute reports whether the server has a route for GET path: a 404 of
// the API's own "no route" is a route not there.
func hasRoute(t testing.TB, base, path string) bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+path, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		return true
	}
	b, _ := io.ReadAll(res.Body)
	return !strings.Contains(string(b), "no route for")
}

// needRoute fails the test when the server lacks a route the page uses.
func needRoute(t *testing.T, base, path string) {
	t.Helper()
	if !hasRoute(t, base, path) {
		t.Fatalf("the server has no route GET %s, which the page uses", strings.SplitN(path, "?", 2)[0])
	}
}

func TestE2E(t *testing.T) {
	t.Parallel()
	browser := newBrowser(t)
	e := newEnv(t, nil)
	const timeout = 30 * time.Second

	t.Run("ThreadsList", func(t *testing.T) {
		for i := range 3 {
			makeThread(t, e.url, fmt.Sprintf("list-%d", i), "hi")
		}
		call(t, e.url, "", "PATCH", "/v1/threads/list-1", map[string]any{"labels": map[string]string{"team": "blue"}}, nil)
		ctx := tab(t, browser, timeout)
		run(t, ctx, "list",
			chromedp.Navigate(e.url+"/"),
			chromedp.WaitVisible(chromedp.CSS(`#threads a[href="#/threads/list-2"]`)),
			chromedp.SendKeys(chromedp.CSS(`#labels`), "team=blue"),
			chromedp.Click(chromedp.CSS(`#filter-form button[type=submit]`)),
			waitJS(`document.querySelectorAll('#threads tbody tr').length === 1 && !!document.querySelector('#threads a[href="#/threads/list-1"]')`),
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#labels').value = ''; document.querySelector('#kind').value = 'workflow'`),
			chromedp.Click(chromedp.CSS(`#filter-form button[type=submit]`)),
			waitJS(`document.querySelector('#threads tbody').innerText.includes('No threads')`),
		)
	})

	t.Run("CreateAppendRun", func(t *testing.T) {
		ctx := tab(t, browser, timeout)
		run(t, ctx, "create a thread in the page",
			chromedp.Navigate(e.url+"/#/"),
			chromedp.WaitVisible(chromedp.CSS(`#threads`)),
			chromedp.Click(chromedp.CSS(`details.panel > summary`)),
			chromedp.SendKeys(chromedp.CSS(`#new-id`), "chat"),
			chromedp.SendKeys(chromedp.CSS(`#new-title`), "A chat"),
			chromedp.Click(chromedp.CSS(`#create-form button[type=submit]`)),
			waitJS(`location.hash === '#/threads/chat' && document.querySelector('#thread-title')?.textContent === 'A chat'`),
		)
		run(t, ctx, "append a message",
			chromedp.Click(chromedp.CSS(`details:has(#append-form) > summary`)),
			chromedp.SendKeys(chromedp.CSS(`#append-text`), "Hello loom"),
			chromedp.Click(chromedp.CSS(`#append-form button[type=submit]`)),
			waitJS(messagesContain("Hello loom")),
		)
		run(t, ctx, "run the agent",
			chromedp.SendKeys(chromedp.CSS(`#run-text`), "what is a thread"),
			chromedp.Click(chromedp.CSS(`#run-button`)),
			waitJS(`document.querySelector('#run-answer')?.textContent === 'You said: what is a thread'`),
			waitJS(`document.querySelector('#run-status')?.textContent === 'Done.'`),
			waitJS(messagesContain("You said: what is a thread")),
			waitJS(`document.querySelectorAll('#messages li.msg').length === 3`),
		)
	})

	// A conversation an OpenAI SDK made is a thread of the page: its items
	// are the messages, its stored response a checkpoint on the timeline.
	t.Run("OpenAIConversation", func(t *testing.T) {
		var conv struct{ ID string }
		call(t, e.url, "", "POST", "/openai/v1/conversations", map[string]any{
			"items": []any{map[string]any{"role": "user", "content": "What is a loom?"}}}, &conv)
		var resp struct{ ID string }
		call(t, e.url, "", "POST", "/openai/v1/responses", map[string]any{"model": "loom", "input": "Tell me", "conversation": conv.ID}, &resp)
		key, _, _ := strings.Cut(strings.TrimPrefix(resp.ID, "resp_"), "_")
		ctx := tab(t, browser, timeout)
		run(t, ctx, "the conversation in the page",
			chromedp.Navigate(e.url+"/#/threads/"+conv.ID),
			waitJS(`document.querySelector('#thread-title')?.textContent === 'What is a loom?'`),
			waitJS(messagesContain("What is a loom?")),
			waitJS(messagesContain("You said: Tell me")),
			waitJS(`document.querySelectorAll('#messages li.msg').length === 3`),
			chromedp.WaitVisible(chromedp.CSS(`#checkpoints li[data-name="resp_`+key+`"]`)),
		)
	})

	t.Run("Fork", func(t *testing.T) {
		makeThread(t, e.url, "fork-src", "one", "two", "three", "four")
		ctx := tab(t, browser, timeout)
		run(t, ctx, "fork at the second message",
			chromedp.Navigate(e.url+"/#/threads/fork-src"),
			waitJS(`document.querySelectorAll('#messages li.msg').length === 4`),
			chromedp.Click(chromedp.CSS(`#messages li.msg:nth-child(2) .fork-here`)),
			waitJS(`location.hash.startsWith('#/threads/') && location.hash !== '#/threads/fork-src'`),
			waitJS(`document.querySelectorAll('#messages li.msg').length === 2`),
			waitJS(`document.querySelectorAll('#fork-tree svg a.node').length === 2`),
			waitJS(`document.querySelector('#fork-tree a.node.current') && document.querySelector('#fork-tree a.node[data-thread="fork-src"]')`),
		)
		if !hasRoute(t, e.url, "/v1/threads/fork-src/family") {
			t.Log("the family route is not there yet: the fork tree of the source is not checked")
			return
		}
		run(t, ctx, "the source's tree shows the fork; its node opens it",
			chromedp.Click(chromedp.CSS(`#fork-tree a.node[data-thread="fork-src"]`)),
			waitJS(`location.hash === '#/threads/fork-src' && document.querySelectorAll('#messages li.msg').length === 4`),
			waitJS(`document.querySelectorAll('#fork-tree svg a.node').length === 2 && document.querySelector('#fork-tree a.node.current').dataset.thread === 'fork-src'`),
		)
	})

	t.Run("CheckpointRollback", func(t *testing.T) {
		makeThread(t, e.url, "cp", "kept one", "kept two")
		ctx := tab(t, browser, timeout)
		run(t, ctx, "checkpoint, append, roll back",
			chromedp.Navigate(e.url+"/#/threads/cp"),
			waitJS(messagesContain("kept two")),
			chromedp.SendKeys(chromedp.CSS(`#cp-name`), "before"),
			chromedp.Click(chromedp.CSS(`#cp-form button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`#checkpoints li[data-name="before"] button`)),
			chromedp.Click(chromedp.CSS(`details:has(#append-form) > summary`)),
			chromedp.SendKeys(chromedp.CSS(`#append-text`), "later message"),
			chromedp.Click(chromedp.CSS(`#append-form button[type=submit]`)),
			waitJS(messagesContain("later message")),
			chromedp.Click(chromedp.CSS(`#checkpoints li[data-name="before"] button`)),
			chromedp.WaitVisible(chromedp.CSS(`#confirm-dialog[open] #confirm-ok`)),
			chromedp.Click(chromedp.CSS(`#confirm-ok`)),
			waitJS(`!`+messagesContain("later message")+` && `+messagesContain("kept two")),
			waitJS(`document.querySelector('#history li:first-child .op')?.textContent === 'rollback'`),
		)
		var rec struct{ Version int }
		call(t, e.url, "", "GET", "/v1/threads/cp", nil, &rec)
		if rec.Version != 3 { // create, append, rollback
			t.Errorf("version %d after the rollback", rec.Version)
		}
	})

	t.Run("Timeline", func(t *testing.T) {
		makeThread(t, e.url, "tl", "first")
		appendMsg(t, e.url, "tl", "assistant", "second")
		appendMsg(t, e.url, "tl", "user", "third")
		var h struct{ Entries []struct{ Version int64 } }
		call(t, e.url, "", "GET", "/v1/threads/tl/history", nil, &h)
		v := h.Entries[1].Version // the version before the last append
		ctx := tab(t, browser, timeout)
		run(t, ctx, "choose an older version and go back",
			chromedp.Navigate(e.url+"/#/threads/tl"),
			waitJS(messagesContain("third")),
			chromedp.Click(chromedp.CSS(fmt.Sprintf(`#history a[data-version="%d"]`, v))),
			chromedp.WaitVisible(chromedp.CSS(`#past-banner`)),
			waitJS(messagesContain("second")+` && !`+messagesContain("third")),
			waitJS(fmt.Sprintf(`document.querySelector('#past-banner').innerText.includes('Past version %d')`, v)),
			waitJS(`document.querySelector('#run-form').offsetParent === null`), // no writes to the past
			chromedp.Click(chromedp.CSS(`#back-to-head`)),
			waitJS(`document.querySelector('#past-banner').hidden && `+messagesContain("third")),
		)
	})

	t.Run("Export", func(t *testing.T) {
		makeThread(t, e.url, "exported", "take me along")
		ctx := tab(t, browser, timeout)
		run(t, ctx, "export with history",
			chromedp.Navigate(e.url+"/#/threads/exported"),
			waitJS(messagesContain("take me along")),
			// The download is a Blob made from a fetch (the key goes in a
			// header): catch it on its way to the download link.
			chromedp.Evaluate[chromedp.Void](`window.blobs = []; const make = URL.createObjectURL; URL.createObjectURL = (b) => { window.blobs.push(b); return make.call(URL, b); }`),
			chromedp.Click(chromedp.CSS(`#export-history`)),
			chromedp.Click(chromedp.CSS(`#export`)),
			waitJS(`window.blobs.length === 1`),
		)
		doc, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.blobs[0].text()`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(doc, "take me along") || !strings.Contains(doc, `"history"`) {
			t.Errorf("the export is not the document with its history: %.300s", doc)
		}
	})

	t.Run("Paging", func(t *testing.T) {
		msgs := []any{}
		for i := range 120 {
			msgs = append(msgs, textMsg("user", fmt.Sprintf("number %03d", i)))
		}
		call(t, e.url, "", "POST", "/v1/threads", map[string]any{"id": "long", "messages": msgs}, nil)
		ctx := tab(t, browser, timeout)
		run(t, ctx, "the newest page, then older ones on scrolling up",
			chromedp.Navigate(e.url+"/#/threads/long"),
			waitJS(messagesContain("number 119")),
			waitJS(`document.querySelectorAll('#messages li.msg').length === 50`),
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#scroller').scrollTop = 0`),
			waitJS(`document.querySelectorAll('#messages li.msg').length === 100`),
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#scroller').scrollTop = 0`),
			waitJS(`document.querySelectorAll('#messages li.msg').length === 120 && `+messagesContain("number 000")),
			waitJS(`document.querySelector('#load-older').hidden`),
		)
	})

	t.Run("Search", func(t *testing.T) {
		needRoute(t, e.url, "/v1/search?q=x")
		makeThread(t, e.url, "searched", "nothing here", "the zanzibar shipment is late")
		ctx := tab(t, browser, timeout)
		run(t, ctx, "search for a word",
			chromedp.Navigate(e.url+"/"),
			chromedp.WaitVisible(chromedp.CSS(`#search-q`)),
			chromedp.SendKeys(chromedp.CSS(`#search-q`), "Zanzibar"),
			chromedp.Click(chromedp.CSS(`#search-form button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`#search-results .hit a[href="#/threads/searched"]`)),
			waitJS(`document.querySelector('#search-results .hit mark')?.textContent.toLowerCase() === 'zanzibar'`),
			chromedp.Click(chromedp.CSS(`#search-results .hit a`)),
			waitJS(messagesContain("zanzibar shipment")),
		)
	})

	t.Run("Live", func(t *testing.T) {
		makeThread(t, e.url, "live", "before")
		needRoute(t, e.url, "/v1/threads/live/events")
		ctx := tab(t, browser, timeout)
		run(t, ctx, "open",
			chromedp.Navigate(e.url+"/#/threads/live"),
			waitJS(messagesContain("before")),
			waitJS(`document.querySelector('#live').textContent.includes('live')`),
		)
		// The message shown stays the same element: a change renders what
		// is new, not everything loaded.
		run(t, ctx, "mark", chromedp.Evaluate[chromedp.Void](`document.querySelector('#messages li.msg').dataset.mark = 'kept'`))
		appendMsg(t, e.url, "live", "user", "written elsewhere")
		run(t, ctx, "a write made elsewhere shows", waitJS(messagesContain("written elsewhere")),
			waitJS(`document.querySelector('#messages li.msg').dataset.mark === 'kept'`))
		call(t, e.url, "", "POST", "/v1/threads/live/checkpoints", map[string]any{"name": "remote"}, nil)
		run(t, ctx, "a checkpoint made elsewhere shows", chromedp.WaitVisible(chromedp.CSS(`#checkpoints li[data-name="remote"]`)))
	})

	t.Run("LiveList", func(t *testing.T) {
		needRoute(t, e.url, "/v1/events")
		ctx := tab(t, browser, timeout)
		run(t, ctx, "open", chromedp.Navigate(e.url+"/"), chromedp.WaitVisible(chromedp.CSS(`#threads`)),
			waitJS(`document.querySelector('#live').textContent.includes('live')`))
		makeThread(t, e.url, "a-new-one", "hi")
		run(t, ctx, "a thread made elsewhere shows", chromedp.WaitVisible(chromedp.CSS(`#threads a[href="#/threads/a-new-one"]`)))
	})

	t.Run("Workflow", func(t *testing.T) {
		if _, err := workflow.Create(context.Background(), e.db, workflow.CreateOptions{ID: "trip", Title: "Plan a trip", Input: map[string]string{"to": "Lisbon"}, SubThreads: []string{"hotels"}}); err != nil {
			t.Fatal(err)
		}
		ctx := tab(t, browser, timeout)
		run(t, ctx, "list and open a workflow",
			chromedp.Navigate(e.url+"/#/workflows"),
			chromedp.Click(chromedp.CSS(`#workflows a[href="#/workflows/trip"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#workflow-facts`)),
			chromedp.Click(chromedp.CSS(`#sub-threads a[href="#/threads/trip.hotels"]`)),
			waitJS(`location.hash === '#/threads/trip.hotels' && !!document.querySelector('#thread-meta')`),
		)
	})

	t.Run("Items", func(t *testing.T) {
		call(t, e.url, "", "POST", "/v1/items?project=web", map[string]any{"text": "fix the flaky deploy"}, nil)
		call(t, e.url, "", "POST", "/v1/sessions?project=web", map[string]any{"session_id": "sess-web-1"}, nil)
		call(t, e.url, "", "POST", "/v1/sessions/sess-web-1/close?project=web", map[string]any{"open_threads": []any{"carry this on"}}, nil)
		ctx := tab(t, browser, timeout)
		run(t, ctx, "a project's items and sessions",
			chromedp.Navigate(e.url+"/#/items"),
			chromedp.WaitVisible(chromedp.CSS(`#items`)),
			chromedp.SetValue(chromedp.CSS(`#project`), "web"),
			chromedp.Click(chromedp.CSS(`#items-form button[type=submit]`)),
			waitJS(`document.querySelector('#items').innerText.includes('fix the flaky deploy')`),
			waitJS(`document.querySelector('#sessions')?.innerText.includes('sess-web-1')`),
		)
	})

	t.Run("APIKey", func(t *testing.T) {
		const key = "key-for-the-browser-0123456789"
		keys := new(auth.Keys)
		if err := keys.Add(key, "acme"); err != nil {
			t.Fatal(err)
		}
		ke := newEnv(t, keys)
		call(t, ke.url, key, "POST", "/v1/threads", map[string]any{"id": "secret"}, nil)
		ctx := tab(t, browser, timeout)
		var stored, href string
		run(t, ctx, "the prompt, then the list",
			chromedp.Navigate(ke.url+"/"),
			chromedp.WaitVisible(chromedp.CSS(`#key-dialog[open] #key-input`)),
			chromedp.SendKeys(chromedp.CSS(`#key-input`), "wrong-key-0123456789"),
			chromedp.Click(chromedp.CSS(`#key-form button[type=submit]`)),
			waitJS(`document.querySelector('#key-dialog').open && document.querySelector('#key-message').textContent.includes('refused')`),
			chromedp.SendKeys(chromedp.CSS(`#key-input`), key),
			chromedp.Click(chromedp.CSS(`#key-form button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`#threads a[href="#/threads/secret"]`)),
			chromedp.Click(chromedp.CSS(`#threads a[href="#/threads/secret"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#thread-meta`)),
		)
		stored, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem('loom.apiKey')`))
		href, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
		if stored != key {
			t.Errorf("sessionStorage has %q", stored)
		}
		if strings.Contains(href, key) {
			t.Errorf("the key is in the URL %s", href)
		}
	})
}

var built struct {
	once sync.Once
	path string
	err  error
}

// loomBinary builds cmd/loom once per test run.
func loomBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "loom-webui-")
		if err != nil {
			built.err = err
			return
		}
		testserver.Track("loom binary", "", 0, dir)
		built.path = filepath.Join(dir, "loom")
		out, err := exec.Command("go", "build", "-o", built.path, "github.com/loomthreads/loom/cmd/loom").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// serve starts `loom serve` on store and returns its URL.
func serve(t *testing.T, store string) string {
	t.Helper()
	cmd := exec.Command(loomBinary(t), "serve", "--addr", "127.0.0.1:0", "--store", store, "--provider", "scripted", "--shutdown-timeout", "1s")
	cmd.Env = append(os.Environ(), "LOOM_API_KEYS=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testserver.Track("loom serve", "loom", cmd.Process.Pid, "")
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			// loom serve's JSON line {"msg":"listening","url":…}.
			var line struct{ Msg, URL string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
				found <- line.URL
			}
		}
	}()
	select {
	case u := <-found:
		return u
	case <-time.After(20 * time.Second):
		t.Fatal("loom serve did not start")
		return ""
	}
}

// TestLiveAcrossServers: two `loom serve` processes on one PostgreSQL; the
// page watches server A, a write made through server B shows on it.
func TestLiveAcrossServers(t *testing.T) {
	t.Parallel()
	browser := newBrowser(t)
	dsn := testserver.Postgres(t)
	a, b := serve(t, dsn), serve(t, dsn)
	makeThread(t, b, "shared", "hello from B")
	needRoute(t, a, "/v1/threads/shared/events")

	// The page comes from here; its API calls go to server A.
	target, _ := url.Parse(a)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	mux := http.NewServeMux()
	mux.Handle("/v1/", proxy)
	mux.Handle("/", webui.Handler())
	front := httptest.NewServer(mux)
	t.Cleanup(front.Close)
	t.Cleanup(front.CloseClientConnections)

	ctx := tab(t, browser, 30*time.Second)
	run(t, ctx, "open on A",
		chromedp.Navigate(front.URL+"/#/threads/shared"),
		waitJS(messagesContain("hello from B")),
		waitJS(`document.querySelector('#live').textContent.includes('live')`),
	)
	start := time.Now()
	appendMsg(t, b, "shared", "user", "written through B")
	run(t, ctx, "B's write shows on A", waitJS(messagesContain("written through B")))
	t.Logf("B's write showed on A after %v", time.Since(start).Round(time.Millisecond))
}
