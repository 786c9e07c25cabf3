package thread

import (
	"context"
	"sync"
	"time"

	"github.com/loomthreads/loom/thread/store"
)

// feedBuffer is how many changes a listener may fall behind by before it
// is sent a ChangeGap in place of what it missed.
const feedBuffer = 256

// hub fans the changes of one store out to the listeners of its DBs.
type hub struct {
	mu   sync.Mutex
	subs map[*listener]struct{}
	stop context.CancelFunc // ends the store's watch; nil while none runs
	// dead is set when the last listener leaves a hub kept in hubs, which
	// then forgets it: a Watch that found it takes a new one.
	dead bool
	// starting is held while a store's watch starts.
	starting sync.Mutex
}

type listener struct {
	tenant string
	ch     chan Change
	mu     sync.Mutex
	gap    bool // a change was dropped: a ChangeGap is due once ch is read
}

// localHub holds the hub of a DB, which its copies (WithTenant) share: a
// change made through the DB reaches the listeners of the DB and of its
// copies. A hub goes when its last listener does.
type localHub struct {
	mu sync.Mutex
	h  *hub
}

// hub returns the hub of db's store, making one when create is set, or
// nil.
func (db *DB) hub(create bool) *hub {
	l := &db.shared.hub
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.h == nil && create {
		l.h = &hub{subs: map[*listener]struct{}{}}
	}
	return l.h
}

// publish sends the changes of an applied batch to the hub's listeners.
// A store that is a Watcher publishes its own, from every process.
func (h *hub) publish(changes []Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.subs {
		l.send(changes)
	}
}

func (l *listener) send(changes []Change) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range changes {
		if c.Kind != ChangeGap {
			tenant, _ := SplitKey(c.Thread)
			if tenant != l.tenant {
				continue
			}
		}
		if l.gap {
			break
		}
		select {
		case l.ch <- c:
		default:
			l.gap = true // ch is full, so the reader will look at gap
		}
	}
}

// Watch calls fn with each change to the threads of db's tenant, thread
// ids as the tenant knows them, until ctx ends; it returns once it
// listens (so a caller can read what it shows after Watch returns and
// miss nothing), or with the error of a store that could not listen.
// fn runs on a goroutine of its own, one call at a time.
//
// A store that is a Watcher reports the changes every process makes; any
// other, those made through DBs of this process on the same store value,
// in the order their writes returned (two goroutines writing one thread at
// once may be heard in either order: a listener keeps the higher version).
// A listener that falls behind by more than a few thousand changes, or a
// store whose listening connection dropped, is told so by a ChangeGap.
func (db *DB) Watch(ctx context.Context, fn func(Change)) error {
	if _, bad := db.store.(badTenant); bad {
		return db.store.(badTenant).err()
	}
	l := &listener{tenant: db.tenant, ch: make(chan Change, feedBuffer)}
	// The listener counts before the store's watch starts, so that no
	// listener leaving meanwhile stops the watch this one relies on.
	var h *hub
	for {
		h = db.hub(true)
		h.mu.Lock()
		if !h.dead {
			h.subs[l] = struct{}{}
			h.mu.Unlock()
			break
		}
		h.mu.Unlock()
	}
	if w, ok := db.raw.(store.Watcher); ok {
		// Starting a watch is a round trip to the store: under a lock of
		// its own, not the one publish takes.
		h.starting.Lock()
		h.mu.Lock()
		running := h.stop != nil
		h.mu.Unlock()
		if !running {
			start, cancel := context.WithCancel(context.WithoutCancel(ctx))
			if err := w.Watch(start, h.publish); err != nil {
				cancel()
				h.starting.Unlock()
				h.mu.Lock()
				delete(h.subs, l)
				h.mu.Unlock()
				return err
			}
			h.mu.Lock()
			h.stop = cancel
			h.mu.Unlock()
		}
		h.starting.Unlock()
	}
	go func() {
		defer func() {
			h.mu.Lock()
			delete(h.subs, l)
			if len(h.subs) == 0 {
				if h.stop != nil {
					h.stop()
					h.stop = nil
				}
				l := &db.shared.hub
				l.mu.Lock()
				if l.h == h {
					l.h = nil
					h.dead = true
				}
				l.mu.Unlock()
			}
			h.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case c := <-l.ch:
				if ctx.Err() != nil {
					return // a listener that stopped hears nothing more
				}
				if c.Thread != "" {
					_, c.Thread = SplitKey(c.Thread)
				}
				fn(c)
			}
			l.mu.Lock()
			gap := l.gap && len(l.ch) == 0
			if gap {
				l.gap = false
			}
			l.mu.Unlock()
			if gap {
				fn(Change{Kind: ChangeGap, Time: time.Now().UTC()})
			}
		}
	}()
	return nil
}

// apply applies b to the store, whatever becomes of ctx once the store
// has it, and then tells this process's listeners.
func (db *DB) apply(ctx context.Context, b *store.Batch) error {
	if err := db.store.Apply(context.WithoutCancel(ctx), b); err != nil {
		return err
	}
	db.published(b)
	return nil
}

// published makes the changes of b heard by this process's listeners,
// after the store applied it, unless the store publishes its own.
func (db *DB) published(b *store.Batch) {
	if _, ok := db.raw.(store.Watcher); ok {
		return
	}
	h := db.hub(false)
	if h == nil {
		return // nobody listens to this store
	}
	changes := b.Changes(db.clock())
	if len(changes) == 0 {
		return
	}
	if db.tenant != "" {
		for i := range changes {
			changes[i].Thread = Key(db.tenant, changes[i].Thread)
		}
	}
	h.publish(changes)
}
