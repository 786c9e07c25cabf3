package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/loomthreads/loom/message"
)

// The folds that move pending commits into the search index (see
// schemaV3): a search folds everything pending before it reads, in
// transactions of foldBatch commits; the store's background folder folds
// every foldEvery while commits are pending, in smaller transactions, so
// that a writer never waits long for it and a search seldom finds more
// than a moment's worth to fold.
const (
	foldBatch           = 1000
	foldBatchBackground = 200
)

// foldEvery is how often the background folder looks for pending commits.
var foldEvery = 200 * time.Millisecond

// querier is what reads pending commits: the read pool or a transaction.
type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// pendingCommit is a commit queued for the index.
type pendingCommit struct {
	k      int64
	id     string
	thread string
	msgs   []message.Message // nil when they do not decode: nothing to index
}

// readPending reads the first limit pending commits by key (all for -1).
func readPending(ctx context.Context, q querier, limit int) ([]pendingCommit, error) {
	rows, err := q.QueryContext(ctx, `SELECT p.commit_key, c.id, p.thread, c.messages
		FROM search_pending p JOIN commits c ON c.k = p.commit_key
		ORDER BY p.commit_key LIMIT ?`, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []pendingCommit
	for rows.Next() {
		var p pendingCommit
		var blob []byte
		if err := rows.Scan(&p.k, &p.id, &p.thread, &blob); err != nil {
			return nil, err
		}
		// A commit whose messages do not decode is left out of the
		// index: reading it fails anyway, and one damaged row should not
		// stop the folds.
		p.msgs, _ = decodeMessages(blob)
		out = append(out, p)
	}
	return out, rows.Err()
}

// fold indexes up to limit pending commits, the oldest, in one write
// transaction, and returns how many it read. It reads and tokenizes them
// before it takes the write lock; in the transaction, each is claimed
// (its pending row deleted) only if it is still pending and still the
// commit read, so that folds in several processes index each commit once.
func (s *Store) fold(ctx context.Context, limit int) (int, error) {
	pend, err := readPending(ctx, s.r, limit)
	if err != nil || len(pend) == 0 {
		return 0, err
	}
	type doc struct {
		index int
		words string
	}
	docs := make([][]doc, len(pend))
	for i, p := range pend {
		tag := keyTag(p.thread)
		for j, m := range p.msgs {
			if w := searchWordsOf(tag, m); w != "" {
				docs[i] = append(docs[i], doc{j, w})
			}
		}
	}
	err = s.wc.do(ctx, s.w, func(st *wstmts) error {
		a := &applier{ctx: ctx, st: st}
		for i, p := range pend {
			var key sql.NullString
			ok, err := a.scan(st.claimPending, []any{p.k, p.id}, &key)
			if err != nil {
				return fmt.Errorf("claim commit %d: %w", p.k, err)
			}
			if !ok {
				continue
			}
			for _, d := range docs[i] {
				res, err := a.exec(st.insertEntry, p.k, d.index, key.String)
				if err != nil {
					return fmt.Errorf("index commit %d: %w", p.k, err)
				}
				rowid, err := res.LastInsertId()
				if err != nil {
					return fmt.Errorf("index commit %d: %w", p.k, err)
				}
				if _, err := a.exec(st.insertSearch, rowid, d.words); err != nil {
					return fmt.Errorf("index commit %d: %w", p.k, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(pend), nil
}

// foldAll folds every pending commit.
func (s *Store) foldAll(ctx context.Context) error {
	for {
		n, err := s.fold(ctx, foldBatch)
		if err != nil {
			return err
		}
		if n < foldBatch {
			return nil
		}
	}
}

// folder is the store's background fold.
type folder struct {
	stop context.CancelFunc
	done chan struct{}
	once sync.Once
}

// startFolding starts the background folder.
func (s *Store) startFolding() {
	ctx, cancel := context.WithCancel(context.Background())
	s.folder = &folder{stop: cancel, done: make(chan struct{})}
	go s.folding(ctx, s.folder.done)
}

// stopFolding stops the background folder and waits for it.
func (s *Store) stopFolding() {
	if f := s.folder; f != nil {
		f.once.Do(func() {
			f.stop()
			<-f.done
		})
	}
}

// folding folds, every foldEvery, whatever is pending, in small
// transactions, until ctx is done. A failed fold is logged (once until
// one succeeds) and tried again at the next tick.
func (s *Store) folding(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(foldEvery)
	defer t.Stop()
	failing := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for {
			n, err := s.fold(ctx, foldBatchBackground)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				if msg := err.Error(); msg != failing {
					failing = msg
					slog.Warn("sqlite: search index: fold of pending commits failed; retrying", "path", s.path, "err", err)
				}
				break
			}
			failing = ""
			if n < foldBatchBackground {
				break
			}
		}
	}
}

// lockedOut says whether err is SQLite's: the database is busy, locked or
// read-only, which a search answers without folding.
func lockedOut(err error) bool {
	var e interface{ Code() int }
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case 5, 6, 8: // SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY
		return true
	}
	return false
}
