package thread

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread/store"
)

// searchWords returns the distinct words of a query, or ErrInvalid.
func searchWords(q string) ([]string, error) {
	var words []string
	for _, w := range store.SearchTokens(q) {
		if !slices.Contains(words, w) {
			words = append(words, w)
		}
	}
	switch {
	case len(words) == 0:
		return nil, fmt.Errorf("%w: a search needs at least one word", ErrInvalid)
	case len(words) > MaxSearchWords:
		return nil, fmt.Errorf("%w: a search takes at most %d words, not %d", ErrInvalid, MaxSearchWords, len(words))
	}
	return words, nil
}

// SearchHit is a message that a search found.
type SearchHit struct {
	// Thread is the thread that committed the message. A fork shares the
	// messages it was forked with, which name their first thread.
	Thread string
	// Commit and Index locate the message: Commit's Messages[Index].
	Commit string
	Index  int
	// Message is the message found.
	Message message.Message
	// Snippet is the message's searched text around the first word found.
	Snippet string
	// Time is when the message was committed.
	Time time.Time
	// Cursor continues the search after this hit (SearchQuery.Before).
	Cursor string
	// Version is set only when SearchQuery.Versions asks for it. When not
	// 0, the thread's head no longer holds the message (a rollback, a
	// restore, a reset took it away) and Version is the newest version of
	// the thread whose head did: read the thread at it to see the message.
	// It is 0 when the head holds the message, and also when no version
	// the thread keeps does or the hit lies past the bounds of
	// SearchQuery.Versions.
	Version int64
}

// SearchQuery is what DB.Search looks for.
type SearchQuery struct {
	// Text is the query: its words (SearchTokens) must all be words of a
	// message's text (SearchText), in any order and case.
	Text string
	// Before is the Cursor of the last hit of the previous page.
	Before string
	// Limit caps the hits; 0 means 20, and at most 1,000.
	Limit int
	// Versions asks for each hit's SearchHit.Version, so that a hit in a
	// rolled-back version can be opened at a version that shows it. It
	// reads more: per thread of the page, the head's line of commits down
	// to the oldest hit's commit; per hit the head does not hold, the
	// thread's history entries newest first until one holds it, each with
	// its line of commits down to the hit. A walk of a line stops after
	// 10,000 commits and a hit reads at most 1,000 history entries; a hit
	// past either is taken to be in the head (Version 0). A thread deleted
	// since its hit was found gives its hits no Version.
	Versions bool
}

// Search finds the messages of db's tenant's threads that hold every word
// of q, newest first. It finds messages of every version that the store
// still keeps (rolled back ones too, while history or a checkpoint reaches
// them), not only the heads'. A store that is a Searcher answers from its
// index; any other is scanned, commit by commit, which costs a read of
// every commit of the tenant's threads on every call (its memory is a
// page's worth of hits, and a mark per commit). With q.Versions, each hit
// the head no longer holds names the version that did (SearchHit.Version),
// at the cost SearchQuery.Versions tells.
func (db *DB) Search(ctx context.Context, q SearchQuery) ([]SearchHit, error) {
	words, err := searchWords(q.Text)
	if err != nil {
		return nil, err
	}
	limit := q.Limit
	switch {
	case limit < 0 || limit > 1000:
		return nil, fmt.Errorf("%w: search limit %d: want 0 to 1000", ErrInvalid, limit)
	case limit == 0:
		limit = 20
	}
	opts := store.SearchOptions{Tenant: db.tenant, Words: words, Before: q.Before, Limit: limit}
	var entries iter.Seq2[store.SearchEntry, error]
	if s, ok := db.raw.(store.Searcher); ok {
		entries = s.Search(ctx, opts)
	} else {
		entries = scanSearch(ctx, db.raw, opts)
	}
	var hits []SearchHit
	var c *Commit // the last hit's: a commit's hits come one after another
	for e, err := range entries {
		if err != nil {
			return nil, err
		}
		tenant, id := SplitKey(e.Thread)
		if tenant != db.tenant {
			continue // a store that filters badly must not leak
		}
		if c == nil || c.ID != e.Commit {
			if c, err = db.raw.Commit(ctx, e.Commit); err != nil {
				return nil, err
			}
		}
		if e.Index < 0 || e.Index >= len(c.Messages) {
			return nil, fmt.Errorf("thread: search index names message %d of commit %s, which has %d", e.Index, e.Commit, len(c.Messages))
		}
		m := c.Messages[e.Index]
		hits = append(hits, SearchHit{
			Thread: id, Commit: e.Commit, Index: e.Index, Message: m,
			Snippet: snippet(store.SearchText(m), words), Time: c.Time, Cursor: e.Cursor,
		})
	}
	if q.Versions {
		if err := db.placeHits(ctx, hits, searchBounds()); err != nil {
			return nil, err
		}
	}
	return hits, nil
}

