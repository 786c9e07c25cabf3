package webui_test

// Browser tests of the threads list, the thread page and the diff page
// (issue 26): the list's filter of loom's own threads, its order by time,
// forks named by where they come from, a phone's width; a search hit in a
// past version; the fork button's accessible name; the run panel on a
// server with no model; the windowed message list of a 100,000-message
// thread; diffs between versions and between a thread and its fork.
//
// Where a test needs an API another part of issue 26 adds (the list's
// order and filter, /v1/server, the diff, a search hit's version) and the
// server lacks it, it skips and says which.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loomthreads/loom/httpapi"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// answers reports whether GET path answers 2xx: a query parameter the
// server does not know yet is a 400.
func answers(t testing.TB, base, path string) bool {
	t.Helper()
	res, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	io.Copy(io.Discard, res.Body)
	return res.StatusCode/100 == 2
}

// needAPI skips the test when the server does not answer GET path, which
// a part of issue 26 adds.
func needAPI(t *testing.T, base, path, what string) {
	t.Helper()
	if !answers(t, base, path) {
		t.Skipf("skipping: the server does not answer GET %s yet (%s, another helper's part of issue 26)", path, what)
	}
}

// noJunkText is an expression: the page shows no null, undefined or NaN
// (a value printed where text was meant).
const noJunkText = `!/\b(null|undefined|NaN)\b/.test(document.body.innerText)`

