package thread

import (
	"container/list"
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/loomthreads/loom/message"
)

// A message is appended to a thread once, so that its id names one place
// in the thread: the message to fork at, or to read before. The ids a thread
// gives are new by construction and need no look, and so are those an
// in-process caller made with message.NewID for the commit and says so
// (CommitOptions.FreshIDs: an agent's input, a work log's records); a
// message that comes with an id chosen elsewhere (a client's, an imported
// one) is looked up among the ids on the line of the head it goes on.
//
// Reading a whole line for every such append would make appends cost the
// thread's length, so a DB remembers the ids of a few recent lines, keyed
// by the commit that ends each (a line never changes: commits are
// immutable). An append onto a remembered head costs what it appends; onto
// another head, the commits between it and a remembered one (or the root,
// the first time a process meets a thread); any store serves it, through
// Ancestors. Options.MessageIDCache sets how many ids a DB remembers.

// defaultIDCache is Options.MessageIDCache's default: about 16 MiB.
const defaultIDCache = 1 << 18

// idLines remembers the message ids on the lines of recent heads, up to
// budget ids over all lines. A line in use is taken out, so that one
// goroutine at a time extends it; another that wants it meanwhile waits
// for it to come back (wait) rather than read the line from the store.
type idLines struct {
	budget int // < 0: remember nothing
	mu     sync.Mutex
	byHead map[string]*list.Element // of *idLine
	lru    list.List                // most recent first
	total  int
	// busy holds a channel for each line taken out, closed when it is
	// given back (under its head or a newer one).
	busy map[string]chan struct{}
}

// idLine is the set of message ids on the line that ends at head.
type idLine struct {
	head string
	ids  map[string]struct{}
}

// take removes and returns the line that ends at head; when there is none,
// it returns nil and, if the line is in use, a channel closed when it is
// given back.
func (l *idLines) take(head string) (*idLine, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.byHead[head]
	if !ok {
		return nil, l.busy[head]
	}
	l.lru.Remove(e)
	delete(l.byHead, head)
	line := e.Value.(*idLine)
	l.total -= len(line.ids)
	if l.busy == nil {
		l.busy = make(map[string]chan struct{})
	}
	l.busy[head] = make(chan struct{})
	return line, nil
}

// put remembers line as the line that ends at head, letting the least
// recent lines go past the budget, and ends the use of the head it was
// taken out under.
func (l *idLines) put(head string, line *idLine) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ch, ok := l.busy[line.head]; ok && line.head != "" {
		close(ch)
		delete(l.busy, line.head)
	}
	if head == "" || l.budget < 0 || len(line.ids) > l.budget {
		return
	}
	line.head = head
	if l.byHead == nil {
		l.byHead = make(map[string]*list.Element)
	}
	if old, ok := l.byHead[head]; ok {
		l.total -= len(old.Value.(*idLine).ids)
		l.lru.Remove(old)
	}
	l.byHead[head] = l.lru.PushFront(line)
	l.total += len(line.ids)
	for l.total > l.budget {
		e := l.lru.Back()
		old := e.Value.(*idLine)
		l.lru.Remove(e)
		delete(l.byHead, old.head)
		l.total -= len(old.ids)
	}
}

// has reports whether a line that ends at head is remembered.
func (l *idLines) has(head string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.byHead[head]
	return ok
}

// ownIDs reports whether any of msgs comes with an id of its own.
func ownIDs(msgs []message.Message) bool {
	for _, m := range msgs {
		if m.ID != "" {
			return true
		}
	}
	return false
}

// lineIDs returns the ids on the line that ends at head, taken out of the
// DB's memory: the caller puts it back (putLine) under head or under the
// commit it adds. A line in use elsewhere is waited for. Otherwise it reads
// the commits after the newest remembered line of head's, or the whole
// line when none is.
func (db *DB) lineIDs(ctx context.Context, head *Commit) (*idLine, error) {
	for {
		line, busy := db.ids.take(head.ID)
		if line != nil {
			return line, nil
		}
		if busy == nil {
			break
		}
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var newer [][]message.Message
	var base *idLine
	for c, err := range db.store.Ancestors(ctx, head.ID, 0) {
		if err != nil {
			if base != nil {
				db.ids.put(base.head, base)
			}
			return nil, err
		}
		if c.ID != head.ID && db.ids.has(c.ID) {
			if base, _ = db.ids.take(c.ID); base != nil {
				break
			}
		}
		newer = append(newer, c.Messages)
	}
	if base == nil {
		base = &idLine{ids: make(map[string]struct{})}
	}
	for _, msgs := range newer {
		addIDs(base, msgs)
	}
	return base, nil
}

// addIDs adds the ids of msgs to line, as copies that keep no message alive.
func addIDs(line *idLine, msgs []message.Message) {
	for _, m := range msgs {
		if m.ID != "" {
			line.ids[strings.Clone(m.ID)] = struct{}{}
		}
	}
}

// checkNewIDs returns ErrDuplicateID when the line of head (nil: the empty
// root) holds a message with an id one of opts.Messages brings along,
// unless opts says the ids are fresh (FreshIDs). A compact commit is the
// one exception: it restates the messages its summary keeps, ids and all,
// and views stop at it. When it returns a line, the caller gives it back
// with putLine.
func (db *DB) checkNewIDs(ctx context.Context, head *Commit, opts CommitOptions) (*idLine, error) {
	if head == nil || opts.Op == OpCompact || opts.FreshIDs || !ownIDs(opts.Messages) {
		return nil, nil
	}
	line, err := db.lineIDs(ctx, head)
	if err != nil {
		return nil, err
	}
	if err := line.check(opts.Messages); err != nil {
		db.ids.put(head.ID, line)
		return nil, err
	}
	return line, nil
}

// check returns ErrDuplicateID when line holds the id of one of msgs.
func (line *idLine) check(msgs []message.Message) error {
	for _, m := range msgs {
		if _, ok := line.ids[m.ID]; ok && m.ID != "" {
			return fmt.Errorf("message id %q: %w", clip(m.ID), ErrDuplicateID)
		}
	}
	return nil
}

// putLine gives back a line that checkNewIDs returned: as the line of c
// when c was committed on it, or of its old head when the commit failed.
func (db *DB) putLine(line *idLine, head, c *Commit) {
	switch {
	case line == nil:
	case c != nil:
		addIDs(line, c.Messages)
		db.ids.put(c.ID, line)
	case head != nil:
		db.ids.put(head.ID, line)
	}
}
