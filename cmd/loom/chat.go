package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/conversation"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// ChatCommand is `loom chat`: a live conversation (package conversation)
// in the terminal, or line by line when stdin or stdout is not one.
type ChatCommand struct {
	base
	Thread   string
	Provider string
	Model    string
	Title    string
	// StopInterrupted opens a conversation whose turn a crash cut short
	// stopped/interrupted, rather than ask the model again.
	StopInterrupted bool
	foundry         foundryFlags
}

// Flags implements Command.
func (c *ChatCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.StringVar(&c.Thread, "thread", "", "resume the conversation on thread `ID` (made when it does not exist); a new one when empty")
	fs.StringVar(&c.Provider, "provider", "scripted", "the model's provider: scripted (no key: it says back what it is told, a few runes at a time, and compacts when asked), openai, responses, anthropic, foundry, foundry-classic; keys from the environment")
	fs.StringVar(&c.Model, "model", "", "the `MODEL` (the provider's default when empty)")
	fs.StringVar(&c.Title, "title", "chat", "the `TITLE` of a new conversation's thread")
	fs.BoolVar(&c.StopInterrupted, "stop-interrupted", false, "open a conversation whose last turn a crash or a kill cut short stopped/interrupted (/continue asks again), rather than ask the model again")
	c.foundry.flags(fs)
	return fs
}

// chatClient returns the chat client of a provider, as `loom serve` makes
// them: the scripted one (scripted.Demo) streams a few runes at a time,
// like a model, and compacts when asked to.
func chatClient(provider, model string, f foundryFlags, tp trace.TracerProvider) (agent.ChatClient, error) {
	return newClient(provider, model, f, tp)
}

