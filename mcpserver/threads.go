package mcpserver

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/tokens"
)

// Limits of the tools' listings.
const (
	// defaultLimit is the page size of thread_list and thread_history when
	// the call gives none.
	defaultLimit = 50
	// maxLimit caps a page, and the messages thread_get returns.
	maxLimit = 1000
)

// Register adds loom's thread tools (thread_list, thread_get,
// thread_create, thread_append, thread_view, thread_fork,
// thread_checkpoint, thread_rollback, thread_history and thread_search) to s, working on
// db. Each call is scoped to the tenant in its context (see New); internal
// errors are logged to slog.Default().
func Register(s *mcp.Server, db *thread.DB) {
	register(s, db, slog.Default())
}

// threadTools holds what the thread tools work on.
type threadTools struct {
	db *thread.DB
}

// scoped returns the DB of the tenant that ctx carries, or db's own.
func (t *threadTools) scoped(ctx context.Context) *thread.DB {
	if tenant, ok := auth.Tenant(ctx); ok && tenant != t.db.Tenant() {
		return t.db.WithTenant(tenant)
	}
	return t.db
}

// thread returns a handle on the thread id of the caller's tenant.
func (t *threadTools) thread(ctx context.Context, id string) (*thread.Thread, error) {
	if id == "" {
		return nil, fmt.Errorf("id is required: %w", thread.ErrInvalid)
	}
	return t.scoped(ctx).Thread(ctx, id)
}

func register(s *mcp.Server, db *thread.DB, logger *slog.Logger) *threadTools {
	t := &threadTools{db: db}
	no := new(bool)
	read := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: no}
	write := &mcp.ToolAnnotations{DestructiveHint: no, OpenWorldHint: no}
	AddTool(s, &mcp.Tool{
		Name:        "thread_list",
		Title:       "Threads: list",
		Description: "Threads: list the conversation threads, most recently updated first or by id, filtered by labels and kind, a page at a time: pass next_cursor back as cursor for the next page. loom's own threads (work-item logs, sessions, workflows' sub-threads) are left out unless internal is include or only.",
		Annotations: read,
	}, logger, t.list)
	AddTool(s, &mcp.Tool{
		Name:        "thread_get",
		Title:       "Threads: get",
		Description: "Threads: get a thread: its record, its checkpoints and, optionally, its newest messages (in loom's wire format), now or as they were at an earlier version.",
		Annotations: read,
	}, logger, t.get)
	AddTool(s, &mcp.Tool{
		Name:        "thread_create",
		Title:       "Threads: create",
		Description: "Threads: create a thread, optionally with a title, labels and first messages.",
		Annotations: write,
	}, logger, t.create)
	AddTool(s, &mcp.Tool{
		Name:        "thread_append",
		Title:       "Threads: append messages",
		Description: `Threads: append messages to a thread in one commit. A message is {"role":"user","text":"…"} or loom's wire format. With if_version, append only if the thread is still at that version (conflict otherwise).`,
		Annotations: write,
	}, logger, t.append)
	AddTool(s, &mcp.Tool{
		Name:        "thread_view",
		Title:       "Threads: view for a model",
		Description: "Threads: the messages of a thread to send a model, within a token budget and a message count: instructions, system and pinned messages and the newest user message are always kept, tool calls are never split from their results, and strategies (drop_oldest, sliding_window, elide_tool_results) decide what goes first. Nothing is written.",
		Annotations: read,
	}, logger, t.view)
	AddTool(s, &mcp.Tool{
		Name:        "thread_fork",
		Title:       "Threads: fork",
		Description: "Threads: fork a thread: a new thread that shares its messages up to and including the message at (or the head), as of now or of an earlier version. Nothing is copied.",
		Annotations: write,
	}, logger, t.fork)
	AddTool(s, &mcp.Tool{
		Name:        "thread_checkpoint",
		Title:       "Threads: checkpoint",
		Description: "Threads: name the thread's current head so that thread_rollback can return to it. Names are unique per thread.",
		Annotations: write,
	}, logger, t.checkpoint)
	AddTool(s, &mcp.Tool{
		Name:        "thread_rollback",
		Title:       "Threads: roll back",
		Description: "Threads: move a thread's head back to a checkpoint, or to where it was at a version. It is a new version: nothing is lost, and the abandoned head can be restored by version.",
		Annotations: write,
	}, logger, t.rollback)
	AddTool(s, &mcp.Tool{
		Name:        "thread_history",
		Title:       "Threads: history",
		Description: "Threads: a thread's history, newest first: every head move with its version, commit, operation and time. Page with before.",
		Annotations: read,
	}, logger, t.history)
	AddTool(s, &mcp.Tool{
		Name:        "thread_search",
		Title:       "Threads: search messages",
		Description: "Threads: find messages of the caller's threads whose text (text, reasoning, tool calls and results) holds every word of query: whole words, any case and order, newest first, in every version a thread keeps. Each hit names its thread and shows a snippet. Page with before.",
		Annotations: read,
	}, logger, t.search)
	registerWorkflows(s, t, logger)
	return t
}