// snippetRunes is about how much text a snippet shows.
const snippetRunes = 160

// snippet returns text around the first of words found in text.
func snippet(text string, words []string) string {
	text = strings.Join(strings.Fields(text), " ")
	lower := strings.ToLower(text)
	at := -1
	for _, w := range words {
		if i := strings.Index(lower, w); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	r := []rune(text)
	if len(r) <= snippetRunes {
		return text
	}
	pos := 0
	if at > 0 && len(lower) == len(text) {
		pos = len([]rune(text[:at]))
	}
	from := max(0, pos-snippetRunes/3)
	to := min(len(r), from+snippetRunes)
	from = max(0, to-snippetRunes)
	out := string(r[from:to])
	if from > 0 {
		out = "…" + out
	}
	if to < len(r) {
		out += "…"
	}
	return out
}

// scanSearch is the search of a store with no index: it reads every
// commit that a thread of the tenant reaches through its history and
// checkpoints, keeping the newest matches past the cursor, a page's worth
// at a time. Its cursor is "time.commit.index" of the last hit.
func scanSearch(ctx context.Context, s store.Store, opts store.SearchOptions) iter.Seq2[store.SearchEntry, error] {
	return func(yield func(store.SearchEntry, error) bool) {
		type found struct {
			e    store.SearchEntry
			time time.Time
		}
		// Newest first; within a commit, its last message first.
		order := func(at time.Time, commit string, index int, b found) int {
			if c := b.time.Compare(at); c != 0 {
				return c
			}
			if c := strings.Compare(b.e.Commit, commit); c != 0 {
				return c
			}
			return cmp.Compare(b.e.Index, index)
		}
		sortFound := func(all []found) {
			slices.SortFunc(all, func(a, b found) int { return order(a.time, a.e.Commit, a.e.Index, b) })
		}
		var (
			afterTime   time.Time
			afterCommit string
			afterIndex  int
		)
		if opts.Before != "" {
			parts := strings.SplitN(opts.Before, ".", 3)
			var us int64
			var err error
			if len(parts) == 3 {
				us, err = strconv.ParseInt(parts[0], 10, 64)
				if err == nil {
					afterIndex, err = strconv.Atoi(parts[2])
				}
			}
			if len(parts) != 3 || err != nil {
				yield(store.SearchEntry{}, fmt.Errorf("%w: search cursor %q", ErrInvalid, opts.Before))
				return
			}
			afterTime, afterCommit = time.UnixMicro(us).UTC(), parts[1]
		}
		var all []found
		keep := func(f found) {
			if opts.Before != "" && order(afterTime, afterCommit, afterIndex, f) >= 0 {
				return // not past the cursor
			}
			all = append(all, f)
			if opts.Limit > 0 && len(all) >= 2*opts.Limit+64 {
				sortFound(all)
				all = all[:opts.Limit] // memory bounded by the page, not the matches
			}
		}
		seen := map[string]bool{}
		walk := func(thread, head string) error {
			if head == "" || seen[head] {
				return nil
			}
			for c, err := range s.Ancestors(ctx, head, -1) {
				if err != nil {
					return err
				}
				if seen[c.ID] {
					return nil
				}
				seen[c.ID] = true
				for i, m := range c.Messages {
					if holdsAll(store.SearchTokens(store.SearchText(m)), opts.Words) {
						keep(found{store.SearchEntry{Thread: thread, Commit: c.ID, Index: i}, c.Time})
					}
				}
			}
			return nil
		}
		for r, err := range s.Threads(ctx, ListOptions{Tenant: opts.Tenant}) {
			if err != nil {
				yield(store.SearchEntry{}, err)
				return
			}
			for h, err := range s.History(ctx, r.ID, HistoryOptions{}) {
				if err == nil {
					err = walk(r.ID, h.Commit)
				}
				if err != nil && !errors.Is(err, ErrNotFound) {
					yield(store.SearchEntry{}, err)
					return
				}
			}
			for cp, err := range s.Checkpoints(ctx, r.ID) {
				if err == nil {
					err = walk(r.ID, cp.Commit)
				}
				if err != nil && !errors.Is(err, ErrNotFound) {
					yield(store.SearchEntry{}, err)
					return
				}
			}
		}
		sortFound(all)
		if opts.Limit > 0 && len(all) > opts.Limit {
			all = all[:opts.Limit]
		}
		for _, f := range all {
			f.e.Cursor = strconv.FormatInt(f.time.UnixMicro(), 10) + "." + f.e.Commit + "." + strconv.Itoa(f.e.Index)
			if !yield(f.e, nil) {
				return
			}
		}
	}
}

func holdsAll(tokens, words []string) bool {
	for _, w := range words {
		if !slices.Contains(tokens, w) {
			return false
		}
	}
	return true
}
