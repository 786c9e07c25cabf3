package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// errInjected is the error of every fault a faults injects.
var errInjected = errors.New("injected fault")

// faults makes a store's write connection fail on demand, as a disk, a
// lock or a crash would: the next BEGIN or COMMIT, or the next run of a
// statement. A COMMIT that fails rolls the transaction back first, as
// modernc's driver does when SQLite's COMMIT fails.
type faults struct {
	mu     sync.Mutex
	begin  int    // BEGINs left to fail
	commit int    // COMMITs left to fail
	stmt   string // a statement whose SQL contains it fails,
	skip   int    // after this many more runs that do not,
	stmtN  int    // this many more times
	// runs counts the runs of each statement, by its SQL.
	runs map[string]int
}

// take reports whether a fault of the count n is due, and counts it.
func (f *faults) take(n *int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if *n <= 0 {
		return false
	}
	*n--
	return true
}

// ran counts a run of the statement q and reports whether it is to fail.
func (f *faults) ran(q string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.runs == nil {
		f.runs = map[string]int{}
	}
	f.runs[q]++
	if f.stmtN > 0 && f.stmt != "" && strings.Contains(q, f.stmt) {
		if f.skip > 0 {
			f.skip--
			return false
		}
		f.stmtN--
		return true
	}
	return false
}

// set changes the faults under the lock.
func (f *faults) set(change func(f *faults)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

// runsOf returns how many times the statements whose SQL contains q ran,
// and forgets the counts.
func (f *faults) runsOf(q string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for s, c := range f.runs {
		if strings.Contains(s, q) {
			n += c
		}
	}
	f.runs = nil
	return n
}

// faultyDriver is modernc's driver with f's faults.
type faultyDriver struct {
	d driver.Driver
	f *faults
}

func (d *faultyDriver) Open(name string) (driver.Conn, error) {
	c, err := d.d.Open(name)
	if err != nil {
		return nil, err
	}
	return &faultyConn{c: c, f: d.f}, nil
}

// faultyConn is a driver connection with faults. It has every method of
// modernc's that database/sql and the store use.
type faultyConn struct {
	c driver.Conn
	f *faults
}

var (
	_ driver.ConnPrepareContext = (*faultyConn)(nil)
	_ driver.ConnBeginTx        = (*faultyConn)(nil)
	_ driver.ExecerContext      = (*faultyConn)(nil)
	_ driver.QueryerContext     = (*faultyConn)(nil)
	_ driver.SessionResetter    = (*faultyConn)(nil)
	_ driver.Validator          = (*faultyConn)(nil)
	_ wstmt                     = (*faultyStmt)(nil)
)

func (c *faultyConn) Prepare(q string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), q)
}

func (c *faultyConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	st, err := c.c.(driver.ConnPrepareContext).PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	return &faultyStmt{st: st.(wstmt), q: q, f: c.f}, nil
}

func (c *faultyConn) Close() error { return c.c.Close() }

func (c *faultyConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *faultyConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if c.f.take(&c.f.begin) {
		return nil, fmt.Errorf("BEGIN: %w", errInjected)
	}
	tx, err := c.c.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &faultyTx{tx: tx, f: c.f}, nil
}

func (c *faultyConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	if c.f.ran(q) {
		return nil, fmt.Errorf("%.40q: %w", q, errInjected)
	}
	return c.c.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c *faultyConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	if c.f.ran(q) {
		return nil, fmt.Errorf("%.40q: %w", q, errInjected)
	}
	return c.c.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c *faultyConn) ResetSession(ctx context.Context) error {
	return c.c.(driver.SessionResetter).ResetSession(ctx)
}

func (c *faultyConn) IsValid() bool { return c.c.(driver.Validator).IsValid() }

type faultyTx struct {
	tx driver.Tx
	f  *faults
}

func (t *faultyTx) Commit() error {
	if t.f.take(&t.f.commit) {
		t.tx.Rollback()
		return fmt.Errorf("COMMIT: %w", errInjected)
	}
	return t.tx.Commit()
}

func (t *faultyTx) Rollback() error { return t.tx.Rollback() }

