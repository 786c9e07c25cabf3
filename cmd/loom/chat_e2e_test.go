package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// terminal is a built `loom chat` running in a pseudo-terminal.
type terminal struct {
	t    *testing.T
	f    *os.File
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	done chan error
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>]`)

func startChat(t *testing.T, args ...string) *terminal {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"chat"}, args...)...)
	cmd.Env = append(os.Environ(), "TERM=xterm-256color", "COLORTERM=", "NO_COLOR=1")
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	term := &terminal{t: t, f: f, cmd: cmd, done: make(chan error, 1)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() { term.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		f.Close()
	})
	return term
}

// screen is what the terminal was sent, without escape sequences.
func (term *terminal) screen() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return ansi.ReplaceAllString(term.out.String(), "")
}

// waitFor waits until the terminal shows s (after what it showed at mark).
func (term *terminal) waitFor(s string, mark int) int {
	term.t.Helper()
	var scr string
	at := -1
	if !testwait.Within(15*time.Second, func() bool {
		scr = term.screen()
		if i := strings.Index(scr[min(mark, len(scr)):], s); i >= 0 {
			at = min(mark, len(scr)) + i + len(s)
		}
		return at >= 0
	}) {
		term.t.Fatalf("the terminal never showed %q; it shows:\n%s", s, scr[max(0, len(scr)-3000):])
	}
	return at
}

func (term *terminal) typeText(s string) {
	term.t.Helper()
	for _, r := range s {
		if _, err := io.WriteString(term.f, string(r)); err != nil {
			term.t.Fatal(err)
		}
	}
}

func (term *terminal) exit() {
	term.t.Helper()
	select {
	case err := <-term.done:
		if err != nil {
			term.t.Fatalf("loom chat: %v\n%s", err, term.screen())
		}
	case <-time.After(10 * time.Second):
		term.t.Fatalf("loom chat did not exit:\n%s", term.screen())
	}
}

// TestChatInATerminal drives the built `loom chat` in a pseudo-terminal:
// a message, a streaming turn aborted with Ctrl-C, a fork, a compaction,
// Ctrl-C twice to quit, and a restart on the same thread that finds it
// intact.
func TestChatInATerminal(t *testing.T) {
	store := "sqlite://" + filepath.Join(t.TempDir(), "chat.db")
	term := startChat(t, "--store", store, "--thread", "t1")
	at := term.waitFor("t1 · stopped/end_turn · normal", 0)

	term.typeText("hello\r")
	at = term.waitFor("loom: You said: hello", at)

	// Long enough that its echo streams for seconds: Ctrl-C lands in it
	// even on a slow machine.
	long := "tell me everything there is to know about the long history of Lisbon, street by street" + strings.Repeat(", and then some more", 30)
	term.typeText(long + "\r")
	at = term.waitFor("loom: You said: tell", at) // streaming
	term.typeText("\x03")
	// The answer as far as it came stays, marked.
	marked := term.waitFor(" [aborted]", at)
	if strings.Contains(term.screen()[at:marked], "loom: … [aborted]") {
		t.Fatalf("the aborted answer is not kept:\n%s", term.screen()[at:])
	}
	at = term.waitFor("stopped/aborted", at)

	term.typeText("/fork what if\r")
	at = term.waitFor("forked into th_", at)
	fork := "th_" + strings.Fields(term.screen()[at:])[0]
	at = term.waitFor("loom: You said: what if", at)

	term.typeText("/compact\r")
	at = term.waitFor("compacting…", at)
	at = term.waitFor("Summary of the conversation so far", at)

	term.typeText("\x03")
	at = term.waitFor("press Ctrl-C again to quit", at)
	term.typeText("\x03")
	term.exit()

	// The same thread again: intact.
	db := openStore(t, store)
	th, err := db.Thread(t.Context(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := th.Messages(t.Context(), thread.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	var roles []string
	for _, m := range msgs {
		roles = append(roles, string(m.Role)+":"+clip(m.Text(), 20))
	}
	if len(msgs) < 3 || msgs[0].Text() != "hello" || msgs[1].Text() != "You said: hello" || msgs[2].Text() != long || msgs[len(msgs)-1].Role == message.RoleUser && msgs[len(msgs)-1].Text() != long {
		t.Fatalf("t1 after the session: %q", roles)
	}
	// The fork holds the conversation up to the fork, and its own turn.
	db = openStore(t, store)
	fth, err := db.Thread(t.Context(), fork)
	if err != nil {
		t.Fatalf("fork %q: %v", fork, err)
	}
	if fth.Record().ForkedFrom.Thread != "t1" {
		t.Fatalf("fork %q made from %+v", fork, fth.Record().ForkedFrom)
	}
	db.Close()
	term = startChat(t, "--store", store, "--thread", "t1")
	at = term.waitFor("you: hello", 0)
	at = term.waitFor("loom: You said: hello", at)
	at = term.waitFor("you: "+long[:40], at)
	term.waitFor("loom: … [aborted]", at) // the partial answer was not kept
	term.typeText("\x03")
	term.typeText("\x03")
	term.exit()
}

// Piped, loom chat reads a message or a command a line.
func TestChatLineByLine(t *testing.T) {
	st := sqliteStore(t)
	r := loomWith(t, loomOpts{stdin: "hello\n/checkpoint one\nagain\n/rollback one\n/history\n@compact go on\n/nosuch\n"}, "chat", "--store", st, "--thread", "piped").ok(t)
	for _, want := range []string{"conversation piped", "loom: You said: hello", `checkpoint "one" at version 3`, "loom: You said: again",
		"rolled back to one", "rollback", "── Summary of the conversation so far: The user said: hello", "you: go on", "error: unknown command /nosuch"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("lacks %q:\n%s", want, r.stdout)
		}
	}
	// Resumed: the conversation as it was left.
	r = loomWith(t, loomOpts{stdin: "/history\n"}, "chat", "--store", st, "--thread", "piped").ok(t)
	if !strings.Contains(r.stdout, "compact") {
		t.Fatalf("history after a restart:\n%s", r.stdout)
	}
	if r := loom(t, "chat", "--store", st, "--provider", "nope"); r.code != 2 || !strings.Contains(r.stderr, `--provider "nope"`) {
		t.Fatalf("a bad provider: %+v", r)
	}
}

// --provider foundry needs a project and an agent, from flags or the
// environment, and says so.
func TestChatFoundryNeedsAProject(t *testing.T) {
	t.Setenv("AZURE_AI_PROJECT_ENDPOINT", "")
	t.Setenv("AZURE_AI_AGENT_NAME", "")
	t.Setenv("AZURE_AI_AGENT_ID", "")
	for _, p := range []string{"foundry", "foundry-classic"} {
		r := loom(t, "chat", "--store", "memory://", "--provider", p)
		if r.code != 2 || !strings.Contains(r.stderr, "AZURE_AI_PROJECT_ENDPOINT") {
			t.Fatalf("%s without a project: %+v", p, r)
		}
	}
}

// Piped, "compacting…" comes where a compaction starts, before the summary
// that ends it: /compact, @compact, and the model's own call of compact.
func TestChatLineByLineCompactingComesFirst(t *testing.T) {
	r := loomWith(t, loomOpts{stdin: "hello\nCall the compact tool, please\nagain\n@compact go on\n/compact\n"}, "chat", "--store", sqliteStore(t)).ok(t)
	lines := strings.Split(r.stdout, "\n")
	summaries := 0
	for i, l := range lines {
		if strings.HasPrefix(l, "── Summary") {
			summaries++
			if i == 0 || lines[i-1] != "compacting…" {
				t.Fatalf("summary %d (line %d) not right after compacting…:\n%s", summaries, i, r.stdout)
			}
		}
	}
	if summaries != 3 || strings.Count(r.stdout, "compacting…") != 3 {
		t.Fatalf("%d summaries, %d compacting…, want 3 of each:\n%s", summaries, strings.Count(r.stdout, "compacting…"), r.stdout)
	}
	// What the user typed is shown; the request that /compact and
	// @compact send the model is not.
	for _, want := range []string{"you: Call the compact tool, please\ncompacting…\n── Summary", "compacting…\n── Summary of the conversation so far: The user said: Summary of the conversation so far: The user said: hello / again\nyou: go on\nloom: You said: go on\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "Call the compact tool now") {
		t.Fatalf("shows the request to compact:\n%s", r.stdout)
	}
}

// /history shows each version: its op, the checkpoints made at it, and
// what it holds.
func TestChatHistoryShowsEachVersion(t *testing.T) {
	st := sqliteStore(t)
	r := loomWith(t, loomOpts{stdin: "hello\n/checkpoint one\n/checkpoint two\nagain\n/rollback one\n/history\n"}, "chat", "--store", st, "--thread", "h").ok(t)
	_, hist, _ := strings.Cut(r.stdout, "rolled back to one: version 6\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^version 6 +rollback +\d\d:\d\d:\d\d  back to version 3 \(checkpoint one, two\)$`),
		regexp.MustCompile(`^version 5 +append +\d\d:\d\d:\d\d  loom: You said: again$`),
		regexp.MustCompile(`^version 4 +append +\d\d:\d\d:\d\d  you: again$`),
		regexp.MustCompile(`^version 3 +append +\d\d:\d\d:\d\d  \[one, two\]  loom: You said: hello$`),
		regexp.MustCompile(`^version 2 +append +\d\d:\d\d:\d\d  you: hello$`),
		regexp.MustCompile(`^version 1 +create +\d\d:\d\d:\d\d  a new conversation$`),
	}
	lines := strings.Split(strings.TrimSpace(hist), "\n")
	if len(lines) != len(want) {
		t.Fatalf("history:\n%s", r.stdout)
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Fatalf("line %d: %q does not match %s; the whole:\n%s", i, lines[i], re, hist)
		}
	}
	// A long message is cut to the line; a turn's status commit says it.
	long := strings.Repeat("word ", 60)
	r = loomWith(t, loomOpts{stdin: long + "\n/compact\n/history\n"}, "chat", "--store", st, "--thread", "h").ok(t)
	for _, want := range []string{`(?m)^version 7 +append +\d\d:\d\d:\d\d  you: [word ]{50,60}…$`, `(?m)^version 11 +compact .*  ── Summary of the conversation so far`, `(?m)^version 12 +state .*  status stopped/tool_use$`} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Fatalf("history lacks %s:\n%s", want, r.stdout)
		}
	}
}