// pageLimit checks a page size: 0 means defaultLimit, more than maxLimit
// is maxLimit.
func pageLimit(n int) (int, error) {
	switch {
	case n < 0:
		return 0, fmt.Errorf("limit %d: must not be negative: %w", n, thread.ErrInvalid)
	case n == 0:
		return defaultLimit, nil
	case n > maxLimit:
		return maxLimit, nil
	}
	return n, nil
}

// --- thread_list

type listIn struct {
	Labels map[string]string `json:"labels,omitzero" jsonschema:"only threads that have all these labels with these values"`
	Kind   thread.Kind       `json:"kind,omitzero" jsonschema:"only threads of this kind"`
	Limit  int               `json:"limit,omitzero" jsonschema:"the most threads to return: 50 when left out, at most 1000"`
	Cursor string            `json:"cursor,omitzero" jsonschema:"next_cursor of the previous page"`
	Desc   bool              `json:"desc,omitzero" jsonschema:"newest first by id (as order newest)"`
	Order  string            `json:"order,omitzero" jsonschema:"id (the default), newest (by id, newest first) or updated (most recently updated first)"`
	// Internal is a string rather than a bool so that only can be asked.
	Internal string `json:"internal,omitzero" jsonschema:"exclude (the default) leaves out loom's own threads (work-item logs, sessions, workflows' sub-threads), include lists them too, only lists them alone"`
}

type listOut struct {
	Threads    []threadInfo `json:"threads"`
	NextCursor string       `json:"next_cursor,omitzero" jsonschema:"set when there are more threads: pass it as cursor"`
}

func (o listOut) Summary() string {
	var b strings.Builder
	b.WriteString(count(len(o.Threads), "thread"))
	if o.NextCursor != "" {
		fmt.Fprintf(&b, " (more: cursor %s)", o.NextCursor)
	}
	for _, ti := range o.Threads {
		b.WriteString("\n")
		b.WriteString(ti.line())
	}
	return b.String()
}

func (t *threadTools) list(ctx context.Context, in listIn) (listOut, error) {
	limit, err := pageLimit(in.Limit)
	if err != nil {
		return listOut{}, err
	}
	out := listOut{Threads: []threadInfo{}}
	opts := thread.ListOptions{Labels: in.Labels, Kind: in.Kind, After: in.Cursor, Desc: in.Desc, Limit: limit + 1}
	switch in.Order {
	case "", "id":
	case "newest":
		opts.Desc = true
	case "updated":
		opts.Order = thread.OrderUpdated
		if in.Cursor != "" {
			// The cursor of this order is "micros:id" (ids have no ':').
			micros, id, ok := strings.Cut(in.Cursor, ":")
			n, err := strconv.ParseInt(micros, 10, 64)
			if !ok || err != nil {
				return listOut{}, fmt.Errorf("cursor %q: not a next_cursor of order updated: %w", clip(in.Cursor, 64), thread.ErrInvalid)
			}
			opts.After, opts.AfterUpdated = id, time.UnixMicro(n).UTC()
		}
	default:
		return listOut{}, fmt.Errorf("order %q: id, newest or updated: %w", clip(in.Order, 64), thread.ErrInvalid)
	}
	switch in.Internal {
	case "", "exclude":
		opts.Internal = thread.InternalExclude
	case "include":
		opts.Internal = thread.InternalInclude
	case "only":
		opts.Internal = thread.InternalOnly
	default:
		return listOut{}, fmt.Errorf("internal %q: exclude, include or only: %w", clip(in.Internal, 64), thread.ErrInvalid)
	}
	var last thread.Record
	for th, err := range t.scoped(ctx).Threads(ctx, opts) {
		if err != nil {
			return listOut{}, err
		}
		if len(out.Threads) == limit {
			out.NextCursor = last.ID
			if opts.Order == thread.OrderUpdated {
				out.NextCursor = strconv.FormatInt(last.UpdatedAt.UnixMicro(), 10) + ":" + last.ID
			}
			break
		}
		last = th.Record()
		out.Threads = append(out.Threads, info(last))
	}
	return out, nil
}

