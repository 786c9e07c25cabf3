package sqlite

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// walSize returns the size of the store's -wal file, 0 when there is none.
func walSize(t *testing.T, s *Store) int64 {
	t.Helper()
	fi, err := os.Stat(s.path + "-wal")
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestWALStaysBounded appends 5,000 one-message turns: without checkpoints
// the log would grow past 100 MB; the writer does none (its auto-checkpoint
// is off) and the checkpointer keeps it near walRestartBytes, even though
// the writes never pause.
func TestWALStaysBounded(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "wal.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var auto int
	if err := s.w.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&auto); err != nil || auto != 0 {
		t.Fatalf("the write connection's wal_autocheckpoint is %d (%v), want 0", auto, err)
	}
	th, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var most int64
	for range 5000 {
		if _, err := th.Append(ctx, user); err != nil {
			t.Fatal(err)
		}
		most = max(most, walSize(t, s))
	}
	// The log grows on while the PASSIVE checkpoint before a RESTART
	// copies: this writer, with no pause, writes some 100 MB/s, about as
	// fast as a checkpoint copies, and takes the log to 25-32 MB.
	if bound := 3 * walRestartBytes; most > bound {
		t.Fatalf("the log grew to %d bytes, more than %d", most, bound)
	}
	if most <= walPassiveBytes {
		t.Fatalf("the log never passed %d bytes (at most %d): the test checks nothing", walPassiveBytes, most)
	}
	t.Logf("the log reached %d bytes at most", most)
}

// TestWALRestartedAfterReaders holds a read transaction open, so that no
// checkpoint can copy the log's new frames nor the log start over, while
// the log grows past walRestartBytes; once the reader is done the
// checkpointer lets the log start over.
func TestWALRestartedAfterReaders(t *testing.T) {
	defer func(every time.Duration, passive, trunc int64, busy time.Duration) {
		walCheckEvery, walPassiveBytes, walRestartBytes, checkpointBusy = every, passive, trunc, busy
	}(walCheckEvery, walPassiveBytes, walRestartBytes, checkpointBusy)
	walCheckEvery, walPassiveBytes, walRestartBytes, checkpointBusy = 2*time.Millisecond, 64<<10, 512<<10, 5*time.Millisecond

	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "readers.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	th, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := s.r.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM commits").Scan(&n); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		if _, err := th.Append(ctx, message.User("while a reader holds the log")); err != nil {
			t.Fatal(err)
		}
	}
	if size := walSize(t, s); size <= walRestartBytes {
		t.Fatalf("the log is %d bytes with a reader holding it, want more than %d", size, walRestartBytes)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// The checkpointer's RESTART, once it gets past the reader, makes
	// the next write start the log over and cut the file back.
	var size int64
	if !testwait.Within(15*time.Second, func() bool {
		if _, err := th.Append(ctx, message.User("after")); err != nil {
			t.Fatal(err)
		}
		size = walSize(t, s)
		return size <= walPassiveBytes
	}) {
		t.Fatalf("the log is still %d bytes %v after the reader finished", size, 15*time.Second)
	}
}