type faultyStmt struct {
	st wstmt
	q  string
	f  *faults
}

func (s *faultyStmt) Close() error  { return s.st.Close() }
func (s *faultyStmt) NumInput() int { return s.st.NumInput() }

func (s *faultyStmt) Exec(args []driver.Value) (driver.Result, error) {
	if s.f.ran(s.q) {
		return nil, fmt.Errorf("%.40q: %w", s.q, errInjected)
	}
	return s.st.Exec(args)
}

func (s *faultyStmt) Query(args []driver.Value) (driver.Rows, error) {
	if s.f.ran(s.q) {
		return nil, fmt.Errorf("%.40q: %w", s.q, errInjected)
	}
	return s.st.Query(args)
}

func (s *faultyStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if s.f.ran(s.q) {
		return nil, fmt.Errorf("%.40q: %w", s.q, errInjected)
	}
	return s.st.ExecContext(ctx, args)
}

func (s *faultyStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if s.f.ran(s.q) {
		return nil, fmt.Errorf("%.40q: %w", s.q, errInjected)
	}
	return s.st.QueryContext(ctx, args)
}

// faultyDrivers numbers the drivers openFaulty registers: database/sql
// keeps a driver for good, under a name used once.
var faultyDrivers atomic.Int64

// openFaulty opens the store at path with a write connection that fails
// as f says, and with no background fold (whose transactions would take
// the faults meant for a test's). It closes the store when the test ends.
func openFaulty(t *testing.T, path string, f *faults) *Store {
	t.Helper()
	db, err := sql.Open("sqlite", "")
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("sqlite-faulty-%d", faultyDrivers.Add(1))
	sql.Register(name, &faultyDriver{d: db.Driver(), f: f})
	db.Close()
	defer func(d string) { writeDriver = d }(writeDriver)
	writeDriver = name
	s, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.stopFolding()
	return s
}

// turnBatch is a commit of one message on head and the move of th, at
// version from, to it.
func turnBatch(th, id, head string, depth, from int64) *store.Batch {
	now := time.Now().UTC()
	return &store.Batch{
		Commits: []*store.Commit{{ID: id, Parent: head, Depth: depth + 1, Op: store.OpAppend, Time: now,
			Messages: []message.Message{message.User(id)}}},
		Moves: []store.Move{{Thread: th, From: from, Head: id, Op: store.OpAppend, Time: now}},
	}
}

// checkAt fails unless thread id is at version at head, and each commit
// of gone is neither stored nor cached.
func checkAt(t *testing.T, s *Store, when, id string, version int64, head string, gone ...string) {
	t.Helper()
	r, err := s.Thread(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != version || r.Head != head {
		t.Errorf("%s: %s at version %d head %s, want %d %s", when, id, r.Version, r.Head, version, head)
	}
	for _, c := range gone {
		if s.CachedCommit(c) != nil {
			t.Errorf("%s: commit %s of a failed batch is cached", when, c)
		}
		if _, err := s.Commit(t.Context(), c); !errors.Is(err, thread.ErrNotFound) {
			t.Errorf("%s: commit %s of a failed batch: %v, want ErrNotFound", when, c, err)
		}
	}
}

// TestApplyFaults makes the write transaction fail at its BEGIN, at its
// COMMIT and at a statement between: Apply returns the error, nothing of
// the batch is stored (in the file, reopened with modernc's own driver)
// or cached, and the next Apply works.
func TestApplyFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		arm  func(f *faults)
	}{
		{"begin", func(f *faults) { f.begin = 1 }},
		{"commit", func(f *faults) { f.commit = 1 }},
		// The history entry is written after the commit and the move.
		{"statement", func(f *faults) { f.stmt, f.stmtN = "INSERT INTO history", 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "faults.db")
			f := &faults{}
			s := openFaulty(t, path, f)
			th, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("hi")}})
			if err != nil {
				t.Fatal(err)
			}
			head := th.Record().Head
			f.set(tc.arm)
			err = s.Apply(ctx, turnBatch("a", "c_failed", head, 1, 1))
			if !errors.Is(err, errInjected) {
				t.Fatalf("Apply with a failing %s: %v, want the fault", tc.name, err)
			}
			checkAt(t, s, "after the fault", "a", 1, head, "c_failed")
			if err := s.Apply(ctx, turnBatch("a", "c_ok", head, 1, 1)); err != nil {
				t.Fatalf("Apply after the fault: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = Open(ctx, path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			checkAt(t, s, "reopened", "a", 2, "c_ok", "c_failed")
			checkRefs(t, s)
		})
	}
}

