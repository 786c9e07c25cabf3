package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/conversation"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// ChatCommand is `loom chat`: a live conversation (package conversation)
// in the terminal, or line by line when stdin is not a terminal.
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
func (c *ChatCommand) Flags() *flag.FlagSet {
	fs := c.flagSet()
	fs.StringVar(&c.Thread, "thread", "", "resume the conversation on thread `ID` (made when it does not exist); a new one when empty")
	fs.StringVar(&c.Provider, "provider", "scripted", "the model's provider: scripted (no key: it says back what it is told), openai, responses, anthropic, foundry, foundry-classic; keys from the environment")
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
	s := &chatSession{db: db, opts: conversation.Options{Client: client, Model: c.Model, Title: c.Title, TracerProvider: tp, StopInterrupted: c.StopInterrupted}}
	terminal := c.IsTerminal != nil && c.IsTerminal(c.Stdin) && c.IsTerminal(c.Stdout)
	if terminal {
		s.relay = make(chan struct{}, 1)
		s.opts.Notify = func(conversation.Notice) {
			select {
			case s.relay <- struct{}{}:
			default:
			}
		}
	}
	if err := s.open(ctx, c.Thread); err != nil {
		return err
	}
	defer func() { s.conv.Close() }()
	if terminal {
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
	relay chan struct{} // a change to show (terminal mode)
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
		s.conv.Close()
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
/history              the versions of this conversation's thread
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
		return "compacting…", false, s.conv.Compact(arg)
	case "continue":
		return "", false, s.conv.Continue()
	case "fork":
		f, err := s.conv.Fork(arg)
		if err != nil {
			return "", false, err
		}
		s.conv.Close()
		s.conv = f
		if arg != "" {
			if err := f.Continue(); err != nil {
				return "", false, err
			}
		}
		return "forked into " + f.ID(), false, nil
	case "history":
		th, err := s.db.Thread(ctx, s.conv.ID())
		if err != nil {
			return "", false, err
		}
		var b strings.Builder
		for e, err := range th.History(ctx, thread.HistoryOptions{Limit: 20}) {
			if err != nil {
				return "", false, err
			}
			fmt.Fprintf(&b, "version %d  %-8s %s\n", e.Version, e.Op, e.Time.Local().Format("15:04:05"))
		}
		return strings.TrimRight(b.String(), "\n"), false, nil
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
			s.conv.Abort()
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
			for _, call := range m.Calls() {
				fmt.Fprintf(&b, "  ▸ %s(%s)\n", call.Name, clip(oneLine(call.Arguments), 60))
			}
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

// lines is loom chat on a stdin that is not a terminal: a line a message
// or a command, each answered before the next is read.
func (s *chatSession) lines(ctx context.Context, in io.Reader, out io.Writer) error {
	fmt.Fprintf(out, "conversation %s\n", s.conv.ID())
	if err := s.resumed(ctx, out); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "/") {
			text, quit, err := s.command(ctx, line)
			if err != nil {
				fmt.Fprintf(out, "error: %v\n", err)
				continue
			}
			if quit {
				return nil
			}
			if text != "" {
				fmt.Fprintln(out, text)
			}
			from := len(s.conv.Agent().Messages())
			if strings.HasPrefix(line, "/compact") {
				from = 0 // what is left is the summary, and what followed it
			}
			if err := s.showTurn(ctx, out, from); err != nil {
				return err
			}
			continue
		}
		from := len(s.conv.Agent().Messages()) + 1 // after the message sent
		if strings.HasPrefix(line, "@compact") {
			from = 0
		}
		if err := s.conv.Send(line); err != nil {
			fmt.Fprintf(out, "error: %v\n", err)
			continue
		}
		if err := s.showTurn(ctx, out, from); err != nil {
			return err
		}
	}
	return sc.Err()
}

// resumed tells of a turn that a crash or a kill cut short: taken up again
// (Open asks the model again, or runs the tools again), it is shown when it
// ends; left stopped/interrupted
// (--stop-interrupted), it is said so.
func (s *chatSession) resumed(ctx context.Context, out io.Writer) error {
	switch st := s.conv.Agent().Status(); {
	case s.busy():
		fmt.Fprintln(out, "going on with the turn a crash cut short…")
		return s.showTurn(ctx, out, len(s.conv.Agent().Messages()))
	case st.Kind == conversation.Stopped && st.Reason == conversation.Interrupted:
		fmt.Fprintln(out, "the last turn was cut short (stopped/interrupted): /continue asks again")
	}
	return nil
}

// showTurn waits for the turn to end and writes its messages from the
// from-th on.
func (s *chatSession) showTurn(ctx context.Context, out io.Writer, from int) error {
	if err := s.conv.Wait(ctx); err != nil {
		return err
	}
	msgs := s.conv.Agent().Messages()
	if from < len(msgs) {
		io.WriteString(out, render(msgs[from:]))
	}
	if st := s.conv.Agent().Status(); st.Kind == conversation.Errored {
		fmt.Fprintf(out, "error: %s\n", st.Err)
	}
	return nil
}