// Piped, an interrupt (Ctrl-C) aborts the answer streaming: its text so
// far stays, marked [aborted], and the session ends well. The
// conversation keeps the question and drops the partial answer (spec
// conversation, 4): run again, the conversation says it was aborted.
func TestChatLineByLineAbortKeepsThePartialAnswer(t *testing.T) {
	store := sqliteStore(t)
	p := startChatProcess(t, "--store", store, "--thread", "ab")
	long := "tell me everything" + strings.Repeat(", and then some more", 40)
	io.WriteString(p.stdin, long+"\n")
	if !testwait.Within(15*time.Second, func() bool { return strings.Contains(p.out.String(), "loom: You said: tell") }) {
		t.Fatalf("the answer never streamed:\n%s", p.out.String())
	}
	p.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("loom chat after an interrupt: %v\n%s", err, p.out.String())
		}
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-done
		t.Fatalf("loom chat did not end after an interrupt:\n%s", p.out.String())
	}
	out := p.out.String()
	if !regexp.MustCompile(`\nloom: You said: tell[^\n]* \[aborted\]\n$`).MatchString(out) || strings.Contains(out, "You said: "+long) {
		t.Fatalf("the partial answer, marked aborted, should end the output:\n%s", out)
	}
	if got := storedTexts(t, store, "ab"); !slices.Equal(got, []string{"user: " + long}) {
		t.Fatalf("stored %q", got)
	}
	r := loomWith(t, loomOpts{stdin: "/history\n"}, "chat", "--store", store, "--thread", "ab").ok(t)
	if !strings.Contains(r.stdout, "status stopped/aborted") {
		t.Fatalf("history after the abort:\n%s", r.stdout)
	}
}

