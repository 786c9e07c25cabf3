package worklog

import (
	"context"
	"fmt"
	"iter"
	"sync/atomic"
	"testing"

	"github.com/loomthreads/loom/thread"
)

// walkingStore is a memory store that counts the walks of lines through it.
type walkingStore struct {
	*thread.MemoryStore
	walks atomic.Int64
}

func (s *walkingStore) Ancestors(ctx context.Context, id string, floor int64) iter.Seq2[*thread.Commit, error] {
	s.walks.Add(1)
	return s.MemoryStore.Ancestors(ctx, id, floor)
}

// TestItemWritesReadNoLine checks that a Log on threads writes its records
// with ids it makes (thread.CommitOptions.FreshIDs), which the thread does
// not look up on its line: with a DB that remembers no line, writes that
// find the Log's cache current read nothing back.
func TestItemWritesReadNoLine(t *testing.T) {
	ctx := t.Context()
	st := &walkingStore{MemoryStore: thread.NewMemoryStore()}
	db := thread.New(st, &thread.Options{MessageIDCache: -1})
	l := dbLog(t, db, newClock())
	for i := range 3 {
		if _, err := l.Create(ctx, CreateOptions{Text: fmt.Sprint("warm ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	st.walks.Store(0)
	for i := range 10 {
		if _, err := l.Create(ctx, CreateOptions{Text: fmt.Sprint("item ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := st.walks.Load(); n != 0 {
		t.Errorf("10 item writes walked lines %d times", n)
	}
}