// junk returns the words of the page's text that are null, undefined or
// NaN, with some context, for a failure message.
func junk(t *testing.T, ctx context.Context) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.body.innerText.match(/.{0,30}\b(null|undefined|NaN)\b.{0,30}/g) || []).join(' | ')`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func checkNoJunk(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	if s := junk(t, ctx); s != "" {
		t.Errorf("the %s shows: %s", page, s)
	}
}

func TestThreadsList(t *testing.T) {
	t.Parallel()
	browser := newBrowser(t)
	e := newEnv(t, nil)
	const timeout = 30 * time.Second

	t.Run("InternalFilter", func(t *testing.T) {
		needAPI(t, e.url, "/v1/threads?internal=include", "the list's internal filter")
		makeThread(t, e.url, "people-1", "hello")
		call(t, e.url, "", "POST", "/v1/threads", map[string]any{"id": "wl_own", "title": "a work log", "labels": map[string]string{"loom.owner": "worklog"}}, nil)
		ctx := tab(t, browser, timeout)
		run(t, ctx, "loom's own threads are behind the filter",
			chromedp.Navigate(e.url+"/"),
			chromedp.WaitVisible(chromedp.CSS(`#threads a[href="#/threads/people-1"]`)),
			waitJS(`!document.querySelector('#threads a[href="#/threads/wl_own"]')`),
			chromedp.Click(chromedp.CSS(`#internal`)),
			chromedp.WaitVisible(chromedp.CSS(`#threads a[href="#/threads/wl_own"]`)),
			chromedp.Click(chromedp.CSS(`#internal`)),
			waitJS(`!document.querySelector('#threads a[href="#/threads/wl_own"]') && !!document.querySelector('#threads a[href="#/threads/people-1"]')`),
		)
	})

	t.Run("UpdatedOrder", func(t *testing.T) {
		needAPI(t, e.url, "/v1/threads?order=updated", "the list's order by time")
		for _, id := range []string{"ord-a", "ord-b", "ord-c"} {
			makeThread(t, e.url, id, "hi")
		}
		appendMsg(t, e.url, "ord-a", "user", "a later word") // ord-a is now the newest by time, the oldest by id
		ctx := tab(t, browser, timeout)
		run(t, ctx, "the thread written to last comes first",
			chromedp.Navigate(e.url+"/"),
			chromedp.WaitVisible(chromedp.CSS(`#threads a[href="#/threads/ord-a"]`)),
			waitJS(`(() => { const ids = [...document.querySelectorAll('#threads tbody tr')].map((r) => r.dataset.thread).filter((x) => x && x.startsWith('ord-'));
				return ids.join(',') === 'ord-a,ord-c,ord-b'; })()`),
		)
	})

	t.Run("ForkNaming", func(t *testing.T) {
		needAPI(t, e.url, "/v1/threads?order=updated", "the list's order by time")
		makeThread(t, e.url, "named", "one", "two")
		var msgs struct{ Messages []struct{ ID string } }
		call(t, e.url, "", "GET", "/v1/threads/named/messages?limit=0", nil, &msgs)
		call(t, e.url, "", "POST", "/v1/threads/named/fork", map[string]any{"id": "named-fork", "at": msgs.Messages[0].ID}, nil)
		ctx := tab(t, browser, timeout)
		run(t, ctx, "a fork's row says where it comes from",
			chromedp.Navigate(e.url+"/"),
			chromedp.WaitVisible(chromedp.CSS(`#threads a[href="#/threads/named-fork"]`)),
			waitJS(fmt.Sprintf(`(() => { const r = document.querySelector('#threads tr[data-thread="named-fork"] .origin');
				return !!r && r.innerText.startsWith('fork of named at msg') && r.innerText.includes(%s) && !!r.querySelector('a[href="#/threads/named"]'); })()`,
				jsString(msgs.Messages[0].ID[len(msgs.Messages[0].ID)-8:]))),
			waitJS(`!document.querySelector('#threads tr[data-thread="named"] .origin')`),
		)
		checkNoJunk(t, ctx, "threads list")
	})

	t.Run("Phone", func(t *testing.T) {
		needAPI(t, e.url, "/v1/threads?order=updated", "the list's order by time")
		call(t, e.url, "", "POST", "/v1/threads", map[string]any{"id": "a-rather-long-thread-identifier-for-a-small-screen",
			"title":  "A title long enough to wrap on a phone's narrow screen, and then some more",
			"labels": map[string]string{"team": "support", "customer": "acme-corporation-international", "lang": "en"}}, nil)
		ctx := tab(t, browser, timeout)
		run(t, ctx, "the list at 390×844",
			chromedp.EmulateViewport(390, 844),
			chromedp.Navigate(e.url+"/"),
			chromedp.WaitVisible(chromedp.CSS(`#threads a[href="#/threads/a-rather-long-thread-identifier-for-a-small-screen"]`)),
		)
		width, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
		if err != nil {
			t.Fatal(err)
		}
		if width > 390 {
			wide, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('body *')].filter((el) => el.getBoundingClientRect().right > 390).slice(0, 8).map((el) => el.tagName + '#' + el.id + '.' + el.className + ' ' + Math.round(el.getBoundingClientRect().right)).join('\n')`))
			t.Errorf("at 390 px the list is %d px wide; too wide:\n%s", width, wide)
		}
		// The cards say what each value is.
		run(t, ctx, "cards", waitJS(`getComputedStyle(document.querySelector('#threads tbody tr')).display === 'block'`))
		checkNoJunk(t, ctx, "threads list at 390 px")
	})

	t.Run("SearchHitVersion", func(t *testing.T) {
		needRoute(t, e.url, "/v1/search?q=x")
		makeThread(t, e.url, "rolled", "a plain start")
		call(t, e.url, "", "POST", "/v1/threads/rolled/checkpoints", map[string]any{"name": "start"}, nil)
		appendMsg(t, e.url, "rolled", "user", "the quokka left the head")
		call(t, e.url, "", "POST", "/v1/threads/rolled/rollback", map[string]any{"checkpoint": "start"}, nil)
		var res struct {
			Hits []struct {
				Thread  string
				Version int64
			}
		}
		call(t, e.url, "", "GET", "/v1/search?q=quokka", nil, &res)
		if len(res.Hits) != 1 {
			t.Fatalf("search for quokka: %+v", res.Hits)
		}
		if res.Hits[0].Version == 0 {
			t.Skip("skipping: the server's search hits have no version yet (another helper's part of issue 26)")
		}
		v := res.Hits[0].Version
		ctx := tab(t, browser, timeout)
		run(t, ctx, "the hit opens the version it was found in",
			chromedp.Navigate(e.url+"/"),
			chromedp.WaitVisible(chromedp.CSS(`#search-q`)),
			chromedp.SendKeys(chromedp.CSS(`#search-q`), "quokka"),
			chromedp.Click(chromedp.CSS(`#search-form button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#search-results .hit a[href="#/threads/rolled?v=%d"]`, v))),
			chromedp.Click(chromedp.CSS(`#search-results .hit a`)),
			waitJS(messagesContain("the quokka left the head")),
			waitJS(fmt.Sprintf(`!document.querySelector('#past-banner').hidden && document.querySelector('#past-banner').innerText.includes('Past version %d')`, v)),
		)
	})
}

