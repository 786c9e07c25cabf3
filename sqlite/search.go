package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// schemaV3 adds the search index (store.Searcher): a contentless FTS5
// table of each indexed message's words, search_entries, which says what
// each of its rows is, and search_pending, the commits not indexed yet.
//
// The search table's one column, words, holds the message's
// store.SearchTokens, each prefixed with its tenant's tag (searchTag),
// joined by spaces: a query asks for the tagged words, so that it never
// leaves its tenant and reads only its tenant's postings. (A tenant
// column ANDed into the query would cost a walk of the tenant's whole
// posting list, 40 ms at a million messages.) The words are tokenized
// already; the ascii tokenizer splits them at the spaces only (it keeps
// every byte that is not ASCII in a token, and a tagged word is ASCII
// letters and digits, a middle dot and SearchTokens' letters, digits and
// marks, lower-cased), so that an FTS token is exactly a tagged word:
// unicode61 would split a word at a combining mark and fold some letters
// that Go's ToLower keeps apart. detail=none keeps only rowids, all that
// a query of single words needs. The table is contentless, so the text is
// not stored twice, with contentless_delete, so that a row can be deleted
// by its rowid alone.
//
// search_entries has a row per indexed message with the same rowid:
// the commit (by key), the message's index in it and the key of the
// thread it was indexed under. A new entry takes the largest rowid plus
// one, so that the newest entry has the largest rowid: a search reads the
// FTS index backwards by rowid, which FTS5 does without sorting, and
// pages with a rowid cursor. (The rowid of a deleted newest entry may be
// taken again, by an entry newer than every other, which keeps the order;
// contentless_delete tells a row from a deleted one of the same rowid.
// AUTOINCREMENT would cost a page of sqlite_sequence per write.)
//
// Apply does not index: FTS5 writes a segment, its structure record and
// docsize rows per transaction, which would double the cost of a small
// append. It writes a row of search_pending per new commit with words, in
// the commit's transaction (so that what is committed is findable, crash
// or not), and a fold (Store.fold) later moves pending commits into the
// index, many per transaction, in commit-key order: commit keys only grow
// (a reused key is larger than every key in use), so every pending commit
// is newer than every indexed one, and entries keep their order.
//
// Triggers keep the index in step with the commits, whatever deletes
// them: a commit's entries and pending row go with it, and an entry's FTS
// row with it.
var schemaV3 = []string{
	`CREATE VIRTUAL TABLE search USING fts5(words, content='', contentless_delete=1,
		detail=none, tokenize='ascii')`,
	`CREATE TABLE search_entries (
		rowid      INTEGER PRIMARY KEY,
		commit_key INTEGER NOT NULL,
		idx        INTEGER NOT NULL,
		thread     TEXT NOT NULL
	)`,
	`CREATE INDEX search_entries_by_commit ON search_entries (commit_key)`,
	`CREATE TABLE search_pending (
		commit_key INTEGER PRIMARY KEY,
		thread     TEXT NOT NULL
	)`,
	`CREATE TRIGGER commits_unindex AFTER DELETE ON commits BEGIN
		DELETE FROM search_entries WHERE commit_key = old.k;
		DELETE FROM search_pending WHERE commit_key = old.k;
	END`,
	`CREATE TRIGGER search_entries_unindex AFTER DELETE ON search_entries BEGIN
		DELETE FROM search WHERE rowid = old.rowid;
	END`,
}

// Statements of the index: a pending commit; an entry, then its FTS row
// with the entry's rowid; the claim of a pending commit by a fold, if it
// is still pending and still the commit the fold read (a freed commit's
// key may be taken again).
const (
	qInsertPending = `INSERT INTO search_pending (commit_key, thread) VALUES (?, ?)`
	qInsertEntry   = `INSERT INTO search_entries (commit_key, idx, thread) VALUES (?, ?, ?)`
	qInsertSearch  = `INSERT INTO search (rowid, words) VALUES (?, ?)`
	qClaimPending  = `DELETE FROM search_pending WHERE commit_key = ?1
		AND (SELECT id FROM commits WHERE k = ?1) = ?2 RETURNING thread`
)

