package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
)

// worklogDir is the flags of the items and session commands that say where
// the work items are: the directory --dir, as `loom mcp --worklog` takes
// it, or with --in-store the work log of --store, as `loom serve` keeps
// it for /v1/items and the tools of /mcp.
type worklogDir struct {
	Dir string
	// Sessions is where the session records of Dir are kept (--sessions):
	// "" means sessions.json in Dir. With InStore they are the store's.
	Sessions string
	// InStore keeps the items in the store's work log (--in-store).
	InStore bool
	// Project is the project (--project); "" means worklog.DefaultProject.
	Project string
	// closers close what openLog opened besides the Log.
	closers []func() error
}

func (w *worklogDir) add(fs *pflag.FlagSet) {
	fs.StringVar(&w.Dir, "dir", worklog.DefaultDir, "the `DIR` of threads.json and sessions.json")
	fs.StringVar(&w.Sessions, "sessions", "", "where the session records of --dir are kept, to carry items across machines: any store URL (sqlite://PATH, postgres://…, redis://…), or file://DIR for a sessions.json (default: sessions.json in --dir; with --in-store they are the store's)")
	fs.BoolVar(&w.InStore, "in-store", false, "the items of --store (and --tenant), as loom serve keeps them, rather than of --dir")
	fs.StringVar(&w.Project, "project", "", "the `P`roject whose items to use (default: "+worklog.DefaultProject+")")
}

// openLog opens the Log of the items in --dir, or with --in-store of the
// store rawURL as tenant sees it, with the session store of --sessions;
// closeLog closes what it opened.
func (w *worklogDir) openLog(ctx context.Context, store, tenant string) (*worklog.Log, error) {
	opts := &worklog.Options{Project: w.Project}
	if w.InStore && w.Sessions != "" {
		return nil, errorOf(thread.ErrInvalid, "--in-store keeps the session records in the store, as loom serve does: --sessions does not apply")
	}
	if w.Sessions != "" {
		ss, err := worklog.OpenSessions(ctx, w.Sessions)
		if err != nil {
			return nil, err
		}
		opts.Sessions = ss
		if c, ok := ss.(io.Closer); ok {
			w.closers = append(w.closers, c.Close)
		}
	}
	if !w.InStore {
		return worklog.Open(w.Dir, opts)
	}
	db, err := openDB(ctx, store, tenant)
	if err != nil {
		return nil, err
	}
	w.closers = append(w.closers, db.Close)
	if err := importFileSessions(ctx, store, db, slog.New(slog.DiscardHandler)); err != nil {
		return nil, err
	}
	// Items and session records in the store's threads of the tenant, as
	// loom serve keeps them.
	return worklog.OpenDB(db, opts)
}

// closeLog closes what openLog opened besides the Log.
func (w *worklogDir) closeLog() {
	for _, c := range w.closers {
		c()
	}
	w.closers = nil
}

// itemTextWidth is how much of an item's text the tables show.
const itemTextWidth = 70

// ItemsListCommand lists work items.
type ItemsListCommand struct {
	base
	worklogDir
	Status string
	All    bool
}

// Flags implements Command.
func (c *ItemsListCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	c.worklogDir.add(fs)
	fs.StringVar(&c.Status, "status", "open", "list the items of status `S`: open or resolved")
	fs.BoolVar(&c.All, "all", false, "list every item, open and resolved")
	return fs
}

// Run implements Command.
func (c *ItemsListCommand) Run(ctx context.Context, args []string) error {
	if _, err := c.positional(args, 0, 0); err != nil {
		return err
	}
	status := worklog.Status(c.Status)
	if status != worklog.StatusOpen && status != worklog.StatusResolved {
		return c.usage("--status must be open or resolved, not %q", c.Status)
	}
	wl, err := c.openLog(ctx, c.Store, c.Tenant)
	defer c.closeLog()
	if err != nil {
		return err
	}
	res, err := wl.List(ctx, worklog.ListOptions{Status: status, IncludeResolved: c.All})
	if err != nil {
		return fmt.Errorf("list items: %w", err)
	}
	if c.JSON {
		if res.Threads == nil {
			res.Threads = []worklog.Item{}
		}
		return writeJSON(c.Stdout, res)
	}
	t := newTable(c.Stdout, "ID", "STATUS", "CREATED", "TEXT")
	for _, it := range res.Threads {
		t.row(it.ID, string(it.Status), formatTime(it.CreatedAt), clip(it.Text, itemTextWidth))
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.Stdout, "%d open, %d resolved\n", res.TotalOpen, res.TotalResolved)
	return err
}

