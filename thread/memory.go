package thread

import (
	"context"
	"fmt"
	"iter"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread/store"
)

func init() {
	Register("memory", func(ctx context.Context, u *url.URL) (store.Store, error) {
		return NewMemoryStore(), nil
	})
}

// MemoryStore is a Store that keeps everything in the process's memory. It is
// safe for concurrent use, fast, and gone when the process ends: for tests
// and ephemeral agents. Open("memory://") makes one.
type MemoryStore struct {
	mu      sync.RWMutex
	commits map[string]*memCommit
	threads map[string]*memThread
	order   []string // thread ids; sorted unless unsorted is set
	// forks indexes threads by the thread they were forked from
	// (ForkedFrom.Thread), for ForkIndex.
	forks map[string][]string
	// unsorted is set when an id was appended out of order. Sorting waits
	// for the next listing: creating stays O(1), and loom's time-ordered ids
	// mostly arrive in order anyway.
	unsorted bool
}

var _ store.Store = (*MemoryStore)(nil)

// memCommit is immutable after it is published, except refs (guarded by mu).
type memCommit struct {
	c      Commit
	parent *memCommit
	refs   int                // children + history entries + checkpoints that point here
	one    [1]message.Message // holds the message of a one-message commit: one allocation, not two
}

func newMemCommit(c *Commit) *memCommit {
	mc := &memCommit{c: *c}
	switch len(c.Messages) {
	case 0:
		mc.c.Messages = nil
	case 1:
		mc.one[0] = c.Messages[0].Clone()
		mc.c.Messages = mc.one[:]
	default:
		mc.c.Messages = make([]message.Message, len(c.Messages))
		for i, m := range c.Messages {
			mc.c.Messages[i] = m.Clone()
		}
	}
	mc.c.State = cloneState(c.State)
	mc.c.Metadata = cloneLabels(c.Metadata)
	return mc
}

type memThread struct {
	rec         *Record
	history     history
	checkpoints map[string]Checkpoint

	// The first record and history chunk live here: one allocation makes
	// a thread.
	first      Record
	firstChunk [1][]HistoryEntry
	firstItems [2]HistoryEntry
}

func newMemThread(r *Record) *memThread {
	t := &memThread{first: *r}
	t.first.Labels = cloneLabels(r.Labels)
	t.rec = &t.first
	t.firstChunk[0] = t.firstItems[:0]
	t.history.chunks = t.firstChunk[:]
	return t
}

// history is a thread's history in chunks: appending never copies the
// entries already there, and a reader holding a copy of the chunk list reads
// what was there when it looked, without the lock. A prune (retention) drops
// entries from the front: whole chunks go, and lo marks the oldest kept.
type history struct {
	chunks [][]HistoryEntry
	base   int64 // the versions up to base are in no chunk
	n      int64 // the newest version
	lo     int64 // the oldest version kept, when above base+1
}

const historyChunk = 512

// start makes an empty history whose first entry will be version v.
func (h *history) start(v int64) { h.base, h.n, h.lo = v-1, v-1, v }

func (h *history) add(e HistoryEntry) {
	if k := h.n - h.base; k > 0 && k%historyChunk == 0 {
		// Most threads are short: a chunk starts small and grows to its size.
		h.chunks = append(h.chunks, make([]HistoryEntry, 0, 2))
	}
	last := len(h.chunks) - 1
	h.chunks[last] = append(h.chunks[last], e)
	h.n++
}

// at returns the entry of version v, which is kept.
func (h *history) at(v int64) HistoryEntry {
	i := v - 1 - h.base
	return h.chunks[i/historyChunk][i%historyChunk]
}

// snapshot returns a copy of h that later adds do not change.
func (h *history) snapshot() history {
	c := *h
	c.chunks = slices.Clone(h.chunks)
	return c
}

// first returns the oldest version kept.
func (h *history) first() int64 { return max(h.lo, h.base+1) }

func (h *history) each(f func(HistoryEntry)) {
	for v := h.first(); v <= h.n; v++ {
		f(h.at(v))
	}
}

// prune drops the entries below version before, calling f with each.
func (h *history) prune(before int64, f func(HistoryEntry)) {
	if before <= h.first() {
		return
	}
	for v := h.first(); v < before; v++ {
		f(h.at(v))
	}
	h.lo = before
	if k := (before - 1 - h.base) / historyChunk; k > 0 {
		h.chunks = slices.Clone(h.chunks[k:])
		h.base += k * historyChunk
	}
}

// NewMemoryStore returns an empty in-memory store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{commits: make(map[string]*memCommit), threads: make(map[string]*memThread), forks: make(map[string][]string)}
}

// Commit implements Store.
func (s *MemoryStore) Commit(ctx context.Context, id string) (*Commit, error) {
	s.mu.RLock()
	mc := s.commits[id]
	s.mu.RUnlock()
	if mc == nil {
		return nil, fmt.Errorf("commit %q: %w", id, ErrNotFound)
	}
	return mc.c.Clone(), nil
}

