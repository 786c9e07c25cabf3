package jsonfile

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/loomthreads/loom/thread/store"
)

// A full disk. A write that finds no room fails before its commit point
// with thread.ErrStorageFull and leaves nothing behind; the store is then
// read-only until space is freed. A batch that reached its commit point
// and that the disk keeps from being finished is committed all the same:
// its intent is durable, readers read through it (pending) and see the
// batch whole, Open succeeds on it, and the first write or read that finds
// room finishes it.

// fullReason is the reason of the store's ErrStorageFull, which a client
// is told.
const fullReason = "the disk of the JSON-file store is full: it is read-only until space is freed"

// diskFull reports whether err is the disk's or the quota's lack of room.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// retryPending is how often readers try again to finish a batch that the
// disk kept from being finished; between the tries they read through it.
const retryPending = time.Second

// pending is a committed batch that could not be finished: its intent's
// ops by path, for the readers to read through.
type pending struct {
	size    int64 // of intent.json, and its time, when read: a new intent is another batch
	modTime time.Time
	tried   time.Time
	err     error // why it could not be finished
	ops     map[string]intentOp
	removed []string // paths removed whole (a thread's history directory)
}

func newPending(ops []intentOp, fi os.FileInfo, err error) *pending {
	p := &pending{size: fi.Size(), modTime: fi.ModTime(), tried: time.Now(), err: err, ops: make(map[string]intentOp, len(ops))}
	for _, op := range ops {
		p.ops[op.Path] = op
		if op.Remove {
			p.removed = append(p.removed, op.Path+"/")
		}
	}
	return p
}

// current reports whether p is the batch of the intent fi describes, and
// was tried recently enough for a reader to read through it untried.
func (p *pending) current(fi os.FileInfo) bool {
	return p != nil && p.size == fi.Size() && p.modTime.Equal(fi.ModTime()) && time.Since(p.tried) < retryPending
}

// readFile reads a file of the store as the pending batch, if any, has it.
func (s *Store) readFile(name string) ([]byte, error) {
	if p := s.pending.Load(); p != nil {
		if op, ok := p.ops[name]; ok {
			switch {
			case op.Remove:
				return nil, fs.ErrNotExist
			case op.From != "":
				b, err := s.root.ReadFile(name)
				if errors.Is(err, fs.ErrNotExist) { // not renamed yet
					b, err = s.root.ReadFile(op.From)
				}
				return b, err
			default:
				return []byte(op.Data), nil
			}
		}
		for _, dir := range p.removed {
			if strings.HasPrefix(name, dir) {
				return nil, fs.ErrNotExist
			}
		}
	}
	return s.root.ReadFile(name)
}

// pendingThreads changes the listing names of threads/ as the pending
// batch, if any, has it.
func (s *Store) pendingThreads(names []string) []string {
	p := s.pending.Load()
	if p == nil {
		return names
	}
	have := make(map[string]bool, len(names))
	for _, n := range names {
		have[n] = true
	}
	for path, op := range p.ops {
		name, ok := strings.CutPrefix(path, "threads/")
		if !ok {
			continue
		}
		switch {
		case op.Remove && have[name]:
			delete(have, name)
		case !op.Remove && !have[name]:
			have[name] = true
		}
	}
	out := names[:0]
	for n := range have {
		out = append(out, n)
	}
	return out
}

// noteFull turns a write's failure for want of room into
// thread.ErrStorageFull, and logs when the store becomes read-only and
// writable again (not while a committed batch waits for room).
func (s *Store) noteFull(err error) error {
	switch {
	case err == nil:
		if s.pending.Load() == nil && s.full.Swap(false) {
			s.logger().Info("jsonfile: there is room on the disk again: the store is writable", "dir", s.dir)
		}
		return nil
	case !diskFull(err):
		return err
	}
	s.markFull(err)
	return store.StorageFull(fullReason, err)
}

// markFull makes the store read-only for want of room, logging it once.
func (s *Store) markFull(err error) {
	if !s.full.Swap(true) {
		s.logger().Warn("jsonfile: the disk is full: the store is read-only until space is freed", "dir", s.dir, "err", err)
	}
}

func (s *Store) logger() *slog.Logger {
	if s.opts.Logger != nil {
		return s.opts.Logger
	}
	return slog.Default()
}

// ReadOnly returns an error wrapping thread.ErrStorageFull while the store
// is read-only for want of room on its disk (its last write failed for
// it, or a committed batch waits to be finished), and nil otherwise.
// `loom serve` logs it at start.
func (s *Store) ReadOnly() error {
	if p := s.pending.Load(); p != nil && diskFull(p.err) {
		return store.StorageFull(fullReason, p.err)
	}
	if s.full.Load() {
		return store.StorageFull(fullReason, syscall.ENOSPC)
	}
	return nil
}
