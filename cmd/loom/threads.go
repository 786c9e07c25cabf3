package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// ThreadsListCommand lists threads: people's, most recently updated
// first, a page at a time unless asked for all.
type ThreadsListCommand struct {
	base
	Labels   labelsFlag
	Kind     kindFlag
	Limit    int
	All      bool
	Internal bool
	Order    string
}

// defaultListLimit is how many threads threads list shows without --limit
// or --all: a screenful, not a store of ten thousand.
const defaultListLimit = 50

// Flags implements Command.
func (c *ThreadsListCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.Var(&c.Labels, "label", "only threads with this `k=v` label (repeatable; all must match)")
	fs.Var(&c.Kind, "kind", "only threads of kind `K`: undetermined, local, service or workflow")
	fs.IntVar(&c.Limit, "limit", defaultListLimit, "list at most `N` threads (0: all of them, as --all)")
	fs.BoolVar(&c.All, "all", false, "list every thread, not a page")
	fs.BoolVar(&c.Internal, "internal", false, "list loom's own threads too (work logs, sessions, workflows' sub-threads)")
	fs.StringVar(&c.Order, "order", "updated", "list in `ORDER`: updated (most recently updated first), id, or newest (by id, newest first)")
	return fs
}

// Run implements Command.
func (c *ThreadsListCommand) Run(ctx context.Context, args []string) error {
	if _, err := c.positional(args, 0, 0); err != nil {
		return err
	}
	if c.Limit < 0 {
		return c.usage("--limit must not be negative")
	}
	opts := thread.ListOptions{Labels: c.Labels, Kind: thread.Kind(c.Kind), Internal: thread.InternalExclude}
	switch c.Order {
	case "updated":
		opts.Order = thread.OrderUpdated
	case "id":
	case "newest":
		opts.Desc = true
	default:
		return c.usage("--order %q: updated, id or newest", c.Order)
	}
	if c.Internal {
		opts.Internal = thread.InternalInclude
	}
	limit := c.Limit
	if c.All {
		limit = 0
	}
	if limit > 0 {
		opts.Limit = limit + 1 // one more tells whether there are more
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	var t *table
	if !c.JSON {
		t = newTable(c.Stdout, "ID", "TITLE", "KIND", "VERSION", "UPDATED", "LABELS")
	}
	n, more := 0, false
	for th, err := range db.Threads(ctx, opts) {
		if err != nil {
			return fmt.Errorf("list threads: %w", err)
		}
		if limit > 0 && n == limit {
			more = true
			break
		}
		n++
		r := th.Record()
		if c.JSON {
			if err := writeJSONLine(c.Stdout, toRecordJSON(r)); err != nil {
				return err
			}
			continue
		}
		t.row(r.ID, clip(r.Title, 60), string(r.Kind), strconv.FormatInt(r.Version, 10), formatTime(r.UpdatedAt), formatLabels(r.Labels))
	}
	if t != nil {
		if err := t.flush(); err != nil {
			return err
		}
	}
	if more {
		// On stderr, so that the rows (or JSON lines) on stdout stay
		// only rows.
		fmt.Fprintf(c.Stderr, "… more threads than these %d: --limit N or --all\n", limit)
	}
	return nil
}

// ThreadsShowCommand shows a thread's record, state and messages.
type ThreadsShowCommand struct {
	base
	Last    int
	Version int64
	Before  string
}

// Flags implements Command.
func (c *ThreadsShowCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.IntVar(&c.Last, "last", 0, "show only the last `N` messages (0: all)")
	fs.Int64Var(&c.Version, "version", 0, "show the thread as it was at version `V` (0: now)")
	fs.StringVar(&c.Before, "before", "", "show only the messages before the message `ID` (with --last, to page back)")
	return fs
}

// showJSON is the --json output of threads show.
type showJSON struct {
	Thread recordJSON `json:"thread"`
	// Version is the version the messages and state are of.
	Version  int64                      `json:"version"`
	State    map[string]json.RawMessage `json:"state,omitzero"`
	Messages []message.Message          `json:"messages"`
}

// Run implements Command.
func (c *ThreadsShowCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.positional(args, 1, 1)
	if err != nil {
		return err
	}
	if c.Last < 0 || c.Version < 0 {
		return c.usage("--last and --version must not be negative")
	}
	db, th, err := c.openThread(ctx, pos[0])
	if err != nil {
		return err
	}
	defer db.Close()
	msgs, err := th.Messages(ctx, thread.ReadOptions{Version: c.Version, Last: c.Last, Before: c.Before})
	if err != nil {
		return err // it names the thread already
	}
	state, err := th.State(ctx, c.Version)
	if err != nil {
		return fmt.Errorf("read the state of %s: %w", th.ID(), err)
	}
	version := orDefault(c.Version, th.Version())
	if c.JSON {
		if msgs == nil {
			msgs = []message.Message{}
		}
		return writeJSON(c.Stdout, showJSON{Thread: toRecordJSON(th.Record()), Version: version, State: state, Messages: msgs})
	}
	printRecord(c.Stdout, th.Record())
	if version != th.Version() {
		fmt.Fprintf(c.Stdout, "showing version %d\n", version)
	}
	printState(c.Stdout, state)
	fmt.Fprintln(c.Stdout)
	if len(msgs) == 0 {
		fmt.Fprintln(c.Stdout, "(no messages)")
		return nil
	}
	printMessages(c.Stdout, msgs, nil)
	return nil
}

// orDefault returns a if it is not zero, else b.
func orDefault[T comparable](a, b T) T {
	var zero T
	if a != zero {
		return a
	}
	return b
}

// ThreadsCreateCommand creates a thread.
type ThreadsCreateCommand struct {
	base
	ID     string
	Title  string
	Labels labelsFlag
	Kind   kindFlag
}

// Flags implements Command.
func (c *ThreadsCreateCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.StringVar(&c.ID, "id", "", "the thread's `ID` (default: a fresh one)")
	fs.StringVar(&c.Title, "title", "", "the thread's title `T`")
	fs.Var(&c.Labels, "label", "a `k=v` label (repeatable)")
	fs.Var(&c.Kind, "kind", "the thread's kind `K`: undetermined (the default), local, service or workflow")
	return fs
}

// Run implements Command.
func (c *ThreadsCreateCommand) Run(ctx context.Context, args []string) error {
	if _, err := c.positional(args, 0, 0); err != nil {
		return err
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	th, err := db.Create(ctx, thread.CreateOptions{ID: c.ID, Title: c.Title, Labels: c.Labels, Kind: thread.Kind(c.Kind)})
	if err != nil {
		return err // "create ID: …" already
	}
	return c.printThread(th, "created %s", th.ID())
}

// printThread writes a thread's record as JSON, or a sentence for people.
func (b *base) printThread(th *thread.Thread, format string, args ...any) error {
	if b.JSON {
		return writeJSON(b.Stdout, toRecordJSON(th.Record()))
	}
	_, err := fmt.Fprintf(b.Stdout, format+"\n", args...)
	return err
}

// ThreadsAppendCommand appends messages to a thread.
type ThreadsAppendCommand struct {
	base
	Role      string
	IfVersion int64
	File      string
}

// Flags implements Command.
func (c *ThreadsAppendCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.StringVar(&c.Role, "role", "user", "the role `R` of the message: user, assistant, system, tool or another word")
	fs.Int64Var(&c.IfVersion, "if-version", 0, "append only if the thread is at version `V`, else fail (0: any version)")
	fs.StringVar(&c.File, "file", "", "append the messages of a JSON array in the wire format from `FILE` (- for stdin)")
	return fs
}

// appendJSON is the --json output of threads append.
type appendJSON struct {
	Thread   string            `json:"thread"`
	Version  int64             `json:"version"`
	Commit   string            `json:"commit"`
	Messages []message.Message `json:"messages"`
}

// Run implements Command.
func (c *ThreadsAppendCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.positional(args, 1, -1)
	if err != nil {
		return err
	}
	id, text := pos[0], pos[1:]
	var msgs []message.Message
	switch {
	case c.File != "" && len(text) > 0:
		return c.usage("give the message as TEXT or --file, not both")
	case c.File != "":
		if msgs, err = c.readMessages(c.File); err != nil {
			return err
		}
		if len(msgs) == 0 {
			return fmt.Errorf("%s holds no messages: %w", c.File, thread.ErrInvalid)
		}
	case len(text) == 0:
		return c.usage("missing the message TEXT (or --file)")
	default:
		msgs = []message.Message{message.New(message.Role(c.Role), message.Text{Text: strings.Join(text, " ")})}
	}
	if c.IfVersion < 0 {
		return c.usage("--if-version must not be negative")
	}
	db, th, err := c.openThread(ctx, id)
	if err != nil {
		return err
	}
	defer db.Close()
	commit, err := th.Commit(ctx, thread.CommitOptions{Messages: msgs, IfVersion: c.IfVersion})
	if err != nil {
		if c.IfVersion != 0 && errors.Is(err, thread.ErrConflict) {
			if th.Refresh(ctx) == nil && th.Version() != c.IfVersion {
				return fmt.Errorf("append to %s: the thread is at version %d, not %d (--if-version); nothing was appended: %w",
					id, th.Version(), c.IfVersion, thread.ErrConflict)
			}
		}
		return err // it names the thread already
	}
	if c.JSON {
		return writeJSON(c.Stdout, appendJSON{Thread: th.ID(), Version: th.Version(), Commit: commit.ID, Messages: commit.Messages})
	}
	_, err = fmt.Fprintf(c.Stdout, "appended %s to %s (version %d)\n", plural(len(commit.Messages), "message", "messages"), th.ID(), th.Version())
	return err
}

// readMessages reads a JSON array of wire-format messages from path ("-":
// stdin).
func (c *ThreadsAppendCommand) readMessages(path string) ([]message.Message, error) {
	var r io.Reader = c.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	var msgs []message.Message
	dec := json.NewDecoder(r)
	if err := dec.Decode(&msgs); err != nil {
		return nil, fmt.Errorf("read messages from %s: a JSON array of messages (docs/wire-format.md) expected: %v: %w", path, err, thread.ErrInvalid)
	}
	return msgs, nil
}

// ThreadsForkCommand forks a thread.
type ThreadsForkCommand struct {
	base
	At      string
	Version int64
	ID      string
	Title   string
	Labels  labelsFlag
}

// Flags implements Command.
func (c *ThreadsForkCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.StringVar(&c.At, "at", "", "the id of the last `MSG` the fork keeps (default: the head)")
	fs.Int64Var(&c.Version, "version", 0, "fork the thread as it was at version `V` (0: now)")
	fs.StringVar(&c.ID, "id", "", "the new thread's `ID` (default: a fresh one)")
	fs.StringVar(&c.Title, "title", "", "the new thread's title `T` (default: the source's)")
	fs.Var(&c.Labels, "label", "a `k=v` label of the new thread (repeatable; replaces the source's)")
	return fs
}

// Run implements Command.
func (c *ThreadsForkCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.positional(args, 1, 1)
	if err != nil {
		return err
	}
	if c.Version < 0 {
		return c.usage("--version must not be negative")
	}
	db, th, err := c.openThread(ctx, pos[0])
	if err != nil {
		return err
	}
	defer db.Close()
	f, err := th.Fork(ctx, thread.ForkOptions{At: c.At, Version: c.Version, ID: c.ID, Title: c.Title, Labels: c.Labels})
	if err != nil {
		return err // it names the thread already
	}
	return c.printThread(f, "forked %s into %s", th.ID(), f.ID())
}

// ThreadsCopyCommand copies a thread within its store.
type ThreadsCopyCommand struct {
	base
	ID     string
	Title  string
	Labels labelsFlag
}

// Flags implements Command.
func (c *ThreadsCopyCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.StringVar(&c.ID, "id", "", "the new thread's `ID` (default: a fresh one)")
	fs.StringVar(&c.Title, "title", "", "the new thread's title `T` (default: the source's)")
	fs.Var(&c.Labels, "label", "a `k=v` label of the new thread (repeatable; replaces the source's)")
	return fs
}

// Run implements Command.
func (c *ThreadsCopyCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.positional(args, 1, 1)
	if err != nil {
		return err
	}
	db, th, err := c.openThread(ctx, pos[0])
	if err != nil {
		return err
	}
	defer db.Close()
	cp, err := th.Copy(ctx, thread.ForkOptions{ID: c.ID, Title: c.Title, Labels: c.Labels})
	if err != nil {
		return err // it names the thread already
	}
	return c.printThread(cp, "copied %s to %s", th.ID(), cp.ID())
}

// ThreadsHistoryCommand lists a thread's history.
type ThreadsHistoryCommand struct {
	base
	Limit int
}

// Flags implements Command.
func (c *ThreadsHistoryCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.IntVar(&c.Limit, "limit", 0, "list at most `N` entries, newest first (0: all)")
	return fs
}

// Run implements Command.
func (c *ThreadsHistoryCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.positional(args, 1, 1)
	if err != nil {
		return err
	}
	if c.Limit < 0 {
		return c.usage("--limit must not be negative")
	}
	db, th, err := c.openThread(ctx, pos[0])
	if err != nil {
		return err
	}
	defer db.Close()
	return c.printHistory(th.ID(), th.History(ctx, thread.HistoryOptions{Limit: c.Limit}), "COMMIT", func(e thread.HistoryEntry) string {
		if e.Commit == "" {
			return "(empty)"
		}
		return e.Commit
	})
}

// printHistory writes history entries: a table whose third column is
// what third says of each, or with --json a JSON line each.
func (b *base) printHistory(id string, history iter.Seq2[thread.HistoryEntry, error], column string, third func(thread.HistoryEntry) string) error {
	var t *table
	if !b.JSON {
		t = newTable(b.Stdout, "VERSION", "OP", column, "TIME")
	}
	for e, err := range history {
		if err != nil {
			return fmt.Errorf("history of %s: %w", id, err)
		}
		if b.JSON {
			if err := writeJSONLine(b.Stdout, historyJSON{Version: e.Version, Commit: e.Commit, Op: e.Op, Time: e.Time}); err != nil {
				return err
			}
			continue
		}
		t.row(strconv.FormatInt(e.Version, 10), string(e.Op), third(e), formatTime(e.Time))
	}
	if t != nil {
		return t.flush()
	}
	return nil
}

// ThreadsCheckpointCommand makes, lists or deletes checkpoints.
type ThreadsCheckpointCommand struct {
	base
	List   bool
	Delete string
}

// Flags implements Command.
func (c *ThreadsCheckpointCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.BoolVar(&c.List, "list", false, "list the thread's checkpoints")
	fs.StringVar(&c.Delete, "delete", "", "delete the checkpoint `NAME`")
	return fs
}

// Run implements Command.
func (c *ThreadsCheckpointCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.positional(args, 1, 2)
	if err != nil {
		return err
	}
	switch {
	case c.List && c.Delete != "":
		return c.usage("--list and --delete do not go together")
	case (c.List || c.Delete != "") && len(pos) == 2:
		return c.usage("unexpected argument %q", pos[1])
	case !c.List && c.Delete == "" && len(pos) == 1:
		return c.usage("missing the checkpoint NAME (or --list, --delete NAME)")
	}
	db, th, err := c.openThread(ctx, pos[0])
	if err != nil {
		return err
	}
	defer db.Close()
	switch {
	case c.List:
		var t *table
		if !c.JSON {
			t = newTable(c.Stdout, "NAME", "VERSION", "COMMIT", "CREATED")
		}
		for cp, err := range th.Checkpoints(ctx) {
			if err != nil {
				return fmt.Errorf("checkpoints of %s: %w", th.ID(), err)
			}
			if c.JSON {
				if err := writeJSONLine(c.Stdout, toCheckpointJSON(cp)); err != nil {
					return err
				}
				continue
			}
			t.row(cp.Name, strconv.FormatInt(cp.Version, 10), cp.Commit, formatTime(cp.CreatedAt))
		}
		if t != nil {
			return t.flush()
		}
		return nil
	case c.Delete != "":
		if err := th.DeleteCheckpoint(ctx, c.Delete); err != nil {
			return err // it names the thread already
		}
		if c.JSON {
			return writeJSON(c.Stdout, map[string]string{"thread": th.ID(), "deleted": c.Delete})
		}
		_, err := fmt.Fprintf(c.Stdout, "deleted checkpoint %q of %s\n", c.Delete, th.ID())
		return err
	}
	cp, err := th.Checkpoint(ctx, pos[1])
	if err != nil {
		return err // it names the thread already
	}
	if c.JSON {
		return writeJSON(c.Stdout, toCheckpointJSON(cp))
	}
	_, err = fmt.Fprintf(c.Stdout, "checkpoint %q of %s at version %d\n", cp.Name, th.ID(), cp.Version)
	return err
}

// ThreadsRollbackCommand rolls a thread back to a checkpoint or version.
type ThreadsRollbackCommand struct {
	base
	Version int64
}

// Flags implements Command.
func (c *ThreadsRollbackCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.Int64Var(&c.Version, "version", 0, "move the head to where it was at version `V`")
	return fs
}

// Run implements Command.
func (c *ThreadsRollbackCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.positional(args, 1, 2)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 2 && c.Version != 0:
		return c.usage("give a checkpoint NAME or --version, not both")
	case len(pos) == 1 && c.Version == 0:
		return c.usage("missing the checkpoint NAME (or --version V)")
	case c.Version < 0:
		return c.usage("--version must be positive")
	}
	db, th, err := c.openThread(ctx, pos[0])
	if err != nil {
		return err
	}
	defer db.Close()
	to := fmt.Sprintf("version %d", c.Version)
	if len(pos) == 2 {
		to = fmt.Sprintf("checkpoint %q", pos[1])
		err = th.Rollback(ctx, pos[1])
	} else {
		err = th.Restore(ctx, c.Version)
	}
	if err != nil {
		return fmt.Errorf("rollback %s: %w", th.ID(), err)
	}
	return c.printThread(th, "rolled %s back to %s (now version %d)", th.ID(), to, th.Version())
}

// ThreadsResetCommand empties a thread.
type ThreadsResetCommand struct {
	base
}

// Flags implements Command.
func (c *ThreadsResetCommand) Flags() *pflag.FlagSet { return c.flagSet() }

// Run implements Command.
func (c *ThreadsResetCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.positional(args, 1, 1)
	if err != nil {
		return err
	}
	db, th, err := c.openThread(ctx, pos[0])
	if err != nil {
		return err
	}
	defer db.Close()
	if err := th.Reset(ctx); err != nil {
		return fmt.Errorf("reset %s: %w", th.ID(), err)
	}
	return c.printThread(th, "reset %s (now version %d); undo with: loom threads rollback %s --version %d",
		th.ID(), th.Version(), th.ID(), th.Version()-1)
}

// ThreadsViewCommand shows a thread's view.
type ThreadsViewCommand struct {
	base
	Model       string
	Budget      int
	MaxMessages int
	Strategies  strategiesFlag
}

// Flags implements Command.
func (c *ThreadsViewCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.StringVar(&c.Model, "model", "", "the model `M` whose tokenizer counts (default: o200k_base)")
	fs.IntVar(&c.Budget, "budget", 0, "the most `N` tokens of the view (0: no limit)")
	fs.IntVar(&c.MaxMessages, "max-messages", 0, "the most `N` messages of the view (0: no limit)")
	fs.Var(&c.Strategies, "strategy", "a strategy `S`: drop_oldest, sliding_window:N or elide_tool_results:N (repeatable, in order)")
	return fs
}

// viewJSON is the --json output of threads view.
type viewJSON struct {
	Thread    string            `json:"thread"`
	Version   int64             `json:"version"`
	Tokens    int               `json:"tokens"`
	Messages  []message.Message `json:"messages"`
	Dropped   []string          `json:"dropped"`
	Elided    []string          `json:"elided"`
	Compacted string            `json:"compacted,omitzero"`
}

// Run implements Command.
func (c *ThreadsViewCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.positional(args, 1, 1)
	if err != nil {
		return err
	}
	if c.Budget < 0 || c.MaxMessages < 0 {
		return c.usage("--budget and --max-messages must not be negative")
	}
	db, th, err := c.openThread(ctx, pos[0])
	if err != nil {
		return err
	}
	defer db.Close()
	v, err := th.View(ctx, thread.ViewOptions{Model: c.Model, Budget: c.Budget, MaxMessages: c.MaxMessages, Strategies: c.Strategies.strategies})
	if err != nil {
		return err // it names the thread already
	}
	if c.JSON {
		out := viewJSON{Thread: th.ID(), Version: th.Version(), Tokens: v.Tokens, Messages: v.Messages,
			Dropped: v.Dropped, Elided: v.Elided, Compacted: v.Compacted}
		if out.Messages == nil {
			out.Messages = []message.Message{}
		}
		if out.Dropped == nil {
			out.Dropped = []string{}
		}
		if out.Elided == nil {
			out.Elided = []string{}
		}
		return writeJSON(c.Stdout, out)
	}
	printMessages(c.Stdout, v.Messages, v.Elided)
	if len(v.Messages) > 0 {
		fmt.Fprintln(c.Stdout)
	}
	fmt.Fprintf(c.Stdout, "%s, %d tokens; %d dropped, %d elided", plural(len(v.Messages), "message", "messages"), v.Tokens, len(v.Dropped), len(v.Elided))
	if v.Compacted != "" {
		fmt.Fprintf(c.Stdout, "; from compaction %s", v.Compacted)
	}
	_, err = fmt.Fprintln(c.Stdout)
	return err
}

// ThreadsDeleteCommand deletes a thread.
type ThreadsDeleteCommand struct {
	base
	Yes bool
}

// Flags implements Command.
func (c *ThreadsDeleteCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.BoolVar(&c.Yes, "yes", false, "delete without asking (needed when stdin is not a terminal)")
	return fs
}

// Run implements Command.
func (c *ThreadsDeleteCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.positional(args, 1, 1)
	if err != nil {
		return err
	}
	db, th, err := c.openThread(ctx, pos[0])
	if err != nil {
		return err
	}
	defer db.Close()
	if !c.Yes {
		if c.IsTerminal == nil || !c.IsTerminal(c.Stdin) {
			return c.usage("refusing to delete %s without --yes: stdin is not a terminal to ask on", th.ID())
		}
		n, err := th.Len(ctx)
		if err != nil {
			return err
		}
		what := th.ID()
		if th.Title() != "" {
			what += fmt.Sprintf(" (%q)", clip(th.Title(), 60))
		}
		fmt.Fprintf(c.Stderr, "Delete thread %s with %s, its history and checkpoints? This cannot be undone. [y/N] ",
			what, plural(int(n), "message", "messages"))
		answer, err := bufio.NewReader(c.Stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			if err != nil && answer == "" {
				fmt.Fprintln(c.Stderr)
				return fmt.Errorf("%s not deleted: no answer", th.ID())
			}
			return fmt.Errorf("%s not deleted", th.ID())
		}
	}
	if err := th.Delete(ctx); err != nil {
		return fmt.Errorf("delete %s: %w", th.ID(), err)
	}
	if c.JSON {
		return writeJSON(c.Stdout, map[string]string{"deleted": th.ID()})
	}
	_, err = fmt.Fprintf(c.Stdout, "deleted %s\n", th.ID())
	return err
}

// ThreadsDiffCommand shows the difference between two versions of a
// thread, or between a thread and another (a fork).
type ThreadsDiffCommand struct {
	base
	Version   int64
	To        string
	ToVersion int64
	Limit     int
}

// Flags implements Command.
func (c *ThreadsDiffCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.Int64Var(&c.Version, "version", 0, "compare the thread as it was at version `N` (0: now)")
	fs.StringVar(&c.To, "to", "", "compare with the thread `ID2`, such as a fork (default: the same thread)")
	fs.Int64Var(&c.ToVersion, "to-version", 0, "compare with --to (or the thread) as it was at version `M` (0: now)")
	fs.IntVar(&c.Limit, "limit", thread.DefaultDiffLimit, fmt.Sprintf("show at most `N` messages and N state keys (at most %d)", thread.MaxDiffLimit))
	return fs
}

// Run implements Command.
func (c *ThreadsDiffCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.positional(args, 1, 1)
	if err != nil {
		return err
	}
	if c.Version < 0 || c.ToVersion < 0 {
		return c.usage("--version and --to-version must not be negative")
	}
	if c.Limit < 1 || c.Limit > thread.MaxDiffLimit {
		return c.usage("--limit must be 1 to %d", thread.MaxDiffLimit)
	}
	db, th, err := c.openThread(ctx, pos[0])
	if err != nil {
		return err
	}
	defer db.Close()
	to := th.ID()
	if c.To != "" {
		// Read first for the error that names the store.
		other, err := getThread(ctx, db, c.To, c.Store)
		if err != nil {
			return err
		}
		to = other.ID()
	}
	d, err := db.Diff(ctx, thread.DiffQuery{Thread: th.ID(), Version: c.Version, To: to, ToVersion: c.ToVersion, Limit: c.Limit})
	if err != nil {
		return err // "diff: thread a: version 9: not found"
	}
	if c.JSON {
		return writeJSON(c.Stdout, d)
	}
	printDiff(c.Stdout, d, c.Limit)
	return nil
}

// printDiff writes a diff for people, as a unified diff of messages and
// state: a header for each side, the shared messages counted, then each
// message as "role: text" marked - (only from has it), + (only to has it)
// or a space (both), a changed message as its - and + lines; then the
// state keys that differ, "key: value" likewise.
func printDiff(w io.Writer, d *thread.Diff, limit int) {
	side := func(s thread.DiffSide) string {
		return fmt.Sprintf("%s  version %d  (%s)", s.Thread, s.Version, plural(int(s.Messages), "message", "messages"))
	}
	fmt.Fprintf(w, "--- %s\n+++ %s\n", side(d.From), side(d.To))
	if len(d.Entries) == 0 && len(d.State) == 0 {
		fmt.Fprintf(w, "no differences: %s shared\n", plural(int(d.Shared), "message", "messages"))
		return
	}
	switch {
	case len(d.Entries) == 0:
	case d.Shared == 0:
		fmt.Fprintln(w, "@@ messages, none shared @@")
	default:
		fmt.Fprintf(w, "@@ messages after %s @@\n", plural(int(d.Shared), "shared message", "shared messages"))
	}
	for _, e := range d.Entries {
		switch e.Change {
		case thread.DiffRemoved:
			printDiffMessage(w, "-", e.From)
		case thread.DiffAdded:
			printDiffMessage(w, "+", e.To)
		case thread.DiffChanged:
			printDiffMessage(w, "-", e.From)
			printDiffMessage(w, "+", e.To)
		default:
			printDiffMessage(w, " ", e.From)
		}
	}
	if len(d.State) > 0 {
		fmt.Fprintln(w, "@@ state @@")
	}
	for _, s := range d.State {
		if s.From != nil {
			fmt.Fprintf(w, "- %s: %s\n", s.Key, clip(string(s.From), 200))
		}
		if s.To != nil {
			fmt.Fprintf(w, "+ %s: %s\n", s.Key, clip(string(s.To), 200))
		}
	}
	if d.Truncated {
		fmt.Fprintf(w, "… cut at %d messages or state keys (--limit)\n", limit)
	}
}

// printDiffMessage writes m as "mark role: text", every line of it marked.
func printDiffMessage(w io.Writer, mark string, m *message.Message) {
	head := string(m.Role)
	if m.AuthorName != "" {
		head += " (" + m.AuthorName + ")"
	}
	var parts []string
	for _, c := range m.Contents {
		parts = append(parts, formatContent(c))
	}
	for i, line := range strings.Split(strings.Join(parts, "\n"), "\n") {
		if i == 0 {
			fmt.Fprintf(w, "%s %s: %s\n", mark, head, line)
			continue
		}
		fmt.Fprintf(w, "%s   %s\n", mark, line)
	}
}
