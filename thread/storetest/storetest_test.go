package storetest

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// The suite must catch broken stores, or it proves nothing. Each store below
// breaks one invariant, and the cases that guard it must fail.

// lostUpdate moves heads last-writer-wins: it ignores the version a move was
// computed against, so a commit built on an old head overwrites the newer
// one. The pause stands for a slow network: it widens the window in which
// racing writers overlap.
type lostUpdate struct{ *thread.MemoryStore }

func (s lostUpdate) Apply(ctx context.Context, b *store.Batch) error {
	time.Sleep(20 * time.Microsecond) // deliberate: the slow network above
	for i, m := range b.Moves {
		if r, err := s.MemoryStore.Thread(ctx, m.Thread); err == nil {
			b.Moves[i].From = r.Version
		}
	}
	return s.MemoryStore.Apply(ctx, b)
}

// aliasing hands out the same commit to every caller, so one caller's change
// is everyone's.
type aliasing struct {
	*thread.MemoryStore
	mu   sync.Mutex
	seen map[string]*thread.Commit
}

func (s *aliasing) Commit(ctx context.Context, id string) (*thread.Commit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.seen[id]; ok {
		return c, nil
	}
	c, err := s.MemoryStore.Commit(ctx, id)
	if err == nil {
		s.seen[id] = c
	}
	return c, err
}

// greedyDelete deletes every commit a deleted thread reached, shared or not.
type greedyDelete struct {
	*thread.MemoryStore
	mu   sync.Mutex
	gone map[string]bool
}

func (s *greedyDelete) Apply(ctx context.Context, b *store.Batch) error {
	var doomed []string
	for _, d := range b.Delete {
		for e, err := range s.MemoryStore.History(ctx, d.Thread, thread.HistoryOptions{}) {
			if err != nil || e.Commit == "" {
				continue
			}
			for c, err := range s.MemoryStore.Ancestors(ctx, e.Commit, -1) {
				if err == nil {
					doomed = append(doomed, c.ID)
				}
			}
		}
	}
	if err := s.MemoryStore.Apply(ctx, b); err != nil {
		return err
	}
	s.mu.Lock()
	for _, id := range doomed {
		s.gone[id] = true
	}
	s.mu.Unlock()
	return nil
}

func (s *greedyDelete) isGone(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gone[id]
}

func (s *greedyDelete) Commit(ctx context.Context, id string) (*thread.Commit, error) {
	if s.isGone(id) {
		return nil, fmt.Errorf("commit %s: %w", id, thread.ErrNotFound)
	}
	return s.MemoryStore.Commit(ctx, id)
}

func (s *greedyDelete) Ancestors(ctx context.Context, id string, floor int64) iter.Seq2[*thread.Commit, error] {
	return func(yield func(*thread.Commit, error) bool) {
		for c, err := range s.MemoryStore.Ancestors(ctx, id, floor) {
			if err == nil && s.isGone(c.ID) {
				err = fmt.Errorf("commit %s: %w", c.ID, thread.ErrNotFound)
			}
			if !yield(c, err) || err != nil {
				return
			}
		}
	}
}

// piecemeal applies a batch one change at a time, so a failure halfway leaves
// the first half written.
type piecemeal struct{ *thread.MemoryStore }

func (s piecemeal) Apply(ctx context.Context, b *store.Batch) error {
	var errs []error
	apply := func(p *store.Batch) { errs = append(errs, s.MemoryStore.Apply(ctx, p)) }
	apply(&store.Batch{Commits: b.Commits, Create: b.Create})
	for _, m := range b.Moves {
		apply(&store.Batch{Moves: []store.Move{m}})
	}
	for _, cp := range b.Checkpoints {
		apply(&store.Batch{Checkpoints: []thread.Checkpoint{cp}})
	}
	for _, d := range b.Delete {
		apply(&store.Batch{Delete: []store.Deletion{d}})
	}
	return errors.Join(errs...)
}

// shallowWalk answers Ancestors with the first commit alone, as a store
// whose walk stopped early would: the messages further back go unseen.
type shallowWalk struct{ *thread.MemoryStore }

func (s shallowWalk) Ancestors(ctx context.Context, id string, floor int64) iter.Seq2[*thread.Commit, error] {
	return func(yield func(*thread.Commit, error) bool) {
		for c, err := range s.MemoryStore.Ancestors(ctx, id, floor) {
			yield(c, err)
			return
		}
	}
}

// idOrder lists in id order whatever order it is asked for.
type idOrder struct{ *thread.MemoryStore }

func (s idOrder) Threads(ctx context.Context, opts thread.ListOptions) iter.Seq2[*thread.Record, error] {
	opts.Order = thread.OrderID
	return s.MemoryStore.Threads(ctx, opts)
}

func TestSuiteCatchesBrokenStores(t *testing.T) {
	mem := func() *thread.MemoryStore { return thread.NewMemoryStore() }
	forgetful := &Options{Reopen: func(store.Store) (store.Store, error) { return thread.NewMemoryStore(), nil }}
	tests := []struct {
		store    string
		newStore func() store.Store
		opts     *Options
		mustFail []string
	}{
		{"lost update", func() store.Store { return lostUpdate{mem()} }, nil, []string{"CASOneWinnerPerVersion", "ConcurrentAppendsLoseNothing", "HistoryAcrossRollbacks"}},
		{"aliasing", func() store.Store { return &aliasing{MemoryStore: mem(), seen: map[string]*thread.Commit{}} }, nil, []string{"CommitsAreImmutable"}},
		{"greedy delete", func() store.Store { return &greedyDelete{MemoryStore: mem(), gone: map[string]bool{}} }, nil, []string{"DeleteKeepsSharedPrefixes"}},
		{"piecemeal", func() store.Store { return piecemeal{mem()} }, nil, []string{"BatchIsAtomic"}},
		{"shallow walk", func() store.Store { return shallowWalk{mem()} }, nil, []string{"MessageIDsOncePerThread"}},
		{"id order", func() store.Store { return idOrder{mem()} }, nil, []string{"ListByUpdated"}},
		{"forgetful", func() store.Store { return mem() }, forgetful, []string{"Reopen"}},
	}
	for _, tt := range tests {
		for _, name := range tt.mustFail {
			t.Run(tt.store+"/"+name, func(t *testing.T) {
				failures := runRecorded(t.Context(), name, tt.newStore(), tt.opts)
				if len(failures) == 0 {
					t.Fatalf("case %s passed a %s store", name, tt.store)
				}
				t.Logf("caught: %s", failures[0])
			})
		}
	}
}

func TestSuitePassesMemoryStoreWithReopen(t *testing.T) {
	// The memory store "reopened" as itself keeps everything: the reopen
	// case must pass, and so must the rest with a smaller fork chain.
	Run(t, func(t *testing.T) store.Store { return thread.NewMemoryStore() }, &Options{
		Reopen:    func(s store.Store) (store.Store, error) { return s, nil },
		ForkDepth: 50,
	})
}