// --- thread_get

type getIn struct {
	ID       string `json:"id" jsonschema:"the thread's id"`
	Messages int    `json:"messages,omitzero" jsonschema:"how many of the newest messages to return: none when left out, at most 1000"`
	Version  int64  `json:"version,omitzero" jsonschema:"read the messages as they were at this version (see thread_history); the current version when left out"`
	Before   string `json:"before,omitzero" jsonschema:"return the messages before the message with this id (the id of the first message of the last page, to page back) rather than the newest"`
}

type getOut struct {
	Thread      threadInfo        `json:"thread"`
	Length      int64             `json:"length" jsonschema:"how many messages the thread has at its current version"`
	Checkpoints []checkpointInfo  `json:"checkpoints" jsonschema:"the thread's checkpoints, by name"`
	Messages    []message.Message `json:"messages,omitzero" jsonschema:"the newest messages asked for, oldest first"`
}

func (o getOut) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "thread %s, %s", o.Thread.line(), count(int(o.Length), "message"))
	if len(o.Checkpoints) > 0 {
		b.WriteString("\ncheckpoints:")
		for _, cp := range o.Checkpoints {
			fmt.Fprintf(&b, " %s (version %d)", cp.Name, cp.Version)
		}
	}
	if len(o.Messages) > 0 {
		fmt.Fprintf(&b, "\nlast %s:", count(len(o.Messages), "message"))
		writeMessages(&b, o.Messages)
	}
	return b.String()
}

func (t *threadTools) get(ctx context.Context, in getIn) (getOut, error) {
	if in.Messages < 0 || in.Messages > maxLimit {
		return getOut{}, fmt.Errorf("messages %d: from 0 to %d: %w", in.Messages, maxLimit, thread.ErrInvalid)
	}
	if in.Version < 0 {
		return getOut{}, fmt.Errorf("version %d: must not be negative: %w", in.Version, thread.ErrInvalid)
	}
	if in.Before != "" && in.Messages == 0 {
		return getOut{}, fmt.Errorf("before needs messages, how many to return: %w", thread.ErrInvalid)
	}
	th, err := t.thread(ctx, in.ID)
	if err != nil {
		return getOut{}, err
	}
	out := getOut{Thread: info(th.Record()), Checkpoints: []checkpointInfo{}}
	if out.Length, err = th.Len(ctx); err != nil {
		return getOut{}, err
	}
	for cp, err := range th.Checkpoints(ctx) {
		if err != nil {
			return getOut{}, err
		}
		out.Checkpoints = append(out.Checkpoints, checkpoint(cp))
	}
	if in.Messages > 0 {
		if out.Messages, err = th.Messages(ctx, thread.ReadOptions{Version: in.Version, Last: in.Messages, Before: in.Before}); err != nil {
			return getOut{}, err
		}
	}
	return out, nil
}

// --- thread_create

type createIn struct {
	ID       string            `json:"id,omitzero" jsonschema:"the new thread's id; a fresh one when left out"`
	Title    string            `json:"title,omitzero"`
	Labels   map[string]string `json:"labels,omitzero" jsonschema:"filterable key-value pairs"`
	Messages []inMessage       `json:"messages,omitzero" jsonschema:"the thread's first messages"`
}

type createOut struct {
	Thread   threadInfo        `json:"thread"`
	Messages []message.Message `json:"messages,omitzero" jsonschema:"the messages as stored, with their ids"`
}

func (o createOut) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "created thread %s with %s", o.Thread.line(), count(len(o.Messages), "message"))
	writeMessages(&b, o.Messages)
	return b.String()
}