// TestThreadsListFirstPaint logs how long the threads list of a
// 10,000-thread store takes to show its first rows (issue 26 asks ≤ 200
// ms; BenchmarkOpenPage measures it too). The time is logged, not
// asserted: the race detector and a busy machine make it anything.
func TestThreadsListFirstPaint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	needAPI(t, e.url, "/v1/threads?order=updated", "the list's order by time")
	seedThreads(t, e, 10_000)
	browser := newBrowser(t)
	ready := `document.querySelectorAll('#threads tbody tr a').length >= 50`
	var best time.Duration
	var tctx context.Context
	for i := range 3 {
		// A new tab each time: the page is loaded from nothing but the
		// browser's cache.
		tctx = tab(t, browser, 60*time.Second)
		run(t, tctx, "blank", chromedp.Navigate("about:blank"))
		start := time.Now()
		run(t, tctx, "open the list", chromedp.Navigate(e.url+"/#/threads"),
			pollJS(ready, 30*time.Second, 2*time.Millisecond))
		d := time.Since(start)
		page, _ := chromedp.Run(tctx, chromedp.Evaluate[float64](`performance.getEntriesByName('loom:threads')[0].startTime`))
		t.Logf("open %d: first 50 rows of 10,000 threads after %v seen from the test, %.0f ms in the page from navigation to the rows", i+1, d.Round(time.Millisecond), page)
		if i == 0 || d < best {
			best = d
		}
	}
	t.Logf("threads list first paint on a 10,000-thread store: best %v (issue 26 asks ≤ 200 ms)", best.Round(time.Millisecond))
	run(t, tctx, "newest first", waitJS(`document.querySelector('#threads tbody tr').dataset.thread === 'p09999'`))
	checkNoJunk(t, tctx, "threads list")
}

// BenchmarkThreadsListFirstPaint measures, in headless Chromium on
// SQLite, the time from navigating to the threads list of a 10,000-thread
// store to its first 50 rows: each open in a new tab (in one tab, the
// change feeds of earlier opens can hold the browser's six connections to
// the server).
func BenchmarkThreadsListFirstPaint(b *testing.B) {
	e := newEnv(b, nil)
	if !answers(b, e.url, "/v1/threads?order=updated") {
		b.Skip("skipping: the server does not list by order=updated yet")
	}
	seedThreads(b, e, 10_000)
	browser := newBrowser(b)
	ready := pollJS(`document.querySelectorAll('#threads tbody tr a').length >= 50`, 30*time.Second, 2*time.Millisecond)
	var total time.Duration
	var inPage float64
	for b.Loop() {
		ctx, cancel := chromedp.NewContext(browser)
		if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := chromedp.Do(ctx, chromedp.Navigate(e.url+"/#/threads"), ready); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		mark, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`performance.getEntriesByName('loom:threads')[0].startTime`))
		if err != nil {
			b.Fatal(err)
		}
		inPage += mark
		cancel()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/open")
	// From the page's navigation to its first rows, by the page's clock:
	// without the DevTools protocol's round trips.
	b.ReportMetric(inPage/float64(b.N), "ms-in-page/open")
}

// seedThreads makes n threads of one message each, p00000 the oldest.
func seedThreads(tb testing.TB, e *env, n int) {
	tb.Helper()
	ctx := context.Background()
	g := e.db.Group()
	for i := range n {
		if _, err := g.Create(ctx, thread.CreateOptions{ID: fmt.Sprintf("p%05d", i), Title: "a thread", Messages: []message.Message{message.User("hello")}}); err != nil {
			tb.Fatal(err)
		}
		if i%500 == 499 || i == n-1 {
			if err := g.Apply(ctx); err != nil {
				tb.Fatal(err)
			}
			g = e.db.Group()
		}
	}
}

// newEnvNoModel is newEnv without an agent or a chat model: a server that
// cannot run.
func newEnvNoModel(t testing.TB) *env {
	t.Helper()
	return serveEnv(t, func(*thread.DB) httpapi.Options { return httpapi.Options{} })
}