// Run implements Command.
func (c *ChatCommand) Run(ctx context.Context, args []string) error {
	if _, err := c.positional(args, 0, 0); err != nil {
		return err
	}
	// Traces, as loom serve sends them; a failed flush is told once the
	// terminal is the shell's again.
	tp, stopTracing, err := startTracing(ctx, slog.New(slog.NewTextHandler(c.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	defer stopTracing()
	client, err := chatClient(c.Provider, c.Model, c.foundry, tp)
	if err != nil {
		return c.usage("%v", err)
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	db = db.WithTracerProvider(tp)
	s := newChatSession(db, conversation.Options{Client: client, Model: c.Model, Title: c.Title, TracerProvider: tp}, c.StopInterrupted)
	if err := s.open(ctx, c.Thread); err != nil {
		return err
	}
	defer func() { s.conv.Close(context.Background()) }()
	// Both ends a terminal (not merely character devices: /dev/null is
	// one), or plain lines.
	if c.IsTerminal != nil && c.IsTerminal(c.Stdin) && c.IsTerminal(c.Stdout) {
		return runTUI(ctx, s, c.Stdin, c.Stdout)
	}
	return s.lines(ctx, c.Stdin, c.Stdout)
}

// chatSession is what loom chat works on: the conversation on screen, and
// what it takes to open another.
type chatSession struct {
	db    *thread.DB
	opts  conversation.Options
	conv  *conversation.Conversation
	relay chan struct{} // a change to show
	// stopInterrupted leaves a turn a crash cut short stopped/interrupted.
	stopInterrupted bool
	// prompted: the conversation is a fork whose prompt is to be sent.
	prompted bool
}

// newChatSession returns a session on db whose conversations opts
// describes. Conversations are opened stopped/interrupted, so that one
// whose turn a crash cut short is shown first and then taken up (takeUp),
// unless stopInterrupted.
func newChatSession(db *thread.DB, opts conversation.Options, stopInterrupted bool) *chatSession {
	s := &chatSession{db: db, opts: opts, stopInterrupted: stopInterrupted, relay: make(chan struct{}, 1)}
	s.opts.StopInterrupted = true
	s.opts.Notify = func(conversation.Notice) {
		select {
		case s.relay <- struct{}{}:
		default:
		}
	}
	return s
}

// open opens the conversation on thread id, or a new one ("" or an id
// that does not exist).
func (s *chatSession) open(ctx context.Context, id string) error {
	var conv *conversation.Conversation
	var err error
	if id != "" {
		conv, err = conversation.Open(ctx, s.db, id, s.opts)
	}
	if id == "" || errors.Is(err, thread.ErrNotFound) {
		o := s.opts
		o.ID = id
		conv, err = conversation.New(ctx, s.db, o)
	}
	if err != nil {
		return err
	}
	if s.conv != nil {
		s.conv.Close(context.Background())
	}
	s.conv = conv
	return nil
}

func (s *chatSession) busy() bool {
	return s.conv.Agent().Status().Kind == conversation.Streaming || s.conv.Mode().Kind == conversation.ModeToolUse
}

const chatHelp = `/compact [prompt]     replace the conversation with a summary, then go on with prompt
/fork [prompt]        go on in a fork of this conversation (this one stays as it is)
/continue             ask the model to go on (after an abort, or a turn a crash cut short)
/history              the thread's versions: op, checkpoints, what each holds
/checkpoint NAME      name this point, to roll back to it
/rollback NAME|V      go back to a checkpoint or a version (a new version: nothing is lost)
/threads              the conversations of this store
/switch ID            go to another conversation
/help, /quit
@async TEXT           send TEXT when the turn in flight ends, without aborting it
Ctrl-C aborts the turn; Ctrl-C twice on an idle prompt quits.`

// command runs a slash command and returns what to show.
func (s *chatSession) command(ctx context.Context, line string) (string, bool, error) {
	name, arg, _ := strings.Cut(strings.TrimPrefix(line, "/"), " ")
	arg = strings.TrimSpace(arg)
	switch name {
	case "help":
		return chatHelp, false, nil
	case "quit", "exit":
		return "", true, nil
	case "compact":
		return "", false, s.conv.Compact(ctx, arg) // the transcript says "compacting…"
	case "continue":
		return "", false, s.conv.Continue(ctx)
	case "fork":
		f, err := s.conv.Fork(ctx, arg)
		if err != nil {
			return "", false, err
		}
		s.conv.Close(context.Background())
		s.conv = f
		s.prompted = arg != "" // sent by takeUp, once the fork is on screen
		return "forked into " + f.ID(), false, nil
	case "history":
		text, err := s.historyText(ctx)
		return text, false, err
	case "checkpoint":
		if arg == "" {
			return "", false, errors.New("/checkpoint NAME")
		}
		th, err := s.db.Thread(ctx, s.conv.ID())
		if err != nil {
			return "", false, err
		}
		cp, err := th.Checkpoint(ctx, arg)
		if err != nil {
			return "", false, err
		}
		return fmt.Sprintf("checkpoint %q at version %d", cp.Name, cp.Version), false, nil
	case "rollback":
		if arg == "" {
			return "", false, errors.New("/rollback NAME or /rollback VERSION")
		}
		if s.busy() {
			s.conv.Abort(context.Background())
		}
		id := s.conv.ID()
		th, err := s.db.Thread(ctx, id)
		if err != nil {
			return "", false, err
		}
		if v, perr := strconv.ParseInt(arg, 10, 64); perr == nil {
			err = th.Restore(ctx, v)
		} else {
			err = th.Rollback(ctx, arg)
		}
		if err != nil {
			return "", false, err
		}
		if err := s.open(ctx, id); err != nil {
			return "", false, err
		}
		return fmt.Sprintf("rolled back to %s: version %d", arg, th.Version()), false, nil
	case "threads":
		var b strings.Builder
		for th, err := range s.db.Threads(ctx, thread.ListOptions{Kind: thread.KindLocal, Desc: true, Limit: 20}) {
			if err != nil {
				return "", false, err
			}
			mark := " "
			if th.ID() == s.conv.ID() {
				mark = "*"
			}
			fmt.Fprintf(&b, "%s %s  %s\n", mark, th.ID(), th.Title())
		}
		return strings.TrimRight(b.String(), "\n"), false, nil
	case "switch":
		if arg == "" {
			return "", false, errors.New("/switch ID")
		}
		if _, err := s.db.Thread(ctx, arg); err != nil {
			return "", false, err
		}
		if err := s.open(ctx, arg); err != nil {
			return "", false, err
		}
		return "on " + arg, false, nil
	}
	return "", false, fmt.Errorf("unknown command /%s (/help lists them)", name)
}

// historyText is /history: the thread's newest versions, each with its op,
// its time, the checkpoints made at it and what it holds — the messages it
// added, one line for all of them, or where a rollback took the thread.
func (s *chatSession) historyText(ctx context.Context) (string, error) {
	th, err := s.db.Thread(ctx, s.conv.ID())
	if err != nil {
		return "", err
	}
	at := map[int64][]string{}     // checkpoint names by the version they were made at
	named := map[string][]string{} // checkpoint names by their commit
	for cp, err := range th.Checkpoints(ctx) {
		if err != nil {
			return "", err
		}
		at[cp.Version] = append(at[cp.Version], cp.Name)
		named[cp.Commit] = append(named[cp.Commit], cp.Name)
	}
	var entries []thread.HistoryEntry
	for e, err := range th.History(ctx, thread.HistoryOptions{Limit: 20}) {
		if err != nil {
			return "", err
		}
		entries = append(entries, e)
	}
	var b strings.Builder
	for i, e := range entries {
		fmt.Fprintf(&b, "version %-3d %-8s %s", e.Version, e.Op, e.Time.Local().Format("15:04:05"))
		if names := at[e.Version]; len(names) > 0 {
			fmt.Fprintf(&b, "  [%s]", strings.Join(names, ", "))
		}
		what, err := s.versionContent(ctx, th, e, entries[i+1:], named)
		if err != nil {
			return "", err
		}
		if what != "" {
			b.WriteString("  " + clip(oneLine(what), 60))
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// versionContent says what version e of th holds: the messages its commit
// added, or for a move of the head (a rollback, a restore, a reset, a
// fork's start) where it went; older are the entries before e, newest
// first, to find the version a rollback went back to, and named the
// checkpoints' names by their commits.
func (s *chatSession) versionContent(ctx context.Context, th *thread.Thread, e thread.HistoryEntry, older []thread.HistoryEntry, named map[string][]string) (string, error) {
	switch e.Op {
	case thread.OpReset:
		return "emptied", nil
	case thread.OpUpdate:
		return "title or labels changed", nil
	case thread.OpFork:
		if f := th.Record().ForkedFrom; f.Thread != "" && e.Version == 1 {
			return "forked from " + f.Thread, nil
		}
	case thread.OpRollback, thread.OpRestore:
		to := "back to an older version"
		for _, o := range older {
			if o.Commit == e.Commit {
				to = fmt.Sprintf("back to version %d", o.Version)
				break
			}
		}
		if names := named[e.Commit]; len(names) > 0 && e.Op == thread.OpRollback {
			to += " (checkpoint " + strings.Join(names, ", ") + ")"
		}
		return to, nil
	}
	if e.Commit == "" {
		return "", nil
	}
	c, err := s.db.Store().Commit(ctx, e.Commit)
	if err != nil {
		return "", fmt.Errorf("version %d: %w", e.Version, err)
	}
	if len(c.Messages) == 0 {
		if e.Op == thread.OpCreate {
			return "a new conversation", nil
		}
		// A commit of the conversation's state only: its status.
		if st, ok := conversation.StatusIn(c.State); ok {
			return "status " + st.String(), nil
		}
		return "", nil
	}
	parts := make([]string, 0, len(c.Messages))
	for _, m := range c.Messages {
		parts = append(parts, strings.TrimSpace(render([]message.Message{m})))
	}
	return strings.Join(parts, " · "), nil
}

// render writes messages for people: tool calls and their results folded
// to a line each.
func render(msgs []message.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		switch {
		case m.Role == message.RoleUser && m.AuthorName == "compact":
			fmt.Fprintf(&b, "── %s\n", oneLine(clip(m.Text(), 200)))
		case m.Role == message.RoleUser:
			fmt.Fprintf(&b, "you: %s\n", m.Text())
		case m.Role == message.RoleAssistant:
			if t := m.Text(); t != "" {
				fmt.Fprintf(&b, "loom: %s\n", t)
			}
			b.WriteString(renderCalls(m.Calls()))
		case m.Role == message.RoleTool:
			for _, r := range m.Results() {
				mark := "↳"
				if r.IsError {
					mark = "↳ !"
				}
				fmt.Fprintf(&b, "    %s %s\n", mark, clip(oneLine(r.Result), 80))
			}
		}
	}
	return b.String()
}

func renderCalls(calls []message.FunctionCall) string {
	var b strings.Builder
	for _, call := range calls {
		fmt.Fprintf(&b, "  ▸ %s(%s)\n", call.Name, clip(oneLine(call.Arguments), 60))
	}
	return b.String()
}

// transcript is what loom chat shows of its conversation, only ever added
// to, like a terminal's scrollback: each message once, the answer's text
// as it streams, "compacting…" as soon as a compaction starts (before the
// summary that ends it), and the answers of commands. What the
// conversation drops stays: the messages a compaction or a rollback
// replaces, and the text of an answer cut short, marked [aborted] (the
// conversation keeps only the completed blocks of an aborted answer, and
// drops the one that was streaming).
//
// In plain mode (live false) it writes to w as it goes, the streaming
// text included; in the terminal (live true) w holds what is done and the
// streaming text is drawn apart, under it, until its block completes.
type transcript struct {
	w    io.Writer
	live bool
	conv *conversation.Conversation // the conversation followed
	// shown are the conversation's messages shown, in order, as keys: a
	// compaction or a rollback replaces some, and only the new ones are
	// shown.
	shown []shownKey
	// partial is the streaming text shown, on a line still open.
	partial string
	open    bool
	// compacting: "compacting…" is shown and the summary not yet.
	compacting bool
	// request: the next user message is the one Compact sends the model
	// on the user's behalf (/compact, @compact), not shown.
	request bool
}

// shownKey is what a shown message is recognised by: the agent's messages
// have no ids until a thread gives its copies theirs.
type shownKey struct {
	role         message.Role
	author, text string
	calls        int
}

func keyOf(m message.Message) shownKey {
	return shownKey{role: m.Role, author: m.AuthorName, text: m.Text(), calls: len(m.Calls())}
}

// follow starts on the conversation s has now: in the terminal it shows
// all of it again; in plain mode it marks what the conversation holds as
// shown, and only what comes next is written.
func (t *transcript) follow(s *chatSession) {
	t.conv, t.shown, t.partial, t.open, t.compacting, t.request = s.conv, nil, "", false, false, false
	a := s.conv.Agent()
	if !t.live {
		for _, m := range a.Messages() {
			t.shown = append(t.shown, keyOf(m))
		}
		return
	}
	t.sync(s)
	// An answer aborted in an earlier session: the conversation kept the
	// question, not the text that was streaming.
	if st, msgs := a.Status(), a.Messages(); st.Kind == conversation.Stopped && st.Reason == conversation.Aborted &&
		len(msgs) > 0 && msgs[len(msgs)-1].Role == message.RoleUser && !t.open {
		io.WriteString(t.w, "loom: … [aborted]\n")
	}
}

// sync shows what changed in the conversation since the last sync.
func (t *transcript) sync(s *chatSession) {
	if t.conv != s.conv {
		t.follow(s)
		return
	}
	a := s.conv.Agent()
	// The status first: a stopped agent's messages, read after it, are
	// all there is of its turn.
	st := a.Status()
	msgs := a.Messages()
	k, n := 0, len(t.shown)
	if n > 0 && len(msgs) >= n && t.shown[n-1] == keyOf(msgs[n-1]) && t.shown[0] == keyOf(msgs[0]) {
		k = n // the usual case, in one look: only added to
	}
	for k < n && k < len(msgs) && t.shown[k] == keyOf(msgs[k]) {
		k++
	}
	if k == len(t.shown)-1 && k < len(msgs) {
		// The last message shown may have grown (a block completed
		// after another): only what it gained is new.
		if old, now := t.shown[k], keyOf(msgs[k]); old.role == now.role && old.role == message.RoleAssistant && old.text == now.text && now.calls > old.calls {
			t.calls(msgs[k].Calls()[old.calls:])
			t.shown[k] = now
			k++
		}
	}
	t.shown = t.shown[:k] // what a compaction or a rollback replaced stays on screen
	for _, m := range msgs[k:] {
		t.message(m)
		t.shown = append(t.shown, keyOf(m))
	}
	switch p := a.Partial(); {
	case p != "":
		t.stream(p)
	case t.open && st.Kind != conversation.Streaming:
		t.closeLine(st) // its block was dropped: aborted, or an error
	}
	if t.compacting && st.Kind != conversation.Streaming && (st.Kind != conversation.Stopped || st.Reason != conversation.ToolUse) {
		// The turn ended without the summary: the model did not compact
		// (the next compaction is said again).
		t.compacting, t.request = false, false
	}
}

// message shows a message the conversation gained.
func (t *transcript) message(m message.Message) {
	switch {
	case m.Role == message.RoleUser && m.AuthorName == "compact":
		t.closeLine(conversation.Status{})
		if !t.compacting {
			io.WriteString(t.w, "compacting…\n")
		}
		t.compacting, t.request = false, false
		io.WriteString(t.w, render([]message.Message{m}))
	case m.Role == message.RoleAssistant:
		text := m.Text()
		switch {
		case t.open && text != "" && strings.HasPrefix(text, t.partial):
			t.finishLine(text)
		case text != "":
			t.closeLine(conversation.Status{})
			fmt.Fprintf(t.w, "loom: %s\n", text)
		}
		t.request = false
		t.calls(m.Calls())
	case m.Role == message.RoleUser && t.request:
		t.request = false // the request to compact, which the user did not type
	default:
		t.closeLine(conversation.Status{})
		io.WriteString(t.w, render([]message.Message{m}))
	}
}

// calls shows an answer's tool calls; a call of compact is the start of a
// compaction.
func (t *transcript) calls(calls []message.FunctionCall) {
	for _, c := range calls {
		if c.Name == conversation.ToolCompact {
			t.compactingNow()
			continue
		}
		io.WriteString(t.w, renderCalls([]message.FunctionCall{c}))
	}
}

// compactingNow says a compaction started, once.
func (t *transcript) compactingNow() {
	if !t.compacting {
		t.closeLine(conversation.Status{})
		io.WriteString(t.w, "compacting…\n")
		t.compacting = true
	}
}

// compactRequested is /compact or @compact: the compaction starts now,
// with the request the conversation sends the model.
func (t *transcript) compactRequested() {
	t.compactingNow()
	t.request = true
}

// compactFailed undoes compactRequested when the request was refused.
func (t *transcript) compactFailed() { t.compacting, t.request = false, false }

// stream shows the streaming text p.
func (t *transcript) stream(p string) {
	if t.open && !strings.HasPrefix(p, t.partial) {
		t.closeLine(conversation.Status{}) // another block
	}
	if !t.live {
		if !t.open {
			io.WriteString(t.w, "loom: ")
		}
		io.WriteString(t.w, p[len(t.partial):])
	}
	t.partial, t.open = p, true
}

// finishLine ends the open line with the completed text of its block.
func (t *transcript) finishLine(text string) {
	if t.live {
		fmt.Fprintf(t.w, "loom: %s\n", text)
	} else {
		fmt.Fprintf(t.w, "%s\n", text[len(t.partial):])
	}
	t.partial, t.open = "", false
}

// closeLine ends the open line, if any, whose block will not complete,
// marked as the status st says: the text stays, as it was seen.
func (t *transcript) closeLine(st conversation.Status) {
	if !t.open {
		return
	}
	mark := ""
	switch {
	case st.Kind == conversation.Stopped && st.Reason == conversation.Aborted:
		mark = " [aborted]"
	case st.Kind == conversation.Errored:
		mark = " [cut off by an error]"
	}
	if t.live {
		fmt.Fprintf(t.w, "loom: %s%s\n", t.partial, mark)
	} else {
		fmt.Fprintf(t.w, "%s\n", mark)
	}
	t.partial, t.open = "", false
}

// say shows a command's answer, under what is shown.
func (t *transcript) say(text string) {
	if text == "" {
		return
	}
	if !t.live {
		t.closeLine(conversation.Status{})
	}
	fmt.Fprintf(t.w, "%s\n", text)
}

// abort aborts the turn in flight; its text shown so far stays, marked
// [aborted]. It reports whether there was a turn to abort.
func (s *chatSession) abort(t *transcript) bool {
	if !s.busy() {
		return false
	}
	wasOpen := t.open
	s.conv.Abort(context.Background())
	t.sync(s)
	a := s.conv.Agent()
	t.closeLine(a.Status())
	if msgs := a.Messages(); !wasOpen && len(msgs) > 0 && msgs[len(msgs)-1].Role == message.RoleUser {
		t.say("loom: … [aborted]") // before any text came
	}
	return true
}

// lines is loom chat on a stdin or stdout that is not a terminal: a line
// is a message or a command, each answered (streaming) before the next is
// read. The session ends at the end of stdin, at /quit, or at an interrupt
// (Ctrl-C, SIGTERM), which aborts the turn in flight first.
func (s *chatSession) lines(ctx context.Context, in io.Reader, out io.Writer) error {
	fmt.Fprintf(out, "conversation %s\n", s.conv.ID())
	t := &transcript{w: out}
	t.follow(s)
	text, err := s.takeUp(ctx)
	t.say(text)
	if err != nil {
		t.say("error: " + err.Error())
	}
	if err := s.showTurn(ctx, t); err != nil {
		return ended(ctx, err)
	}
	stop := make(chan struct{})
	defer close(stop)
	next, readErr := readLines(in, stop)
	for {
		var line string
		select {
		case <-ctx.Done():
			return nil
		case l, ok := <-next:
			if !ok {
				return <-readErr
			}
			line = strings.TrimSpace(l)
		}
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "/") {
			compact := isCompact(line, "/compact")
			if compact {
				t.compactRequested()
			}
			text, quit, err := s.command(ctx, line)
			if err != nil {
				if compact {
					t.compactFailed()
				}
				t.say("error: " + err.Error())
				continue
			}
			if quit {
				return nil
			}
			t.say(text)
			if t.conv != s.conv {
				t.follow(s) // another conversation: from what it does next
				text, err := s.takeUp(ctx)
				t.say(text)
				if err != nil {
					t.say("error: " + err.Error())
				}
			}
		} else {
			compact := isCompact(line, "@compact")
			if compact {
				t.compactRequested()
			}
			if err := s.send(ctx, line); err != nil {
				if compact {
					t.compactFailed()
				}
				t.say("error: " + err.Error())
				continue
			}
		}
		if err := s.showTurn(ctx, t); err != nil {
			return ended(ctx, err)
		}
	}
}

// ended is the end of a plain session that err stopped: none when it was
// an interrupt.
func ended(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// readLines reads in a line at a time on a goroutine of its own, so that
// an interrupt ends the session while it waits for one; closing stop
// ends it at its next line.
func readLines(in io.Reader, stop <-chan struct{}) (<-chan string, <-chan error) {
	lines, errc := make(chan string), make(chan error, 1)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-stop:
				return
			}
		}
		errc <- sc.Err()
	}()
	return lines, errc
}

// takeUp starts what a conversation just put on screen is to do: a fork
// sends its prompt; a turn that a crash or a kill cut short is asked of
// the model again (Continue), or, with --stop-interrupted, left
// stopped/interrupted (tools that were running run again as the
// conversation opens). It returns what to tell the user. The front end
// follows the conversation first, so that nothing of it goes unseen.
func (s *chatSession) takeUp(ctx context.Context) (string, error) {
	if s.prompted {
		s.prompted = false
		return "", s.conv.Continue(ctx)
	}
	switch st := s.conv.Agent().Status(); {
	case s.busy():
		return "going on with the turn a crash cut short…", nil
	case st.Kind != conversation.Stopped || st.Reason != conversation.Interrupted:
		return "", nil
	case s.stopInterrupted:
		return "the last turn was cut short (stopped/interrupted): /continue asks again", nil
	}
	return "going on with the turn a crash cut short…", s.conv.Continue(ctx)
}

// showTurn shows the turn in flight as it goes, until it ends. An
// interrupt aborts it, and ctx's error is returned.
func (s *chatSession) showTurn(ctx context.Context, t *transcript) error {
	done := make(chan error, 1)
	go func() { done <- s.conv.Wait(ctx) }()
	for over := false; !over; {
		t.sync(s)
		select {
		case <-s.relay:
		case err := <-done:
			if err != nil {
				if ctx.Err() != nil {
					s.abort(t)
				}
				return err
			}
			over = true
		}
	}
	t.sync(s)
	t.closeLine(s.conv.Agent().Status())
	if st := s.conv.Agent().Status(); st.Kind == conversation.Errored {
		t.say("error: " + st.Err)
	}
	return nil
}

// isCompact reports whether line is the command word (/compact or
// @compact), alone or followed by a prompt.
// send sends a line the user typed. The chat's commands are read here,
// by the face, not by the conversation: "@async TEXT" queues TEXT until
// the turn in flight ends instead of aborting it, and "@compact [PROMPT]"
// asks the agent to compact, going on with PROMPT after.
func (s *chatSession) send(ctx context.Context, line string) error {
	if isCompact(line, "@compact") {
		return s.conv.Compact(ctx, strings.TrimSpace(strings.TrimPrefix(line, "@compact")))
	}
	text, queued := strings.CutPrefix(line, "@async ")
	return s.conv.Send(ctx, message.User(text), queued)
}

func isCompact(line, word string) bool {
	rest, ok := strings.CutPrefix(line, word)
	return ok && (rest == "" || rest[0] == ' ')
}
