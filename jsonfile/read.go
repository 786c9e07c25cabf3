package jsonfile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"slices"
	"strings"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// Reads take no lock: every file is replaced whole by a rename, so a reader
// sees a file as it was before or after a write, never half of it. A read
// that finds an intent pending (a batch committed but not all written yet:
// its writer is at it, failed, or died) first waits for the lock and
// finishes it, so that no reader sees half of a committed batch.

// settle finishes a pending intent before a read; when there is none (the
// usual case) it costs one fstat.
func (s *Store) settle(ctx context.Context) error {
	if s.closed.Load() {
		return errClosed
	}
	fi, err := s.intent.Stat()
	if err != nil {
		return fmt.Errorf("jsonfile: intent: %w", err)
	}
	if fi.Size() == 0 {
		s.pending.Store(nil)
		return nil
	}
	if s.pending.Load().current(fi) {
		return nil // the disk refused it a moment ago: read through it
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.unlock()
	if fi, err := s.intent.Stat(); err == nil && s.pending.Load().current(fi) {
		return nil // another reader tried while this one waited
	}
	if err := s.recover(); err != nil && s.pending.Load() == nil {
		return fmt.Errorf("jsonfile: finish a committed batch: %w", err)
	}
	return nil
}

// readErr turns a failed read of what names into a store error.
func readErr(what, id string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s %q: %w", what, id, thread.ErrNotFound)
	}
	return fmt.Errorf("%s %q: %w", what, id, err)
}

// notFound is the error for an id that no file can have.
func notFound(what, id string) error {
	if len(id) > 40 {
		id = id[:40] + "…"
	}
	return fmt.Errorf("%s %q: %w", what, id, thread.ErrNotFound)
}

func (s *Store) readCommit(id string) (*thread.Commit, error) {
	if !s.storable(id) {
		return nil, notFound("commit", id)
	}
	b, err := s.readFile(commitPath(id))
	if err != nil {
		return nil, readErr("commit", id, err)
	}
	c, err := decodeCommit(b)
	if err != nil {
		return nil, fmt.Errorf("commit %q: corrupt file: %v", id, err)
	}
	if c.ID != id {
		// Another commit's file under a name that differs in case.
		return nil, notFound("commit", id)
	}
	return c, nil
}

func (s *Store) readThread(id string) (*threadFile, error) {
	if !s.storableKey(id) {
		return nil, notFound("thread", id)
	}
	b, err := s.readFile(threadPath(id))
	if err != nil {
		return nil, readErr("thread", id, err)
	}
	f := new(threadFile)
	if err := json.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("thread %q: corrupt file: %v", id, err)
	}
	if f.ID != id {
		// Another thread's file under a name that differs in case.
		return nil, notFound("thread", id)
	}
	return f, nil
}

func (s *Store) readChunk(th string, n int64) ([]entryFile, error) {
	b, err := s.readFile(chunkPath(th, n))
	if err != nil {
		return nil, readErr("history of thread", th, err)
	}
	var f chunkFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("history of thread %q: corrupt chunk %d: %v", th, n, err)
	}
	if k := len(f.History); f.Thread != th || k == 0 || k > historyChunk || f.History[k-1].Version != (n+1)*historyChunk ||
		f.History[0].Version != (n+1)*historyChunk-int64(k)+1 {
		// A chunk of a deleted thread of the same id that a crash left
		// behind; the thread file says what is sealed, so this is a race
		// with a delete.
		return nil, fmt.Errorf("history of thread %q: chunk %d: %w", th, n, thread.ErrNotFound)
	}
	return f.History, nil
}

// Commit implements store.Store.
func (s *Store) Commit(ctx context.Context, id string) (*thread.Commit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.settle(ctx); err != nil {
		return nil, err
	}
	return s.readCommit(id)
}

// Ancestors implements store.Store: one file read per commit, following
// the parent ids. A parent chain that loops (a damaged or hand-edited
// file) ends the walk with an error wrapping thread.ErrInvalid.
func (s *Store) Ancestors(ctx context.Context, id string, floor int64) iter.Seq2[*thread.Commit, error] {
	return func(yield func(*thread.Commit, error) bool) {
		if err := s.settle(ctx); err != nil {
			yield(nil, err)
			return
		}
		// Along a chain whose depths go down no commit can come twice.
		// A loop has a step where the depth does not go down: the commits
		// such steps reach are kept (with the first), and a loop reaches
		// one of them twice.
		first := id
		var seen map[string]bool
		prevDepth := int64(0)
		for step := 0; ; step++ {
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			c, err := s.readCommit(id)
			if err != nil {
				yield(nil, err)
				return
			}
			if step > 0 && c.Depth >= prevDepth {
				if id == first || seen[id] {
					yield(nil, fmt.Errorf("commit %q: its chain of parents loops: the store is damaged: %w", clip(id), thread.ErrInvalid))
					return
				}
				if seen == nil {
					seen = map[string]bool{}
				}
				seen[id] = true
			}
			if c.Depth <= floor || !yield(c, nil) || c.Parent == "" {
				return
			}
			id, prevDepth = c.Parent, c.Depth
		}
	}
}

