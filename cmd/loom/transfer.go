package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// ExportCommand writes a thread's portable document.
type ExportCommand struct {
	base
	History bool
	Output  string
}

// Flags implements Command.
func (c *ExportCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.BoolVar(&c.History, "history", false, "include every commit and the history, so that time travel survives")
	fs.StringVarP(&c.Output, "output", "o", "", "write to `FILE` instead of stdout (replaced atomically)")
	return fs
}

// Run implements Command. --json changes nothing: the document is JSON.
func (c *ExportCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.positional(args, 1, 1)
	if err != nil {
		return err
	}
	db, th, err := c.openThread(ctx, pos[0])
	if err != nil {
		return err
	}
	defer db.Close()
	save := func(w io.Writer) error { return th.Save(ctx, w, thread.SaveOptions{History: c.History}) }
	if c.Output == "" || c.Output == "-" {
		return save(c.Stdout)
	}
	if err := writeFileAtomic(c.Output, save); err != nil {
		return fmt.Errorf("export %s: %w", th.ID(), err)
	}
	return nil
}

// writeFileAtomic writes path through a temporary file in its directory
// that is synced and renamed over it, so that path is either the old file
// or the whole new one.
func writeFileAtomic(path string, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriter(f)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // best effort: not every system syncs directories
		d.Close()
	}
	return nil
}

// ImportCommand loads a portable document into the store.
type ImportCommand struct {
	base
	ID string
}

// Flags implements Command.
func (c *ImportCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.StringVar(&c.ID, "id", "", "name the thread `NEW` instead of the document's id")
	return fs
}

// importBarMin is the number of messages from which an import draws a
// progress bar on a terminal: fewer load in a blink.
const importBarMin = 1000

// Run implements Command. On a terminal (and without --json) an import of
// importBarMin messages or more draws a progress bar as it goes.
func (c *ImportCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.positional(args, 0, 1)
	if err != nil {
		return err
	}
	src := "-"
	if len(pos) == 1 {
		src = pos[0]
	}
	var r io.Reader = c.Stdin
	if src != "-" {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	opts := thread.LoadOptions{ID: c.ID}
	bar := &progressLine{w: c.Stdout}
	if !c.JSON && c.IsTerminal != nil && c.IsTerminal(c.Stdout) {
		opts.Progress = func(p thread.LoadProgress) {
			if p.Total < importBarMin {
				return
			}
			line := fmt.Sprintf("%s %d/%d messages  %s", progressBar(p.Done, p.Total, 24), p.Done, p.Total,
				plural(p.Commits, "commit", "commits"))
			if p.Done == p.Total && !p.Written {
				line += "  writing"
			}
			bar.draw(line, p.Done, p.Total)
		}
	}
	th, err := db.Load(ctx, r, opts)
	bar.end()
	if err != nil {
		if errors.Is(err, thread.ErrConflict) && c.ID == "" {
			return fmt.Errorf("import %s: %w (give the copy another id with --id)", src, err)
		}
		return fmt.Errorf("import %s: %w", src, err)
	}
	if c.JSON {
		return writeJSON(c.Stdout, toRecordJSON(th.Record()))
	}
	n, err := th.Len(ctx)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.Stdout, "imported %s (%s)\n", th.ID(), plural(int(n), "message", "messages"))
	return err
}

// CopyCommand copies threads from one store to another.
type CopyCommand struct {
	base
	From, To   string
	Threads    []string
	AllTenants bool

	// now is the clock of the progress rate; nil means time.Now.
	now func() time.Time
}

// Flags implements Command.
func (c *CopyCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.StringVar(&c.From, "from", "", "the source store `URL` (default: --store)")
	fs.StringVar(&c.To, "to", "", "the destination store `URL` (required)")
	fs.StringArrayVar(&c.Threads, "thread", nil, "copy only the thread `ID` of the tenant (with --all-tenants, its key TENANT/ID; repeatable; default: every thread)")
	fs.BoolVar(&c.AllTenants, "all-tenants", false, "copy every tenant's threads (not only --tenant's)")
	return fs
}

