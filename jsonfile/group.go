package jsonfile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// Group commit. Apply and AppendAt hand their batch to the store's writer,
// a goroutine that runs while batches wait: it takes the lock, gathers
// every batch waiting by then, plans each against the store as the ones
// before it leave it (a batch that fails planning fails alone and changes
// nothing), and writes them all with one intent: one intent write and
// fsync, and each file and directory written once however many batches
// change it. Every caller is answered once the intent is done, so each
// batch is as durable, and as atomic after a crash, as if it were alone;
// the batches of a group commit or fail together only on a failure of the
// disk.

// maxGroup caps the batches of one intent.
const maxGroup = 128

// A request is a batch waiting for the writer: Batch, or for AppendAt the
// batch build makes from a thread's record and head.
type request struct {
	b      *store.Batch
	thread string
	build  func(r *thread.Record, head *thread.Commit) (*store.Batch, error)

	state atomic.Int32 // waiting, taken or abandoned
	done  chan error   // buffered: the writer never waits on it
}

const (
	waiting int32 = iota
	taken
	abandoned
)

// writer is the state of the group writer, under mu.
type writer struct {
	queue   []*request
	running bool
	// cancel ends the writer's wait for the lock, when every request
	// waiting for it has left.
	cancel context.CancelFunc
}

// submit hands r to the writer and waits for its answer. A caller whose
// ctx ends while r waits for the lock leaves (r is then never applied);
// once the writer has taken r, it waits for the answer: a batch being
// committed is committed.
func (s *Store) submit(ctx context.Context, r *request) error {
	r.done = make(chan error, 1)
	s.wmu.Lock()
	s.w.queue = append(s.w.queue, r)
	if !s.w.running {
		s.w.running = true
		go s.writeLoop()
	}
	s.wmu.Unlock()
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		if !r.state.CompareAndSwap(waiting, abandoned) {
			return <-r.done
		}
		s.wmu.Lock()
		if !s.waiting() && s.w.cancel != nil {
			s.w.cancel() // no one is left to wait for the lock
		}
		s.wmu.Unlock()
		return fmt.Errorf("jsonfile %s: lock: %w", s.dir, ctx.Err())
	}
}

// writeLoop applies groups of waiting requests until none waits.
func (s *Store) writeLoop() {
	var carry []*request // taken, for the next group
	for {
		s.wmu.Lock()
		if len(carry) == 0 && !s.waiting() {
			s.w.queue, s.w.running = nil, false
			s.wmu.Unlock()
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		s.w.cancel = cancel
		s.wmu.Unlock()
		err := s.lock(ctx)
		stopped := ctx.Err() != nil
		cancel()
		s.wmu.Lock()
		s.w.cancel = nil
		group := carry
		carry = nil
		if err == nil || !stopped {
			for _, r := range s.w.queue {
				if len(group) < maxGroup && r.state.CompareAndSwap(waiting, taken) {
					group = append(group, r)
				}
			}
			s.w.queue = dropTaken(s.w.queue)
		}
		s.wmu.Unlock()
		switch {
		case err == nil:
			carry = s.applyGroup(group)
			s.unlock()
		case stopped:
			carry = group // every waiter left; any that came since waits on
		default:
			for _, r := range group {
				r.done <- err
			}
		}
	}
}

// waiting reports whether a request waits in the queue; wmu is held.
func (s *Store) waiting() bool {
	for _, r := range s.w.queue {
		if r.state.Load() == waiting {
			return true
		}
	}
	return false
}

// dropTaken returns the queue without the requests taken or abandoned.
func dropTaken(q []*request) []*request {
	out := q[:0]
	for _, r := range q {
		if r.state.Load() == waiting {
			out = append(out, r)
		}
	}
	clear(q[len(out):])
	return out
}

// applyGroup applies the requests of group with one intent and answers
// them, but for those that must wait for a group of their own, which it
// returns; the lock is held.
func (s *Store) applyGroup(group []*request) (carry []*request) {
	if err := s.recover(); err != nil {
		err = s.noteFull(fmt.Errorf("jsonfile: finish an earlier batch: %w", err))
		for _, r := range group {
			r.done <- err
		}
		return nil
	}
	tx := newTx(s)
	var in []*request
	for _, r := range group {
		err := tx.addRequest(r)
		var we *writeError
		switch {
		case errors.Is(err, errRegroup):
			carry = append(carry, r)
		case errors.As(err, &we):
			// The tx holds part of r: make it again without r.
			r.done <- s.noteFull(we.err)
			tx, in = s.replay(in)
		case err != nil:
			r.done <- s.noteFull(err)
		default:
			in = append(in, r)
		}
	}
	var err error
	if len(in) > 0 {
		err = tx.commit()
	}
	err = s.noteFull(err)
	for _, r := range in {
		r.done <- err
	}
	return carry
}

// replay makes a tx of the requests in, which were in a tx that a failed
// write spoilt; a request that fails now is answered.
func (s *Store) replay(in []*request) (*tx, []*request) {
	for {
		tx, kept, spoilt := newTx(s), []*request(nil), false
		for i, r := range in {
			err := tx.addRequest(r)
			if err == nil {
				kept = append(kept, r)
				continue
			}
			r.done <- s.noteFull(err)
			var we *writeError
			if errors.As(err, &we) {
				kept, spoilt = append(kept, in[i+1:]...), true
				break
			}
		}
		if !spoilt {
			return tx, kept
		}
		in = kept
	}
}

// addRequest adds r's batch to the tx, building it first for AppendAt.
func (tx *tx) addRequest(r *request) error {
	if r.build == nil {
		return tx.add(r.b)
	}
	t, err := tx.thread(r.thread)
	if err != nil {
		return err
	}
	if t.f == nil {
		return fmt.Errorf("thread %q: %w", clip(r.thread), thread.ErrNotFound)
	}
	var head *thread.Commit
	if t.f.Head != "" {
		if head, err = tx.head(t.f.Head); err != nil {
			return err
		}
	}
	b, err := r.build(t.f.record(), head)
	if err != nil || b == nil {
		return err
	}
	return tx.add(b)
}

// head returns the ID, Depth and StateFrom of a commit that a thread's
// head names: one of the tx, or a stored one.
func (tx *tx) head(id string) (*thread.Commit, error) {
	if r := tx.refs[id]; r != nil && r.head != nil {
		return r.head, nil
	}
	b, err := tx.s.root.ReadFile(commitPath(id))
	if err != nil {
		return nil, fmt.Errorf("commit %q: %w", clip(id), err)
	}
	var f struct {
		Depth     int64  `json:"depth"`
		StateFrom string `json:"state_from"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("commit %q: corrupt file: %v", clip(id), err)
	}
	return &thread.Commit{ID: id, Depth: f.Depth, StateFrom: f.StateFrom}, nil
}

// AppendAt implements store.Appender: build runs in the writer, under the
// store's lock, on the thread's record and head as the batches before it
// in its group leave them, so that racing appends to one thread take
// turns instead of losing their compare-and-swap, and share an intent.
func (s *Store) AppendAt(ctx context.Context, id string, build func(r *thread.Record, head *thread.Commit) (*store.Batch, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.submit(ctx, &request{thread: id, build: build})
}

var _ store.Appender = (*Store)(nil)