// Thread implements store.Store.
func (s *Store) Thread(ctx context.Context, id string) (*thread.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.settle(ctx); err != nil {
		return nil, err
	}
	f, err := s.readThread(id)
	if err != nil {
		return nil, err
	}
	return f.record(), nil
}

// threadIDs returns the keys of the stored threads, sorted.
func (s *Store) threadIDs() ([]string, error) {
	d, err := s.root.Open("threads")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	names = s.pendingThreads(names)
	out := names[:0]
	for _, n := range names {
		if name, ok := strings.CutSuffix(n, ".json"); ok {
			if key := keyOfName(name); s.storableKey(key) {
				out = append(out, key)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// Threads implements store.Store. It lists the directory of thread files
// and reads them one by one as the caller iterates: O(threads) to list,
// one file read per thread looked at. A listing filtered by labels reads
// only the threads that the index (index.go) says have the rarest of them:
// O(the page) for a rare label. OrderUpdated reads every matching
// thread's file and sorts (store.ListByUpdated).
func (s *Store) Threads(ctx context.Context, opts thread.ListOptions) iter.Seq2[*thread.Record, error] {
	if opts.Order == thread.OrderUpdated {
		return store.ListByUpdated(ctx, opts, s.Threads)
	}
	return func(yield func(*thread.Record, error) bool) {
		opts := opts // the label path moves its cursor
		if len(opts.Labels) > 0 {
			done, after, n := s.labelPages(ctx, opts, yield)
			if done {
				return
			}
			opts.After = after // the scan goes on from there
			if opts.Limit > 0 {
				opts.Limit -= n
			}
		}
		if err := s.settle(ctx); err != nil {
			yield(nil, err)
			return
		}
		all, err := s.threadIDs()
		if err != nil {
			yield(nil, fmt.Errorf("list threads: %w", err))
			return
		}
		var i, step int
		if opts.Desc {
			i, _ = slices.BinarySearch(all, opts.After)
			if opts.After == "" {
				i = len(all)
			}
			i, step = i-1, -1
		} else {
			var found bool
			i, found = slices.BinarySearch(all, opts.After)
			if found {
				i++
			}
			step = 1
		}
		n := 0
		for ; i >= 0 && i < len(all); i += step {
			if opts.Limit > 0 && n >= opts.Limit {
				return
			}
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			f, err := s.readThread(all[i])
			if errors.Is(err, thread.ErrNotFound) {
				continue // deleted since the listing
			}
			if err != nil {
				yield(nil, err)
				return
			}
			r := f.record()
			if !opts.Match(r) {
				continue
			}
			n++
			if !yield(r, nil) {
				return
			}
		}
	}
}

// History implements store.Store. The newest entries are in the thread's
// file; older ones are read from its sealed chunks only when the caller
// iterates that far.
func (s *Store) History(ctx context.Context, th string, opts thread.HistoryOptions) iter.Seq2[thread.HistoryEntry, error] {
	return func(yield func(thread.HistoryEntry, error) bool) {
		if err := s.settle(ctx); err != nil {
			yield(thread.HistoryEntry{}, err)
			return
		}
		f, err := s.readThread(th)
		if err != nil {
			yield(thread.HistoryEntry{}, err)
			return
		}
		v := f.Version
		if opts.Before > 0 && opts.Before-1 < v {
			v = opts.Before - 1
		}
		n := 0
		var chunk []entryFile
		chunkNo := int64(-1)
		missing := func(v int64) {
			yield(thread.HistoryEntry{}, fmt.Errorf("thread %q: history misses version %d", th, v))
		}
		for ; v >= f.first(); v-- {
			if opts.Limit > 0 && n >= opts.Limit {
				return
			}
			var e entryFile
			if sealed := f.Sealed * historyChunk; v > sealed {
				if len(f.History) == 0 {
					missing(v)
					return
				}
				i := v - f.History[0].Version
				if i < 0 || i >= int64(len(f.History)) {
					missing(v)
					return
				}
				e = f.History[i]
			} else {
				if c := (v - 1) / historyChunk; c != chunkNo {
					if err := ctx.Err(); err != nil {
						yield(thread.HistoryEntry{}, err)
						return
					}
					if chunk, err = s.readChunk(th, c); err != nil {
						if errors.Is(err, thread.ErrNotFound) {
							// Pruned since the thread file was read? Then
							// the history ends here.
							if now, rerr := s.readThread(th); rerr == nil && now.first() > v {
								return
							}
						}
						yield(thread.HistoryEntry{}, err)
						return
					}
					chunkNo = c
				}
				i := v - chunk[0].Version
				if i < 0 {
					missing(v)
					return
				}
				e = chunk[i]
			}
			n++
			if !yield(e.entry(), nil) {
				return
			}
		}
	}
}

// Checkpoints implements store.Store.
func (s *Store) Checkpoints(ctx context.Context, th string) iter.Seq2[thread.Checkpoint, error] {
	return func(yield func(thread.Checkpoint, error) bool) {
		if err := s.settle(ctx); err != nil {
			yield(thread.Checkpoint{}, err)
			return
		}
		f, err := s.readThread(th)
		if err != nil {
			yield(thread.Checkpoint{}, err)
			return
		}
		for _, cp := range f.Checkpoints {
			if !yield(cp.checkpoint(f.ID), nil) {
				return
			}
		}
	}
}
