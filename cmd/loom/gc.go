package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/loomthreads/loom/thread"
	"github.com/spf13/pflag"
)

// retentionFlags are the store-wide default retention of `loom gc` and
// `loom serve`: each field a thread's own labels do not set.
type retentionFlags struct {
	ttl, keepFor time.Duration
	keepLast     int64
}

func (f *retentionFlags) flags(fs *pflag.FlagSet) {
	fs.DurationVar(&f.ttl, "ttl", 0, "delete a thread idle for this `DURATION` (720h: 30 days), unless its own loom.ttl label says otherwise; 0 keeps threads for ever")
	fs.Int64Var(&f.keepLast, "keep-last", 0, "keep the newest `N` versions of each thread's history (and every checkpoint), unless its loom.keep_last label says otherwise; 0 keeps them all")
	fs.DurationVar(&f.keepFor, "keep-for", 0, "keep the versions younger than this `DURATION`, unless a thread's loom.keep_for label says otherwise; 0 sets no age")
}

func (f *retentionFlags) retention() (thread.Retention, error) {
	if f.ttl < 0 || f.keepLast < 0 || f.keepFor < 0 {
		return thread.Retention{}, fmt.Errorf("--ttl, --keep-last and --keep-for cannot be negative")
	}
	return thread.Retention{TTL: f.ttl, KeepLast: f.keepLast, KeepFor: f.keepFor}, nil
}

// GCCommand applies retention: it deletes the threads that expired and
// drops the versions their history limits no longer keep.
type GCCommand struct {
	base
	ret    retentionFlags
	dryRun bool
}

// Flags implements Command.
func (c *GCCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	c.ret.flags(fs)
	fs.BoolVar(&c.dryRun, "dry-run", false, "report what would be dropped, and drop nothing")
	return fs
}

// Run implements Command.
func (c *GCCommand) Run(ctx context.Context, args []string) error {
	if _, err := c.positional(args, 0, 0); err != nil {
		return err
	}
	ret, err := c.ret.retention()
	if err != nil {
		return c.usage("%v", err)
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	// Without --tenant, every tenant's threads: gc is the store's upkeep.
	rep, err := db.WithRetention(ret).GC(ctx, thread.GCOptions{DryRun: c.dryRun, AllTenants: c.Tenant == ""})
	if err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	if c.JSON {
		return writeJSON(c.Stdout, struct {
			DryRun bool `json:"dry_run"`
			thread.GCReport
		}{c.dryRun, rep})
	}
	verb := "dropped"
	if c.dryRun {
		verb = "would drop"
	}
	fmt.Fprintf(c.Stdout, "%d threads looked at; %s %d expired threads and %d versions of %d threads\n",
		rep.Threads, verb, rep.Expired, rep.Versions, rep.Pruned)
	if rep.Skipped > 0 {
		fmt.Fprintf(c.Stdout, "%d threads changed meanwhile and are left for the next gc\n", rep.Skipped)
	}
	for _, e := range rep.Errors {
		fmt.Fprintf(c.Stderr, "loom gc: %s (the default applies)\n", e)
	}
	return nil
}

// collect runs GC every interval (and once at start) until ctx ends, on
// every tenant's threads, logging what it dropped: the server's own
// upkeep, so that retention holds without a cron job.
func collect(ctx context.Context, db *thread.DB, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		rep, err := db.GC(ctx, thread.GCOptions{AllTenants: true})
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.Error("gc", "err", err)
		case rep.Expired > 0 || rep.Versions > 0:
			log.Info("gc", "threads", rep.Threads, "expired", rep.Expired, "pruned", rep.Pruned, "versions", rep.Versions, "skipped", rep.Skipped)
		}
		for _, e := range rep.Errors {
			log.Warn("gc: a thread's retention label does not parse; the default applies", "err", e)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ThreadsRetentionCommand shows a thread's retention and expiry, or sets
// its own.
type ThreadsRetentionCommand struct {
	base
	ret   retentionFlags
	clear bool
	fs    *pflag.FlagSet // to tell a flag given as 0 from one not given
}

// Flags implements Command.
func (c *ThreadsRetentionCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	c.ret.flags(fs)
	fs.BoolVar(&c.clear, "clear", false, "drop the thread's own retention: the store-wide default applies again")
	c.fs = fs
	return fs
}

type retentionJSON struct {
	Thread    string    `json:"thread"`
	Version   int64     `json:"version"`
	TTL       string    `json:"ttl"`
	KeepLast  int64     `json:"keep_last"`
	KeepFor   string    `json:"keep_for"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// Run implements Command.
func (c *ThreadsRetentionCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.positional(args, 1, 1)
	if err != nil {
		return err
	}
	fs := c.fs
	set := fs.Changed("ttl") || fs.Changed("keep-last") || fs.Changed("keep-for")
	if set && c.clear {
		return c.usage("--clear takes no --ttl, --keep-last or --keep-for")
	}
	ret, err := c.ret.retention()
	if err != nil {
		return c.usage("%v", err)
	}
	db, th, err := c.openThread(ctx, pos[0])
	if err != nil {
		return err
	}
	defer db.Close()
	switch {
	case c.clear:
		err = th.ClearRetention(ctx)
	case set:
		// The flags not given keep what the thread has.
		own, _ := th.Retention()
		if fs.Changed("ttl") {
			own.TTL = ret.TTL
		}
		if fs.Changed("keep-last") {
			own.KeepLast = ret.KeepLast
		}
		if fs.Changed("keep-for") {
			own.KeepFor = ret.KeepFor
		}
		err = th.SetRetention(ctx, own)
	}
	if err != nil {
		return fmt.Errorf("retention of %s: %w", th.ID(), err)
	}
	cur, err := th.Retention()
	if err != nil {
		fmt.Fprintf(c.Stderr, "loom: %v\n", err)
	}
	rec := th.Record()
	ls := cur.Labels() // the durations as the labels write them ("0" for none)
	out := retentionJSON{Thread: th.ID(), Version: rec.Version, TTL: ls[thread.LabelTTL], KeepLast: cur.KeepLast,
		KeepFor: ls[thread.LabelKeepFor], ExpiresAt: cur.Expires(rec.UpdatedAt)}
	if c.JSON {
		return writeJSON(c.Stdout, out)
	}
	expires := "never"
	if !out.ExpiresAt.IsZero() {
		expires = formatTime(out.ExpiresAt)
	}
	keepLast := "all"
	if cur.KeepLast > 0 {
		keepLast = fmt.Sprint(cur.KeepLast)
	}
	fmt.Fprintf(c.Stdout, "%s (version %d): ttl %s, keep last %s versions, keep for %s; expires %s\n",
		th.ID(), rec.Version, out.TTL, keepLast, out.KeepFor, expires)
	return nil
}
