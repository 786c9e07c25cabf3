package webui_test

// The live conversations pages in the browser: the list with its
// sub-agent tree, and one conversation driven from the page — send and
// watch the answer stream in, queue with @async, abort mid-stream, fork,
// compact — on the demo model of `loom serve --provider scripted`, which
// streams slowly enough to abort and compacts when asked.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/conversation"
	"github.com/loomthreads/loom/httpapi"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// newConvEnv serves the API over a SQLite store with chat as the model of
// live conversations (nil: none), and the page at /.
func newConvEnv(t testing.TB, chat agent.ChatClient) *env {
	t.Helper()
	return serveEnv(t, func(*thread.DB) httpapi.Options { return httpapi.Options{Chat: chat} })
}

// convMessagesContain is an expression: the conversation's messages (as
// the thread keeps them) include text.
func convMessagesContain(text string) string {
	return fmt.Sprintf(`(document.querySelector('#conv-messages')?.innerText || '').includes(%s)`, jsString(text))
}

// noBadText is an expression: the page shows no "null", "undefined" or
// "NaN" as a word.
const noBadText = `!/\b(null|undefined|NaN)\b/.test(document.body.innerText)`

// convStatusIs is an expression: the status shown is kind (and reason, if
// not "").
func convStatusIs(kind, reason string) string {
	e := fmt.Sprintf(`document.querySelector('#conv-status')?.dataset.kind === %s`, jsString(kind))
	if reason != "" {
		e += fmt.Sprintf(` && document.querySelector('#conv-status')?.dataset.reason === %s`, jsString(reason))
	}
	return e
}

// send types text into the composer and sends it.
func send(text string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector('#conv-text').value = %s`, jsString(text))),
		chromedp.Click(chromedp.CSS(`#conv-send`)),
	)
}

