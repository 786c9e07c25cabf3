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
)

func init() {
	Register("memory", func(ctx context.Context, u *url.URL) (Store, error) {
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
	order   []string // thread ids, sorted
}

var _ Store = (*MemoryStore)(nil)

// memCommit is immutable after it is published, except refs (guarded by mu).
type memCommit struct {
	c      *Commit
	parent *memCommit
	refs   int // children + history entries + checkpoints that point here
}

type memThread struct {
	rec         *Record
	history     []HistoryEntry // by version: history[i].Version == i+1
	checkpoints map[string]Checkpoint
}

// NewMemoryStore returns an empty in-memory store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{commits: make(map[string]*memCommit), threads: make(map[string]*memThread)}
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

// Threads implements Store. It collects a page at a time under the lock and
// yields outside it, so the caller may write to the store while iterating.
func (s *MemoryStore) Threads(ctx context.Context, opts ListOptions) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		const page = 256
		cursor, started, n := opts.After, opts.After != "", 0
		for {
			var batch []*Record
			s.mu.RLock()
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
			s.mu.RUnlock()
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

// History implements Store.
func (s *MemoryStore) History(ctx context.Context, thread string, opts HistoryOptions) iter.Seq2[HistoryEntry, error] {
	return func(yield func(HistoryEntry, error) bool) {
		s.mu.RLock()
		t := s.threads[thread]
		var h []HistoryEntry
		if t != nil {
			h = t.history // entries below len never change; safe to read unlocked
		}
		s.mu.RUnlock()
		if t == nil {
			yield(HistoryEntry{}, fmt.Errorf("thread %q: %w", thread, ErrNotFound))
			return
		}
		end := int64(len(h))
		if opts.Before > 0 && opts.Before-1 < end {
			end = opts.Before - 1
		}
		n := 0
		for v := end; v >= 1; v-- {
			if opts.Limit > 0 && n >= opts.Limit {
				return
			}
			n++
			if !yield(h[v-1], nil) {
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
func (s *MemoryStore) Apply(ctx context.Context, b *Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(b); err != nil {
		return err
	}
	for _, c := range b.Commits {
		mc := &memCommit{c: c.Clone()}
		if c.Parent != "" {
			mc.parent = s.commits[c.Parent]
			mc.parent.refs++
		}
		s.commits[c.ID] = mc
	}
	for _, cr := range b.Create {
		t := &memThread{rec: cr.Record.Clone(), checkpoints: make(map[string]Checkpoint)}
		t.history = slices.Clone(cr.History)
		if len(t.history) == 0 {
			t.history = []HistoryEntry{{Version: 1, Commit: cr.Record.Head, Op: cr.Op, Time: cr.Record.CreatedAt}}
		}
		for _, e := range t.history {
			s.ref(e.Commit)
		}
		s.threads[t.rec.ID] = t
		i, _ := slices.BinarySearch(s.order, t.rec.ID)
		s.order = slices.Insert(s.order, i, t.rec.ID)
	}
	for _, m := range b.Moves {
		t := s.threads[m.Thread]
		r := t.rec.Clone() // readers may hold the old record
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
		t.history = append(t.history, HistoryEntry{Version: r.Version, Commit: m.Head, Op: m.Op, Time: m.Time})
		s.ref(m.Head)
	}
	for _, k := range b.DropCheckpoints {
		t := s.threads[k.Thread]
		s.unref(t.checkpoints[k.Name].Commit)
		delete(t.checkpoints, k.Name)
	}
	for _, cp := range b.Checkpoints {
		s.threads[cp.Thread].checkpoints[cp.Name] = cp
		s.ref(cp.Commit)
	}
	for _, d := range b.Delete {
		t := s.threads[d.Thread]
		for _, e := range t.history {
			s.unref(e.Commit)
		}
		for _, cp := range t.checkpoints {
			s.unref(cp.Commit)
		}
		delete(s.threads, d.Thread)
		if i, ok := slices.BinarySearch(s.order, d.Thread); ok {
			s.order = slices.Delete(s.order, i, i+1)
		}
	}
	return nil
}

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

func (s *MemoryStore) ref(id string) {
	if id != "" {
		s.commits[id].refs++
	}
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

// check validates a batch without changing anything.
func (s *MemoryStore) check(b *Batch) error {
	newCommits := make(map[string]bool, len(b.Commits))
	commitExists := func(id string) bool { return id == "" || newCommits[id] || s.commits[id] != nil }
	for _, c := range b.Commits {
		if c.ID == "" || s.commits[c.ID] != nil || newCommits[c.ID] {
			return fmt.Errorf("commit %q exists: %w", c.ID, ErrConflict)
		}
		if !commitExists(c.Parent) {
			return fmt.Errorf("commit %q: parent %q: %w", c.ID, c.Parent, ErrNotFound)
		}
		newCommits[c.ID] = true
	}
	version := make(map[string]int64) // threads as the batch leaves them
	exists := func(id string) bool {
		_, ok := version[id]
		return ok || s.threads[id] != nil
	}
	versionOf := func(id string) int64 {
		if v, ok := version[id]; ok {
			return v
		}
		return s.threads[id].rec.Version
	}
	for _, cr := range b.Create {
		r := cr.Record
		if r == nil || r.ID == "" {
			return fmt.Errorf("create: no thread id: %w", ErrInvalid)
		}
		if exists(r.ID) {
			return fmt.Errorf("thread %q exists: %w", r.ID, ErrConflict)
		}
		if err := cr.Validate(); err != nil {
			return err
		}
		if !commitExists(r.Head) {
			return fmt.Errorf("thread %q: head %q: %w", r.ID, r.Head, ErrNotFound)
		}
		for _, e := range cr.History {
			if !commitExists(e.Commit) {
				return fmt.Errorf("thread %q: history commit %q: %w", r.ID, e.Commit, ErrNotFound)
			}
		}
		version[r.ID] = r.Version
	}
	for _, m := range b.Moves {
		if !exists(m.Thread) {
			return fmt.Errorf("thread %q: %w", m.Thread, ErrNotFound)
		}
		if v := versionOf(m.Thread); v != m.From {
			return fmt.Errorf("thread %q is at version %d, not %d: %w", m.Thread, v, m.From, ErrConflict)
		}
		if !commitExists(m.Head) {
			return fmt.Errorf("thread %q: head %q: %w", m.Thread, m.Head, ErrNotFound)
		}
		version[m.Thread] = m.From + 1
	}
	dropped := make(map[CheckpointKey]bool)
	for _, k := range b.DropCheckpoints {
		t := s.threads[k.Thread]
		if t == nil {
			return fmt.Errorf("thread %q: %w", k.Thread, ErrNotFound)
		}
		if _, ok := t.checkpoints[k.Name]; !ok || dropped[k] {
			return fmt.Errorf("checkpoint %q of thread %q: %w", k.Name, k.Thread, ErrNotFound)
		}
		dropped[k] = true
	}
	added := make(map[CheckpointKey]bool)
	for _, cp := range b.Checkpoints {
		k := CheckpointKey{cp.Thread, cp.Name}
		if !exists(cp.Thread) {
			return fmt.Errorf("thread %q: %w", cp.Thread, ErrNotFound)
		}
		if cp.Commit == "" || !commitExists(cp.Commit) {
			return fmt.Errorf("checkpoint %q: commit %q: %w", cp.Name, cp.Commit, ErrNotFound)
		}
		taken := added[k]
		if t := s.threads[cp.Thread]; t != nil && !dropped[k] {
			_, ok := t.checkpoints[cp.Name]
			taken = taken || ok
		}
		if taken {
			return fmt.Errorf("checkpoint %q of thread %q exists: %w", cp.Name, cp.Thread, ErrConflict)
		}
		added[k] = true
	}
	for _, d := range b.Delete {
		if !exists(d.Thread) || s.threads[d.Thread] == nil {
			return fmt.Errorf("thread %q: %w", d.Thread, ErrNotFound)
		}
		if v := versionOf(d.Thread); d.Version != 0 && v != d.Version {
			return fmt.Errorf("thread %q is at version %d, not %d: %w", d.Thread, v, d.Version, ErrConflict)
		}
	}
	return nil
}

// Validate checks that a creation's history is numbered 1..n
// and ends at the record's head and version. Stores share it.
func (cr Creation) Validate() error {
	r := cr.Record
	if len(cr.History) == 0 {
		if r.Version != 1 {
			return fmt.Errorf("thread %q: version %d without history: %w", r.ID, r.Version, ErrInvalid)
		}
		return nil
	}
	for i, e := range cr.History {
		if e.Version != int64(i+1) {
			return fmt.Errorf("thread %q: history entry %d has version %d: %w", r.ID, i, e.Version, ErrInvalid)
		}
	}
	last := cr.History[len(cr.History)-1]
	if last.Version != r.Version || last.Commit != r.Head {
		return fmt.Errorf("thread %q: history ends at version %d, commit %q; record says %d, %q: %w",
			r.ID, last.Version, last.Commit, r.Version, r.Head, ErrInvalid)
	}
	return nil
}
