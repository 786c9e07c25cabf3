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
// budget ids over all lines. Lines are read and changed under mu only, so
// that appends racing on one thread share its line: a check and an append
// in the store's queue (Appender) never wait for each other's line, nor
// read it from the store.
type idLines struct {
	budget int // < 0: remember nothing
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

// check looks up the ids of msgs on the remembered line that ends at head:
// known is false when no such line is remembered.
func (l *idLines) check(head string, msgs []message.Message) (known bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.byHead[head]
	if !ok {
		return false, nil
	}
	l.lru.MoveToFront(e)
	return true, e.Value.(*idLine).check(msgs)
}

// extend moves the remembered line that ends at from, if any, to to, the
// commit made on it with msgs: once a commit moves a head, the line of
// the old head is seldom wanted again.
func (l *idLines) extend(from, to string, msgs []message.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.byHead[from]
	if !ok {
		return
	}
	line := e.Value.(*idLine)
	l.drop(e)
	addIDs(line, msgs)
	l.put(to, line)
}

// adopt makes the line that ends at head from the remembered line that
// ends at base ("" or gone: none) and the messages of the commits between
// them (newer, newest first), checks msgs against it, and remembers it.
// When base is no longer remembered, it reports false.
func (l *idLines) adopt(head, base string, newer [][]message.Message, msgs []message.Message) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := &idLine{ids: make(map[string]struct{})}
	if base != "" {
		e, ok := l.byHead[base]
		if !ok {
			return false, nil
		}
		line = e.Value.(*idLine)
		l.drop(e)
	}
	for _, ms := range newer {
		addIDs(line, ms)
	}
	err := line.check(msgs)
	if _, ok := l.byHead[head]; !ok {
		l.put(head, line)
	}
	return true, err
}

// drop forgets the line of e; l.mu is held.
func (l *idLines) drop(e *list.Element) {
	line := e.Value.(*idLine)
	l.lru.Remove(e)
	delete(l.byHead, line.head)
	l.total -= len(line.ids)
}

// put remembers line as the line that ends at head, letting the least
// recent lines go past the budget; l.mu is held.
func (l *idLines) put(head string, line *idLine) {
	if head == "" || l.budget < 0 || len(line.ids) > l.budget {
		return
	}
	line.head = head
	if l.byHead == nil {
		l.byHead = make(map[string]*list.Element)
	}
	l.byHead[head] = l.lru.PushFront(line)
	l.total += len(line.ids)
	for l.total > l.budget {
		l.drop(l.lru.Back())
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

// checkLine returns ErrDuplicateID when the line that ends at head holds
// the id of one of msgs. It reads the commits after the newest remembered
// line of head's, or the whole line when none is, and remembers head's.
func (db *DB) checkLine(ctx context.Context, head *Commit, msgs []message.Message) error {
	if known, err := db.ids.check(head.ID, msgs); known {
		return err
	}
	// A remembered line the walk stops at may be forgotten before it is
	// used: walk again, the last time to the root.
	for try := 0; ; try++ {
		var newer [][]message.Message
		base := ""
		for c, err := range db.store.Ancestors(ctx, head.ID, 0) {
			if err != nil {
				return err
			}
			if try < 2 && c.ID != head.ID && db.ids.has(c.ID) {
				base = c.ID
				break
			}
			newer = append(newer, c.Messages)
		}
		if ok, err := db.ids.adopt(head.ID, base, newer, msgs); ok {
			return err
		}
	}
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
// and views stop at it.
func (db *DB) checkNewIDs(ctx context.Context, head *Commit, opts CommitOptions) error {
	if head == nil || !idsToCheck(opts) {
		return nil
	}
	return db.checkLine(ctx, head, opts.Messages)
}

// idsToCheck reports whether a commit of opts brings ids that must be
// looked up on its head's line: ids of its own, not fresh, and not a
// compact's restatement.
func idsToCheck(opts CommitOptions) bool {
	return opts.Op != OpCompact && !opts.FreshIDs && ownIDs(opts.Messages)
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

// committed moves the remembered line of head, if any, to c, committed on
// it: the next append finds the line of the new head.
func (db *DB) committed(head, c *Commit) {
	if head != nil {
		db.ids.extend(head.ID, c.ID, c.Messages)
	}
}