// recordTexts makes the page remember every text the element sel shows,
// in window.__seen[sel], so that a test can tell it changed and back.
func recordTexts(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const sel = %s, el = document.querySelector(sel);
		window.__seen = window.__seen || {};
		const seen = window.__seen[sel] = [el.textContent];
		new MutationObserver(() => { if (seen[seen.length - 1] !== el.textContent) seen.push(el.textContent); })
			.observe(el, { childList: true, characterData: true, subtree: true });
	})()`, jsString(sel)))
}

// seen is an expression: the element sel showed a text that includes s.
func seen(sel, s string) string {
	return fmt.Sprintf(`(window.__seen?.[%s] || []).some((t) => t.includes(%s))`, jsString(sel), jsString(s))
}

func TestConversationPages(t *testing.T) {
	t.Parallel()
	browser := newBrowser(t)
	e := newConvEnv(t, scripted.Demo())
	const timeout = 60 * time.Second

	// Start one from the list, talk, and see the answer stream in.
	t.Run("StartSendStream", func(t *testing.T) {
		ctx := tab(t, browser, timeout)
		run(t, ctx, "start a conversation from the list",
			chromedp.Navigate(e.url+"/#/conversations"),
			chromedp.WaitVisible(chromedp.CSS(`#conv-new-form`)),
			waitJS(`document.querySelector('#conversations')?.innerText.includes('No conversations yet')`),
			waitJS(noBadText),
			chromedp.SendKeys(chromedp.CSS(`#conv-new-title`), "Planning"),
			chromedp.SendKeys(chromedp.CSS(`#conv-new-id`), "plan"),
			chromedp.Click(chromedp.CSS(`#conv-start`)),
			waitJS(`location.hash === '#/conversations/plan' && document.querySelector('#conv-title')?.textContent === 'Planning'`),
			waitJS(convStatusIs("stopped", "end_turn")),
			waitJS(`document.querySelector('#conv-mode')?.textContent === 'normal'`),
			waitJS(noBadText),
		)
		// The answer grows in the streaming bubble before the thread has it.
		long := "Tell me about threads. " + strings.Repeat("Forks share history. ", 10)
		run(t, ctx, "send and watch it stream",
			recordTexts("#conv-status"),
			send(long),
			waitJS(`(document.querySelector('#conv-partial')?.innerText || '').includes('You said: Tell')`),
			waitJS(convStatusIs("streaming", "")),
			waitJS(`document.querySelector('#conv-abort')?.disabled === false`),
			waitJS(`!(document.querySelector('#conv-partial')?.innerText || '').includes('Forks share history. Forks share history. Forks share history. Forks share history. Forks share history. Forks share history. Forks share history. Forks share history. Forks share history. Forks share history.')`),
			waitJS(convMessagesContain("You said: "+strings.TrimSpace(long))),
			waitJS(convStatusIs("stopped", "end_turn")),
			waitJS(`!document.querySelector('#conv-partial') && document.querySelector('#conv-abort').disabled`),
			waitJS(seen("#conv-status", "streaming")),
			waitJS(`document.querySelectorAll('#conv-messages li.msg').length === 2`),
			waitJS(noBadText),
		)
		run(t, ctx, "the list shows it, live",
			chromedp.Click(chromedp.CSS(`nav.crumbs a[href="#/conversations"]`)),
			waitJS(`!!document.querySelector('#conversations li[data-id="plan"] a[href="#/conversations/plan"]')`),
			waitJS(`document.querySelector('#conversations li[data-id="plan"]').innerText.includes('stopped (end turn)')`),
			waitJS(noBadText),
			chromedp.Click(chromedp.CSS(`#conversations a[href="#/conversations/plan"]`)),
			waitJS(convMessagesContain("You said: Tell me about threads.")),
		)
	})

	// Abort mid-stream: the partial answer stays (marked aborted), the
	// status says aborted, and the thread keeps the question only.
	t.Run("AbortMidStream", func(t *testing.T) {
		call(t, e.url, "", "POST", "/v1/conversations", map[string]any{"id": "abort-me"}, nil)
		ctx := tab(t, browser, timeout)
		long := strings.Repeat("abcdefghij", 200) // 2,000 characters: seconds of streaming
		run(t, ctx, "abort",
			chromedp.Navigate(e.url+"/#/conversations/abort-me"),
			waitJS(convStatusIs("stopped", "end_turn")),
			send(long),
			waitJS(`(document.querySelector('#conv-partial p.text')?.textContent || '').length > 60`),
			chromedp.Click(chromedp.CSS(`#conv-abort`)),
			waitJS(convStatusIs("stopped", "aborted")),
			waitJS(`document.querySelector('#conv-status').textContent === 'stopped (aborted)'`),
			waitJS(`!!document.querySelector('#conv-messages li.conv-aborted') && document.querySelector('#conv-messages li.conv-aborted').innerText.includes('You said: abcdefghij')`),
			waitJS(`!document.querySelector('#conv-partial')`),
			waitJS(noBadText),
		)
		shown, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelector('#conv-messages li.conv-aborted p.text').textContent.length`))
		if err != nil {
			t.Fatal(err)
		}
		if shown < 60 || shown >= len("You said: ")+len(long) {
			t.Fatalf("the aborted answer shows %d characters", shown)
		}
		var msgs struct{ Messages []map[string]any }
		call(t, e.url, "", "GET", "/v1/threads/abort-me/messages", nil, &msgs)
		if len(msgs.Messages) != 1 {
			t.Fatalf("the thread keeps %d messages, want the question only", len(msgs.Messages))
		}
		// It talks on after.
		run(t, ctx, "send after the abort",
			send("again"),
			waitJS(convMessagesContain("You said: again")),
			waitJS(`document.querySelector('#conv-messages li.conv-aborted') !== null`),
		)
	})

	// @async queues a message behind the turn in flight rather than abort
	// it; the explicit toggle does the same.
	t.Run("AsyncQueue", func(t *testing.T) {
		call(t, e.url, "", "POST", "/v1/conversations", map[string]any{"id": "queue"}, nil)
		ctx := tab(t, browser, timeout)
		first := "first " + strings.Repeat("wait ", 60)
		run(t, ctx, "queue one while streaming",
			chromedp.Navigate(e.url+"/#/conversations/queue"),
			waitJS(convStatusIs("stopped", "end_turn")),
			send(first),
			waitJS(`(document.querySelector('#conv-partial')?.innerText || '').includes('first')`),
			send("@async second"),
			waitJS(`!!document.querySelector('#conv-pending li.conv-queued') && document.querySelector('#conv-pending li.conv-queued').innerText.includes('second')`),
			waitJS(convStatusIs("streaming", "")),
			chromedp.Click(chromedp.CSS(`#conv-queue`)),
			send("third"),
			waitJS(`document.querySelectorAll('#conv-pending li.conv-queued').length === 2`),
			waitJS(convMessagesContain("You said: "+strings.TrimSpace(first))),
			waitJS(convMessagesContain("You said: third")),
			waitJS(`document.querySelectorAll('#conv-pending li.conv-queued').length === 0`),
			waitJS(convStatusIs("stopped", "end_turn")),
			waitJS(`!document.querySelector('#conv-messages li.conv-aborted')`),
			waitJS(noBadText),
		)
		// The first answer was not aborted: it is whole, before the
		// queued ones.
		texts, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#conv-messages li.msg p.text')].map((p) => p.textContent)`))
		if err != nil {
			t.Fatal(err)
		}
		if len(texts) < 4 || texts[0] != strings.TrimSpace(first) && texts[0] != first || texts[1] != "You said: "+first || !strings.Contains(strings.Join(texts[2:], "\n"), "second") {
			t.Fatalf("messages %q", texts)
		}
	})

	// Fork: the page goes to the fork, which has the history and answers
	// its prompt; the source is unchanged.
	t.Run("Fork", func(t *testing.T) {
		call(t, e.url, "", "POST", "/v1/conversations", map[string]any{"id": "src", "title": "Source"}, nil)
		ctx := tab(t, browser, timeout)
		run(t, ctx, "fork",
			chromedp.Navigate(e.url+"/#/conversations/src"),
			waitJS(convStatusIs("stopped", "end_turn")),
			send("the shared part"),
			waitJS(convMessagesContain("You said: the shared part")),
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#conv-text').value = 'the other way'`),
			chromedp.Click(chromedp.CSS(`#conv-fork`)),
			waitJS(`location.hash.startsWith('#/conversations/') && location.hash !== '#/conversations/src'`),
			waitJS(`(document.querySelector('#conv-meta')?.innerText || '').includes('forked from src')`),
			waitJS(convMessagesContain("You said: the shared part")),
			waitJS(convMessagesContain("You said: the other way")),
			waitJS(convStatusIs("stopped", "end_turn")),
			waitJS(noBadText),
		)
		var msgs struct{ Messages []map[string]any }
		call(t, e.url, "", "GET", "/v1/threads/src/messages", nil, &msgs)
		if len(msgs.Messages) != 2 {
			t.Fatalf("the source has %d messages after the fork", len(msgs.Messages))
		}
		run(t, ctx, "the list shows the fork",
			chromedp.Navigate(e.url+"/#/conversations"),
			waitJS(`[...document.querySelectorAll('#conversations li.conv-item')].some((li) => li.innerText.includes('fork of src'))`),
		)
	})

	// Compact: the mode goes through control flow and back, and the
	// summary replaces what was said.
	t.Run("Compact", func(t *testing.T) {
		call(t, e.url, "", "POST", "/v1/conversations", map[string]any{"id": "compact-me"}, nil)
		ctx := tab(t, browser, timeout)
		run(t, ctx, "compact",
			chromedp.Navigate(e.url+"/#/conversations/compact-me"),
			waitJS(convStatusIs("stopped", "end_turn")),
			send("alpha"),
			waitJS(convMessagesContain("You said: alpha")),
			waitJS(convStatusIs("stopped", "end_turn")),
			send("beta"),
			waitJS(convMessagesContain("You said: beta")),
			waitJS(convStatusIs("stopped", "end_turn")),
			recordTexts("#conv-mode"),
			chromedp.Click(chromedp.CSS(`#conv-compact`)),
			waitJS(convMessagesContain("Summary of the conversation so far:")),
			waitJS(convMessagesContain("The user said: alpha / beta")),
			waitJS(`!(document.querySelector('#conv-messages')?.innerText || '').includes('You said: alpha')`),
			waitJS(`document.querySelector('#conv-before-compact summary')?.textContent.startsWith('6 earlier messages')`),
			waitJS(seen("#conv-mode", "control flow: compact")),
			waitJS(`document.querySelector('#conv-mode').textContent === 'normal'`),
			waitJS(convStatusIs("stopped", "")),
			waitJS(noBadText),
		)
	})

	// A sub-agent the model starts shows under its parent, on the
	// conversation's page and in the list, and opens as the live one.
	t.Run("SubAgents", func(t *testing.T) {
		call(t, e.url, "", "POST", "/v1/conversations", map[string]any{"id": "boss", "title": "Boss"}, nil)
		ctx := tab(t, browser, timeout)
		run(t, ctx, "spawn a sub-agent",
			chromedp.Navigate(e.url+"/#/conversations/boss"),
			waitJS(convStatusIs("stopped", "end_turn")),
			waitJS(`document.querySelector('#conv-subagents')?.innerText.includes('None started')`),
			send(`call spawn_subagent {"prompt":"look around","title":"Scout"}`),
			waitJS(`!!document.querySelector('#conv-subtree a.conv-name') && document.querySelector('#conv-subtree').innerText.includes('Scout')`),
			waitJS(convMessagesContain("Tool spawn_subagent returned")),
			waitJS(convStatusIs("stopped", "end_turn")),
			waitJS(noBadText),
		)
		run(t, ctx, "the list nests it under its parent",
			chromedp.Navigate(e.url+"/#/conversations"),
			waitJS(`!!document.querySelector('#conversations > li[data-id="boss"] > ul.conv-tree > li.conv-item a.conv-name')`),
			waitJS(`document.querySelector('#conversations > li[data-id="boss"] > ul.conv-tree').innerText.includes('Scout')`),
			waitJS(`!document.querySelector('#conversations > li[data-id="boss"] > ul.conv-tree').innerText.includes('fork of')`),
			waitJS(`![...document.querySelectorAll('#conversations > li')].some((li) => li.querySelector(':scope > .conv-line')?.innerText.includes('Scout'))`),
			waitJS(noBadText),
			chromedp.Click(chromedp.CSS(`#conversations > li[data-id="boss"] > ul.conv-tree a.conv-name`)),
			waitJS(`document.querySelector('#conv-title')?.textContent === 'Scout'`),
			waitJS(`(document.querySelector('#conv-parent')?.innerText || '').includes('sub-agent of boss')`),
			waitJS(convMessagesContain("You said: look around")),
			waitJS(convStatusIs("stopped", "end_turn")),
			waitJS(noBadText),
		)
	})
}

