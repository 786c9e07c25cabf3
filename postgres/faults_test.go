package postgres

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// failCommit makes the server fail the COMMIT of every transaction that
// inserts a commit while loom_test_fail_commit has a row: a deferred
// constraint trigger raises at COMMIT, which then rolls the transaction
// back, as a commit-time serialization failure or a full disk would.
const failCommit = `
CREATE TABLE loom_test_fail_commit (armed boolean);
CREATE FUNCTION loom_test_fail_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF EXISTS (SELECT 1 FROM loom_test_fail_commit) THEN
		RAISE EXCEPTION 'injected commit failure' USING ERRCODE = 'P0001';
	END IF;
	RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER loom_test_fail_commit AFTER INSERT ON loom_commits
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION loom_test_fail_commit();
`

// codeInFailedTransaction is the server's answer to any statement but
// ROLLBACK in a transaction it has aborted: in_failed_sql_transaction.
const codeInFailedTransaction = "25P02"

// openFaulty opens a store on dsn whose server fails on demand: while
// failBegin is set, every connection the pool hands out is in a
// transaction the server has aborted, so that the BEGIN of a write's
// transaction fails (and every statement after it); fail arms and disarms
// failCommit.
func openFaulty(t *testing.T, dsn string) (s *Store, failBegin *atomic.Bool, fail func(armed bool)) {
	t.Helper()
	failBegin = new(atomic.Bool)
	s = open(t, dsn, &Options{Configure: func(cfg *pgxpool.Config) {
		cfg.PrepareConn = func(ctx context.Context, c *pgx.Conn) (bool, error) {
			if failBegin.Load() {
				c.Exec(ctx, "BEGIN")
				if _, err := c.Exec(ctx, "SELECT 1/0"); err == nil {
					return false, errors.New("the fault did not abort the transaction")
				}
			}
			return true, nil
		}
	}})
	if _, err := s.pool.Exec(t.Context(), failCommit); err != nil {
		t.Fatal(err)
	}
	fail = func(armed bool) {
		t.Helper()
		q := `DELETE FROM loom_test_fail_commit`
		if armed {
			q = `INSERT INTO loom_test_fail_commit VALUES (true)`
		}
		if _, err := s.pool.Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	return s, failBegin, fail
}

// TestApplyFaults makes the server fail a write's BEGIN or its COMMIT, on
// the general path (a transaction of BEGIN … COMMIT) and on the fast path
// of an append (one statement, its own transaction): Apply returns the
// server's error, nothing of the batch is applied (as another store on
// the database reads it), and the next Apply works.
func TestApplyFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		// fast takes the fast path: the batch is only the commit and the
		// move to it.
		fast  bool
		begin bool // the BEGIN fails, else the COMMIT
		code  string
	}{
		{"begin", false, true, codeInFailedTransaction},
		{"commit", false, false, "P0001"},
		{"append commit", true, false, "P0001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			dsn := testserver.Postgres(t)
			s, failBegin, fail := openFaulty(t, dsn)
			th, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("hi")}})
			if err != nil {
				t.Fatal(err)
			}
			head := th.Record().Head
			batch := func(id string) *store.Batch {
				now := time.Now().UTC().Truncate(time.Microsecond)
				b := &store.Batch{
					Commits: []*store.Commit{{ID: id, Parent: head, Depth: 2, Op: store.OpAppend, Time: now,
						Messages: []message.Message{message.User(id)}}},
					Moves: []store.Move{{Thread: "a", From: 1, Head: id, Op: store.OpAppend, Time: now}},
				}
				if !tc.fast {
					// A checkpoint too: not an append, the general path.
					b.Checkpoints = []store.Checkpoint{{Thread: "a", Name: id, Commit: head, Version: 1, CreatedAt: now}}
				}
				if fastAppend(b) != tc.fast {
					t.Fatalf("fastAppend: %v, want %v", !tc.fast, tc.fast)
				}
				return b
			}
			if tc.begin {
				failBegin.Store(true)
			} else {
				fail(true)
			}
			err = s.Apply(ctx, batch("c_failed"))
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != tc.code {
				t.Fatalf("Apply with a failing %s: %v, want the server's error %s", tc.name, err, tc.code)
			}
			failBegin.Store(false)
			fail(false)

			other := open(t, dsn, nil)
			check := func(when string, version int64, want string) {
				t.Helper()
				r, err := other.Thread(ctx, "a")
				if err != nil {
					t.Fatal(err)
				}
				if r.Version != version || r.Head != want {
					t.Errorf("%s: a at version %d head %s, want %d %s", when, r.Version, r.Head, version, want)
				}
				if _, err := other.Commit(ctx, "c_failed"); !errors.Is(err, thread.ErrNotFound) {
					t.Errorf("%s: commit of the failed batch: %v, want ErrNotFound", when, err)
				}
				for cp, err := range other.Checkpoints(ctx, "a") {
					if err != nil {
						t.Fatal(err)
					}
					if cp.Name == "c_failed" {
						t.Errorf("%s: the failed batch's checkpoint is there", when)
					}
				}
				checkRefs(t, other)
			}
			check("after the fault", 1, head)
			if err := s.Apply(ctx, batch("c_ok")); err != nil {
				t.Fatalf("Apply after the fault: %v", err)
			}
			check("after the next Apply", 2, "c_ok")
		})
	}
}
