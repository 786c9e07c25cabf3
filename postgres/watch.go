package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

var _ store.Watcher = (*Store)(nil)

// channel is the channel of PostgreSQL's LISTEN/NOTIFY that every batch's
// changes are sent on.
const channel = "loom_changes"

// note is the payload of a notification: the changes of a batch (thread
// ids as keys), or, when they do not fit in one notification, part Part
// (from 1) of Parts of them.
type note struct {
	Part    int             `json:"part,omitzero"`
	Parts   int             `json:"parts,omitzero"`
	Changes []thread.Change `json:"changes"`
}

// maxNote is the longest payload sent: PostgreSQL takes less than 8000
// bytes.
const maxNote = 7999

// notes returns the payloads of the notifications of changes: a note, or
// several that each fit. A change too long for a notification of its own
// goes without its op, and if it still does not fit (ids of kilobytes of
// escapes) as a ChangeGap, which has every listener read again.
func notes(changes []thread.Change) []string {
	if len(changes) == 0 {
		return nil
	}
	if b, err := json.Marshal(note{Changes: changes}); err == nil && len(b) <= maxNote {
		return []string{string(b)}
	}
	// Pack the changes greedily into parts, with room for the part numbers.
	const room = maxNote - len(`{"part":1000000,"parts":1000000,"changes":[]}`)
	var parts [][]json.RawMessage
	size := room + 1
	for _, c := range changes {
		b, _ := json.Marshal(c)
		if len(b) > room {
			c.Op = ""
			b, _ = json.Marshal(c)
		}
		if len(b) > room {
			b, _ = json.Marshal(thread.Change{Kind: thread.ChangeGap, Time: c.Time})
		}
		if size+1+len(b) > room {
			parts = append(parts, nil)
			size = 0
		}
		parts[len(parts)-1] = append(parts[len(parts)-1], b)
		size += 1 + len(b)
	}
	out := make([]string, len(parts))
	for i, p := range parts {
		b, _ := json.Marshal(struct {
			Part    int               `json:"part"`
			Parts   int               `json:"parts"`
			Changes []json.RawMessage `json:"changes"`
		}{i + 1, len(parts), p})
		out[i] = string(b)
	}
	return out
}

// notes returns the payloads of the notifications of b's changes, or none
// if the store does not notify (Options.NoNotify).
func (s *Store) notes(b *store.Batch) []string {
	if s.noNotify {
		return nil
	}
	return notes(b.Changes(time.Now().UTC()))
}

// Watch implements store.Watcher with PostgreSQL's LISTEN/NOTIFY. Every
// batch that any Store applies to the database notifies its changes on
// the channel loom_changes once it committed: Apply queues them and
// returns, and a goroutine of the Store sends what is queued, on a
// connection of its own, in a transaction of its own (many batches' at
// once, in the order they were queued), shortly after the commit — a
// listener may hear a change a moment after Apply returned. So a batch
// that did not commit is never heard, a batch's changes are heard
// together (a batch whose changes need more than one notification, of at
// most 8000 bytes each, is put back together before fn hears it), and
// what one caller applies through a Store after another is heard after
// it. Close sends what is still queued before it returns.
//
// Two writers of one thread may get their notifications out in the other
// order than they committed in; Watch puts them back in each thread's
// version order. A batch with a move that skips a version of its thread
// is held until the notifications of the versions before it come, for
// 100 ms at most; a notification overtaken by a later version of its
// thread is dropped.
//
// Notifications can be lost, not the batches: those queued when a process
// crashes (or ends without Close); those whose sending failed twice (the
// second time on a new connection); and, when more than 65,536 wait to be
// sent, the oldest, for which the listeners hear a ChangeGap in their
// place (as they do after a failed send, with the next one). The
// listeners hear nothing of a lost change until the thread's next change,
// which, since it skips a version, they hear 100 ms late, after a
// ChangeGap. A lost change that no other follows (a thread's last, a
// deletion, a checkpoint) is not heard at all.
//
// Watch listens on a connection of its own (made from the pool's
// configuration, without its hooks), and returns once LISTEN has
// succeeded. If that connection drops (or stops answering), Watch
// connects again, with a backoff, and once it listens fn hears a
// ChangeGap. The connection is closed when ctx ends, or when the Store is
// closed.
func (s *Store) Watch(ctx context.Context, fn func([]thread.Change)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.noNotify {
		return fmt.Errorf("postgres: watch: the store does not notify (Options.NoNotify): %w", thread.ErrUnsupported)
	}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.watches.Add(1)
	}
	s.mu.Unlock()
	if closed {
		return fmt.Errorf("postgres: watch: the store is closed: %w", thread.ErrInvalid)
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.done, cancel)
	conn, err := s.listen(ctx)
	if err != nil {
		stop()
		cancel()
		s.watches.Done()
		return fmt.Errorf("postgres: watch: %w", err)
	}
	ready := make(chan struct{})
	defer close(ready)
	go func() {
		defer s.watches.Done()
		defer cancel()
		defer stop()
		<-ready
		s.watch(ctx, conn, fn)
	}()
	return nil
}

