package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

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
	deadline := time.Now().Add(15 * time.Second)
	for {
		scr := term.screen()
		if i := strings.Index(scr[min(mark, len(scr)):], s); i >= 0 {
			return min(mark, len(scr)) + i + len(s)
		}
		if time.Now().After(deadline) {
			term.t.Fatalf("the terminal never showed %q; it shows:\n%s", s, scr[max(0, len(scr)-3000):])
		}
		time.Sleep(10 * time.Millisecond)
	}
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
	at = term.waitFor("▍", at) // streaming
	term.typeText("\x03")
	at = term.waitFor("stopped/aborted", at)

	term.typeText("/fork what if\r")
	at = term.waitFor("forked into th_", at)
	fork := "th_" + strings.Fields(term.screen()[at:])[0]
	at = term.waitFor("loom: You said: what if", at)

	term.typeText("/compact\r")
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
	term.waitFor("you: "+long[:40], at)
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