func TestThreadPage(t *testing.T) {
	t.Parallel()
	browser := newBrowser(t)
	e := newEnv(t, nil)
	const timeout = 30 * time.Second

	t.Run("ForkButtonName", func(t *testing.T) {
		makeThread(t, e.url, "named-buttons", "one", "two", "three")
		ctx := tab(t, browser, timeout)
		run(t, ctx, "every fork button's name begins with what it shows",
			chromedp.Navigate(e.url+"/#/threads/named-buttons"),
			waitJS(`document.querySelectorAll('#messages .fork-here').length === 3`),
			waitJS(`[...document.querySelectorAll('#messages .fork-here')].every((b) => b.textContent === 'Fork here' && (b.getAttribute('aria-label') || b.textContent).toLowerCase().startsWith(b.textContent.toLowerCase()))`),
		)
		checkNoJunk(t, ctx, "thread page")
	})

	t.Run("ForkTitle", func(t *testing.T) {
		makeThread(t, e.url, "titled", "one", "two", "three")
		appendMsg(t, e.url, "titled", "user", "four")
		ctx := tab(t, browser, timeout)
		run(t, ctx, "the fork's title says where it comes from",
			chromedp.Navigate(e.url+"/#/threads/titled"),
			waitJS(`document.querySelectorAll('#messages li.msg').length === 4`),
			chromedp.Click(chromedp.CSS(`#messages li.msg:nth-child(2) .fork-here`)),
			waitJS(`location.hash.startsWith('#/threads/') && location.hash !== '#/threads/titled'`),
			waitJS(`document.querySelector('#thread-title')?.textContent === 'thread titled · fork at v2'`),
			waitJS(`document.querySelectorAll('#messages li.msg').length === 2`),
			// The fork tree's links too are named by what they show first.
			waitJS(`document.querySelectorAll('#fork-tree a.node').length === 2`),
			waitJS(`[...document.querySelectorAll('#fork-tree a.node')].every((a) => { const [l1, l2] = a.querySelectorAll('text');
				return a.getAttribute('aria-label').startsWith(l1.textContent + ', ' + l2.textContent); })`),
			waitJS(`document.querySelector('#fork-tree a.compare').getAttribute('aria-label').startsWith('compare with parent')`),
		)
	})

	t.Run("AppendWhileBack", func(t *testing.T) {
		msgs := []any{}
		for i := range 500 {
			msgs = append(msgs, textMsg("user", fmt.Sprintf("line %03d", i)))
		}
		call(t, e.url, "", "POST", "/v1/threads", map[string]any{"id": "back-up", "messages": msgs}, nil)
		ctx := tab(t, browser, timeout)
		run(t, ctx, "scroll back until the newest leave the page",
			chromedp.Navigate(e.url+"/#/threads/back-up"),
			waitJS(messagesContain("line 499")),
			chromedp.Poll[chromedp.Void](`(() => { document.querySelector('#scroller').scrollTop = 0;
				return document.querySelector('#load-newer').offsetParent !== null; })()`,
				chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)),
			waitJS(`!`+messagesContain("line 499")),
		)
		run(t, ctx, "what the reader appends shows, with the newest",
			chromedp.Click(chromedp.CSS(`details:has(#append-form) > summary`)),
			chromedp.SendKeys(chromedp.CSS(`#append-text`), "written from back up"),
			chromedp.Click(chromedp.CSS(`#append-form button[type=submit]`)),
			waitJS(messagesContain("written from back up")+` && `+messagesContain("line 499")),
			waitJS(`document.querySelector('#load-newer').offsetParent === null`),
		)
	})

	t.Run("Expiry", func(t *testing.T) {
		// A thread with a TTL of its own shows when it expires; one without
		// (and no server default) shows none.
		call(t, e.url, "", "POST", "/v1/threads", map[string]any{"id": "expiring", "labels": map[string]string{thread.LabelTTL: "720h"},
			"messages": []any{textMsg("user", "soon gone")}}, nil)
		makeThread(t, e.url, "lasting", "here to stay")
		ctx := tab(t, browser, timeout)
		run(t, ctx, "the page shows the thread's expiry",
			chromedp.Navigate(e.url+"/#/threads/expiring"),
			waitJS(messagesContain("soon gone")),
			waitJS(`document.querySelector('.expires')?.textContent.startsWith(' · expires ')`),
			waitJS(`document.querySelector('.expires time')?.getAttribute('datetime') !== null`),
		)
		run(t, ctx, "and none for a thread that never expires",
			chromedp.Navigate(e.url+"/#/threads/lasting"),
			waitJS(messagesContain("here to stay")),
			waitJS(`document.querySelector('.expires') === null`),
		)
		checkNoJunk(t, ctx, "thread page with an expiry")
	})

	t.Run("RunPanelWithModel", func(t *testing.T) {
		makeThread(t, e.url, "can-run", "hello")
		ctx := tab(t, browser, timeout)
		run(t, ctx, "the run form is offered",
			chromedp.Navigate(e.url+"/#/threads/can-run"),
			waitJS(messagesContain("hello")),
			chromedp.WaitVisible(chromedp.CSS(`#run-text`)),
			waitJS(`document.querySelector('#run-unavailable').hidden`),
		)
	})

	t.Run("RunPanelNoModel", func(t *testing.T) {
		ne := newEnvNoModel(t)
		needAPI(t, ne.url, "/v1/server", "GET /v1/server")
		makeThread(t, ne.url, "cannot-run", "hello")
		ctx := tab(t, browser, timeout)
		run(t, ctx, "no run form; a note says how to get a model",
			chromedp.Navigate(ne.url+"/#/threads/cannot-run"),
			waitJS(messagesContain("hello")),
			chromedp.WaitVisible(chromedp.CSS(`#run-unavailable`)),
			waitJS(`document.querySelector('#run-form').offsetParent === null`),
			waitJS(`document.querySelector('#run-unavailable').innerText.includes('--provider scripted')`),
		)
		checkNoJunk(t, ctx, "thread page with no model")
	})
}