// copyLineJSON is a line of copy's --json output: one per thread, then a
// summary.
type copyLineJSON struct {
	Event string `json:"event"` // "thread" or "summary"
	// Thread and Status (copied, skipped, gone) are set for a thread.
	Thread  string `json:"thread,omitzero"`
	Status  string `json:"status,omitzero"`
	Done    int    `json:"done"`
	Total   int    `json:"total"`
	Copied  int    `json:"copied"`
	Skipped int    `json:"skipped"`
	Commits int    `json:"commits"`
	// Seconds is set on the summary.
	Seconds float64 `json:"seconds,omitzero"`
}

// Run implements Command.
func (c *CopyCommand) Run(ctx context.Context, args []string) error {
	if _, err := c.positional(args, 0, 0); err != nil {
		return err
	}
	if c.From == "" {
		c.From = c.Store
	}
	switch {
	case c.To == "":
		return c.usage("missing --to URL")
	case c.To == c.From:
		return c.usage("--from and --to are the same store")
	case c.AllTenants && c.Tenant != "":
		return c.usage("--all-tenants and --tenant do not go together")
	}
	now := c.now
	if now == nil {
		now = time.Now
	}
	src, err := c.openURL(ctx, c.From, "")
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := c.openURL(ctx, c.To, "")
	if err != nil {
		return err
	}
	defer dst.Close()

	var from store.Store = src.Store()
	if len(c.Threads) > 0 {
		keys := c.Threads
		if !c.AllTenants {
			// The ids are the tenant's: its keys in the store (thread.Key).
			keys = make([]string, len(c.Threads))
			for i, id := range c.Threads {
				keys[i] = thread.Key(c.Tenant, id)
			}
		}
		from = onlyThreads{Store: from, ids: keys, where: storeName(c.From, c.Tenant)}
	}
	var bar *progressLine
	if !c.JSON && c.IsTerminal != nil && c.IsTerminal(c.Stdout) {
		bar = &progressLine{w: c.Stdout}
	}
	start := now()
	var last thread.CopyProgress
	var werr error
	progress := func(p thread.CopyProgress) {
		status := "gone"
		switch {
		case p.Copied > last.Copied:
			status = "copied"
		case p.Skipped > last.Skipped:
			status = "skipped"
		}
		commits := p.Commits - last.Commits
		last = p
		switch {
		case c.JSON:
			werr = errors.Join(werr, writeJSONLine(c.Stdout, copyLineJSON{Event: "thread", Thread: p.Thread, Status: status,
				Done: p.Done, Total: p.Total, Copied: p.Copied, Skipped: p.Skipped, Commits: p.Commits}))
		case bar != nil:
			rate := float64(p.Done) / max(now().Sub(start).Seconds(), 1e-9)
			bar.draw(fmt.Sprintf("%s %d/%d threads  %d commits  %.1f threads/s", progressBar(p.Done, p.Total, 24), p.Done, p.Total, p.Commits, rate), p.Done, p.Total)
		default:
			switch status {
			case "copied":
				fmt.Fprintf(c.Stdout, "copied %s (%s)\n", p.Thread, plural(commits, "commit", "commits"))
			case "skipped":
				fmt.Fprintf(c.Stdout, "skipped %s (already in the destination)\n", p.Thread)
			default:
				fmt.Fprintf(c.Stdout, "skipped %s (deleted from the source meanwhile)\n", p.Thread)
			}
		}
	}
	err = thread.Copy(ctx, dst.Store(), from, thread.CopyOptions{
		Filter:   thread.ListOptions{Tenant: c.Tenant, AllTenants: c.AllTenants},
		Progress: progress,
	})
	if bar != nil {
		bar.end()
	}
	elapsed := now().Sub(start)
	if err != nil && last.Done > 0 {
		return fmt.Errorf("%w (%d of %d threads done; run the copy again to resume)", err, last.Done, last.Total)
	} else if err != nil {
		return err
	}
	if c.JSON {
		return errors.Join(werr, writeJSONLine(c.Stdout, copyLineJSON{Event: "summary", Done: last.Done, Total: last.Total,
			Copied: last.Copied, Skipped: last.Skipped, Commits: last.Commits, Seconds: elapsed.Seconds()}))
	}
	if last.Total == 0 {
		_, err := fmt.Fprintf(c.Stdout, "nothing to copy from %s\n", redact(c.From))
		return err
	}
	_, err = fmt.Fprintf(c.Stdout, "copied %s (%s) to %s, skipped %d already there, in %s\n",
		plural(last.Copied, "thread", "threads"), plural(last.Commits, "commit", "commits"), redact(c.To), last.Skipped,
		elapsed.Round(time.Millisecond))
	return err
}