// listen connects and listens on the channel.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		closeConn(conn)
		return nil, err
	}
	return conn, nil
}

func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn.Close(ctx)
}

// Watch's timing: how long a listening connection may be quiet before it
// is pinged, how long a ping may take, and the backoff between attempts
// to connect again.
var (
	watchIdle    = 30 * time.Second
	watchPing    = 10 * time.Second
	watchBackoff = [2]time.Duration{20 * time.Millisecond, 5 * time.Second}
)

// watch hears the notifications on conn until ctx ends, and connects
// again when conn drops.
func (s *Store) watch(ctx context.Context, conn *pgx.Conn, fn func([]thread.Change)) {
	defer func() {
		if conn != nil {
			closeConn(conn)
		}
	}()
	var (
		batch []thread.Change // the parts heard so far of a batch
		part  int             // the last part heard
		seq   sequencer
	)
	hand := func(batches [][]thread.Change) {
		for _, b := range batches {
			fn(b)
		}
	}
	for {
		wait := watchIdle
		deadline, holding := seq.deadline()
		if holding {
			wait = min(wait, max(time.Until(deadline), time.Millisecond))
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			var nt note
			if n.Channel != channel || json.Unmarshal([]byte(n.Payload), &nt) != nil {
				continue // not a payload of ours
			}
			switch {
			case nt.Parts == 0: // a batch in one notification
				batch, part = nil, 0
				if len(nt.Changes) > 0 {
					hand(seq.push(nt.Changes, time.Now()))
				}
			case nt.Part == 1 || nt.Part == part+1:
				if nt.Part == 1 {
					batch = nil
				}
				batch, part = append(batch, nt.Changes...), nt.Part
				if part == nt.Parts {
					hand(seq.push(batch, time.Now()))
					batch, part = nil, 0
				}
			default:
				// A part missing, which a batch's notifications, sent
				// together, never are: say so.
				batch, part = nil, 0
				fn([]thread.Change{{Kind: thread.ChangeGap, Time: time.Now().UTC()}})
			}
			continue
		}
		if pgconn.Timeout(err) && !conn.IsClosed() {
			if now := time.Now(); holding && !now.Before(deadline) {
				hand(seq.expire(now))
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, watchPing)
			err = conn.Ping(pctx)
			cancel()
			if err == nil || ctx.Err() != nil {
				continue
			}
		}
		// The connection is gone: connect again, and say what may have
		// been missed meanwhile (what was held too).
		closeConn(conn)
		if conn = s.relisten(ctx); conn == nil {
			return
		}
		batch, part = nil, 0
		seq.reset()
		fn([]thread.Change{{Kind: thread.ChangeGap, Time: time.Now().UTC()}})
	}
}

// relisten connects and listens again, with a jittered backoff, until it
// does or ctx ends (nil).
func (s *Store) relisten(ctx context.Context) *pgx.Conn {
	delay := watchBackoff[0]
	for {
		t := time.NewTimer(delay/2 + rand.N(delay/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		conn, err := s.listen(ctx)
		if err == nil {
			return conn
		}
		if errors.Is(err, context.Canceled) || ctx.Err() != nil {
			return nil
		}
		delay = min(2*delay, watchBackoff[1])
	}
}
