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

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/thread"
)

// Reads take no lock: every file is replaced whole by a rename, so a reader
// sees a file as it was before or after a write, never half of it.

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
	if !ids.Valid(id) {
		return nil, notFound("commit", id)
	}
	b, err := s.root.ReadFile(commitPath(id))
	if err != nil {
		return nil, readErr("commit", id, err)
	}
	c, err := decodeCommit(b)
	if err != nil {
		return nil, fmt.Errorf("commit %q: corrupt file: %v", id, err)
	}
	return c, nil
}

func (s *Store) readThread(id string) (*threadFile, error) {
	if !ids.Valid(id) {
		return nil, notFound("thread", id)
	}
	b, err := s.root.ReadFile(threadPath(id))
	if err != nil {
		return nil, readErr("thread", id, err)
	}
	f := new(threadFile)
	if err := json.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("thread %q: corrupt file: %v", id, err)
	}
	return f, nil
}

func (s *Store) readChunk(th string, n int64) ([]entryFile, error) {
	b, err := s.root.ReadFile(chunkPath(th, n))
	if err != nil {
		return nil, readErr("history of thread", th, err)
	}
	var f chunkFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("history of thread %q: corrupt chunk %d: %v", th, n, err)
	}
	if f.Thread != th || len(f.History) != historyChunk || f.History[0].Version != n*historyChunk+1 {
		// A chunk of a deleted thread of the same id that a crash left
		// behind; the thread file says what is sealed, so this is a race
		// with a delete.
		return nil, fmt.Errorf("history of thread %q: chunk %d: %w", th, n, thread.ErrNotFound)
	}
	return f.History, nil
}

// Commit implements thread.Store.
func (s *Store) Commit(ctx context.Context, id string) (*thread.Commit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.readCommit(id)
}

// Ancestors implements thread.Store: one file read per commit, following
// the parent ids.
func (s *Store) Ancestors(ctx context.Context, id string, floor int64) iter.Seq2[*thread.Commit, error] {
	return func(yield func(*thread.Commit, error) bool) {
		for {
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			c, err := s.readCommit(id)
			if err != nil {
				yield(nil, err)
				return
			}
			if c.Depth <= floor || !yield(c, nil) || c.Parent == "" {
				return
			}
			id = c.Parent
		}
	}
}

// Thread implements thread.Store.
func (s *Store) Thread(ctx context.Context, id string) (*thread.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := s.readThread(id)
	if err != nil {
		return nil, err
	}
	return f.record(), nil
}

// threadIDs returns the ids of the stored threads, sorted.
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
	out := names[:0]
	for _, n := range names {
		if id, ok := strings.CutSuffix(n, ".json"); ok && ids.Valid(id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Threads implements thread.Store. It lists the directory of thread files
// and reads them one by one as the caller iterates: O(threads) to list,
// one file read per thread looked at.
func (s *Store) Threads(ctx context.Context, opts thread.ListOptions) iter.Seq2[*thread.Record, error] {
	return func(yield func(*thread.Record, error) bool) {
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

// History implements thread.Store. The newest entries are in the thread's
// file; older ones are read from its sealed chunks only when the caller
// iterates that far.
func (s *Store) History(ctx context.Context, th string, opts thread.HistoryOptions) iter.Seq2[thread.HistoryEntry, error] {
	return func(yield func(thread.HistoryEntry, error) bool) {
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
		for ; v >= 1; v-- {
			if opts.Limit > 0 && n >= opts.Limit {
				return
			}
			var e entryFile
			if sealed := f.Sealed * historyChunk; v > sealed {
				i := v - sealed - 1
				if i >= int64(len(f.History)) {
					yield(thread.HistoryEntry{}, fmt.Errorf("thread %q: history misses version %d", th, v))
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
						yield(thread.HistoryEntry{}, err)
						return
					}
					chunkNo = c
				}
				e = chunk[(v-1)%historyChunk]
			}
			n++
			if !yield(e.entry(), nil) {
				return
			}
		}
	}
}

// Checkpoints implements thread.Store.
func (s *Store) Checkpoints(ctx context.Context, th string) iter.Seq2[thread.Checkpoint, error] {
	return func(yield func(thread.Checkpoint, error) bool) {
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