// Ancestors implements Store. The walk follows parent pointers without the
// lock: a published commit and its parent link never change.
func (s *MemoryStore) Ancestors(ctx context.Context, id string, floor int64) iter.Seq2[*Commit, error] {
	return func(yield func(*Commit, error) bool) {
		s.mu.RLock()
		mc := s.commits[id]
		s.mu.RUnlock()
		if mc == nil {
			yield(nil, fmt.Errorf("commit %q: %w", id, ErrNotFound))
			return
		}
		for ; mc != nil && mc.c.Depth > floor; mc = mc.parent {
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			if !yield(mc.c.Clone(), nil) {
				return
			}
		}
	}
}

// Thread implements Store.
func (s *MemoryStore) Thread(ctx context.Context, id string) (*Record, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t := s.threads[id]
	if t == nil {
		return nil, fmt.Errorf("thread %q: %w", id, ErrNotFound)
	}
	return t.rec.Clone(), nil
}

// Threads implements Store. OrderUpdated sorts every matching record
// (ListByUpdated). It collects a page at a time under the lock and
// yields outside it, so the caller may write to the store while iterating.
func (s *MemoryStore) Threads(ctx context.Context, opts ListOptions) iter.Seq2[*Record, error] {
	if opts.Order == OrderUpdated {
		return store.ListByUpdated(ctx, opts, s.Threads)
	}
	return func(yield func(*Record, error) bool) {
		const page = 256
		cursor, started, n := opts.After, opts.After != "", 0
		for {
			var batch []*Record
			s.mu.Lock() // not RLock: the ids may need sorting
			s.sortOrder()
			var i int
			if opts.Desc {
				i = len(s.order) - 1
				if started {
					i = sort.SearchStrings(s.order, cursor) - 1
				}
			} else if started {
				i = sort.SearchStrings(s.order, cursor)
				if i < len(s.order) && s.order[i] == cursor {
					i++
				}
			}
			for i >= 0 && i < len(s.order) && len(batch) < page {
				id := s.order[i]
				if opts.Desc {
					i--
				} else {
					i++
				}
				cursor, started = id, true
				if r := s.threads[id].rec; opts.Match(r) {
					batch = append(batch, r.Clone())
				}
			}
			more := i >= 0 && i < len(s.order)
			s.mu.Unlock()
			for _, r := range batch {
				if opts.Limit > 0 && n >= opts.Limit {
					return
				}
				n++
				if !yield(r, nil) {
					return
				}
			}
			if !more || (opts.Limit > 0 && n >= opts.Limit) {
				return
			}
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
		}
	}
}

// Forks implements ForkIndex.
func (s *MemoryStore) Forks(ctx context.Context, parent string) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		s.mu.RLock()
		var recs []*Record
		for _, id := range s.forks[parent] {
			recs = append(recs, s.threads[id].rec.Clone())
		}
		s.mu.RUnlock()
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
}

var _ store.ForkIndex = (*MemoryStore)(nil)

// History implements Store.
func (s *MemoryStore) History(ctx context.Context, thread string, opts HistoryOptions) iter.Seq2[HistoryEntry, error] {
	return func(yield func(HistoryEntry, error) bool) {
		s.mu.RLock()
		t := s.threads[thread]
		var h history
		if t != nil {
			h = t.history.snapshot()
		}
		s.mu.RUnlock()
		if t == nil {
			yield(HistoryEntry{}, fmt.Errorf("thread %q: %w", thread, ErrNotFound))
			return
		}
		end := h.n
		if opts.Before > 0 && opts.Before-1 < end {
			end = opts.Before - 1
		}
		n := 0
		for v := end; v >= h.first(); v-- {
			if opts.Limit > 0 && n >= opts.Limit {
				return
			}
			n++
			if !yield(h.at(v), nil) {
				return
			}
		}
	}
}

// Checkpoints implements Store.
func (s *MemoryStore) Checkpoints(ctx context.Context, thread string) iter.Seq2[Checkpoint, error] {
	return func(yield func(Checkpoint, error) bool) {
		s.mu.RLock()
		t := s.threads[thread]
		var cps []Checkpoint
		if t != nil {
			for _, cp := range t.checkpoints {
				cps = append(cps, cp)
			}
		}
		s.mu.RUnlock()
		if t == nil {
			yield(Checkpoint{}, fmt.Errorf("thread %q: %w", thread, ErrNotFound))
			return
		}
		slices.SortFunc(cps, func(a, b Checkpoint) int { return strings.Compare(a.Name, b.Name) })
		for _, cp := range cps {
			if !yield(cp, nil) {
				return
			}
		}
	}
}

// Apply implements Store: it checks every precondition against the current
// state plus the batch's own earlier changes, and only then writes.
func (s *MemoryStore) Apply(ctx context.Context, b *store.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.apply(ctx, b)
}

