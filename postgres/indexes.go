package postgres

import (
	"context"
	"fmt"
	"iter"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

var (
	_ store.ForkIndex       = (*Store)(nil)
	_ store.DescendantIndex = (*Store)(nil)
)

// schemaV7 indexes threads by the thread they were forked from
// (loom_threads_forked, of forks only: an append to another thread writes
// nothing to it), for Forks and Descendants, and by label
// (loom_labels), so that a page of the threads of a label is a seek and a
// walk of that label's entries in id order, whatever the number of
// threads without it.
//
// loom_labels holds a row per label of each thread of the tenant, kept by
// triggers on loom_threads (so that processes of earlier releases keep it
// too): a created thread's labels, a relabelled thread's (only when its
// labels change: an append does not set them), a deleted thread's. A label
// whose key and value are longer than maxIndexedLabel bytes together is
// left out (a B-tree entry holds some 2.7 KB): a listing by it is not
// served from loom_labels (see labelIndexed). The threads the database
// holds already are indexed by the migration.
//
// The GIN index of the labels (loom_threads_labels) goes: every append
// updated it (the update of a thread's head is not a HOT update, its
// updated_at being indexed), and its pending list, flushed by whichever
// writer fills it, made the writers queue: 64 writers on 64 threads made
// 1.4–1.8 times the appends/s without it. The listings it served that
// loom_labels does not (of every tenant, by update time, or by a label too
// long for loom_labels) filter the records they walk, as a store without
// an index does.
const schemaV7 = `
CREATE INDEX loom_threads_forked ON loom_threads (forked_thread, id) WHERE forked_thread <> '';
DROP INDEX loom_threads_labels;

CREATE TABLE loom_labels (
	tenant text COLLATE "C" NOT NULL,
	key    text COLLATE "C" NOT NULL,
	value  text COLLATE "C" NOT NULL,
	thread text COLLATE "C" NOT NULL,
	PRIMARY KEY (tenant, key, value, thread)
);

CREATE FUNCTION loom_labels_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP IN ('UPDATE', 'DELETE') THEN
		DELETE FROM loom_labels l USING jsonb_each_text(OLD.labels) e
		WHERE l.tenant = OLD.tenant AND l.key = e.key AND l.value = e.value AND l.thread = OLD.id;
	END IF;
	IF TG_OP IN ('INSERT', 'UPDATE') THEN
		INSERT INTO loom_labels (tenant, key, value, thread)
		SELECT NEW.tenant, e.key, e.value, NEW.id FROM jsonb_each_text(NEW.labels) e
		WHERE octet_length(e.key) + octet_length(e.value) <= 512;
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER loom_labels_insert AFTER INSERT ON loom_threads
	FOR EACH ROW WHEN (NEW.labels <> '{}') EXECUTE FUNCTION loom_labels_sync();
CREATE TRIGGER loom_labels_update AFTER UPDATE OF labels ON loom_threads
	FOR EACH ROW WHEN (OLD.labels IS DISTINCT FROM NEW.labels) EXECUTE FUNCTION loom_labels_sync();
CREATE TRIGGER loom_labels_delete AFTER DELETE ON loom_threads
	FOR EACH ROW WHEN (OLD.labels <> '{}') EXECUTE FUNCTION loom_labels_sync();

INSERT INTO loom_labels (tenant, key, value, thread)
SELECT t.tenant, e.key, e.value, t.id FROM loom_threads t, jsonb_each_text(t.labels) e
WHERE octet_length(e.key) + octet_length(e.value) <= 512;

-- loom_descendants returns the ids of the threads forked from root, and
-- of those forked from them, down the tree (UNION ends a cycle of forks
-- of threads deleted and made again), at most lim. It is a function, whose
-- plan a session keeps, so that it may forbid hash and merge joins: each
-- step down is then a seek of loom_threads_forked for each thread found,
-- not a scan of every fork.
CREATE FUNCTION loom_descendants(root text, lim integer) RETURNS SETOF text LANGUAGE plpgsql STABLE
SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off AS $$
BEGIN
	RETURN QUERY WITH RECURSIVE d(id) AS (
		SELECT l.id COLLATE "default" FROM loom_threads l WHERE l.forked_thread = root AND l.forked_thread <> ''
		UNION
		SELECT t.id COLLATE "default" FROM d JOIN loom_threads t ON t.forked_thread = d.id AND t.forked_thread <> ''
	)
	SELECT d.id FROM d LIMIT lim;
END
$$;
`

// maxIndexedLabel is the most bytes of a label's key and value that
// loom_labels indexes (schemaV7's triggers say it again).
const maxIndexedLabel = 512

// labelIndexed returns the label of labels that a listing seeks in
// loom_labels: the first by key of those indexed, and false when none is.
func labelIndexed(labels map[string]string) (key, value string, ok bool) {
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range labels {
			if !yield(k) {
				return
			}
		}
	}) {
		if v := labels[k]; len(k)+len(v) <= maxIndexedLabel {
			return k, v, true
		}
	}
	return "", "", false
}

// forksPage is how many records a query of Forks or Descendants reads.
const forksPage = 256

// Forks implements store.ForkIndex from loom_threads_forked: pages of the
// records of the threads forked from parent, in id order.
func (s *Store) Forks(ctx context.Context, parent string) iter.Seq2[*thread.Record, error] {
	return func(yield func(*thread.Record, error) bool) {
		if !validKey(parent) || parent == "" {
			return
		}
		after := ""
		for {
			rows, err := s.query(ctx, `SELECT `+recordCols+`
				FROM loom_threads t LEFT JOIN loom_commits h ON h.seq = t.head
				WHERE t.forked_thread = $1 AND t.forked_thread <> '' AND t.id > $2
				ORDER BY t.id LIMIT $3`, parent, after, forksPage)
			if err != nil {
				yield(nil, mapError(ctx, "forks", err))
				return
			}
			buf, err := collectRecords(rows)
			if err != nil {
				yield(nil, mapError(ctx, "forks", err))
				return
			}
			for _, r := range buf {
				if !yield(r, nil) {
					return
				}
			}
			if len(buf) < forksPage {
				return
			}
			after = buf[len(buf)-1].ID
		}
	}
}

// Descendants implements store.DescendantIndex: the records of every
// thread forked from root or from any of its descendants (root's own too
// in a cycle of threads deleted and made again), in one query that walks
// loom_threads_forked down (loom_descendants): a family costs one round
// trip, not one a member. It stops past thread.MaxFamily records.
func (s *Store) Descendants(ctx context.Context, root string) iter.Seq2[*thread.Record, error] {
	return func(yield func(*thread.Record, error) bool) {
		if !validKey(root) || root == "" {
			return
		}
		rows, err := s.query(ctx, `SELECT `+recordCols+`
			FROM loom_threads t LEFT JOIN loom_commits h ON h.seq = t.head
			WHERE t.id = ANY(ARRAY(SELECT loom_descendants($1, $2)))`, root, thread.MaxFamily)
		if err != nil {
			yield(nil, mapError(ctx, "descendants", err))
			return
		}
		buf, err := collectRecords(rows)
		if err != nil {
			yield(nil, mapError(ctx, "descendants", err))
			return
		}
		for _, r := range buf {
			if !yield(r, nil) {
				return
			}
		}
	}
}

// collectRecords reads rows of recordCols and closes them.
func collectRecords(rows pgx.Rows) ([]*thread.Record, error) {
	defer rows.Close()
	var buf []*thread.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		buf = append(buf, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read records: %w", err)
	}
	return buf, nil
}
