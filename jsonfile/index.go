package jsonfile

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// The indexes. A Store keeps in memory which threads were forked from
// each thread (store.ForkIndex) and which threads have each label (for
// a listing filtered by labels), so that a fork family costs reads of its
// members and a label's page reads of the page, not a read of every thread
// file. The index is built on first use, by reading every thread file, and
// follows later writes through the change log, DIR/changes: a line with the
// log's epoch, then the key of every thread that a batch created, deleted
// or relabelled, appended by the writer (any process's) once the batch's
// files are written and before its intent is emptied. Before answering,
// the index reads the log past where it last read and reads again the
// threads it names; a log begun anew by another process (another epoch,
// when it grows past maxChanges) has it read every thread file again. The log is not synced:
// a process that dies keeps what it wrote, and after a machine's crash
// every index is built anew.
//
// While a committed batch waits for room on the disk (see fulldisk.go),
// the index is not used: reads scan, through the batch.

// maxChanges is the size past which a writer begins the change log anew.
var maxChanges int64 = 4 << 20

// epochLen is the length of the change log's first line: 16 hex digits
// and a newline.
const epochLen = 17

type index struct {
	mu     sync.Mutex
	built  bool
	epoch  string
	offset int64 // of the change log, read up to here
	// threads are the indexed fields of each thread, by key.
	threads map[string]indexed
	forks   map[string]*keySet
	labels  map[[2]string]*keySet
}

type indexed struct {
	parent string
	labels map[string]string
}

// keySet is a set of thread keys, with the keys in order once asked for.
type keySet struct {
	keys   map[string]struct{}
	sorted []string // nil once keys change
}

func (k *keySet) add(key string) {
	if k.keys == nil {
		k.keys = map[string]struct{}{}
	}
	k.keys[key] = struct{}{}
	k.sorted = nil
}

func (k *keySet) list() []string {
	if k.sorted == nil {
		k.sorted = make([]string, 0, len(k.keys))
		for key := range k.keys {
			k.sorted = append(k.sorted, key)
		}
		slices.Sort(k.sorted)
	}
	return k.sorted
}

// set indexes thread key as f has it; a nil f removes it.
func (ix *index) set(key string, f *threadFile) {
	if old, ok := ix.threads[key]; ok {
		if old.parent != "" {
			if ks := ix.forks[old.parent]; ks != nil {
				delete(ks.keys, key)
				ks.sorted = nil
				if len(ks.keys) == 0 {
					delete(ix.forks, old.parent)
				}
			}
		}
		for k, v := range old.labels {
			if ks := ix.labels[[2]string{k, v}]; ks != nil {
				delete(ks.keys, key)
				ks.sorted = nil
				if len(ks.keys) == 0 {
					delete(ix.labels, [2]string{k, v})
				}
			}
		}
		delete(ix.threads, key)
	}
	if f == nil {
		return
	}
	e := indexed{parent: f.ForkedFrom.Thread, labels: f.Labels}
	ix.threads[key] = e
	if e.parent != "" {
		ks := ix.forks[e.parent]
		if ks == nil {
			ks = &keySet{}
			ix.forks[e.parent] = ks
		}
		ks.add(key)
	}
	for k, v := range e.labels {
		ks := ix.labels[[2]string{k, v}]
		if ks == nil {
			ks = &keySet{}
			ix.labels[[2]string{k, v}] = ks
		}
		ks.add(key)
	}
}

// logHead returns the change log's epoch and size.
func (s *Store) logHead() (string, int64, error) {
	fi, err := s.changes.Stat()
	if err != nil {
		return "", 0, err
	}
	if fi.Size() < epochLen {
		return "", fi.Size(), nil
	}
	var b [epochLen]byte
	if _, err := s.changes.ReadAt(b[:], 0); err != nil {
		return "", 0, err
	}
	return string(b[:]), fi.Size(), nil
}

