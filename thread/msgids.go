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
// gives are new by construction and need no look; a message that comes with
// its own id (a client's, an agent's, an imported one) is looked up among
// the ids on the line of the head it goes on.
//
// Reading a whole line for every such append would make appends cost the
// thread's length, so a DB remembers the ids of a few recent lines, keyed
// by the commit that ends each (a line never changes: commits are
// immutable). An append onto a remembered head costs what it appends; onto
// another head, the commits between it and a remembered one (or the root,
// the first time a process meets a thread); any store serves it, through
// Ancestors.

// idLineBudget caps the message ids a DB remembers, over all lines: about
// 64 bytes each.
const idLineBudget = 1 << 18

// idLines remembers the message ids on the lines of recent heads. A line in
// use is taken out, so that one goroutine at a time extends it; another
// append onto the same head meanwhile reads its line from the store.
type idLines struct {
	mu     sync.Mutex
	byHead map[string]*list.Element // of *idLine
	lru    list.List                // most recent first
	total  int
}

// idLine is the set of message ids on the line that ends at head.
type idLine struct {
	head string
	ids  map[string]struct{}
}

// take removes and returns the line that ends at head, or nil.
func (l *idLines) take(head string) *idLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.byHead[head]
	if !ok {
		return nil
	}
	l.lru.Remove(e)
	delete(l.byHead, head)
	line := e.Value.(*idLine)
	l.total -= len(line.ids)
	return line
}

// put remembers line as the line that ends at head, letting the least
// recent lines go past the budget.
func (l *idLines) put(head string, line *idLine) {
	if head == "" || len(line.ids) > idLineBudget {
		return
	}
	line.head = head
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byHead == nil {
		l.byHead = make(map[string]*list.Element)
	}
	if old, ok := l.byHead[head]; ok {
		l.total -= len(old.Value.(*idLine).ids)
		l.lru.Remove(old)
	}
	l.byHead[head] = l.lru.PushFront(line)
	l.total += len(line.ids)
	for l.total > idLineBudget {
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
// commit it adds. It reads the commits after the newest remembered line of
// head's, or the whole line when none is.
func (db *DB) lineIDs(ctx context.Context, head *Commit) (*idLine, error) {
	if line := db.ids.take(head.ID); line != nil {
		return line, nil
	}
	var newer [][]message.Message
	var base *idLine
	for c, err := range db.store.Ancestors(ctx, head.ID, 0) {
		if err != nil {
			return nil, err
		}
		if c.ID != head.ID && db.ids.has(c.ID) {
			if base = db.ids.take(c.ID); base != nil {
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
// root) holds a message with an id one of msgs, committed with op, brings
// along. A compact commit is the one exception: it restates the messages
// its summary keeps, ids and all, and views stop at it. When it returns a
// line, the caller gives it back with putLine.
func (db *DB) checkNewIDs(ctx context.Context, head *Commit, msgs []message.Message, op Op) (*idLine, error) {
	if head == nil || op == OpCompact || !ownIDs(msgs) {
		return nil, nil
	}
	line, err := db.lineIDs(ctx, head)
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		if _, ok := line.ids[m.ID]; ok && m.ID != "" {
			db.ids.put(head.ID, line)
			return nil, fmt.Errorf("message id %q: %w", clip(m.ID), ErrDuplicateID)
		}
	}
	return line, nil
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
