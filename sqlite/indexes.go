package sqlite

import (
	"context"
	"fmt"
	"iter"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

var (
	_ store.ForkIndex       = (*Store)(nil)
	_ store.DescendantIndex = (*Store)(nil)
)

const (
	// qForks is a page of the forks of ?1 after the id ?2, in id order,
	// from threads_by_fork (whose condition the query repeats, so that
	// the partial index serves it).
	qForks = `SELECT ` + recordCols + ` FROM threads t INDEXED BY threads_by_fork
		LEFT JOIN commits h ON h.k = t.head
		WHERE t.forked_thread = ?1 AND t.forked_thread <> '' AND t.id > ?2
		ORDER BY t.id LIMIT ?3`

	// qDescendants walks threads_by_fork down from ?1, at most ?2
	// threads: each step is a seek for the forks of one thread found.
	// UNION ends a cycle of forks (of threads deleted and made again);
	// a deleted thread ends its branch, its row being gone.
	qDescendants = `WITH RECURSIVE d(k, id) AS (
		SELECT k, id FROM threads WHERE forked_thread = ?1 AND forked_thread <> ''
		UNION
		SELECT t.k, t.id FROM d CROSS JOIN threads t ON t.forked_thread = d.id AND t.forked_thread <> ''
		LIMIT ?2
	)
	SELECT ` + recordCols + ` FROM d CROSS JOIN threads t ON t.k = d.k LEFT JOIN commits h ON h.k = t.head`
)

// forksPage is how many records a query of Forks reads.
const forksPage = 256

// Forks implements store.ForkIndex from threads_by_fork: pages of the
// records of the threads forked from parent, in id order. Each page is
// read and its query closed before it is yielded, as Threads does.
func (s *Store) Forks(ctx context.Context, parent string) iter.Seq2[*thread.Record, error] {
	return func(yield func(*thread.Record, error) bool) {
		if parent == "" {
			return
		}
		after := ""
		for {
			recs, err := s.records(ctx, qForks, parent, after, forksPage)
			if err != nil {
				yield(nil, fmt.Errorf("forks of %q: %w", clip(parent), err))
				return
			}
			for _, r := range recs {
				if !yield(r, nil) {
					return
				}
			}
			if len(recs) < forksPage {
				return
			}
			after = recs[len(recs)-1].ID
		}
	}
}

// Descendants implements store.DescendantIndex: the records of every
// thread forked from root or from any of its descendants (root's own too
// in a cycle of threads deleted and made again), in one recursive query
// on threads_by_fork. It stops past thread.MaxFamily records.
func (s *Store) Descendants(ctx context.Context, root string) iter.Seq2[*thread.Record, error] {
	return func(yield func(*thread.Record, error) bool) {
		if root == "" {
			return
		}
		recs, err := s.records(ctx, qDescendants, root, thread.MaxFamily)
		if err != nil {
			yield(nil, fmt.Errorf("descendants of %q: %w", clip(root), err))
			return
		}
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
}

// records runs a query of recordCols on the read pool and returns its
// records, the query closed.
func (s *Store) records(ctx context.Context, query string, args ...any) ([]*thread.Record, error) {
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var recs []*thread.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	return recs, rows.Err()
}