// migrateV3 makes the search index and queues every commit for it.
func migrateV3(ctx context.Context, tx *sql.Tx) error {
	if err := execAll(schemaV3...)(ctx, tx); err != nil {
		return err
	}
	return backfillSearch(ctx, tx)
}

// backfillSearch queues for the index (search_pending) every commit that
// a thread reaches through its history and checkpoints, under the first
// thread (by creation) that reaches it, as Apply would have: a fork's
// shared commits belong to the thread it was forked from. The folds that
// follow index them in key order, the order they were written, so that
// newest first means what it does for the commits Apply queues; the
// migration itself reads no message, so that it holds the write lock
// briefly however large the database.
func backfillSearch(ctx context.Context, tx *sql.Tx) error {
	parent := map[int64]int64{}
	err := eachRow(ctx, tx, `SELECT k, coalesce(parent, 0) FROM commits`, nil, func(rows *sql.Rows) error {
		var k, p int64
		if err := rows.Scan(&k, &p); err != nil {
			return err
		}
		parent[k] = p
		return nil
	})
	if err != nil {
		return fmt.Errorf("read commits: %w", err)
	}
	if len(parent) == 0 {
		return nil
	}
	// owner maps each reachable commit to the index of its thread in keys.
	owner := make(map[int64]int, len(parent))
	var keys []string
	err = eachRow(ctx, tx, `SELECT t.id, x.c FROM threads t JOIN (
			SELECT thread, commit_key AS c FROM history WHERE commit_key IS NOT NULL
			UNION ALL SELECT thread, commit_key FROM checkpoints
		) x ON x.thread = t.k ORDER BY t.k`, nil, func(rows *sql.Rows) error {
		var id string
		var k int64
		if err := rows.Scan(&id, &k); err != nil {
			return err
		}
		if len(keys) == 0 || keys[len(keys)-1] != id {
			keys = append(keys, id)
		}
		for ; k != 0; k = parent[k] {
			if _, done := owner[k]; done {
				break
			}
			if _, ok := parent[k]; !ok {
				break // a dangling key: nothing to index
			}
			owner[k] = len(keys) - 1
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read threads: %w", err)
	}
	ins, err := tx.PrepareContext(ctx, qInsertPending)
	if err != nil {
		return err
	}
	defer ins.Close()
	ks := make([]int64, 0, len(owner))
	for k := range owner {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	for _, k := range ks {
		if _, err := ins.ExecContext(ctx, k, keys[owner[k]]); err != nil {
			return fmt.Errorf("queue commit %d: %w", k, err)
		}
	}
	return nil
}

// eachRow runs a query on tx and calls f with each row.
func eachRow(ctx context.Context, tx *sql.Tx, q string, args []any, f func(*sql.Rows) error) error {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return rows.Close()
}

// searchTag is what the words of a tenant's messages are prefixed with in
// the search table: "t", the tenant's bytes in hex and a middle dot,
// which no word of SearchTokens holds. Each tenant, "" too, has its own,
// and a tagged word names its tenant and word unambiguously.
func searchTag(tenant string) string {
	return "t" + hex.EncodeToString([]byte(tenant)) + "\u00b7"
}

// keyTag is the searchTag of the tenant of a thread key.
func keyTag(key string) string {
	tenant, _ := thread.SplitKey(key)
	return searchTag(tenant)
}

// searchWordsOf returns what the words column holds for a message of the
// tenant whose searchTag is tag: its words, tagged, space-separated, or ""
// for none.
func searchWordsOf(tag string, m message.Message) string {
	var b strings.Builder
	for i, w := range store.SearchTokens(store.SearchText(m)) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(tag)
		b.WriteString(w)
	}
	return b.String()
}

// searchThreads returns, for each commit of b (by index), the thread
// that Apply queues it for the index under: the thread b commits it for
// (store.Batch.CommitThreads), or "" if none claims it or its messages
// have no words. It runs before the write transaction.
func searchThreads(b *store.Batch) []string {
	threads := b.CommitThreads()
	if len(threads) == 0 {
		return nil
	}
	out := make([]string, len(b.Commits))
	for i, c := range b.Commits {
		if key, ok := threads[c.ID]; ok && slices.ContainsFunc(c.Messages, hasWords) {
			out[i] = key
		}
	}
	return out
}

// hasWords says whether m's search text has a word (store.SearchTokens),
// without building it: any letter, digit or mark. A workflow's records
// have no search text (store.SearchText), so their commits are never
// queued.
func hasWords(m message.Message) bool {
	if !store.Searchable(m.Role) {
		return false
	}
	for _, c := range m.Contents {
		var ss [2]string
		switch c := c.(type) {
		case message.Text:
			ss[0] = c.Text
		case message.Reasoning:
			ss[0] = c.Text
		case message.FunctionCall:
			ss[0], ss[1] = c.Name, c.Arguments
		case message.FunctionResult:
			ss[0] = c.Result
		case message.Error:
			ss[0] = c.Message
		}
		for _, s := range ss {
			for _, r := range s {
				if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) {
					return true
				}
			}
		}
	}
	return false
}

var _ store.Searcher = (*Store)(nil)

// qSearch reads the entries whose FTS rows match ?1, below rowid ?2,
// newest first, at most ?3 of them. FTS5 walks its index backwards by
// rowid with the rowid bound and stops at the limit: the join is per row
// found, and nothing is sorted.
const qSearch = `SELECT search.rowid, e.thread, c.id, e.idx
	FROM search
	CROSS JOIN search_entries e ON e.rowid = search.rowid
	CROSS JOIN commits c ON c.k = e.commit_key
	WHERE search MATCH ?1 AND search.rowid < ?2
	ORDER BY search.rowid DESC LIMIT ?3`

// searchMatch is the FTS5 query for opts: every word, tagged with the
// tenant's searchTag and quoted.
func searchMatch(opts store.SearchOptions) string {
	tag := searchTag(opts.Tenant)
	var b strings.Builder
	for i, w := range opts.Words {
		if i > 0 {
			b.WriteString(` AND `)
		}
		quote(&b, tag+w)
	}
	return b.String()
}

// quote writes s as an FTS5 string.
func quote(b *strings.Builder, s string) {
	b.WriteByte('"')
	b.WriteString(strings.ReplaceAll(s, `"`, `""`))
	b.WriteByte('"')
}

// searchCursor is a parsed SearchOptions.Before: an indexed entry's rowid
// in decimal, or "p" and the key and message index of a pending commit's
// message ("p12.1"), which only a search that could not fold gives out.
type searchCursor struct {
	rowid   int64 // 0 for none or a pending commit's
	pending bool
	k, i    int64
}

func parseSearchCursor(s string) (searchCursor, bool) {
	num := func(s string) (int64, bool) {
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil && n >= 0 && strconv.FormatInt(n, 10) == s
	}
	switch {
	case s == "":
		return searchCursor{}, true
	case strings.HasPrefix(s, "p"):
		ks, is, ok := strings.Cut(s[1:], ".")
		k, ok1 := num(ks)
		i, ok2 := num(is)
		return searchCursor{pending: true, k: k, i: i}, ok && ok1 && ok2 && k > 0
	default:
		n, ok := num(s)
		return searchCursor{rowid: n}, ok && n > 0
	}
}

// Search implements store.Searcher from the FTS5 index. An entry's
// Cursor is its rowid in decimal.
//
// It first folds the commits pending for the index, so that it finds
// every commit made before it. If it cannot (another process holds the
// write lock past the busy timeout), it answers all the same, in one read
// transaction: the pending commits' messages are matched here, newest
// first, before the index's entries, which are all older; their cursors
// are "p" and the commit's key and the message's index.
func (s *Store) Search(ctx context.Context, opts store.SearchOptions) iter.Seq2[store.SearchEntry, error] {
	return func(yield func(store.SearchEntry, error) bool) {
		if len(opts.Words) == 0 {
			yield(store.SearchEntry{}, fmt.Errorf("search: no words: %w", thread.ErrInvalid))
			return
		}
		for _, w := range opts.Words {
			// A word that is not a token of SearchTokens is in no
			// message's words (and could be several FTS tokens).
			if t := store.SearchTokens(w); len(t) != 1 || t[0] != w {
				return
			}
		}
		cur, ok := parseSearchCursor(opts.Before)
		if !ok {
			yield(store.SearchEntry{}, fmt.Errorf("search cursor %q: %w", clip(opts.Before), thread.ErrInvalid))
			return
		}
		limit := int64(cmp.Or(opts.Limit, -1))
		if limit < -1 {
			limit = -1
		}
		fail := func(err error) { yield(store.SearchEntry{}, fmt.Errorf("search: %w", err)) }
		var q querier = s.r
		var pending []pendingCommit
		if err := s.foldAll(ctx); err != nil {
			if ctx.Err() != nil || !lockedOut(err) {
				fail(fmt.Errorf("index pending commits: %w", err))
				return
			}
			tx, err := s.r.BeginTx(ctx, nil)
			if err != nil {
				fail(err)
				return
			}
			defer tx.Rollback()
			q = tx
			if cur.rowid == 0 { // a rowid cursor is past every pending commit
				if pending, err = readPending(ctx, tx, -1); err != nil {
					fail(err)
					return
				}
			}
		}
		n := int64(0)
		for i := len(pending) - 1; i >= 0; i-- {
			p := pending[i]
			if tenant, _ := thread.SplitKey(p.thread); tenant != opts.Tenant {
				continue
			}
			for j := len(p.msgs) - 1; j >= 0; j-- {
				if cur.pending && (p.k > cur.k || p.k == cur.k && int64(j) >= cur.i) {
					continue
				}
				if !holdsAll(store.SearchTokens(store.SearchText(p.msgs[j])), opts.Words) {
					continue
				}
				if n == limit {
					return
				}
				n++
				e := store.SearchEntry{Thread: p.thread, Commit: p.id, Index: j, Cursor: fmt.Sprintf("p%d.%d", p.k, j)}
				if !yield(e, nil) {
					return
				}
			}
		}
		before := cur.rowid
		if cur.pending {
			// Below the entries of the cursor's message and the newer
			// ones, if it has been folded since; below none if not.
			var min sql.NullInt64
			if err := q.QueryRowContext(ctx, `SELECT min(rowid) FROM search_entries
				WHERE commit_key >= ?1 AND NOT (commit_key = ?1 AND idx < ?2)`, cur.k, cur.i).Scan(&min); err != nil {
				fail(err)
				return
			}
			before = min.Int64
		}
		if before == 0 {
			before = 1<<63 - 1
		}
		if limit >= 0 {
			limit -= n
		}
		rows, err := q.QueryContext(ctx, qSearch, searchMatch(opts), before, limit)
		if err != nil {
			fail(err)
			return
		}
		defer rows.Close()
		for rows.Next() {
			var e store.SearchEntry
			var rowid int64
			if err := rows.Scan(&rowid, &e.Thread, &e.Commit, &e.Index); err != nil {
				fail(err)
				return
			}
			e.Cursor = strconv.FormatInt(rowid, 10)
			if !yield(e, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			fail(err)
		}
	}
}

// holdsAll says whether tokens hold every word.
func holdsAll(tokens, words []string) bool {
	for _, w := range words {
		if !slices.Contains(tokens, w) {
			return false
		}
	}
	return true
}