func (t *threadTools) create(ctx context.Context, in createIn) (createOut, error) {
	msgs, err := messages("messages", in.Messages)
	if err != nil {
		return createOut{}, err
	}
	th, err := t.scoped(ctx).Create(ctx, thread.CreateOptions{ID: in.ID, Title: in.Title, Labels: in.Labels, Messages: msgs})
	if err != nil {
		return createOut{}, err
	}
	out := createOut{Thread: info(th.Record())}
	if len(msgs) > 0 {
		// The messages as stored, with the ids and times the thread gave them.
		if out.Messages, err = th.Messages(ctx, thread.ReadOptions{Last: len(msgs)}); err != nil {
			return createOut{}, err
		}
	}
	return out, nil
}

// --- thread_append

type appendIn struct {
	ID        string      `json:"id" jsonschema:"the thread's id"`
	Messages  []inMessage `json:"messages" jsonschema:"the messages to append, oldest first"`
	IfVersion int64       `json:"if_version,omitzero" jsonschema:"append only if the thread is at this version; left out, the append goes on top of whatever is there"`
}

type appendOut struct {
	Thread   string            `json:"thread"`
	Version  int64             `json:"version" jsonschema:"the thread's version after the append"`
	Commit   string            `json:"commit" jsonschema:"the commit that holds the messages"`
	Messages []message.Message `json:"messages" jsonschema:"the messages as stored, with their ids"`
}

func (o appendOut) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "appended %s to %s, now at version %d", count(len(o.Messages), "message"), o.Thread, o.Version)
	writeMessages(&b, o.Messages)
	return b.String()
}

func (t *threadTools) append(ctx context.Context, in appendIn) (appendOut, error) {
	if len(in.Messages) == 0 {
		return appendOut{}, fmt.Errorf("messages: at least one is required: %w", thread.ErrInvalid)
	}
	if in.IfVersion < 0 {
		return appendOut{}, fmt.Errorf("if_version %d: must not be negative: %w", in.IfVersion, thread.ErrInvalid)
	}
	msgs, err := messages("messages", in.Messages)
	if err != nil {
		return appendOut{}, err
	}
	th, err := t.thread(ctx, in.ID)
	if err != nil {
		return appendOut{}, err
	}
	c, err := th.Commit(ctx, thread.CommitOptions{Messages: msgs, IfVersion: in.IfVersion})
	if err != nil {
		return appendOut{}, err
	}
	return appendOut{Thread: th.ID(), Version: th.Version(), Commit: c.ID, Messages: c.Messages}, nil
}

// --- thread_view

// strategyType names a view strategy.
type strategyType string

type strategyIn struct {
	Type     strategyType `json:"type" jsonschema:"drop_oldest: drop the oldest messages until the view fits; sliding_window: keep only the last turns user turns; elide_tool_results: replace older tool results by a short stub while the view does not fit"`
	Turns    int          `json:"turns,omitzero" jsonschema:"sliding_window: how many user turns to keep, at least 1"`
	KeepLast int          `json:"keep_last,omitzero" jsonschema:"elide_tool_results: how many of the newest tool messages keep their results"`
	Stub     string       `json:"stub,omitzero" jsonschema:"elide_tool_results: the text that replaces a result; {bytes} and {name} are replaced"`
}

func (s strategyIn) strategy(i int) (thread.Strategy, error) {
	switch s.Type {
	case "drop_oldest":
		return thread.DropOldest{}, nil
	case "sliding_window":
		if s.Turns < 1 {
			return nil, fmt.Errorf("strategies[%d]: sliding_window needs turns of at least 1: %w", i, thread.ErrInvalid)
		}
		return thread.SlidingWindow{Turns: s.Turns}, nil
	case "elide_tool_results":
		if s.KeepLast < 0 {
			return nil, fmt.Errorf("strategies[%d]: keep_last must not be negative: %w", i, thread.ErrInvalid)
		}
		return thread.ElideToolResults{KeepLast: s.KeepLast, Stub: s.Stub}, nil
	}
	return nil, fmt.Errorf("strategies[%d]: unknown type %q: %w", i, s.Type, thread.ErrInvalid)
}

