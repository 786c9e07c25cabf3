package postgres

import (
	"time"

	"github.com/loomthreads/loom/thread"
)

// watchHold is how long Watch holds a batch whose move skips a version of
// its thread, waiting for the notification of the versions between.
var watchHold = 100 * time.Millisecond

// watchForget is how long Watch remembers the last version it delivered of
// a thread that changes no more (between one and two of these): longer
// than any two notifications of one thread arrive apart out of order.
const watchForget = 10 * time.Second

// sequencer puts the batches a Watch hears back in each thread's version
// order. The notifications of a batch are queued after it commits, and
// sent by its Store's notifier (see Store.notify), so two writers of one
// thread, the second of which could only commit after the first, may get
// theirs to the listeners in the other order (two Stores; or two writers
// of one Store, the second of which queued first).
//
// A batch is delivered when each of its moves is the next version of its
// thread (or of a thread not heard of lately), and no earlier batch held
// touches the thread of its checkpoints and deletions; one that is not is
// held, for watchHold at
// most, until the batches before it come. If they do not (a writer
// crashed between its commit and its notification, or its notifier failed
// to send it, or dropped it from a full queue), the held batch is
// delivered after a ChangeGap. A create or a move of a version already
// delivered is dropped: it was overtaken.
type sequencer struct {
	// last is the last version delivered of the threads heard of since
	// rotated (cur) and in the watchForget before it (prev).
	cur, prev map[string]int64
	rotated   time.Time
	held      []heldBatch // in the order they were heard
}

type heldBatch struct {
	changes []thread.Change
	since   time.Time
}

// version is the last version delivered of id, if it is known.
func (q *sequencer) version(id string) (int64, bool) {
	if v, ok := q.cur[id]; ok {
		return v, true
	}
	v, ok := q.prev[id]
	return v, ok
}

func (q *sequencer) set(id string, v int64, now time.Time) {
	if q.cur == nil || now.Sub(q.rotated) >= watchForget {
		q.prev, q.cur, q.rotated = q.cur, map[string]int64{}, now
	}
	q.cur[id] = v
}

func (q *sequencer) forget(id string) {
	delete(q.cur, id)
	delete(q.prev, id)
}

// reset forgets everything: the listening connection dropped, and a gap
// covers what is held.
func (q *sequencer) reset() { *q = sequencer{} }

// ready reports whether changes may be delivered now: they are in order
// after what was delivered, and no batch of held[:upto] touches their
// threads.
func (q *sequencer) ready(changes []thread.Change, upto int) bool {
	var next map[string]int64 // versions the batch's earlier moves reach
	for _, c := range changes {
		if c.Kind != thread.ChangeMove {
			// A change without a version (a checkpoint, a deletion)
			// keeps its place behind the held changes of its thread.
			if c.Kind != thread.ChangeCreate {
				for _, h := range q.held[:upto] {
					if touches(h.changes, c.Thread) {
						return false
					}
				}
			}
			continue
		}
		last, ok := next[c.Thread]
		if !ok {
			last, ok = q.version(c.Thread)
		}
		if ok && c.Version > last+1 {
			return false
		}
		if next == nil {
			next = map[string]int64{}
		}
		next[c.Thread] = c.Version
	}
	return true
}

func touches(changes []thread.Change, id string) bool {
	for _, c := range changes {
		if c.Thread == id && c.Kind != thread.ChangeGap {
			return true
		}
	}
	return false
}

// deliver notes changes as delivered and returns them without those an
// earlier delivery overtook (nil if none is left).
func (q *sequencer) deliver(changes []thread.Change, now time.Time) []thread.Change {
	out := changes[:0:0]
	for _, c := range changes {
		switch c.Kind {
		case thread.ChangeCreate, thread.ChangeMove:
			if last, ok := q.version(c.Thread); ok && c.Version <= last {
				continue
			}
			q.set(c.Thread, c.Version, now)
		case thread.ChangeDelete:
			q.forget(c.Thread)
		}
		out = append(out, c)
	}
	return out
}

// push takes a batch heard and returns the batches to hand to the
// listener now, in order.
func (q *sequencer) push(changes []thread.Change, now time.Time) [][]thread.Change {
	if len(q.held) == 0 && q.ready(changes, 0) {
		if out := q.deliver(changes, now); len(out) > 0 {
			return [][]thread.Change{out}
		}
		return nil
	}
	q.held = append(q.held, heldBatch{changes, now})
	return q.release(nil, now)
}

// release delivers the held batches that are ready, appending them to out.
func (q *sequencer) release(out [][]thread.Change, now time.Time) [][]thread.Change {
	for i := 0; i < len(q.held); {
		if !q.ready(q.held[i].changes, i) {
			i++
			continue
		}
		if d := q.deliver(q.held[i].changes, now); len(d) > 0 {
			out = append(out, d)
		}
		q.held = append(q.held[:i], q.held[i+1:]...)
		i = 0 // what it delivered may free a batch before it
	}
	return out
}

// deadline is when the first held batch stops waiting, if one is held.
func (q *sequencer) deadline() (time.Time, bool) {
	if len(q.held) == 0 {
		return time.Time{}, false
	}
	return q.held[0].since.Add(watchHold), true
}

// expire gives up waiting for what the held batches that waited watchHold
// miss: a ChangeGap says so, and they are delivered, in order. Each such
// batch's threads skip to the lowest version held of them (so that what
// was heard is delivered in order), or, if that frees nothing, the batch
// is delivered as it is.
func (q *sequencer) expire(now time.Time) [][]thread.Change {
	var out [][]thread.Change
	for len(q.held) > 0 && !now.Before(q.held[0].since.Add(watchHold)) {
		if len(out) == 0 {
			out = append(out, []thread.Change{{Kind: thread.ChangeGap, Time: now.UTC()}})
		}
		if h := q.held[0]; !q.skip(h.changes, now) {
			q.held = q.held[1:]
			if d := q.deliver(h.changes, now); len(d) > 0 {
				out = append(out, d)
			}
		}
		out = q.release(out, now)
	}
	return out
}

// skip moves the last version of each thread that changes skip a version
// of up to the version before the lowest held, and reports whether any
// moved.
func (q *sequencer) skip(changes []thread.Change, now time.Time) bool {
	moved := false
	for _, c := range changes {
		last, ok := q.version(c.Thread)
		if c.Kind != thread.ChangeMove || !ok || c.Version <= last+1 {
			continue
		}
		low := c.Version
		for _, h := range q.held {
			for _, d := range h.changes {
				if d.Kind == thread.ChangeMove && d.Thread == c.Thread && d.Version > last && d.Version < low {
					low = d.Version
				}
			}
		}
		if low-1 > last {
			q.set(c.Thread, low-1, now)
			moved = true
		}
	}
	return moved
}