// logChanges appends the keys of the threads a batch created, deleted or
// relabelled to the change log, beginning it anew when it has no epoch or
// is past maxChanges; the lock is held.
func (s *Store) logChanges(keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	epoch, size, err := s.logHead()
	if err != nil {
		return fmt.Errorf("change log: %w", err)
	}
	var buf []byte
	if epoch == "" || size > maxChanges {
		// This process's index reads the old log to its end first, and
		// follows the new one from its start: only the other processes'
		// indexes are built again.
		s.ix.mu.Lock()
		defer s.ix.mu.Unlock()
		keep := s.ix.built && s.ix.epoch == epoch && epoch != "" && s.ix.catchUp(s) == nil && s.ix.epoch == epoch
		if err := s.changes.Truncate(0); err != nil {
			s.ix.built = false
			return fmt.Errorf("change log: %w", err)
		}
		buf, size = newEpoch(), 0
		if keep {
			s.ix.epoch, s.ix.offset = string(buf), epochLen
		} else {
			s.ix.built = false
		}
	}
	for _, k := range keys {
		buf = append(append(buf, k...), '\n')
	}
	if _, err := s.changes.WriteAt(buf, size); err != nil {
		return fmt.Errorf("change log: %w", err)
	}
	return nil
}

// initChanges gives the change log an epoch if it has none; the lock is
// held.
func (s *Store) initChanges() error {
	epoch, _, err := s.logHead()
	if err != nil || epoch != "" {
		return err
	}
	if err := s.changes.Truncate(0); err != nil {
		return err
	}
	_, err = s.changes.WriteAt(newEpoch(), 0)
	return err
}

func newEpoch() []byte {
	var b [8]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return append(hex.AppendEncode(make([]byte, 0, epochLen), b[:]), '\n')
}

// catchUp brings the index up to the change log, building it if it is
// not built or the log has begun anew; ix.mu is held.
func (ix *index) catchUp(s *Store) error {
	epoch, size, err := s.logHead()
	if err != nil {
		return fmt.Errorf("change log: %w", err)
	}
	if !ix.built || epoch != ix.epoch || size < ix.offset {
		return ix.build(s)
	}
	if size == ix.offset {
		return nil
	}
	buf := make([]byte, size-ix.offset)
	if _, err := s.changes.ReadAt(buf, ix.offset); err != nil {
		return fmt.Errorf("change log: %w", err)
	}
	if again, _, err := s.logHead(); err != nil || again != epoch {
		return ix.build(s) // begun anew while it was read
	}
	end := bytes.LastIndexByte(buf, '\n') + 1
	for line := range bytes.Lines(buf[:end]) {
		if err := ix.reload(s, string(bytes.TrimSuffix(line, []byte("\n")))); err != nil {
			return err
		}
	}
	ix.offset += int64(end)
	return nil
}

// reload indexes a thread as its file has it now.
func (ix *index) reload(s *Store, key string) error {
	if !s.storableKey(key) {
		return nil
	}
	f, err := s.readThread(key)
	switch {
	case errors.Is(err, thread.ErrNotFound):
		ix.set(key, nil)
	case err != nil:
		return err
	default:
		ix.set(key, f)
	}
	return nil
}

// build reads every thread file. The log's place is taken first: a batch
// logs its threads after writing them, so what the files miss the log has.
func (ix *index) build(s *Store) error {
	epoch, size, err := s.logHead()
	if err != nil {
		return fmt.Errorf("change log: %w", err)
	}
	keys, err := s.threadIDs()
	if err != nil {
		return fmt.Errorf("index threads: %w", err)
	}
	ix.built = false
	ix.threads = make(map[string]indexed, len(keys))
	ix.forks = map[string]*keySet{}
	ix.labels = map[[2]string]*keySet{}
	for _, k := range keys {
		if err := ix.reload(s, k); err != nil {
			return fmt.Errorf("index threads: %w", err)
		}
	}
	ix.built, ix.epoch, ix.offset = true, epoch, size
	return nil
}

