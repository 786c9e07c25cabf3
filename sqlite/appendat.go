package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"

	"github.com/loomthreads/loom/thread/store"
)

var _ store.Appender = (*Store)(nil)

// AppendAt implements store.Appender. The append joins the group of
// batches waiting for the writer (group.go), and its turn reads the
// record and head in the write transaction, calls build and writes the
// batch it returns, in that transaction: writers on one hot thread take
// turns in the order they came, and share transactions, instead of losing
// their compare-and-swap and trying again.
func (s *Store) AppendAt(ctx context.Context, id string, build func(r *store.Record, head *store.Commit) (*store.Batch, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w := &write{ctx: ctx, at: id, build: build}
	s.group.run(w, s.writeGroup)
	if w.err != nil {
		return mapFull(w.err)
	}
	s.cacheWritten(w.b, w.enc, w.a.added)
	return nil
}

// buildAt reads the record and head of w's thread in the write
// transaction and has w.build make the batch on them.
func (s *Store) buildAt(st *wstmts, w *write) error {
	a := &applier{ctx: w.ctx, st: st}
	var (
		r         *store.Record
		k, headK  int64
		depth     int64
		stateFrom string
	)
	found := false
	err := a.each(st.appendRecord, []any{w.at}, func(row []driver.Value) error {
		if found {
			return nil
		}
		found = true
		var err error
		n := len(row)
		r, err = scanRecord(driverRow(row[:n-4]))
		if err != nil {
			return err
		}
		return assign(row[n-4:], &k, &headK, &depth, (*nullString)(&stateFrom))
	})
	if err != nil {
		return fmt.Errorf("thread %q: %w", clip(w.at), err)
	}
	if !found {
		return fmt.Errorf("thread %q: %w", clip(w.at), store.ErrNotFound)
	}
	var head *store.Commit
	if r.Head != "" {
		head = &store.Commit{ID: r.Head, Depth: depth, StateFrom: stateFrom}
	}
	b, err := w.build(r, head)
	if err != nil {
		return err
	}
	if b == nil {
		b = &store.Batch{}
	}
	enc, err := encodeCommits(b)
	if err != nil {
		return err
	}
	w.b, w.enc = b, enc
	w.seed = threadRow{id: r.ID, k: k, version: r.Version, head: r.Head, ok: true}
	w.seedHead = headK
	return nil
}

// nullString scans a text column, NULL as "".
type nullString string

func (n *nullString) Scan(v any) error {
	var s sql.NullString
	if err := s.Scan(v); err != nil {
		return err
	}
	*n = nullString(s.String)
	return nil
}

// driverRow scans a row of driver values as sql.Rows would, into the
// types scanRecord uses.
type driverRow []driver.Value

func (row driverRow) Scan(dest ...any) error {
	if len(row) != len(dest) {
		return fmt.Errorf("sqlite: %d columns into %d values", len(row), len(dest))
	}
	for i, d := range dest {
		v := row[i]
		switch d := d.(type) {
		case *string:
			switch v := v.(type) {
			case string:
				*d = v
			case []byte:
				*d = string(v)
			default:
				return fmt.Errorf("sqlite: column %d: %T, want text", i, v)
			}
		case *int64:
			n, ok := v.(int64)
			if !ok {
				return fmt.Errorf("sqlite: column %d: %T, want an integer", i, v)
			}
			*d = n
		case *sql.RawBytes:
			switch v := v.(type) {
			case nil:
				*d = nil
			case []byte:
				*d = append((*d)[:0], v...)
			case string:
				*d = append((*d)[:0], v...)
			default:
				return fmt.Errorf("sqlite: column %d: %T, want bytes", i, v)
			}
		case sql.Scanner:
			if err := d.Scan(v); err != nil {
				return fmt.Errorf("sqlite: column %d: %w", i, err)
			}
		default:
			return fmt.Errorf("sqlite: column %d: cannot scan into %T", i, d)
		}
	}
	return nil
}