// AppendAt implements Appender: build runs under the store's lock, on the
// thread's current record and head.
func (s *MemoryStore) AppendAt(ctx context.Context, id string, build func(r *Record, head *Commit) (*store.Batch, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.threads[id]
	if t == nil {
		return fmt.Errorf("thread %q: %w", id, ErrNotFound)
	}
	var head *Commit
	if mc := s.commits[t.rec.Head]; mc != nil {
		head = &Commit{ID: mc.c.ID, Depth: mc.c.Depth, StateFrom: mc.c.StateFrom}
	}
	b, err := build(t.rec.Clone(), head)
	if err != nil {
		return err
	}
	return s.apply(ctx, b)
}

var _ store.Appender = (*MemoryStore)(nil)

// apply applies b; the lock is held. The rules are PlanBatch's; the
// store only answers its questions and writes the plan.
func (s *MemoryStore) apply(ctx context.Context, b *store.Batch) error {
	p, err := store.PlanBatch(ctx, (*memFacts)(s), b)
	if err != nil {
		return err
	}
	for i, c := range b.Commits {
		mc := newMemCommit(c)
		mc.refs = int(p.NewRefs[i])
		mc.parent = s.commits[c.Parent] // a parent earlier in the batch is in by now
		s.commits[c.ID] = mc
	}
	for _, r := range p.Refs {
		s.commits[r.Commit].refs += int(r.N)
	}
	for _, cr := range b.Create {
		t := newMemThread(cr.Record)
		entries := cr.Entries()
		t.history.start(entries[0].Version)
		for _, e := range entries {
			t.history.add(e)
		}
		s.threads[t.rec.ID] = t
		if n := len(s.order); n > 0 && s.order[n-1] > t.rec.ID {
			s.unsorted = true
		}
		s.order = append(s.order, t.rec.ID)
		if p := t.rec.ForkedFrom.Thread; p != "" {
			s.forks[p] = append(s.forks[p], t.rec.ID)
		}
	}
	for _, m := range b.Moves {
		t := s.threads[m.Thread]
		r := new(Record) // records are never changed in place: readers clone them
		*r = *t.rec
		r.Version++
		r.Head = m.Head
		r.UpdatedAt = m.Time
		if m.Kind != "" {
			r.Kind = m.Kind
		}
		if m.Title != nil {
			r.Title = *m.Title
		}
		if m.Labels != nil {
			r.Labels = cloneLabels(m.Labels)
		}
		t.rec = r
		t.history.add(m.Entry())
	}
	for i, k := range b.DropCheckpoints {
		s.unref(p.DropCommits[i])
		delete(s.threads[k.Thread].checkpoints, k.Name)
	}
	for _, cp := range b.Checkpoints {
		t := s.threads[cp.Thread]
		if t.checkpoints == nil {
			t.checkpoints = make(map[string]Checkpoint)
		}
		t.checkpoints[cp.Name] = cp
	}
	for _, pr := range b.Prune {
		s.threads[pr.Thread].history.prune(pr.Before, func(e HistoryEntry) { s.unref(e.Commit) })
	}
	for _, d := range b.Delete {
		t := s.threads[d.Thread]
		t.history.each(func(e HistoryEntry) { s.unref(e.Commit) })
		for _, cp := range t.checkpoints {
			s.unref(cp.Commit)
		}
		delete(s.threads, d.Thread)
		if p := t.rec.ForkedFrom.Thread; p != "" {
			s.forks[p] = slices.DeleteFunc(s.forks[p], func(id string) bool { return id == d.Thread })
			if len(s.forks[p]) == 0 {
				delete(s.forks, p)
			}
		}
		s.sortOrder()
		if i, ok := slices.BinarySearch(s.order, d.Thread); ok {
			s.order = slices.Delete(s.order, i, i+1)
		}
	}
	return nil
}

// memFacts answers the planner from the store's maps; the lock is held.
type memFacts MemoryStore

func (f *memFacts) Thread(_ context.Context, id string) (int64, string, bool, error) {
	if t := f.threads[id]; t != nil {
		return t.rec.Version, t.rec.Head, true, nil
	}
	return 0, "", false, nil
}

func (f *memFacts) Commit(_ context.Context, id string) (bool, error) {
	return f.commits[id] != nil, nil
}

func (f *memFacts) Checkpoint(_ context.Context, thread, name string) (string, bool, error) {
	if t := f.threads[thread]; t != nil {
		cp, ok := t.checkpoints[name]
		return cp.Commit, ok, nil
	}
	return "", false, nil
}

// sortOrder sorts the thread ids if they are out of order; mu must be held.
func (s *MemoryStore) sortOrder() {
	if s.unsorted {
		slices.Sort(s.order)
		s.unsorted = false
	}
}

// cloneLabels copies a string map (labels, commit metadata); empty is nil.
func cloneLabels(l map[string]string) map[string]string {
	if len(l) == 0 {
		return nil
	}
	out := make(map[string]string, len(l))
	for k, v := range l {
		out[k] = v
	}
	return out
}

// unref drops one reference and deletes the commits that no longer have any,
// walking up the parents for as long as that frees them: O(commits freed).
func (s *MemoryStore) unref(id string) {
	if id == "" {
		return
	}
	for mc := s.commits[id]; mc != nil; mc = mc.parent {
		mc.refs--
		if mc.refs > 0 {
			return
		}
		delete(s.commits, mc.c.ID)
	}
}
