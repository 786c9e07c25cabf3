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

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// schemaV3 adds the search index (thread.Searcher): a contentless FTS5
// table of each indexed message's words, and search_entries, which says
// what each of its rows is.
//
// The search table's one column, words, holds the message's
// thread.SearchTokens, each prefixed with its tenant's tag (searchTag),
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
// Two triggers keep the index in step with the commits, whatever deletes
// them: a commit's entries go with it, and an entry's FTS row with it.
// Apply writes the entries of new commits (see searchDocs).
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
	`CREATE TRIGGER commits_unindex AFTER DELETE ON commits BEGIN
		DELETE FROM search_entries WHERE commit_key = old.k;
	END`,
	`CREATE TRIGGER search_entries_unindex AFTER DELETE ON search_entries BEGIN
		DELETE FROM search WHERE rowid = old.rowid;
	END`,
}

// Statements that write an entry: the entry, then its FTS row with the
// entry's rowid.
const (
	qInsertEntry  = `INSERT INTO search_entries (commit_key, idx, thread) VALUES (?, ?, ?)`
	qInsertSearch = `INSERT INTO search (rowid, words) VALUES (?, ?)`
)

// migrateV3 makes the search index and fills it.
func migrateV3(ctx context.Context, tx *sql.Tx) error {
	if err := execAll(schemaV3...)(ctx, tx); err != nil {
		return err
	}
	return backfillSearch(ctx, tx)
}

// backfillSearch indexes the messages of every commit that a thread
// reaches through its history and checkpoints, under the first thread (by
// creation) that reaches it, as Apply would have: a fork's shared commits
// belong to the thread it was forked from. Commits are indexed in the
// order they were written, so that newest first means what it does for
// the entries Apply writes. A commit whose messages do not decode is left
// out: reading it fails anyway, and one damaged row should not keep a
// database from opening.
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
	insEntry, err := tx.PrepareContext(ctx, qInsertEntry)
	if err != nil {
		return err
	}
	defer insEntry.Close()
	insSearch, err := tx.PrepareContext(ctx, qInsertSearch)
	if err != nil {
		return err
	}
	defer insSearch.Close()
	read, err := tx.PrepareContext(ctx, `SELECT messages FROM commits WHERE k = ?`)
	if err != nil {
		return err
	}
	defer read.Close()
	ks := make([]int64, 0, len(owner))
	for k := range owner {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	for _, k := range ks {
		var blob []byte
		if err := read.QueryRowContext(ctx, k).Scan(&blob); err != nil {
			return fmt.Errorf("read commit %d: %w", k, err)
		}
		msgs, err := decodeMessages(blob)
		if err != nil {
			continue
		}
		key := keys[owner[k]]
		tag := keyTag(key)
		for i, m := range msgs {
			words := searchWordsOf(tag, m)
			if words == "" {
				continue
			}
			res, err := insEntry.ExecContext(ctx, k, i, key)
			if err != nil {
				return fmt.Errorf("index commit %d: %w", k, err)
			}
			rowid, err := res.LastInsertId()
			if err != nil {
				return fmt.Errorf("index commit %d: %w", k, err)
			}
			if _, err := insSearch.ExecContext(ctx, rowid, words); err != nil {
				return fmt.Errorf("index commit %d: %w", k, err)
			}
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
	for i, w := range thread.SearchTokens(thread.SearchText(m)) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(tag)
		b.WriteString(w)
	}
	return b.String()
}

// searchDoc is one message to index: its index in its commit and words.
type searchDoc struct {
	index int
	words string
}

// searchCommit is what Apply indexes of a commit of its batch.
type searchCommit struct {
	thread string
	docs   []searchDoc
}

// searchDocs returns, for each commit of b (by index), the entries Apply
// writes for it: one per message with words, under the thread that b
// commits it for (thread.Batch.CommitThreads). A commit that no thread
// claims gets none. It runs before the write transaction, so that
// tokenizing does not hold the write lock.
func searchDocs(b *thread.Batch) []searchCommit {
	threads := b.CommitThreads()
	if len(threads) == 0 {
		return nil
	}
	out := make([]searchCommit, len(b.Commits))
	for i, c := range b.Commits {
		key, ok := threads[c.ID]
		if !ok {
			continue
		}
		sc := searchCommit{thread: key}
		tag := keyTag(key)
		for j, m := range c.Messages {
			if w := searchWordsOf(tag, m); w != "" {
				sc.docs = append(sc.docs, searchDoc{index: j, words: w})
			}
		}
		out[i] = sc
	}
	return out
}

// index writes the entries of commit k.
func (a *applier) index(k int64, sc searchCommit) error {
	for _, d := range sc.docs {
		res, err := a.exec(a.st.insertEntry, k, d.index, sc.thread)
		if err != nil {
			return fmt.Errorf("index: %w", err)
		}
		rowid, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("index: %w", err)
		}
		if _, err := a.exec(a.st.insertSearch, rowid, d.words); err != nil {
			return fmt.Errorf("index: %w", err)
		}
	}
	return nil
}

var _ thread.Searcher = (*Store)(nil)

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
func searchMatch(opts thread.SearchOptions) string {
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

// Search implements thread.Searcher from the FTS5 index. An entry's
// Cursor is its rowid in decimal.
func (s *Store) Search(ctx context.Context, opts thread.SearchOptions) iter.Seq2[thread.SearchEntry, error] {
	return func(yield func(thread.SearchEntry, error) bool) {
		if len(opts.Words) == 0 {
			yield(thread.SearchEntry{}, fmt.Errorf("search: no words: %w", thread.ErrInvalid))
			return
		}
		for _, w := range opts.Words {
			// A word that is not a token of SearchTokens is in no
			// message's words (and could be several FTS tokens).
			if t := thread.SearchTokens(w); len(t) != 1 || t[0] != w {
				return
			}
		}
		before := int64(1<<63 - 1)
		if opts.Before != "" {
			n, err := strconv.ParseInt(opts.Before, 10, 64)
			if err != nil || n <= 0 || strconv.FormatInt(n, 10) != opts.Before {
				yield(thread.SearchEntry{}, fmt.Errorf("search cursor %q: %w", clip(opts.Before), thread.ErrInvalid))
				return
			}
			before = n
		}
		limit := int64(cmp.Or(opts.Limit, -1))
		if limit < -1 {
			limit = -1
		}
		rows, err := s.r.QueryContext(ctx, qSearch, searchMatch(opts), before, limit)
		if err != nil {
			yield(thread.SearchEntry{}, fmt.Errorf("search: %w", err))
			return
		}
		defer rows.Close()
		for rows.Next() {
			var e thread.SearchEntry
			var rowid int64
			if err := rows.Scan(&rowid, &e.Thread, &e.Commit, &e.Index); err != nil {
				yield(thread.SearchEntry{}, fmt.Errorf("search: %w", err))
				return
			}
			e.Cursor = strconv.FormatInt(rowid, 10)
			if !yield(e, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(thread.SearchEntry{}, fmt.Errorf("search: %w", err))
		}
	}
}