// TestThreadWindow: a 100,000-message thread's page keeps at most 500
// message nodes while the reader scrolls back through 10,000 messages,
// keeps the view where it is as pages come and go, and comes back down to
// the newest.
func TestThreadWindow(t *testing.T) {
	t.Parallel()
	browser := newBrowser(t)
	e := newEnv(t, nil)
	const total, back, batch = 100_000, 10_000, 1000
	// Made in the store in commits of 1,000 (through the API, under the
	// race detector, it takes twice as long; what is tested is the page).
	huge, err := e.db.Create(context.Background(), thread.CreateOptions{ID: "huge", Title: "a huge thread"})
	if err != nil {
		t.Fatal(err)
	}
	made := time.Now()
	msgs := make([]message.Message, batch)
	for i := 0; i < total; i += batch {
		for j := range msgs {
			msgs[j] = message.User(fmt.Sprintf("msg %06d", i+j))
		}
		if _, err := huge.Append(context.Background(), msgs...); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d messages appended in %v", total, time.Since(made).Round(time.Millisecond))
	ctx := tab(t, browser, 5*time.Minute)
	run(t, ctx, "open",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(e.url+"/#/threads/huge"),
		waitJS(messagesContain(fmt.Sprintf("msg %06d", total-1))),
	)
	start := time.Now()
	up := scrollWindow(t, ctx, "#scroller", "#messages", true, total-back-1)
	t.Logf("back through %d messages: %d pages in %v (a read: %.0f ms), at most %d message nodes, the view moved at most %.1f px",
		total-1-up.First, up.Steps, time.Since(start).Round(time.Millisecond), up.Read, up.MaxNodes, up.MaxShift)
	if up.Last >= total-1 {
		t.Errorf("the newest message is still in the page (the window is msg %06d to %06d)", up.First, up.Last)
	}
	run(t, ctx, "the newest are a button away", chromedp.WaitVisible(chromedp.CSS(`#load-newer`)))

	// Back down, a page at a time, to the newest.
	start = time.Now()
	down := scrollWindow(t, ctx, "#scroller", "#messages", false, total-1)
	t.Logf("back down: %d pages in %v, at most %d message nodes, the view moved at most %.1f px",
		down.Steps, time.Since(start).Round(time.Millisecond), down.MaxNodes, down.MaxShift)
	run(t, ctx, "at the newest, the window is whole again and follows the head",
		waitJS(`document.querySelector('#load-newer').offsetParent === null`),
		waitJS(fmt.Sprintf(`(() => { const all = document.querySelectorAll('#messages li.msg'); for (let i = 1; i < all.length; i++) if (+all[i].querySelector('.text').textContent.slice(4) !== +all[i-1].querySelector('.text').textContent.slice(4) + 1) return false; return all.length > 0 && all.length <= 500; })()`)),
	)
	appendMsg(t, e.url, "huge", "user", "one more at the end")
	run(t, ctx, "a new message shows", waitJS(messagesContain("one more at the end")))
	checkNoJunk(t, ctx, "thread page")
}

func TestDiffPage(t *testing.T) {
	t.Parallel()
	browser := newBrowser(t)
	e := newEnv(t, nil)
	if !hasRoute(t, e.url, "/v1/threads/x/diff") {
		t.Skip("skipping: the server has no GET /v1/threads/{id}/diff yet (another helper's part of issue 26)")
	}
	const timeout = 30 * time.Second

	// dv: created with two messages (v1), one appended (v2), one more (v3),
	// its state set (v4).
	makeThread(t, e.url, "dv", "first", "second")
	appendMsg(t, e.url, "dv", "user", "third, added later")
	appendMsg(t, e.url, "dv", "assistant", "fourth, added last")
	dv, err := e.db.Thread(context.Background(), "dv")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dv.Commit(context.Background(), thread.CommitOptions{State: map[string]json.RawMessage{"stage": json.RawMessage(`"review"`)}}); err != nil {
		t.Fatal(err)
	}
	var head struct{ Version int64 }
	call(t, e.url, "", "GET", "/v1/threads/dv", nil, &head)
	// fam-fork: fam forked after its second message (v1), then a message
	// of its own (v2).
	makeThread(t, e.url, "fam", "alpha", "beta", "gamma")
	var msgs struct{ Messages []struct{ ID string } }
	call(t, e.url, "", "GET", "/v1/threads/fam/messages?limit=0", nil, &msgs)
	call(t, e.url, "", "POST", "/v1/threads/fam/fork", map[string]any{"id": "fam-fork", "at": msgs.Messages[1].ID, "title": "the fork"}, nil)
	appendMsg(t, e.url, "fam-fork", "user", "delta, only in the fork")

	t.Run("VersionsFromTimeline", func(t *testing.T) {
		ctx := tab(t, browser, timeout)
		run(t, ctx, "diff with head, from the timeline",
			chromedp.Navigate(e.url+"/#/threads/dv"),
			waitJS(messagesContain("fourth, added last")),
			chromedp.Click(chromedp.CSS(`#history li[data-version="1"] a.diff-head`)),
			waitJS(fmt.Sprintf(`location.hash === '#/threads/dv/diff?version=1&to_version=%d'`, head.Version)),
			chromedp.WaitVisible(chromedp.CSS(`#diff-entries`)),
			waitJS(`document.querySelector('#diff-shared')?.innerText.includes('2 messages in common')`),
			waitJS(`[...document.querySelectorAll('#diff-entries tr.entry')].map((r) => r.dataset.change).join(',') === 'added,added'`),
			waitJS(`[...document.querySelectorAll('#diff-entries tr.entry .change')].every((c) => c.innerText.trim() === 'added')`),
			waitJS(`document.querySelector('#diff-entries tr.entry td.side:last-child').innerText.includes('third, added later')`),
			waitJS(`document.querySelector('#diff-entries tr.entry td.side:nth-child(2)').innerText.includes('no message')`),
		)
		checkNoJunk(t, ctx, "diff page")
	})

	t.Run("TickTwoVersions", func(t *testing.T) {
		ctx := tab(t, browser, timeout)
		run(t, ctx, "tick two versions and compare",
			chromedp.Navigate(e.url+"/#/threads/dv"),
			waitJS(messagesContain("fourth, added last")),
			chromedp.Click(chromedp.CSS(`#history li[data-version="3"] input.pick`)),
			waitJS(`document.querySelector('#compare').disabled`),
			chromedp.Click(chromedp.CSS(`#history li[data-version="2"] input.pick`)),
			waitJS(`!document.querySelector('#compare').disabled`),
			chromedp.Click(chromedp.CSS(`#compare`)),
			waitJS(`location.hash === '#/threads/dv/diff?version=2&to_version=3'`),
			waitJS(`document.querySelector('#diff-shared')?.innerText.includes('3 messages in common')`),
			waitJS(`document.querySelectorAll('#diff-entries tr.entry').length === 1 && document.querySelector('#diff-entries tr.entry').innerText.includes('fourth, added last')`),
			waitJS(`document.querySelector('#diff-state-none')`),
		)
		run(t, ctx, "the pickers change a side: v3 against the head, with the state's change",
			chromedp.SetValue(chromedp.CSS(`#from-version`), "3"),
			chromedp.SetValue(chromedp.CSS(`#to-version`), ""),
			chromedp.Click(chromedp.CSS(`#diff-form button[type=submit]`)),
			waitJS(`location.hash === '#/threads/dv/diff?version=3'`),
			waitJS(`document.querySelector('#diff-state tr[data-key="stage"]')?.innerText.includes('added') && document.querySelector('#diff-state').innerText.includes('review')`),
			waitJS(`document.querySelector('#diff-tally')?.innerText === 'No messages differ.'`),
		)
		checkNoJunk(t, ctx, "diff page")
	})

	t.Run("ForkFromTree", func(t *testing.T) {
		ctx := tab(t, browser, timeout)
		run(t, ctx, "compare with parent, from the fork tree",
			chromedp.Navigate(e.url+"/#/threads/fam-fork"),
			waitJS(messagesContain("delta, only in the fork")),
			chromedp.Click(chromedp.CSS(`#fork-tree a.compare[data-compare="fam-fork"]`)),
			waitJS(`location.hash === '#/threads/fam/diff?to=fam-fork'`),
			waitJS(`document.querySelector('#diff-shared')?.innerText.includes('2 messages in common')`),
			waitJS(`(() => { const rows = [...document.querySelectorAll('#diff-entries tr.entry')]; return rows.length === 2 &&
				rows[0].innerText.includes('gamma') && rows.some((r) => r.dataset.change === 'added' && r.innerText.includes('delta, only in the fork')); })()`),
			waitJS(`document.querySelector('#to-thread').value === 'fam-fork' && document.querySelector('#from-thread').value === 'fam'`),
			waitJS(`document.querySelector('#diff-title').innerText === 'Diff of fam and fam-fork'`),
		)
		run(t, ctx, "swap the sides",
			chromedp.Click(chromedp.CSS(`#diff-swap`)),
			waitJS(`location.hash === '#/threads/fam-fork/diff?to=fam'`),
			waitJS(`document.querySelector('#diff-title')?.innerText === 'Diff of fam-fork and fam'`),
		)
		checkNoJunk(t, ctx, "diff page")
	})

	t.Run("ForkFromTimeline", func(t *testing.T) {
		// From the fork's timeline to its diff with its parent: a version
		// of the fork against its head, then the pickers put the parent on
		// the from side.
		ctx := tab(t, browser, timeout)
		run(t, ctx, "from the fork's timeline to the parent",
			chromedp.Navigate(e.url+"/#/threads/fam-fork"),
			waitJS(messagesContain("delta, only in the fork")),
			chromedp.Click(chromedp.CSS(`#history li[data-version="1"] a.diff-head`)),
			waitJS(`location.hash === '#/threads/fam-fork/diff?version=1&to_version=2'`),
			waitJS(`document.querySelector('#diff-tally')?.innerText === '1 added.'`),
			waitJS(`[...document.querySelectorAll('#from-thread option')].some((o) => o.value === 'fam')`),
			chromedp.SetValue(chromedp.CSS(`#from-thread`), "fam"),
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#from-thread').dispatchEvent(new Event('change'))`),
			waitJS(`document.querySelector('#from-version').value === '' && document.querySelector('#from-version option').textContent === 'head (v1)'`),
			chromedp.Click(chromedp.CSS(`#diff-form button[type=submit]`)),
			waitJS(`location.hash === '#/threads/fam/diff?to=fam-fork'`), // v2 is the fork's head
			waitJS(`document.querySelector('#diff-title')?.innerText === 'Diff of fam and fam-fork'`),
			waitJS(`document.querySelector('#diff-entries').innerText.includes('delta, only in the fork') && document.querySelector('#diff-entries').innerText.includes('gamma')`),
		)
		checkNoJunk(t, ctx, "diff page")
	})

	t.Run("Missing", func(t *testing.T) {
		ctx := tab(t, browser, timeout)
		run(t, ctx, "a version that is not there",
			chromedp.Navigate(e.url+"/#/threads/dv/diff?version=99"),
			chromedp.WaitVisible(chromedp.CSS(`#diff-error`)),
			waitJS(`document.querySelector('#diff-error').innerText.startsWith('Not found')`),
		)
		checkNoJunk(t, ctx, "diff page")
	})

	t.Run("Phone", func(t *testing.T) {
		ctx := tab(t, browser, timeout)
		run(t, ctx, "the diff at 390×844",
			chromedp.EmulateViewport(390, 844),
			chromedp.Navigate(e.url+"/#/threads/fam/diff?to=fam-fork"),
			chromedp.WaitVisible(chromedp.CSS(`#diff-entries`)),
		)
		width, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
		if err != nil {
			t.Fatal(err)
		}
		if width > 390 {
			t.Errorf("at 390 px the diff page is %d px wide", width)
		}
	})
}

// windowWalk is what scrolling a message window page after page saw: the
// most message nodes in the page, how far the message at the edge moved
// when a page came in beside it, the window's first and last message
// numbers at the end, and the mean time of a page's read (ms).
type windowWalk struct {
	Steps, MaxNodes, First, Last int
	MaxShift, Read               float64
	Err                          string
}

// scrollWindow scrolls the message window (CSS selectors of its scroller
// and its list, whose messages read "msg NNNNNN") to its top (up) or its
// bottom again and again until its first message is numbered until or
// less (up) or its last until or more. It runs in the page: a round trip a
// page from here would be slow.
func scrollWindow(t *testing.T, ctx context.Context, scroller, list string, up bool, until int) windowWalk {
	t.Helper()
	w, err := chromedp.Run(ctx, chromedp.Evaluate[windowWalk](fmt.Sprintf(`(async () => {
		const up = %t, until = %d;
		const sc = document.querySelector(%s);
		const msgs = () => document.querySelectorAll(%s);
		const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
		const num = (li) => +li.querySelector('.text').textContent.slice(4);
		const edge = () => { const all = msgs(); return up ? all[0] : all[all.length - 1]; };
		const done = () => (up ? num(edge()) <= until : num(edge()) >= until);
		let steps = 0, maxNodes = msgs().length, maxShift = 0;
		performance.setResourceTimingBufferSize(5000);
		performance.clearResourceTimings();
		while (!done()) {
			const li = edge();
			sc.scrollTop = up ? 0 : sc.scrollHeight;
			const off = li.getBoundingClientRect().top - sc.getBoundingClientRect().top;
			let waited = 0;
			while (edge() === li && waited < 10000) { await sleep(5); waited += 5; }
			if (edge() === li) return { Steps: steps, MaxNodes: maxNodes, First: num(msgs()[0]), Last: num(edge()), Err: up ? 'no older page came' : 'no newer page came' };
			maxShift = Math.max(maxShift, Math.abs(li.getBoundingClientRect().top - sc.getBoundingClientRect().top - off));
			maxNodes = Math.max(maxNodes, msgs().length);
			steps++;
		}
		const all = msgs();
		const reads = performance.getEntriesByType('resource').filter((r) => r.name.includes('/messages?'));
		return { Steps: steps, MaxNodes: maxNodes, MaxShift: maxShift, First: num(all[0]), Last: num(all[all.length - 1]),
			Read: reads.reduce((s, r) => s + r.duration, 0) / Math.max(reads.length, 1) };
	})()`, up, until, jsString(scroller), jsString(list+" li.msg")), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	dir := "down"
	if up {
		dir = "back"
	}
	if w.Err != "" {
		t.Fatalf("scrolling %s: %s at msg %06d to %06d", dir, w.Err, w.First, w.Last)
	}
	if w.MaxNodes > 500 {
		t.Errorf("%d message nodes in the page while scrolling %s; want ≤ 500", w.MaxNodes, dir)
	}
	if w.MaxShift > 2 {
		t.Errorf("the message in view moved by %.1f px when a page came in while scrolling %s", w.MaxShift, dir)
	}
	return w
}