// TestGroupCommitFaults queues two batches so that they share one
// transaction, and makes its COMMIT, or the release of the second batch's
// savepoint, fail: both batches fail, the first too although it had been
// written, nothing of either is stored or cached, and both go through
// when tried again.
func TestGroupCommitFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		arm  func(f *faults)
	}{
		{"commit", func(f *faults) { f.commit = 1 }},
		// The first batch's savepoint is released, the second's fails.
		{"release", func(f *faults) { f.stmt, f.skip, f.stmtN = "RELEASE batch", 1, 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "group.db")
			f := &faults{}
			s := openFaulty(t, path, f)
			db := thread.New(s, nil)
			var heads []string
			for i := range 2 {
				th, err := db.Create(ctx, thread.CreateOptions{ID: fmt.Sprintf("t%d", i), Messages: []message.Message{message.User("hi")}})
				if err != nil {
					t.Fatal(err)
				}
				heads = append(heads, th.Record().Head)
			}
			// The turn is taken, as by a writer in its transaction,
			// while the two batches queue.
			s.group.mu.Lock()
			s.group.busy = true
			s.group.mu.Unlock()
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for i := range 2 {
				wg.Go(func() {
					errs[i] = s.Apply(ctx, turnBatch(fmt.Sprintf("t%d", i), fmt.Sprintf("c_failed%d", i), heads[i], 1, 1))
				})
				queued(t, s, i+1)
			}
			f.set(tc.arm)
			f.runsOf("") // count the group's statements only
			s.group.mu.Lock()
			s.group.handOff()
			s.group.mu.Unlock()
			wg.Wait()
			if n := f.runsOf("SAVEPOINT batch"); n != 2 {
				t.Fatalf("%d savepoints: the batches were not written in one transaction", n)
			}
			for i, err := range errs {
				if !errors.Is(err, errInjected) {
					t.Errorf("batch %d of the failed transaction: %v, want the fault", i, err)
				}
			}
			for i := range 2 {
				checkAt(t, s, "after the fault", fmt.Sprintf("t%d", i), 1, heads[i], fmt.Sprintf("c_failed%d", i))
			}
			for i := range 2 {
				if err := s.Apply(ctx, turnBatch(fmt.Sprintf("t%d", i), fmt.Sprintf("c_ok%d", i), heads[i], 1, 1)); err != nil {
					t.Fatalf("Apply after the fault: %v", err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err := Open(ctx, path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for i := range 2 {
				checkAt(t, s, "reopened", fmt.Sprintf("t%d", i), 2, fmt.Sprintf("c_ok%d", i), fmt.Sprintf("c_failed%d", i))
			}
			checkRefs(t, s)
		})
	}
}

// TestFreeRunIsOneStatement deletes a thread whose line of commits is its
// own: the line is freed by one statement (free's run of ancestors that
// only the commit below kept), not one per commit.
func TestFreeRunIsOneStatement(t *testing.T) {
	ctx := t.Context()
	f := &faults{}
	s := openFaulty(t, filepath.Join(t.TempDir(), "free.db"), f)
	th, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("a0")}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := th.Append(ctx, message.User(fmt.Sprint("a", i+1))); err != nil {
			t.Fatal(err)
		}
	}
	f.runsOf("")
	if err := th.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.runsOf("WITH RECURSIVE run"); n != 1 {
		t.Errorf("a line of 6 commits freed in %d statements, want 1", n)
	}
	if n := commitRows(t, s); n != 0 {
		t.Errorf("%d commits stored after the thread was deleted, want 0", n)
	}
}
