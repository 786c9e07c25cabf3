package storetest

import (
	"context"
	"iter"
	"sync/atomic"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// CountingStore is a memory store that counts what the layers above it
// read and queue through it, for tests that hold them to a cost: Walks
// (calls of Ancestors), Commits (the commits those walks yielded) and
// Queued (appends through the store's queue, AppendAt).
type CountingStore struct {
	*thread.MemoryStore
	Walks, Commits, Queued atomic.Int64
}

// NewCountingStore returns an empty CountingStore.
func NewCountingStore() *CountingStore {
	return &CountingStore{MemoryStore: thread.NewMemoryStore()}
}

// Ancestors counts a walk and each commit it yields.
func (s *CountingStore) Ancestors(ctx context.Context, id string, floor int64) iter.Seq2[*thread.Commit, error] {
	s.Walks.Add(1)
	return func(yield func(*thread.Commit, error) bool) {
		for c, err := range s.MemoryStore.Ancestors(ctx, id, floor) {
			s.Commits.Add(1)
			if !yield(c, err) {
				return
			}
		}
	}
}

// AppendAt counts an append through the store's queue.
func (s *CountingStore) AppendAt(ctx context.Context, id string, build func(r *thread.Record, head *thread.Commit) (*store.Batch, error)) error {
	s.Queued.Add(1)
	return s.MemoryStore.AppendAt(ctx, id, build)
}