type viewIn struct {
	ID           string       `json:"id" jsonschema:"the thread's id"`
	Version      int64        `json:"version,omitzero" jsonschema:"view the thread as it was at this version; the current version when left out"`
	Model        string       `json:"model,omitzero" jsonschema:"the model the view is for, which picks the tokenizer (such as gpt-4.1 or claude-sonnet-4); o200k_base when left out"`
	Encoding     string       `json:"encoding,omitzero" jsonschema:"the tokenizer by name (o200k_base or cl100k_base), instead of the model's"`
	Budget       int          `json:"budget,omitzero" jsonschema:"the most tokens of the whole view; no token limit when left out"`
	MaxMessages  int          `json:"max_messages,omitzero" jsonschema:"the most messages of the view; no limit when left out"`
	Instructions string       `json:"instructions,omitzero" jsonschema:"a system message that comes first and is always kept, counted in the budget; it is not in the thread"`
	Pinned       []string     `json:"pinned,omitzero" jsonschema:"ids of messages that must be kept"`
	Strategies   []strategyIn `json:"strategies,omitzero" jsonschema:"how to make the view fit, applied in order; drop_oldest alone when left out, and what is still over the limits is dropped oldest first"`
}

type viewOut struct {
	Thread    string            `json:"thread"`
	Version   int64             `json:"version" jsonschema:"the version viewed"`
	Messages  []message.Message `json:"messages" jsonschema:"the messages to send, oldest first, instructions included"`
	Tokens    int               `json:"tokens" jsonschema:"the tokens of the messages, with the reply's priming"`
	Dropped   []string          `json:"dropped,omitzero" jsonschema:"ids of the messages read and left out"`
	Elided    []string          `json:"elided,omitzero" jsonschema:"ids of the messages whose tool results were replaced by a stub"`
	Compacted string            `json:"compacted,omitzero" jsonschema:"the compact commit the view stopped at"`
}

func (o viewOut) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "view of %s at version %d: %s, %d tokens", o.Thread, o.Version, count(len(o.Messages), "message"), o.Tokens)
	if len(o.Dropped) > 0 {
		fmt.Fprintf(&b, ", %d dropped", len(o.Dropped))
	}
	if len(o.Elided) > 0 {
		fmt.Fprintf(&b, ", %d elided", len(o.Elided))
	}
	writeMessages(&b, o.Messages)
	return b.String()
}

func (t *threadTools) view(ctx context.Context, in viewIn) (viewOut, error) {
	switch {
	case in.Version < 0:
		return viewOut{}, fmt.Errorf("version %d: must not be negative: %w", in.Version, thread.ErrInvalid)
	case in.Budget < 0:
		return viewOut{}, fmt.Errorf("budget %d: must not be negative: %w", in.Budget, thread.ErrInvalid)
	case in.MaxMessages < 0:
		return viewOut{}, fmt.Errorf("max_messages %d: must not be negative: %w", in.MaxMessages, thread.ErrInvalid)
	}
	opts := thread.ViewOptions{Version: in.Version, Model: in.Model, Budget: in.Budget, MaxMessages: in.MaxMessages, Pinned: in.Pinned}
	if in.Encoding != "" {
		enc, ok := tokens.EncodingByName(in.Encoding)
		if !ok {
			return viewOut{}, fmt.Errorf("encoding %q: o200k_base or cl100k_base: %w", in.Encoding, thread.ErrInvalid)
		}
		opts.Encoding = enc
	}
	if in.Instructions != "" {
		opts.Instructions = []message.Message{message.System(in.Instructions)}
	}
	for i, s := range in.Strategies {
		st, err := s.strategy(i)
		if err != nil {
			return viewOut{}, err
		}
		opts.Strategies = append(opts.Strategies, st)
	}
	th, err := t.thread(ctx, in.ID)
	if err != nil {
		return viewOut{}, err
	}
	v, err := th.View(ctx, opts)
	if err != nil {
		return viewOut{}, err
	}
	version := in.Version
	if version == 0 {
		version = th.Version()
	}
	return viewOut{
		Thread: th.ID(), Version: version, Messages: v.Messages, Tokens: v.Tokens,
		Dropped: v.Dropped, Elided: v.Elided, Compacted: v.Compacted,
	}, nil
}

// --- thread_fork