// progressBar draws [#####.....] for done of total in width cells.
func progressBar(done, total, width int) string {
	n := width
	if total > 0 {
		n = done * width / total
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

// progressLine is a line of progress redrawn in place (\r) on a terminal.
type progressLine struct {
	w     io.Writer
	drawn bool // a line is on screen that no newline ended yet
	shown int  // the thousandths done that the line on screen shows
}

// draw redraws the line as s, for done of total; it skips a line that
// shows the same thousandths done as the one on screen, short of the end,
// so that a million steps make a thousand lines.
func (l *progressLine) draw(s string, done, total int) {
	k := 1000
	if total > 0 {
		k = done * 1000 / total
	}
	if l.drawn && k == l.shown && done < total {
		return
	}
	fmt.Fprintf(l.w, "\r%-78s", s)
	l.drawn, l.shown = true, k
}

// end ends the line on screen, if there is one, with a newline.
func (l *progressLine) end() {
	if l.drawn {
		fmt.Fprintln(l.w)
		l.drawn = false
	}
}

// migrationBar returns ctx for opening the store rawURL: when stderr is a
// terminal, a migration of the store as it opens draws a progress bar
// there (thread.WithMigrationProgress), "migrating URL: [##..] n/m
// threads (step)", with the URL redacted. Call end once the store is open:
// it ends the bar's line. Off a terminal it returns ctx as it is.
func (b *base) migrationBar(ctx context.Context, rawURL string) (_ context.Context, end func()) {
	if b.JSON || b.Env == nil || b.IsTerminal == nil || b.Stderr == nil || !b.IsTerminal(b.Stderr) {
		return ctx, func() {}
	}
	line := &progressLine{w: b.Stderr}
	step := ""
	ctx = thread.WithMigrationProgress(ctx, func(p thread.MigrationProgress) {
		if p.Step != step {
			line.end() // a bar per step
			step = p.Step
		}
		s := fmt.Sprintf("migrating %s: %s %d/%d threads", redact(rawURL), progressBar(p.Done, p.Total, 24), p.Done, p.Total)
		if p.Step != "" {
			s += " (" + p.Step + ")"
		}
		line.draw(s, p.Done, p.Total)
	})
	return ctx, line.end
}

// onlyThreads is a store whose listing holds only the threads ids (keys in
// the store: tenant/id for a tenant other than ""), as the filter of the
// listing allows: what Copy copies with --thread.
type onlyThreads struct {
	store.Store
	ids   []string
	where string // the store and tenant, for errors
}

// Threads implements store.Store.
func (s onlyThreads) Threads(ctx context.Context, opts thread.ListOptions) iter.Seq2[*thread.Record, error] {
	return func(yield func(*thread.Record, error) bool) {
		for _, id := range s.ids {
			r, err := s.Store.Thread(ctx, id)
			if err == nil && !opts.Match(r) {
				err = thread.ErrNotFound // another tenant's
			}
			if errors.Is(err, thread.ErrNotFound) {
				err = errorOf(thread.ErrNotFound, "thread %q not found in %s", id, s.where)
			}
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(r, nil) {
				return
			}
		}
	}
}