// withIndex runs f on the index, brought up to date, and reports whether
// it could: not while a committed batch waits to be finished.
func (s *Store) withIndex(ctx context.Context, f func(ix *index)) (bool, error) {
	if err := s.settle(ctx); err != nil {
		return false, err
	}
	if s.pending.Load() != nil {
		return false, nil
	}
	s.ix.mu.Lock()
	defer s.ix.mu.Unlock()
	if err := s.ix.catchUp(s); err != nil {
		return false, err
	}
	f(&s.ix)
	return true, nil
}

// Forks implements store.ForkIndex: the index's forks of parent, each
// read from its file.
func (s *Store) Forks(ctx context.Context, parent string) iter.Seq2[*thread.Record, error] {
	return func(yield func(*thread.Record, error) bool) {
		var keys []string
		ok, err := s.withIndex(ctx, func(ix *index) {
			if ks := ix.forks[parent]; ks != nil {
				keys = slices.Clone(ks.list())
			}
		})
		if err != nil {
			yield(nil, err)
			return
		}
		if !ok { // scan
			for r, err := range s.Threads(ctx, thread.ListOptions{AllTenants: true}) {
				if err != nil {
					yield(nil, err)
					return
				}
				if r.ForkedFrom.Thread == parent && !yield(r, nil) {
					return
				}
			}
			return
		}
		for _, k := range keys {
			r, err := s.readRecord(ctx, k)
			if err != nil {
				yield(nil, err)
				return
			}
			if r != nil && r.ForkedFrom.Thread == parent && !yield(r, nil) {
				return
			}
		}
	}
}

var _ store.ForkIndex = (*Store)(nil)

// labelled returns at most n of the keys that the rarest of opts.Labels
// holds, in opts' order, past after, or false when the index cannot answer.
func (s *Store) labelled(ctx context.Context, opts thread.ListOptions, after string, n int) ([]string, bool, error) {
	var keys []string
	ok, err := s.withIndex(ctx, func(ix *index) {
		var best *keySet
		for k, v := range opts.Labels {
			ks := ix.labels[[2]string{k, v}]
			if ks == nil {
				best = &keySet{}
				break
			}
			if best == nil || len(ks.keys) < len(best.keys) {
				best = ks
			}
		}
		all := best.list()
		if opts.Desc {
			i := len(all)
			if after != "" {
				i, _ = slices.BinarySearch(all, after)
			}
			keys = slices.Clone(all[max(0, i-n):i])
			slices.Reverse(keys)
		} else {
			i, found := slices.BinarySearch(all, after)
			if found {
				i++
			}
			keys = slices.Clone(all[i:min(len(all), i+n)])
		}
	})
	return keys, ok, err
}

// labelPages lists the threads that match opts, which has labels, through
// the label index: a window of the rarest label's keys at a time, each
// thread read and checked against opts (it may have changed since the
// index looked). When the index cannot answer (a committed batch waits to
// be finished) it returns false with the cursor and the count of what it
// yielded, for a scan to go on from there.
func (s *Store) labelPages(ctx context.Context, opts thread.ListOptions, yield func(*thread.Record, error) bool) (done bool, after string, n int) {
	window := 1024
	if opts.Limit > 0 {
		window = 2*opts.Limit + 16
	}
	after = opts.After
	for {
		keys, ok, err := s.labelled(ctx, opts, after, window)
		if err != nil {
			yield(nil, err)
			return true, after, n
		}
		if !ok {
			return false, after, n
		}
		for _, k := range keys {
			if opts.Limit > 0 && n >= opts.Limit {
				return true, after, n
			}
			r, err := s.readRecord(ctx, k)
			if err != nil {
				yield(nil, err)
				return true, after, n
			}
			after = k
			if r == nil || !opts.Match(r) {
				continue
			}
			n++
			if !yield(r, nil) {
				return true, after, n
			}
		}
		if len(keys) < window {
			return true, after, n
		}
	}
}

// readRecord reads a thread's record for a listing: nil for a thread
// deleted since it was listed.
func (s *Store) readRecord(ctx context.Context, key string) (*thread.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := s.readThread(key)
	if errors.Is(err, thread.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return f.record(), nil
}