type forkIn struct {
	ID      string            `json:"id" jsonschema:"the thread to fork"`
	At      string            `json:"at,omitzero" jsonschema:"the id of the last message the fork keeps; the head when left out"`
	Version int64             `json:"version,omitzero" jsonschema:"fork the thread as it was at this version; the current version when left out"`
	Title   string            `json:"title,omitzero" jsonschema:"the new thread's title; the source's when left out"`
	Labels  map[string]string `json:"labels,omitzero" jsonschema:"the new thread's labels; the source's when left out"`
	NewID   string            `json:"new_id,omitzero" jsonschema:"the new thread's id; a fresh one when left out (as the HTTP API's and loom fork's --id)"`
}

type forkOut struct {
	Thread threadInfo `json:"thread" jsonschema:"the new thread"`
}

func (o forkOut) Summary() string { return "forked into thread " + o.Thread.line() }

func (t *threadTools) fork(ctx context.Context, in forkIn) (forkOut, error) {
	th, err := t.thread(ctx, in.ID)
	if err != nil {
		return forkOut{}, err
	}
	// A negative version is thread's to refuse (ErrInvalid), as every
	// other rule of a fork.
	f, err := th.Fork(ctx, thread.ForkOptions{ID: in.NewID, At: in.At, Version: in.Version, Title: in.Title, Labels: in.Labels})
	if err != nil {
		return forkOut{}, err
	}
	return forkOut{Thread: info(f.Record())}, nil
}

// --- thread_checkpoint

type checkpointIn struct {
	ID   string `json:"id" jsonschema:"the thread's id"`
	Name string `json:"name" jsonschema:"the checkpoint's name, unique in the thread"`
}

type checkpointOut struct {
	Thread     string         `json:"thread"`
	Checkpoint checkpointInfo `json:"checkpoint"`
}

func (o checkpointOut) Summary() string {
	return fmt.Sprintf("checkpoint %s of %s at version %d (commit %s)", o.Checkpoint.Name, o.Thread, o.Checkpoint.Version, o.Checkpoint.Commit)
}

func (t *threadTools) checkpoint(ctx context.Context, in checkpointIn) (checkpointOut, error) {
	th, err := t.thread(ctx, in.ID)
	if err != nil {
		return checkpointOut{}, err
	}
	cp, err := th.Checkpoint(ctx, in.Name)
	if err != nil {
		return checkpointOut{}, err
	}
	return checkpointOut{Thread: th.ID(), Checkpoint: checkpoint(cp)}, nil
}

// --- thread_rollback

type rollbackIn struct {
	ID         string `json:"id" jsonschema:"the thread's id"`
	Checkpoint string `json:"checkpoint,omitzero" jsonschema:"the checkpoint to go back to; give checkpoint or version"`
	Version    int64  `json:"version,omitzero" jsonschema:"the version whose head to go back (or forward) to; give checkpoint or version"`
}

type rollbackOut struct {
	Thread threadInfo `json:"thread" jsonschema:"the thread after the move"`
}

func (o rollbackOut) Summary() string { return "rolled back thread " + o.Thread.line() }

func (t *threadTools) rollback(ctx context.Context, in rollbackIn) (rollbackOut, error) {
	if (in.Checkpoint == "") == (in.Version == 0) {
		return rollbackOut{}, fmt.Errorf("give checkpoint or version, not both nor neither: %w", thread.ErrInvalid)
	}
	if in.Version < 0 {
		return rollbackOut{}, fmt.Errorf("version %d: must not be negative: %w", in.Version, thread.ErrInvalid)
	}
	th, err := t.thread(ctx, in.ID)
	if err != nil {
		return rollbackOut{}, err
	}
	if in.Checkpoint != "" {
		err = th.Rollback(ctx, in.Checkpoint)
	} else {
		err = th.Restore(ctx, in.Version)
	}
	if err != nil {
		return rollbackOut{}, err
	}
	return rollbackOut{Thread: info(th.Record())}, nil
}

// --- thread_history

type historyIn struct {
	ID     string `json:"id" jsonschema:"the thread's id"`
	Limit  int    `json:"limit,omitzero" jsonschema:"the most entries to return: 50 when left out, at most 1000"`
	Before int64  `json:"before,omitzero" jsonschema:"list the versions below this one (next_before of the previous page); from the newest when left out"`
}

