package postgres

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomthreads/loom/thread"
)

// notifyTimeout bounds an attempt to send notifications (connecting
// included).
const notifyTimeout = 5 * time.Second

// The notifier's bounds: how many notes may wait to be sent (past it the
// oldest batches' are dropped, and a ChangeGap goes in their place), and
// how many bytes of notes one round trip carries (at least one batch's).
const (
	maxQueued = 1 << 16
	maxSend   = 1 << 20
)

// notifier sends the notifications of a Store's batches, once they
// committed, from a goroutine of its own on a connection of its own (made
// from the pool's configuration, without its hooks, outside MaxConns): the
// writers queue their batches' notes and return at once, and the goroutine
// sends everything queued in one round trip, while the next notes queue.
//
// It sends them in a transaction of their own with synchronous_commit off,
// not in the batches': PostgreSQL commits the transactions that notify one
// at a time (a lock taken before the commit, so that the notifications
// queue in commit order, is held until the commit record is flushed), and
// a batch's commit must wait for its flush; this transaction's commit
// waits for none, so it holds that lock a moment. (A function declared with
// SET synchronous_commit = off would not do: its setting ends when it
// returns, before the commit.) One transaction's notifications reach the
// queue together, so a batch's, which may be several, stay together, and
// the batches go in the order they were queued in.
//
// It starts with the first batch that has notes, and Close stops it once
// it sent what was queued. A send that fails is tried once more on a new
// connection; if that fails too its notes are lost, and the next send
// starts with a ChangeGap. A process that ends without Close (a crash)
// loses the notes queued.
type notifier struct {
	mu      sync.Mutex
	queue   [][]string // the batches' notes, oldest first
	n       int        // notes in queue
	lost    bool       // notes were dropped before those queued
	started bool
	closed  bool
	wake    chan struct{} // something was queued, or closed; buffered
	done    chan struct{} // closed when the goroutine ends

	connect func(context.Context) (*pgx.Conn, error)
}

func newNotifier(connect func(context.Context) (*pgx.Conn, error)) *notifier {
	return &notifier{wake: make(chan struct{}, 1), done: make(chan struct{}), connect: connect}
}

// notify queues notes, the notifications of a batch that committed, to be
// sent soon after (see notifier). It never waits for the database, and its
// failure is not the batch's: the listeners miss the notifications (see
// Watch).
func (s *Store) notify(notes []string) {
	if len(notes) > 0 {
		s.notifier.push(notes)
	}
}

func (n *notifier) push(notes []string) {
	n.mu.Lock()
	if n.closed {
		// Close waits for the writers' connections before it closes the
		// notifier, so no batch committed through the Store gets here.
		n.mu.Unlock()
		return
	}
	if !n.started {
		n.started = true
		go n.run()
	}
	for n.n+len(notes) > maxQueued && len(n.queue) > 0 {
		n.n -= len(n.queue[0])
		n.queue[0] = nil
		n.queue = n.queue[1:]
		n.lost = true
	}
	n.queue = append(n.queue, notes)
	n.n += len(notes)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// close sends what is queued, stops the goroutine, and waits for it.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	started := n.started
	n.mu.Unlock()
	if !started {
		return
	}
	select {
	case n.wake <- struct{}{}:
	default:
	}
	<-n.done
}

// take takes the notes to send next: whole batches, in order, up to
// maxSend bytes (one batch at least), after a gap if notes were lost;
// none if none is queued.
func (n *notifier) take() (notes []string, closed bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.queue) == 0 {
		return nil, n.closed // a gap waits for notes to lead: no sending in a loop to a database that is down
	}
	if n.lost {
		n.lost = false
		notes = append(notes, gapNote())
	}
	size, k := 0, 0
	for _, b := range n.queue {
		bs := 0
		for _, s := range b {
			bs += len(s)
		}
		if k > 0 && size+bs > maxSend {
			break
		}
		notes = append(notes, b...)
		size += bs
		n.n -= len(b)
		k++
	}
	clear(n.queue[:k])
	n.queue = n.queue[k:]
	if len(n.queue) == 0 {
		n.queue = nil // let the array go
	}
	return notes, n.closed
}

// gapNote is a note of a ChangeGap: listeners read again.
func gapNote() string {
	b, _ := json.Marshal(note{Changes: []thread.Change{{Kind: thread.ChangeGap, Time: time.Now().UTC()}}})
	return string(b)
}

func (n *notifier) run() {
	defer close(n.done)
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			closeConn(conn)
		}
	}()
	for {
		notes, closed := n.take()
		if len(notes) == 0 {
			if closed {
				return
			}
			<-n.wake
			continue
		}
		var ok bool
		conn, ok = n.send(conn, notes)
		if !ok {
			n.mu.Lock()
			n.lost = true
			if n.closed {
				// Do not spend the Close on a database that does not
				// answer: what is queued is lost too.
				n.queue, n.n, n.lost = nil, 0, false
			}
			n.mu.Unlock()
		}
	}
}

// send sends notes on conn, or on a new connection if there is none or
// the send fails, and returns the connection to use next: one statement
// in a transaction of its own, with synchronous_commit off.
func (n *notifier) send(conn *pgx.Conn, notes []string) (*pgx.Conn, bool) {
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		var err error
		if conn == nil {
			conn, err = n.connect(ctx)
		}
		if err == nil {
			// One statement, its own transaction, which commits without
			// waiting for the disk.
			_, err = conn.Exec(ctx, `SELECT set_config('synchronous_commit', 'off', true), loom_notify($1::text[])`, notes)
			if err != nil {
				closeConn(conn)
				conn = nil
			}
		}
		cancel()
		if err == nil {
			return conn, true
		}
	}
	return conn, false
}
