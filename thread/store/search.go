package store

import (
	"context"
	"iter"
	"strings"
	"unicode"

	"github.com/loomthreads/loom/message"
)

// Searcher is an optional upgrade of a Store that keeps a full-text index
// of message text, written in the same transaction as the commits it
// indexes. DB.Search uses it; without it, DB.Search scans.
//
// A store indexes each message of each new commit of a batch under the
// tenant (see SplitKey) and thread key that the batch commits it for
// (CommitThreads), with SearchTokens(SearchText(m)) as its words, and
// drops a commit's entries when it frees the commit. Search yields the
// entries of opts.Tenant whose words include every word of opts.Words,
// newest first (the order they were indexed in), at most opts.Limit of
// them (0: no cap), starting after the entry opts.Before names.
type Searcher interface {
	Search(ctx context.Context, opts SearchOptions) iter.Seq2[SearchEntry, error]
}

// SearchOptions select what a Searcher yields.
type SearchOptions struct {
	// Tenant is the tenant whose threads are searched.
	Tenant string
	// Words are what a message must all hold, each a token of
	// SearchTokens; never empty.
	Words []string
	// Before is the Cursor of the last entry of the previous page; ""
	// starts at the newest.
	Before string
	// Limit caps the entries; 0 means no cap.
	Limit int
}

// SearchEntry is one indexed message.
type SearchEntry struct {
	// Thread is the key of the thread that committed the message.
	Thread string
	// Commit and Index locate the message: Commit's Messages[Index].
	Commit string
	Index  int
	// Cursor names the entry for SearchOptions.Before. Its form is the
	// store's own.
	Cursor string
}

// Searchable reports whether messages of a role have search text at all
// (see SearchText): a store that queues commits for its index skips those
// whose messages have none.
func Searchable(role message.Role) bool { return role != "workflow" }

// SearchText returns the text of m that search indexes: its text and
// reasoning, the names and arguments of its tool calls and their results.
// A message of role "workflow" has none: it is a workflow's record of which
// step ran (package workflow), which nobody wrote or reads as prose, and
// indexing it would make every workflow a hit for "done" or "running" and
// cost every step an index write.
func SearchText(m message.Message) string {
	if !Searchable(m.Role) {
		return ""
	}
	var b strings.Builder
	for _, c := range m.Contents {
		var s string
		switch c := c.(type) {
		case message.Text:
			s = c.Text
		case message.Reasoning:
			s = c.Text
		case message.FunctionCall:
			s = c.Name + " " + c.Arguments
		case message.FunctionResult:
			s = c.Result
		case message.Error:
			s = c.Message
		}
		if s != "" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(s)
		}
	}
	return b.String()
}

// Search limits: a query holds at most MaxSearchWords words, and a word
// is at most MaxSearchWordBytes long (longer runs of letters are cut).
const (
	MaxSearchWords     = 16
	MaxSearchWordBytes = 64
)

// SearchTokens splits s into the words search matches on: maximal runs of
// letters, digits and marks, lower-cased, cut to MaxSearchWordBytes, in
// the order they appear (repeats kept). Every store tokenizes with it, so
// that a word matches the same messages in each.
func SearchTokens(s string) []string {
	var out []string
	start := -1
	flush := func(end int) {
		if start < 0 {
			return
		}
		w := strings.ToLower(s[start:end])
		if len(w) > MaxSearchWordBytes {
			cut := MaxSearchWordBytes
			for cut > 0 && !runeStart(w[cut]) {
				cut--
			}
			w = w[:cut]
		}
		out = append(out, w)
		start = -1
	}
	for i, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		flush(i)
	}
	flush(len(s))
	return out
}

func runeStart(b byte) bool { return b&0xC0 != 0x80 }

// CommitThreads returns, for each commit of b, the key of the thread the
// batch commits it for: the thread whose new head (by a Creation or a
// Move) the commit leads to, following parents inside b. A commit no head
// of b leads to (a checkpoint's alone) takes the thread of its
// checkpoint, and otherwise is left out. Stores that index messages use it
// to know each message's thread.
func (b *Batch) CommitThreads() map[string]string {
	if len(b.Commits) == 0 {
		return nil
	}
	parent := make(map[string]string, len(b.Commits))
	for _, c := range b.Commits {
		parent[c.ID] = c.Parent
	}
	out := make(map[string]string, len(b.Commits))
	claim := func(thread, head string) {
		for id := head; id != ""; id = parent[id] {
			if _, ok := parent[id]; !ok {
				return
			}
			if _, done := out[id]; done {
				return
			}
			out[id] = thread
		}
	}
	for _, cr := range b.Create {
		claim(cr.Record.ID, cr.Record.Head)
		for _, h := range cr.History {
			claim(cr.Record.ID, h.Commit)
		}
	}
	for _, mv := range b.Moves {
		claim(mv.Thread, mv.Head)
	}
	for _, cp := range b.Checkpoints {
		claim(cp.Thread, cp.Commit)
	}
	return out
}
