package main

import (
	"context"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/conversation"
	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/thread"
)

// tui is loom chat's Bubble Tea model driven in the test's goroutine, as
// the program would drive it, on a memory store and the demo model.
type tui struct {
	t *testing.T
	m *chatModel
}

func newTUI(t *testing.T) *tui {
	t.Helper()
	db, err := thread.Open(t.Context(), "memory://", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := newChatSession(db, conversation.Options{Client: scripted.Demo(), Title: "chat"}, false)
	if err := s.open(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.conv.Close(context.Background()) })
	u := &tui{t: t, m: newChatModel(t.Context(), s)}
	// Wide enough that no line of these tests wraps.
	u.m.Update(tea.WindowSizeMsg{Width: 400, Height: 60})
	return u
}

// enter types line and presses Enter.
func (u *tui) enter(line string) {
	for _, r := range line {
		u.m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
	u.m.Update(tea.KeyMsg{Type: tea.KeyEnter})
}

// settle waits for the turn to end and shows it, as a notice would.
func (u *tui) settle() string {
	u.t.Helper()
	if err := u.m.s.conv.Wait(u.t.Context()); err != nil {
		u.t.Fatal(err)
	}
	u.m.Update(changed{})
	return u.screen()
}

// screen is the view, without the spaces that pad its lines and the empty
// lines above the conversation.
func (u *tui) screen() string {
	lines := strings.Split(u.m.View(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.TrimLeft(strings.Join(lines, "\n"), "\n")
}

// until shows the conversation, as notices would, until cond holds.
func (u *tui) until(what string, cond func(view string) bool) string {
	u.t.Helper()
	var v string
	if !testwait.Within(15*time.Second, func() bool {
		u.m.Update(changed{})
		v = u.screen()
		return cond(v)
	}) {
		u.t.Fatalf("never %s; the screen:\n%s", what, v)
	}
	return v
}

// "compacting…" shows where the compaction starts, above the summary that
// ends it, and the conversation before it stays on screen.
func TestChatTUICompactingComesFirst(t *testing.T) {
	u := newTUI(t)
	u.enter("hello")
	u.settle()
	u.enter("/compact")
	view := u.settle()
	c, sum := strings.Index(view, "compacting…"), strings.Index(view, "── Summary of the conversation so far: The user said: hello")
	if c < 0 || sum < 0 || c > sum || strings.Count(view, "compacting…") != 1 {
		t.Fatalf("compacting… at %d, the summary at %d:\n%s", c, sum, view)
	}
	if h := strings.Index(view, "loom: You said: hello"); h < 0 || h > c {
		t.Fatalf("the conversation before the compaction is gone:\n%s", view)
	}
	// The model compacts of its own accord: the same.
	u.enter("Call the compact tool, please")
	view = u.settle()
	ask := strings.Index(view, "you: Call the compact tool, please")
	if c := strings.LastIndex(view, "compacting…"); ask < 0 || c < ask || strings.Count(view, "compacting…") != 2 || !strings.Contains(view[c:], "── Summary") {
		t.Fatalf("a compaction the model asked for:\n%s", view)
	}
}

// An answer aborted with Ctrl-C stays on screen as far as it had come,
// marked [aborted].
func TestChatTUIAbortKeepsThePartialAnswer(t *testing.T) {
	u := newTUI(t)
	long := "tell me everything" + strings.Repeat(", and then some more", 40)
	u.enter(long)
	shown := streaming(u.until("streamed", func(v string) bool { return strings.Contains(v, "loom: You said: tell") }))
	u.m.Update(tea.KeyMsg{Type: tea.KeyCtrlC})
	view := u.settle()
	if !strings.Contains(view, "loom: "+shown+" [aborted]") || strings.Contains(view, "▍") {
		t.Fatalf("after Ctrl-C, want %q marked [aborted]:\n%s", "loom: "+shown, view)
	}
	if st := u.m.s.conv.Agent().Status(); st.Reason != conversation.Aborted {
		t.Fatalf("status %s", st)
	}
	// A message sent while an answer streams aborts it: kept the same.
	u.enter(long)
	shown = streaming(u.until("streamed", func(v string) bool { return strings.Count(v, "loom: You said: tell") == 2 }))
	u.enter("stop")
	view = u.settle()
	if !strings.Contains(view, "loom: "+shown+" [aborted]\nyou: stop\nloom: You said: stop") {
		t.Fatalf("an answer a message cut short:\n%s", view)
	}
}

// streaming is the streaming text that view shows.
func streaming(view string) string {
	_, p, _ := strings.Cut(view[strings.LastIndex(view, "loom: "):], "loom: ")
	p, _, _ = strings.Cut(p, "▍")
	return p
}

// /history shows each version's op, checkpoints and content.
func TestChatTUIHistory(t *testing.T) {
	u := newTUI(t)
	u.enter("hello")
	u.settle()
	u.enter("/checkpoint greeted")
	u.enter("/history")
	view := u.settle()
	for _, want := range []string{"version 1   create", "version 2   append", "you: hello", "[greeted]  loom: You said: hello"} {
		if !strings.Contains(view, want) {
			t.Fatalf("/history lacks %q:\n%s", want, view)
		}
	}
}
