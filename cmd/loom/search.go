package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// SearchCommand finds messages by their words.
type SearchCommand struct {
	base
	Limit  int
	Before string
}

// Flags implements Command.
func (c *SearchCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.IntVar(&c.Limit, "limit", 20, "show at most `N` hits, newest first (1 to 1000)")
	fs.StringVar(&c.Before, "before", "", "continue after the hit whose cursor is `C` (--json prints cursors)")
	return fs
}

type searchHitJSON struct {
	Thread  string          `json:"thread"`
	Commit  string          `json:"commit"`
	Index   int             `json:"index"`
	Message message.Message `json:"message"`
	Snippet string          `json:"snippet"`
	Time    time.Time       `json:"time"`
	Cursor  string          `json:"cursor"`
	Version int64           `json:"version,omitzero"`
}

// Run implements Command.
func (c *SearchCommand) Run(ctx context.Context, args []string) error {
	words, err := c.positional(args, 1, -1)
	if err != nil {
		return err
	}
	if c.Limit < 1 || c.Limit > 1000 {
		return c.usage("--limit must be 1 to 1000")
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	hits, err := db.Search(ctx, thread.SearchQuery{Text: strings.Join(words, " "), Limit: c.Limit, Before: c.Before, Versions: true})
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	var t *table
	if !c.JSON {
		t = newTable(c.Stdout, "THREAD", "VERSION", "ROLE", "TIME", "TEXT")
	}
	for _, h := range hits {
		if c.JSON {
			if err := writeJSONLine(c.Stdout, searchHitJSON{Thread: h.Thread, Commit: h.Commit, Index: h.Index,
				Message: h.Message, Snippet: h.Snippet, Time: h.Time, Cursor: h.Cursor, Version: h.Version}); err != nil {
				return err
			}
			continue
		}
		version := ""
		if h.Version != 0 {
			version = strconv.FormatInt(h.Version, 10)
		}
		t.row(h.Thread, version, string(h.Message.Role), formatTime(h.Time), clip(oneLine(h.Snippet), 100))
	}
	if t != nil {
		if err := t.flush(); err != nil {
			return err
		}
		if len(hits) == c.Limit {
			fmt.Fprintf(c.Stderr, "more: --before %s\n", strconv.Quote(hits[len(hits)-1].Cursor))
		}
	}
	return nil
}