// ItemsCreateCommand creates a work item.
type ItemsCreateCommand struct {
	base
	worklogDir
}

// Flags implements Command.
func (c *ItemsCreateCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	c.worklogDir.add(fs)
	return fs
}

// Run implements Command.
func (c *ItemsCreateCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.positional(args, 1, -1)
	if err != nil {
		return err
	}
	text := strings.Join(pos, " ")
	if strings.TrimSpace(text) == "" {
		return c.usage("the item's text is blank")
	}
	wl, err := c.openLog(ctx, c.Store, c.Tenant)
	defer c.closeLog()
	if err != nil {
		return err
	}
	res, err := wl.Create(ctx, worklog.CreateOptions{Text: text})
	if err != nil {
		return fmt.Errorf("create item: %w", err)
	}
	if c.JSON {
		return writeJSON(c.Stdout, res)
	}
	verb := "created"
	if res.Deduplicated {
		verb = "already open"
	}
	_, err = fmt.Fprintf(c.Stdout, "%s %s: %s\n", verb, res.Thread.ID, res.Thread.Text)
	return err
}

// ItemsResolveCommand resolves a work item.
type ItemsResolveCommand struct {
	base
	worklogDir
	Match string
	Note  string
}

// Flags implements Command.
func (c *ItemsResolveCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	c.worklogDir.add(fs)
	fs.StringVar(&c.Match, "match", "", "resolve the item whose text contains `TEXT` (case ignored)")
	fs.StringVar(&c.Note, "note", "", "the resolution `NOTE`")
	return fs
}

// Run implements Command.
func (c *ItemsResolveCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.positional(args, 0, 1)
	if err != nil {
		return err
	}
	opts := worklog.ResolveOptions{Note: c.Note}
	switch {
	case len(pos) == 1 && c.Match != "":
		return c.usage("give an ID or --match, not both")
	case len(pos) == 1:
		opts.ID = pos[0]
	case strings.TrimSpace(c.Match) != "":
		opts.TextMatch = c.Match
	default:
		return c.usage("missing the item: ID, #N or --match TEXT")
	}
	wl, err := c.openLog(ctx, c.Store, c.Tenant)
	defer c.closeLog()
	if err != nil {
		return err
	}
	res, err := wl.Resolve(ctx, opts)
	if amb := (*worklog.AmbiguousError)(nil); errors.As(err, &amb) {
		var b strings.Builder
		fmt.Fprintf(&b, "%q matches %d items; resolve one by its id:", amb.Query, len(amb.Candidates))
		for _, it := range amb.Candidates {
			fmt.Fprintf(&b, "\n  %s  %-8s  %s", it.ID, it.Status, clip(oneLine(it.Text), itemTextWidth))
		}
		return errorOf(worklog.ErrAmbiguous, "%s", b.String())
	}
	if errors.Is(err, worklog.ErrNotFound) {
		what := opts.ID
		if what == "" {
			what = fmt.Sprintf("matching %q", opts.TextMatch)
		}
		return errorOf(worklog.ErrNotFound, "no item %s in %s", what, c.Dir)
	}
	if err != nil {
		return fmt.Errorf("resolve item: %w", err)
	}
	if c.JSON {
		return writeJSON(c.Stdout, res)
	}
	verb := "resolved"
	if res.AlreadyResolved {
		verb = "already resolved"
	}
	fmt.Fprintf(c.Stdout, "%s %s: %s\n", verb, res.ResolvedThread.ID, res.ResolvedThread.Text)
	for _, it := range res.AlsoResolved {
		fmt.Fprintf(c.Stdout, "resolved %s too: %s\n", it.ID, it.Text)
	}
	return nil
}