// A character device that is not a terminal (/dev/null) is no terminal:
// `loom chat </dev/null >/dev/null` runs line by line, and the end of
// stdin ends it, with 0.
func TestChatOnDevNull(t *testing.T) {
	in, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if isTerminal(in) || isTerminal(out) {
		t.Fatal("/dev/null taken for a terminal")
	}
	store := sqliteStore(t)
	cmd := exec.Command(binary(t), "chat", "--store", store, "--thread", "null")
	var stderr strings.Builder
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, out, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("loom chat </dev/null >/dev/null: %v\n%s", err, stderr.String())
	}
	// stdin from /dev/null, stdout a pipe: the same, and it says which
	// conversation it opened.
	cmd = exec.Command(binary(t), "chat", "--store", store, "--thread", "null")
	cmd.Stdin = in
	b, err := cmd.CombinedOutput()
	if err != nil || string(b) != "conversation null\n" {
		t.Fatalf("loom chat </dev/null: %v\n%s", err, b)
	}
}

// loom chat --help says what the chat does, and its example pipes two
// lines (the \n written as such, not broken across lines).
func TestChatHelp(t *testing.T) {
	r := loom(t, "chat", "--help").ok(t)
	for _, want := range []string{"marked [aborted]", `"compacting…", then the summary`, "/history (each version's op,\ncheckpoints and content)",
		"When stdin or stdout is not a terminal", "/dev/null", "the end of stdin ends it", `printf 'hello\n/history\n' | loom chat --thread demo`} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("loom chat --help lacks %q:\n%s", want, r.stdout)
		}
	}
	// /help, in the chat, names the same commands.
	r = loomWith(t, loomOpts{stdin: "/help\n"}, "chat", "--store", "memory://").ok(t)
	for _, cmd := range []string{"/compact", "/fork", "/continue", "/history", "/checkpoint", "/rollback", "/threads", "/switch", "/quit", "@async"} {
		if !strings.Contains(r.stdout, cmd) {
			t.Fatalf("/help lacks %s:\n%s", cmd, r.stdout)
		}
	}
}