// A server with no chat model says how to get one, rather than fail on
// send; the list and a conversation's messages still show.
func TestConversationPagesWithoutAModel(t *testing.T) {
	t.Parallel()
	browser := newBrowser(t)
	e := newConvEnv(t, nil)
	// A conversation another process (loom chat) made on the store.
	c, err := conversation.New(t.Context(), e.db, conversation.Options{Client: scripted.Echo(), ID: "elsewhere", Title: "From loom chat"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(context.Background(), message.User("hello from the terminal"), false); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.Close(context.Background())
	ctx := tab(t, browser, 30*time.Second)
	const hint = `(document.querySelector('#conv-no-model')?.innerText || '').includes('loom serve --provider scripted')`
	run(t, ctx, "the list",
		chromedp.Navigate(e.url+"/#/conversations"),
		chromedp.WaitVisible(chromedp.CSS(`#conv-new-form`)),
		waitJS(`!!document.querySelector('#conversations li[data-id="elsewhere"]')`),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#conv-start').disabled || document.querySelector('#conv-start').click()`),
		waitJS(hint),
		waitJS(`document.querySelector('#conv-start').disabled`),
		waitJS(`location.hash === '#/conversations'`),
		waitJS(noBadText),
	)
	run(t, ctx, "a conversation",
		chromedp.Click(chromedp.CSS(`#conversations a[href="#/conversations/elsewhere"]`)),
		waitJS(hint),
		waitJS(convMessagesContain("You said: hello from the terminal")),
		waitJS(`document.querySelector('#conv-send').disabled && document.querySelector('#conv-fork').disabled`),
		waitJS(noBadText),
	)
}

// TestConversationWindow: a conversation's page, like a thread's, keeps at
// most 500 message nodes while the reader scrolls back through 1,000 of
// its 5,000 messages, keeps the view where it is as pages come in, and
// jumps back to the newest.
func TestConversationWindow(t *testing.T) {
	t.Parallel()
	browser := newBrowser(t)
	e := newConvEnv(t, scripted.Demo())
	const total, back, batch = 5000, 1000, 1000
	// A conversation another process made, its messages appended in the
	// store (what is tested is the page).
	c, err := conversation.New(t.Context(), e.db, conversation.Options{Client: scripted.Echo(), ID: "long", Title: "A long talk"})
	if err != nil {
		t.Fatal(err)
	}
	c.Close(context.Background())
	th, err := e.db.Thread(t.Context(), "long")
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]message.Message, batch)
	for i := 0; i < total; i += batch {
		for j := range msgs {
			msgs[j] = message.User(fmt.Sprintf("msg %06d", i+j))
		}
		if _, err := th.Append(t.Context(), msgs...); err != nil {
			t.Fatal(err)
		}
	}
	// Beside the other tests (a 100,000-message thread being made), the
	// server may take more than waitJS's 10 s to open it.
	waitLong := func(expr string) chromedp.Action[chromedp.Void] {
		return pollJS(expr, time.Minute, 50*time.Millisecond)
	}
	ctx := tab(t, browser, 3*time.Minute)
	run(t, ctx, "open",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(e.url+"/#/conversations/long"),
		waitLong(convMessagesContain(fmt.Sprintf("msg %06d", total-1))),
	)
	up := scrollWindow(t, ctx, "#conv-scroller", "#conv-messages", true, total-back-1)
	t.Logf("back through %d messages: %d pages, at most %d message nodes, the view moved at most %.1f px",
		total-1-up.First, up.Steps, up.MaxNodes, up.MaxShift)
	if up.Last >= total-1 {
		t.Errorf("the newest message is still in the page (the window is msg %06d to %06d)", up.First, up.Last)
	}
	run(t, ctx, "back to the newest",
		chromedp.WaitVisible(chromedp.CSS(`#conv-newest`)),
		// Clicked in the page: a mouse click scrolls the button into view
		// first, which reads the next page down and moves the button away.
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#conv-newest').click()`),
		waitLong(convMessagesContain(fmt.Sprintf("msg %06d", total-1))),
		waitJS(`document.querySelector('#conv-newer').offsetParent === null`),
		waitJS(`document.querySelectorAll('#conv-messages li.msg').length <= 500`),
		waitJS(noBadText),
	)
}
