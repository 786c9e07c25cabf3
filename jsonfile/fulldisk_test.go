package jsonfile

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// fullDisk fails the writes of the files whose name has one of parts
// with ENOSPC, as a full disk does (a write or the fsync that flushes it).
func fullDisk(parts ...string) func(string) error {
	return func(name string) error {
		for _, p := range parts {
			if strings.Contains(name, p) {
				return syscall.ENOSPC
			}
		}
		return nil
	}
}

// TestFullDiskRefusesWrites: a write the disk has no room for fails with
// thread.ErrStorageFull, whose reason says the store is read-only until
// space is freed; nothing of it is stored, reads go on, and once there is
// room again writes do too.
func TestFullDiskRefusesWrites(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, t.TempDir(), nil)
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("x")}})
	if err != nil {
		t.Fatal(err)
	}
	s.testHooks.sync = fullDisk("commits/")
	_, err = th.Append(ctx, message.User("y"))
	var se *thread.StoreError
	if !errors.Is(err, thread.ErrStorageFull) || !errors.As(err, &se) || !strings.Contains(se.Reason, "read-only") {
		t.Fatalf("append on a full disk: %v, want ErrStorageFull saying the store is read-only", err)
	}
	if r, err := s.Thread(ctx, "a"); err != nil || r.Version != 1 {
		t.Fatalf("read on a full disk: %+v %v, want version 1", r, err)
	}
	s.testHooks.sync = nil
	if _, err := th.Append(ctx, message.User("y")); err != nil {
		t.Fatalf("append once there is room: %v", err)
	}
}

// TestFullDiskUnfinishedBatch: a batch that reached its commit point and
// that the full disk keeps from being finished is committed: reads show
// it whole (never half, never nothing), writes fail with ErrStorageFull,
// the store opens (read-only, and says so), and the first write or read
// once there is room finishes it.
func TestFullDiskUnfinishedBatch(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	b := twoThreads(t, s)
	full := fullDisk("-b.json")
	s.testHooks.sync = full
	if err := s.Apply(ctx, b); err != nil {
		t.Fatalf("apply that reached its commit point but cannot be finished: %v, want success", err)
	}
	check := func(s *Store, when string) {
		t.Helper()
		if va, vb, err := versions(t, s); err != nil || va != 2 || vb != 2 {
			t.Fatalf("%s: a v%d, b v%d, %v; want both at 2", when, va, vb, err)
		}
		var ids []string
		for r, err := range s.Threads(ctx, thread.ListOptions{}) {
			if err != nil {
				t.Fatalf("%s: list: %v", when, err)
			}
			ids = append(ids, r.ID)
		}
		if len(ids) != 2 {
			t.Fatalf("%s: listed %v, want a and b", when, ids)
		}
		var msgs []message.Message
		h, err := thread.New(s, nil).Thread(ctx, "b")
		if err == nil {
			msgs, err = h.Messages(ctx, thread.ReadOptions{})
		}
		if err != nil || len(msgs) != 1 {
			t.Fatalf("%s: b's messages %v %v, want a's one", when, msgs, err)
		}
	}
	check(s, "read while the disk is full")
	if _, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{ID: "c"}); !errors.Is(err, thread.ErrStorageFull) {
		t.Fatalf("write while the batch cannot be finished: %v, want ErrStorageFull", err)
	}
	// Another process opens the store on the full disk: read-only.
	s2, err := openWith(ctx, dir, nil, hooks{sync: full})
	if err != nil {
		t.Fatalf("open on a full disk: %v", err)
	}
	defer s2.Close()
	if err := readOnly(s2); !errors.Is(err, thread.ErrStorageFull) {
		t.Fatalf("ReadOnly of a store opened on a full disk: %v", err)
	}
	check(s2, "read from a store opened on the full disk")
	// Room again: the next read that tries finishes the batch (readers
	// try once every retryPending).
	s.testHooks.sync = nil
	s.pending.Load().tried = time.Time{}
	check(s, "read once there is room")
	if fi, err := os.Stat(filepath.Join(dir, "intent.json")); err != nil || fi.Size() != 0 {
		t.Fatalf("the batch was not finished: %v", err)
	}
	if err := readOnly(s); err != nil {
		t.Fatalf("ReadOnly once there is room: %v", err)
	}
	if _, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{ID: "c"}); err != nil {
		t.Fatalf("write once there is room: %v", err)
	}
}

func readOnly(s *Store) error {
	if ro, ok := any(s).(interface{ ReadOnly() error }); ok {
		return ro.ReadOnly()
	}
	return errors.New("no ReadOnly method")
}

// TestFullDiskCommittedWriteAcknowledged: a write that reached its commit
// point is durable, so the full disk that keeps it from being finished
// must not make it fail: a client told "failed" would send it again and
// the thread would hold it twice. The writer is told it succeeded, the
// thread reads it back once, the store turns read-only (and says so), and
// once there is room the batch is finished and writes go on.
func TestFullDiskCommittedWriteAcknowledged(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("x")}})
	if err != nil {
		t.Fatal(err)
	}
	s.testHooks.sync = fullDisk("-a.json") // the thread's file, written after the commit point
	if _, err := th.Append(ctx, message.User("y")); err != nil {
		t.Fatalf("append that reached its commit point on a full disk: %v, want success", err)
	}
	texts := func(when string) []string {
		t.Helper()
		h, err := thread.New(s, nil).Thread(ctx, "a")
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		msgs, err := h.Messages(ctx, thread.ReadOptions{})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		var out []string
		for _, m := range msgs {
			out = append(out, m.Text())
		}
		return out
	}
	if got := texts("read while the batch cannot be finished"); !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("messages %q, want x and y once each", got)
	}
	if err := readOnly(s); !errors.Is(err, thread.ErrStorageFull) {
		t.Fatalf("ReadOnly while a committed batch waits for room: %v, want ErrStorageFull", err)
	}
	if _, err := db.Create(ctx, thread.CreateOptions{ID: "c"}); !errors.Is(err, thread.ErrStorageFull) {
		t.Fatalf("write while the batch cannot be finished: %v, want ErrStorageFull", err)
	}
	s.testHooks.sync = nil
	if _, err := th.Append(ctx, message.User("z")); err != nil {
		t.Fatalf("append once there is room: %v", err)
	}
	if got := texts("read once there is room"); !slices.Equal(got, []string{"x", "y", "z"}) {
		t.Fatalf("messages %q, want x, y, z", got)
	}
	if err := readOnly(s); err != nil {
		t.Fatalf("ReadOnly once there is room: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "intent.json")); err != nil || fi.Size() != 0 {
		t.Fatalf("the batch was not finished: %v", err)
	}
}