// SessionStartCommand starts a working session.
type SessionStartCommand struct {
	base
	worklogDir
	ID string
}

// Flags implements Command.
func (c *SessionStartCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	c.worklogDir.add(fs)
	fs.StringVar(&c.ID, "id", "", "the session's `ID` (default: a new UUID)")
	return fs
}

// Run implements Command.
func (c *SessionStartCommand) Run(ctx context.Context, args []string) error {
	if _, err := c.positional(args, 0, 0); err != nil {
		return err
	}
	wl, err := c.openLog(ctx, c.Store, c.Tenant)
	defer c.closeLog()
	if err != nil {
		return err
	}
	res, err := wl.SessionStart(ctx, worklog.StartOptions{SessionID: c.ID})
	if err != nil {
		return fmt.Errorf("start session: %w", err)
	}
	if c.JSON {
		return writeJSON(c.Stdout, res)
	}
	fmt.Fprintf(c.Stdout, "session %s started (project %s, %s aggregated)\n",
		res.SessionID, res.Project, plural(res.SessionsAggregated, "closed session", "closed sessions"))
	printItems(c.Stdout, "Open items", res.OpenThreads)
	if len(res.ProjectState) > 0 {
		fmt.Fprintf(c.Stdout, "\nProject state:\n")
		for _, it := range res.ProjectState {
			fmt.Fprintf(c.Stdout, "  %s\n", oneLine(it.Text))
		}
	}
	return nil
}

// printItems writes a heading and a table of items, or that there are none.
func printItems(w io.Writer, heading string, items []worklog.Item) {
	if len(items) == 0 {
		fmt.Fprintf(w, "\nNo %s.\n", strings.ToLower(heading))
		return
	}
	fmt.Fprintf(w, "\n%s (%d):\n", heading, len(items))
	t := newTable(w, "  ID", "CREATED", "TEXT")
	for _, it := range items {
		t.row("  "+it.ID, formatTime(it.CreatedAt), clip(it.Text, itemTextWidth))
	}
	t.flush()
}

// SessionCloseCommand closes a working session.
type SessionCloseCommand struct {
	base
	worklogDir
	ID   string
	Open []string
}

// Flags implements Command.
func (c *SessionCloseCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	c.worklogDir.add(fs)
	fs.StringVar(&c.ID, "id", "", "the `ID` that session start gave the session (default: a new session, closed at once)")
	fs.StringArrayVar(&c.Open, "open", nil, "an item the session leaves open, as `TEXT` (repeatable)")
	return fs
}

// Run implements Command.
func (c *SessionCloseCommand) Run(ctx context.Context, args []string) error {
	if _, err := c.positional(args, 0, 0); err != nil {
		return err
	}
	var open []json.RawMessage
	for _, text := range c.Open {
		if strings.TrimSpace(text) == "" {
			return c.usage("--open needs a text")
		}
		if !utf8.ValidString(text) {
			// json.Marshal would write U+FFFD for the bytes that are not.
			return fmt.Errorf("close session: --open %q: the text is not valid UTF-8: %w", text, worklog.ErrInvalid)
		}
		b, err := json.Marshal(text)
		if err != nil {
			return err
		}
		open = append(open, b)
	}
	wl, err := c.openLog(ctx, c.Store, c.Tenant)
	defer c.closeLog()
	if err != nil {
		return err
	}
	res, err := wl.SessionClose(ctx, worklog.CloseOptions{SessionID: c.ID, OpenThreads: open})
	if err != nil {
		return fmt.Errorf("close session: %w", err)
	}
	if c.JSON {
		return writeJSON(c.Stdout, res)
	}
	fmt.Fprintf(c.Stdout, "session %s closed (project %s), carrying %s\n",
		res.SessionID, res.Project, plural(len(res.OpenThreads), "open item", "open items"))
	printItems(c.Stdout, "New items", res.Created)
	return nil
}