type historyEntry struct {
	Version int64     `json:"version"`
	Commit  string    `json:"commit,omitzero" jsonschema:"the head commit after the move; empty for the empty root"`
	Op      thread.Op `json:"op" jsonschema:"what moved the head: create, append, fork, rollback, restore, reset, compact, …"`
	Time    time.Time `json:"time"`
}

type historyOut struct {
	Thread     string         `json:"thread"`
	Entries    []historyEntry `json:"entries" jsonschema:"newest first"`
	NextBefore int64          `json:"next_before,omitzero" jsonschema:"set when there are older entries: pass it as before"`
}

func (o historyOut) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "history of %s: %s", o.Thread, count(len(o.Entries), "version"))
	if o.NextBefore != 0 {
		fmt.Fprintf(&b, " (more: before %d)", o.NextBefore)
	}
	for _, e := range o.Entries {
		fmt.Fprintf(&b, "\nversion %d: %s %s at %s", e.Version, e.Op, orEmpty(e.Commit), e.Time.Format(time.RFC3339))
	}
	return b.String()
}

// orEmpty names the empty root commit.
func orEmpty(commit string) string {
	if commit == "" {
		return "(empty)"
	}
	return commit
}

func (t *threadTools) history(ctx context.Context, in historyIn) (historyOut, error) {
	return historyPage(ctx, in, func() (string, historyFunc, error) {
		th, err := t.thread(ctx, in.ID)
		if err != nil {
			return "", nil, err
		}
		return th.ID(), th.History, nil
	})
}

// historyFunc is Thread.History or Workflow.History.
type historyFunc = func(context.Context, thread.HistoryOptions) iter.Seq2[thread.HistoryEntry, error]

// historyPage checks in, then opens what it names and reads a page of its
// history.
func historyPage(ctx context.Context, in historyIn, open func() (string, historyFunc, error)) (historyOut, error) {
	limit, err := pageLimit(in.Limit)
	if err != nil {
		return historyOut{}, err
	}
	if in.Before < 0 {
		return historyOut{}, fmt.Errorf("before %d: must not be negative: %w", in.Before, thread.ErrInvalid)
	}
	id, history, err := open()
	if err != nil {
		return historyOut{}, err
	}
	out := historyOut{Thread: id, Entries: []historyEntry{}}
	for e, err := range history(ctx, thread.HistoryOptions{Before: in.Before, Limit: limit + 1}) {
		if err != nil {
			return historyOut{}, err
		}
		if len(out.Entries) == limit {
			out.NextBefore = out.Entries[limit-1].Version
			break
		}
		out.Entries = append(out.Entries, historyEntry{Version: e.Version, Commit: e.Commit, Op: e.Op, Time: e.Time})
	}
	return out, nil
}

type searchIn struct {
	Query  string `json:"query" jsonschema:"the words to find, 1 to 16 of them"`
	Limit  int    `json:"limit,omitzero" jsonschema:"the most hits to return: 20 when left out, at most 1000"`
	Before string `json:"before,omitzero" jsonschema:"the next of the previous page"`
}

type searchHit struct {
	Thread  string          `json:"thread" jsonschema:"the thread that committed the message"`
	Commit  string          `json:"commit" jsonschema:"the commit that holds the message"`
	Index   int             `json:"index" jsonschema:"the message's index among the commit's messages"`
	Message message.Message `json:"message"`
	Snippet string          `json:"snippet" jsonschema:"the text around the first word found"`
	Time    time.Time       `json:"time"`
}

type searchOut struct {
	Hits []searchHit `json:"hits"`
	Next string      `json:"next,omitzero" jsonschema:"pass as before for the next page; absent on the last page"`
}

func (t *threadTools) search(ctx context.Context, in searchIn) (searchOut, error) {
	limit := in.Limit
	if limit == 0 {
		limit = 20
	}
	hits, err := t.scoped(ctx).Search(ctx, thread.SearchQuery{Text: in.Query, Limit: limit, Before: in.Before})
	if err != nil {
		return searchOut{}, err
	}
	out := searchOut{Hits: make([]searchHit, 0, len(hits))}
	for _, h := range hits {
		out.Hits = append(out.Hits, searchHit{Thread: h.Thread, Commit: h.Commit, Index: h.Index, Message: h.Message, Snippet: h.Snippet, Time: h.Time})
	}
	if len(hits) == limit {
		out.Next = hits[len(hits)-1].Cursor
	}
	return out, nil
}
