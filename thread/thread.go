package thread

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread/store"
)

// Thread is a handle on one thread as of a version, like a checkout: reads
// see that version, writes move it forward, and Refresh catches up with
// writes made through other handles or processes. A Thread is safe for
// concurrent use; writes through one handle run one at a time.
type Thread struct {
	db  *DB
	wmu sync.Mutex // serializes writes through this handle

	mu   sync.RWMutex
	rec  *Record
	head *Commit // the head commit once loaded; never handed out without Clone
}

// ID returns the thread's id.
func (t *Thread) ID() string { return t.snapshot().ID }

// Version returns the version this handle is at.
func (t *Thread) Version() int64 { return t.snapshot().Version }

// Kind returns the thread's kind.
func (t *Thread) Kind() Kind { return t.snapshot().Kind }

// Title returns the thread's title.
func (t *Thread) Title() string { return t.snapshot().Title }

// Record returns a copy of the thread's record as of this handle's version.
func (t *Thread) Record() Record { return *t.snapshot().Clone() }

func (t *Thread) snapshot() *Record {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.rec
}

// advance moves the handle to r after a write through it, unless a Refresh
// running beside the write has already moved it further.
func (t *Thread) advance(r *Record, head *Commit) {
	t.mu.Lock()
	if r.Version > t.rec.Version {
		t.rec, t.head = r, head
	}
	t.mu.Unlock()
}

// DB returns the database the handle reads and writes.
func (t *Thread) DB() *DB { return t.db }

// Refresh moves the handle to the thread's current version.
func (t *Thread) Refresh(ctx context.Context) (err error) {
	ctx, span := t.db.startSpan(ctx, "refresh", t.ID())
	defer endSpan(span, &err)
	r, err := t.db.record(ctx, t.ID())
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// A write through this handle may have finished while the record was
	// read: never move back, unless the thread was deleted and made anew.
	if c := t.rec; r.Version < c.Version && r.CreatedAt.Equal(c.CreatedAt) {
		return nil
	}
	t.rec, t.head = r, nil
	return nil
}

// headCommit returns the handle's record and head commit (nil for an empty
// thread), loading the commit on first use.
func (t *Thread) headCommit(ctx context.Context) (*Record, *Commit, error) {
	t.mu.RLock()
	r, h := t.rec, t.head
	t.mu.RUnlock()
	if h != nil || r.Head == "" {
		return r, h, nil
	}
	if cc, ok := t.db.store.(store.CommitCache); ok {
		h = cc.CachedCommit(r.Head)
	}
	if h == nil {
		var err error
		if h, err = t.db.store.Commit(ctx, r.Head); err != nil {
			return nil, nil, err
		}
	}
	h = header(h)
	t.mu.Lock()
	if t.rec == r {
		t.head = h
	}
	t.mu.Unlock()
	return r, h, nil
}

// Len returns the number of messages at the handle's version.
func (t *Thread) Len(ctx context.Context) (int64, error) {
	_, h, err := t.headCommit(ctx)
	if err != nil || h == nil {
		return 0, err
	}
	return h.Depth, nil
}

// CommitOptions describe one commit. A commit with only Messages is a pure
// append.
type CommitOptions struct {
	// Messages are appended in order.
	Messages []message.Message
	// State patches the thread's state: each key is set to its JSON value,
	// and a key with a nil value is removed.
	State map[string]json.RawMessage
	// Op records what made the commit; "" means OpAppend, or OpState when
	// there are no messages.
	Op Op
	// Metadata is kept on the commit (run id, model, author).
	Metadata map[string]string
	// Kind, when not "", determines the thread's kind in the same step: an
	// undetermined thread may become local or service; a determined one
	// keeps its kind.
	Kind Kind
	// IfVersion, when not 0, commits only if the thread is at this version,
	// and never retries (an HTTP If-Match).
	IfVersion int64
	// Mirror says that Messages mirror the conversation a chat service
	// keeps for a service-managed thread (KindService), which holds no
	// messages of its own (DESIGN §2: service-managed or local, never
	// both): it is the only way messages go into such a thread, and it is
	// ErrInvalid on a thread that is not, or does not become (Kind),
	// service-managed. Package agent sets it on the steps of a service
	// thread's runs; an append through any face leaves it unset, and is
	// ErrInvalid on a service thread.
	Mirror bool
	// FreshIDs says that every message of Messages that has an id got it
	// from message.NewID (or NewIDAt) in this process for this commit: new
	// by construction, such ids are not looked up among the ids on the
	// thread's line (ErrDuplicateID), which saves reading or remembering
	// the line. Package agent sets it for the input ids it makes, package
	// worklog for its records; a face that passes on ids a client chose
	// (HTTP, MCP) never sets it. Set wrongly, it lets a thread hold one id
	// twice.
	FreshIDs bool
}

// Commit writes one commit and moves the head to it. A pure append (only
// Messages, no IfVersion) that loses a race is rebased onto the new head and
// retried, because appends commute; anything else returns ErrConflict when the
// thread has moved past the handle's version (or IfVersion).
//
// The returned commit is the caller's: the store keeps its own copy. Its
// messages are the ones given, with ids and times filled in, and share their
// contents with them.
func (t *Thread) Commit(ctx context.Context, opts CommitOptions) (_ *Commit, err error) {
	if opts.Op == "" {
		opts.Op = OpAppend
		if len(opts.Messages) == 0 {
			opts.Op = OpState
		}
	}
	ctx, span := t.db.startSpan(ctx, "commit", t.ID(), AttrOp.String(string(opts.Op)))
	defer endSpan(span, &err)
	if len(opts.Messages) == 0 && opts.State == nil {
		return nil, fmt.Errorf("commit to %s: no messages and no state: %w", t.ID(), ErrInvalid)
	}
	pure := opts.State == nil && opts.Kind == "" && opts.IfVersion == 0 && opts.Op == OpAppend
	t.wmu.Lock()
	defer t.wmu.Unlock()
	for attempt := 0; ; attempt++ {
		c, err := t.commitOnce(ctx, opts)
		if err == nil || !pure || !errors.Is(err, ErrConflict) || errors.Is(err, ErrDuplicateID) || t.db.retries < 0 || attempt >= t.db.retries {
			return c, err
		}
		// A hot thread: where the store can, wait for the thread's lock in
		// its queue and append onto whatever head is there then.
		if ap, ok := appender(t.db.store); ok {
			c, err := t.appendQueued(ctx, ap, opts)
			if !errors.Is(err, errLineUnknown) {
				return c, err
			}
			// The DB cannot remember the thread's line (see
			// Options.MessageIDCache): rebase and try again instead.
		}
		if attempt > 0 {
			backoff(ctx, attempt)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("commit to %s: %w", t.ID(), err)
		}
		if err := t.Refresh(ctx); err != nil {
			return nil, err
		}
	}
}

// errLineUnknown is returned by the build of appendLocked when messages
// with ids of their own go on a head whose line of ids the DB does not
// remember: build may not read the store, so the line is read outside the
// store's lock and the append queues again. It never leaves the package.
var errLineUnknown = errors.New("the ids on the head's line are not at hand")

// appendQueued is appendLocked until it has the line of ids of the head
// the store holds, for messages that come with ids of their own: a line the
// DB does not remember is read outside the store's lock, and the append
// queues again, up to the DB's retries. A line the DB cannot remember is
// errLineUnknown.
func (t *Thread) appendQueued(ctx context.Context, ap store.Appender, opts CommitOptions) (*Commit, error) {
	// Each try that finds a head whose line is not at hand follows another
	// writer's commit, whose line the DB takes up a moment after the
	// store has it: on a hot thread that is progress, not a lost race, and
	// takes more tries than AppendRetries allows for lost races.
	tries := max(t.db.retries, queuedTries)
	for try := 0; ; try++ {
		c, err := t.appendLocked(ctx, ap, opts)
		if !errors.Is(err, errLineUnknown) {
			return c, err
		}
		if try >= tries {
			return nil, fmt.Errorf("commit to %s: the thread moved on under every try: %w", t.ID(), ErrConflict)
		}
		if err := t.Refresh(ctx); err != nil {
			return nil, err
		}
		_, head, err := t.headCommit(ctx)
		if err != nil {
			return nil, err
		}
		if head != nil {
			if err := t.db.checkLine(ctx, head, opts.Messages); err != nil {
				return nil, fmt.Errorf("commit to %s: %w", t.ID(), err)
			}
			if !t.db.ids.has(head.ID) && (t.db.ids.budget < 0 || head.Depth > int64(t.db.ids.budget)) {
				return nil, errLineUnknown
			}
		}
	}
}

// queuedTries bounds the tries of an append in the store's queue that
// finds heads whose lines are not at hand yet.
const queuedTries = 64

// appendLocked makes a pure append's commit on the head the store holds under
// the thread's lock (Appender). Messages with ids of their own are checked
// against the line of that head when the DB remembers it, and are
// errLineUnknown when it does not.
func (t *Thread) appendLocked(ctx context.Context, ap store.Appender, opts CommitOptions) (*Commit, error) {
	var (
		c   *Commit
		rec *Record
		mv  store.Move
	)
	check := idsToCheck(opts)
	err := ap.AppendAt(ctx, t.ID(), func(r *Record, head *Commit) (*store.Batch, error) {
		if err := checkMirror(r.Kind, len(opts.Messages), opts.Mirror); err != nil {
			return nil, err
		}
		if check && head != nil {
			if known, err := t.db.ids.check(head.ID, opts.Messages); err != nil {
				return nil, err
			} else if !known {
				return nil, errLineUnknown
			}
		}
		now := t.db.clock()
		cc, err := t.db.newCommit(head, nil, opts.Messages, nil, opts.Op, opts.Metadata, now)
		if err != nil {
			return nil, err
		}
		// The line moves to the new commit here, under the store's lock:
		// the next append in the queue finds it. Were it moved after the
		// lock is let go, that append would find a head whose line is not
		// at hand, and queue again, until it ran out of tries on a hot
		// thread. Should the batch not apply, the line goes with a commit
		// that is no head, and the next append reads it again.
		t.db.committed(head, cc)
		c, rec, mv = cc, r, store.Move{Thread: r.ID, From: r.Version, Head: cc.ID, Op: opts.Op, Time: now}
		return &store.Batch{Commits: []*Commit{cc}, Moves: []store.Move{mv}}, nil
	})
	if errors.Is(err, errLineUnknown) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("commit to %s: %w", t.ID(), err)
	}
	t.db.published(&store.Batch{Commits: []*Commit{c}, Moves: []store.Move{mv}})
	t.advance(moved(rec, mv), header(c))
	return c, nil
}

// backoff sleeps a jittered, growing pause so that racing writers spread out.
func backoff(ctx context.Context, attempt int) {
	d := 20 * time.Microsecond << min(attempt, 9)
	timer := time.NewTimer(rand.N(d) + d/2)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

func (t *Thread) commitOnce(ctx context.Context, opts CommitOptions) (*Commit, error) {
	r, head, err := t.headCommit(ctx)
	if err != nil {
		return nil, err
	}
	from := r.Version
	if opts.IfVersion != 0 && opts.IfVersion != from {
		// The handle may be behind: check the store, not just the cache.
		if err := t.Refresh(ctx); err != nil {
			return nil, err
		}
		if r, head, err = t.headCommit(ctx); err != nil {
			return nil, err
		}
		if from = r.Version; opts.IfVersion != from {
			return nil, fmt.Errorf("commit to %s: at version %d, not %d: %w", r.ID, from, opts.IfVersion, ErrConflict)
		}
	}
	if opts.Kind != "" && opts.Kind != r.Kind && (r.Kind != KindUndetermined || !validKind(opts.Kind) || opts.Kind == KindUndetermined) {
		return nil, fmt.Errorf("commit to %s: kind %s cannot become %q: %w", r.ID, r.Kind, clip(string(opts.Kind)), ErrInvalid)
	}
	kind := r.Kind
	if opts.Kind != "" {
		kind = opts.Kind
	}
	if err := checkMirror(kind, len(opts.Messages), opts.Mirror); err != nil {
		return nil, fmt.Errorf("commit to %s: %w", r.ID, err)
	}
	var parentState map[string]json.RawMessage
	if opts.State != nil {
		if parentState, err = t.stateAt(ctx, head); err != nil {
			return nil, err
		}
	}
	now := t.db.clock()
	c, err := t.db.newCommit(head, parentState, opts.Messages, opts.State, opts.Op, opts.Metadata, now)
	if err != nil {
		return nil, fmt.Errorf("commit to %s: %w", r.ID, err)
	}
	// The messages are valid: look for the ids they came with (not those
	// newCommit gave them) on the head's line.
	if err := t.db.checkNewIDs(ctx, head, opts); err != nil {
		return nil, fmt.Errorf("commit to %s: %w", r.ID, err)
	}
	mv := store.Move{Thread: r.ID, From: from, Head: c.ID, Op: opts.Op, Time: now}
	if opts.Kind != r.Kind {
		mv.Kind = opts.Kind
	}
	// One allocation for the batch of the common case.
	one := &struct {
		b store.Batch
		c [1]*Commit
		m [1]store.Move
	}{c: [1]*Commit{c}, m: [1]store.Move{mv}}
	one.b.Commits, one.b.Moves = one.c[:], one.m[:]
	if err := t.db.apply(ctx, &one.b); err != nil {
		return nil, fmt.Errorf("commit to %s: %w", r.ID, err)
	}
	t.db.committed(head, c)
	// The store kept its own copy of c, and the handle keeps only the
	// header: c is the caller's.
	t.advance(moved(r, mv), header(c))
	return c, nil
}

// moved returns r as a store leaves it after mv. Records a handle keeps are
// never changed, so the copy shares the labels unless mv replaces them.
func moved(r *Record, mv store.Move) *Record {
	n := new(Record)
	*n = *r
	n.Version, n.Head, n.UpdatedAt = mv.From+1, mv.Head, mv.Time
	if mv.Kind != "" {
		n.Kind = mv.Kind
	}
	if mv.Title != nil {
		n.Title = *mv.Title
	}
	if mv.Labels != nil {
		n.Labels = cloneLabels(mv.Labels)
	}
	return n
}

// Append appends messages to the thread in one commit and returns it, with
// the ids and times the messages were given. See Commit for retries.
func (t *Thread) Append(ctx context.Context, msgs ...message.Message) (*Commit, error) {
	if len(msgs) == 0 {
		return nil, fmt.Errorf("append to %s: no messages: %w", t.ID(), ErrInvalid)
	}
	return t.Commit(ctx, CommitOptions{Messages: msgs})
}

// SetState patches the thread's state in one commit (a nil value removes its
// key). It never retries: state written on a stale version is ErrConflict.
func (t *Thread) SetState(ctx context.Context, patch map[string]json.RawMessage) (*Commit, error) {
	if patch == nil {
		patch = map[string]json.RawMessage{}
	}
	return t.Commit(ctx, CommitOptions{State: patch})
}

// ReadOptions select messages to read. The zero value reads every message
// at the handle's version.
type ReadOptions struct {
	// Version reads the thread as it was at that version (time travel);
	// 0 means the handle's version.
	Version int64
	// Last reads only the newest Last messages; 0 means all. The cost is
	// that of what is read, whatever the thread's length.
	Last int
	// Before, when not "", reads only the messages before the message
	// with this id — with Last, the Last messages before it: a cursor
	// for paging back through a long thread. The cost is that of what is
	// read, plus the commits after the message. A thread that does not
	// hold the message (at the version read) is ErrNotFound.
	Before string
}

// Messages returns messages of the thread, oldest first.
func (t *Thread) Messages(ctx context.Context, opts ReadOptions) (_ []message.Message, err error) {
	ctx, span := t.db.startSpan(ctx, "messages", t.ID())
	defer endSpan(span, &err)
	if opts.Last < 0 {
		return nil, fmt.Errorf("read %s: negative Last: %w", t.ID(), ErrInvalid)
	}
	head, err := t.commitAt(ctx, opts.Version)
	if err != nil || head == nil {
		if err == nil && opts.Before != "" {
			err = fmt.Errorf("read %s: no message %q before which to read: %w", t.ID(), clip(opts.Before), ErrNotFound)
		}
		return nil, err
	}
	if opts.Before == "" {
		return t.db.readMessages(ctx, head, opts.Last)
	}
	c, p, err := t.db.findMessage(ctx, head, opts.Before)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", t.ID(), err)
	}
	floor := int64(0)
	if opts.Last > 0 {
		floor = max(p-int64(opts.Last), 0)
	}
	return t.db.readRange(ctx, c, floor, p)
}

// findMessage returns the commit, at head or before it, that holds the
// message id, and the message's 0-based position in the thread; it reads
// the commits after it and its own.
func (db *DB) findMessage(ctx context.Context, head *Commit, id string) (*Commit, int64, error) {
	for c, err := range db.store.Ancestors(ctx, head.ID, 0) {
		if err != nil {
			return nil, 0, err
		}
		for i, m := range c.Messages {
			if m.ID == id {
				return c, c.Depth - int64(len(c.Messages)) + int64(i), nil
			}
		}
	}
	return nil, 0, fmt.Errorf("no message %q before which to read: %w", clip(id), ErrNotFound)
}

// commitAt returns the head commit at version (0: the handle's), nil for
// an empty head.
func (t *Thread) commitAt(ctx context.Context, version int64) (*Commit, error) {
	r, h, err := t.headCommit(ctx)
	if err != nil {
		return nil, err
	}
	if version == 0 || version == r.Version {
		return h, nil
	}
	e, err := t.entry(ctx, version)
	if err != nil {
		return nil, err
	}
	if e.Commit == "" {
		return nil, nil
	}
	return t.db.store.Commit(ctx, e.Commit)
}

// headIDAt returns the id of the head commit at version (0: the
// handle's), "" for an empty head, reading no commit.
func (t *Thread) headIDAt(ctx context.Context, version int64) (string, error) {
	r := t.snapshot()
	if version == 0 || version == r.Version {
		return r.Head, nil
	}
	e, err := t.entry(ctx, version)
	if err != nil {
		return "", err
	}
	return e.Commit, nil
}

// entry returns the history entry of version v.
func (t *Thread) entry(ctx context.Context, v int64) (HistoryEntry, error) {
	if v < 1 {
		return HistoryEntry{}, fmt.Errorf("thread %s: version %d: %w", t.ID(), v, ErrInvalid)
	}
	for e, err := range t.db.store.History(ctx, t.ID(), HistoryOptions{Before: v + 1, Limit: 1}) {
		if err != nil {
			return HistoryEntry{}, err
		}
		if e.Version == v {
			return e, nil
		}
	}
	return HistoryEntry{}, fmt.Errorf("thread %s: version %d: %w", t.ID(), v, ErrNotFound)
}

// readMessages returns the last messages up to and including head (all of
// them when last is 0), walking only the commits that hold them.
func (db *DB) readMessages(ctx context.Context, head *Commit, last int) ([]message.Message, error) {
	floor := int64(0)
	if last > 0 {
		floor = max(head.Depth-int64(last), 0)
	}
	return db.readRange(ctx, head, floor, head.Depth)
}

// readRange returns the messages at the 0-based positions [floor, ceil)
// of the thread whose commit head holds position ceil-1 or a later one,
// walking only the commits that hold them.
func (db *DB) readRange(ctx context.Context, head *Commit, floor, ceil int64) ([]message.Message, error) {
	out := make([]message.Message, ceil-floor)
	if len(out) == 0 {
		return out, nil
	}
	for c, err := range db.store.Ancestors(ctx, head.ID, floor) {
		if err != nil {
			return nil, err
		}
		start := c.Depth - int64(len(c.Messages)) // messages before this commit
		for i, m := range c.Messages {
			if p := start + int64(i); p >= floor && p < ceil { // p is 0-based
				out[p-floor] = m
			}
		}
	}
	return out, nil
}

// State returns the thread's state at version (0: the handle's version).
func (t *Thread) State(ctx context.Context, version int64) (_ map[string]json.RawMessage, err error) {
	ctx, span := t.db.startSpan(ctx, "state", t.ID())
	defer endSpan(span, &err)
	c, err := t.commitAt(ctx, version)
	if err != nil {
		return nil, err
	}
	return t.stateAt(ctx, c)
}

// stateAt returns the state in effect at c (nil c: the empty root). The
// result is the caller's to change.
func (t *Thread) stateAt(ctx context.Context, c *Commit) (map[string]json.RawMessage, error) {
	return stateIn(ctx, t.db.store, c)
}

// stateIn returns the state in effect at c, read from st: c's own, or
// the commit's it names (StateFrom). The result is the caller's to change.
func stateIn(ctx context.Context, st store.Store, c *Commit) (map[string]json.RawMessage, error) {
	switch {
	case c == nil || c.StateFrom == "":
		return map[string]json.RawMessage{}, nil
	case c.StateFrom == c.ID:
		return cloneState(c.State), nil
	}
	s, err := st.Commit(ctx, c.StateFrom)
	if err != nil {
		return nil, err
	}
	return s.State, nil
}

// History yields the thread's history, newest version first: every head
// move with its version, commit, operation and time.
func (t *Thread) History(ctx context.Context, opts HistoryOptions) iter.Seq2[HistoryEntry, error] {
	return t.db.store.History(ctx, t.ID(), opts)
}

// move moves the head to commit head by compare-and-swap from the handle's
// version. It never retries.
func (t *Thread) move(ctx context.Context, r *Record, mv store.Move, head *Commit) error {
	if err := t.db.apply(ctx, &store.Batch{Moves: []store.Move{mv}}); err != nil {
		return fmt.Errorf("%s %s: %w", mv.Op, mv.Thread, err)
	}
	t.advance(moved(r, mv), head)
	return nil
}

// Reset moves the head to the empty root: the thread has no messages and no
// state. History keeps the old head, so Restore undoes a reset.
func (t *Thread) Reset(ctx context.Context) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	r := t.snapshot()
	return t.move(ctx, r, store.Move{Thread: r.ID, From: r.Version, Op: OpReset, Time: t.db.clock()}, nil)
}

// Restore moves the head back (or forward) to where it was at version v.
// It is a new history entry: nothing is rewritten.
func (t *Thread) Restore(ctx context.Context, v int64) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	e, err := t.entry(ctx, v)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	r := t.snapshot()
	if err := t.refuseLinear(ctx, r, e.Commit); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return t.move(ctx, r, store.Move{Thread: r.ID, From: r.Version, Head: e.Commit, Op: OpRestore, Time: t.db.clock()}, nil)
}

// Checkpoint names the handle's head commit so that Rollback can return to
// it. Names are unique per thread (ErrConflict); an empty thread has nothing
// to checkpoint (ErrInvalid).
func (t *Thread) Checkpoint(ctx context.Context, name string) (Checkpoint, error) {
	if err := checkCheckpointName(name); err != nil {
		return Checkpoint{}, err
	}
	r := t.snapshot()
	if r.Head == "" {
		return Checkpoint{}, fmt.Errorf("checkpoint %s of empty thread %s: %w", name, r.ID, ErrInvalid)
	}
	cp := Checkpoint{Thread: r.ID, Name: name, Commit: r.Head, Version: r.Version, CreatedAt: t.db.clock()}
	if err := t.db.apply(ctx, &store.Batch{Checkpoints: []Checkpoint{cp}}); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s of %s: %w", name, r.ID, err)
	}
	return cp, nil
}

// Checkpoints yields the thread's checkpoints in name order.
func (t *Thread) Checkpoints(ctx context.Context) iter.Seq2[Checkpoint, error] {
	return t.db.store.Checkpoints(ctx, t.ID())
}

// checkpoint returns the named checkpoint.
func (t *Thread) checkpoint(ctx context.Context, name string) (Checkpoint, error) {
	if err := checkCheckpointName(name); err != nil {
		return Checkpoint{}, err
	}
	for cp, err := range t.Checkpoints(ctx) {
		if err != nil {
			return Checkpoint{}, err
		}
		if cp.Name == name {
			return cp, nil
		}
	}
	return Checkpoint{}, fmt.Errorf("checkpoint %q of %s: %w", name, t.ID(), ErrNotFound)
}

// DeleteCheckpoint deletes the named checkpoint.
func (t *Thread) DeleteCheckpoint(ctx context.Context, name string) error {
	if err := checkCheckpointName(name); err != nil {
		return err
	}
	err := t.db.apply(ctx, &store.Batch{DropCheckpoints: []store.CheckpointKey{{Thread: t.ID(), Name: name}}})
	if err != nil {
		return fmt.Errorf("delete checkpoint %q of %s: %w", name, t.ID(), err)
	}
	return nil
}

// StateLinear is the state key that marks a service-managed thread whose
// service keeps one linear conversation (such as an OpenAI Conversations API
// conversation): the service cannot go back to an earlier point of it or
// branch it, so Fork, Copy, Rollback and Restore to a point where the key is
// set return ErrUnsupported. Services that chain responses by id do not set
// it, and their threads fork and roll back like local ones.
const StateLinear = "service/linear"

// refuseLinear returns ErrUnsupported when r is a service thread and the
// state at commit id marks a linear service conversation. Local threads
// pay nothing for the check.
func (t *Thread) refuseLinear(ctx context.Context, r *Record, id string) error {
	if r.Kind != KindService || id == "" {
		return nil
	}
	c, err := t.db.store.Commit(ctx, id)
	if err != nil {
		return err
	}
	return t.refuseLinearAt(ctx, r, c)
}

func (t *Thread) refuseLinearAt(ctx context.Context, r *Record, c *Commit) error {
	if r.Kind != KindService || c == nil {
		return nil
	}
	st, err := t.stateAt(ctx, c)
	if err != nil {
		return err
	}
	if _, ok := st[StateLinear]; ok {
		return fmt.Errorf("thread %s keeps its messages in a service conversation that cannot go back or branch: %w", r.ID, ErrUnsupported)
	}
	return nil
}

// Rollback moves the head back to the named checkpoint. It is a new history
// entry, so the abandoned head stays reachable through Restore.
func (t *Thread) Rollback(ctx context.Context, name string) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	cp, err := t.checkpoint(ctx, name)
	if err != nil {
		return fmt.Errorf("rollback: %w", err)
	}
	r := t.snapshot()
	if err := t.refuseLinear(ctx, r, cp.Commit); err != nil {
		return fmt.Errorf("rollback: %w", err)
	}
	return t.move(ctx, r, store.Move{Thread: r.ID, From: r.Version, Head: cp.Commit, Op: OpRollback, Time: t.db.clock()}, nil)
}

// UpdateOptions change a thread's descriptive fields. Nil fields stay.
type UpdateOptions struct {
	Title *string
	// Labels replace all labels; an empty map clears them.
	Labels map[string]string
}

// Update changes the title or labels, by compare-and-swap on the version.
func (t *Thread) Update(ctx context.Context, opts UpdateOptions) error {
	if opts.Title != nil {
		if err := t.db.checkTitle(*opts.Title); err != nil {
			return err
		}
	}
	if err := t.db.checkLabels(opts.Labels); err != nil {
		return err
	}
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.mu.RLock()
	r, head := t.rec, t.head
	t.mu.RUnlock()
	mv := store.Move{Thread: r.ID, From: r.Version, Head: r.Head, Op: OpUpdate, Time: t.db.clock(), Title: opts.Title, Labels: opts.Labels}
	return t.move(ctx, r, mv, head)
}

// Delete deletes the thread, its history and checkpoints, and every commit
// that no other thread or checkpoint reaches, in O(history entries +
// checkpoints + commits freed). It fails with ErrConflict if the thread has
// moved past the handle's version.
func (t *Thread) Delete(ctx context.Context) (err error) {
	ctx, span := t.db.startSpan(ctx, "delete", t.ID())
	defer endSpan(span, &err)
	r := t.snapshot()
	if err := t.db.apply(ctx, &store.Batch{Delete: []store.Deletion{{Thread: r.ID, Version: r.Version}}}); err != nil {
		return fmt.Errorf("delete %s: %w", r.ID, err)
	}
	return nil
}

// ForkOptions say where to fork and what to call the new thread.
type ForkOptions struct {
	// At is the id of the last message the fork keeps; "" forks at the head.
	At string
	// Version forks the thread as it was at that version; 0 means the
	// handle's version.
	Version int64
	// ID names the new thread; "" means a fresh id.
	ID string
	// Title names the new thread; "" keeps the source's title.
	Title string
	// Labels, when not nil, replace the source's labels.
	Labels map[string]string
	// Checkpoints makes Copy take the source's checkpoints too: the same
	// names on the same commits, so that the copy can roll back where the
	// source could. Fork ignores it.
	Checkpoints bool
	// State, when not nil, patches the fork's state (a nil value removes
	// its key): the fork's head is then one new commit on the fork point
	// (op fork) that holds the patched state, and ForkedFrom still names
	// the fork point. Copy ignores it.
	State map[string]json.RawMessage
}

// Fork makes a new thread that shares this one's messages up to and
// including the message At (or the head). Nothing is copied: the new thread
// points at an existing commit, and only when At is inside a commit of
// several messages is one new commit made, holding that commit's prefix.
func (t *Thread) Fork(ctx context.Context, opts ForkOptions) (*Thread, error) {
	return t.fork(ctx, opts, OpFork)
}

// Copy makes a new thread with this one's messages and state at the head, as
// an independent thread (not marked as a fork). Title "" keeps the source's,
// nil Labels keep the source's. Like Fork, it copies nothing.
func (t *Thread) Copy(ctx context.Context, opts ForkOptions) (*Thread, error) {
	opts.At, opts.State = "", nil
	return t.fork(ctx, opts, OpCopy)
}

func (t *Thread) fork(ctx context.Context, opts ForkOptions, op Op) (_ *Thread, err error) {
	ctx, span := t.db.startSpan(ctx, string(op), t.ID())
	defer endSpan(span, &err)
	b := &store.Batch{}
	r, head, err := t.forkInto(ctx, opts, op, b)
	if err != nil {
		return nil, err
	}
	if opts.Checkpoints && op == OpCopy {
		for cp, err := range t.Checkpoints(ctx) {
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", op, t.ID(), err)
			}
			b.Checkpoints = append(b.Checkpoints, Checkpoint{Thread: r.ID, Name: cp.Name, Commit: cp.Commit, Version: r.Version, CreatedAt: r.CreatedAt})
		}
	}
	if err := t.db.apply(ctx, b); err != nil {
		return nil, fmt.Errorf("%s %s: %w", op, t.ID(), err)
	}
	return t.db.handle(r, head), nil
}

// forkInto adds to b what makes a fork (or copy) of t, and returns the new
// thread's record and head.
func (t *Thread) forkInto(ctx context.Context, opts ForkOptions, op Op, b *store.Batch) (*Record, *Commit, error) {
	src := t.snapshot()
	now := t.db.clock()
	if opts.ID == "" {
		opts.ID = ids.NewAt("th_", now)
	}
	if opts.Title == "" {
		opts.Title = src.Title
	}
	if opts.Labels == nil {
		opts.Labels = src.Labels
	}
	if err := t.db.checkRecord(opts.ID, src.Kind, opts.Title, opts.Labels); err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", op, src.ID, err)
	}
	if opts.At != "" && !ids.Valid(opts.At) {
		return nil, nil, fmt.Errorf("%s %s: message id %q: %w", op, src.ID, clip(opts.At), ErrInvalid)
	}
	var head *Commit
	if opts.At == "" && (opts.State == nil || op != OpFork) && src.Kind != KindService {
		// Only the commit's id is needed: a fork costs the same whatever
		// the commit holds.
		id, err := t.headIDAt(ctx, opts.Version)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", op, src.ID, err)
		}
		r := &Record{ID: opts.ID, Tenant: t.db.tenant, Kind: src.Kind, Title: opts.Title, Labels: cloneLabels(opts.Labels),
			Version: 1, CreatedAt: now, UpdatedAt: now, Head: id}
		if op == OpFork {
			r.ForkedFrom = ForkPoint{Thread: src.ID, Commit: id}
		}
		b.Create = append(b.Create, store.Creation{Record: r, Op: op})
		return r, nil, nil
	}
	head, err := t.commitAt(ctx, opts.Version)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", op, src.ID, err)
	}
	if opts.At != "" {
		if head, err = t.splitAt(ctx, head, opts.At, now, b); err != nil {
			return nil, nil, fmt.Errorf("%s %s at %s: %w", op, src.ID, opts.At, err)
		}
	}
	if head != nil {
		if err := t.refuseLinearAt(ctx, src, head); err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", op, src.ID, err)
		}
	}
	point := head
	if opts.State != nil && op == OpFork {
		st, err := t.stateAt(ctx, head)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", op, src.ID, err)
		}
		c, err := t.db.newCommit(head, st, nil, opts.State, OpFork, nil, now)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", op, src.ID, err)
		}
		b.Commits = append(b.Commits, c)
		head = c
	}
	r := &Record{ID: opts.ID, Tenant: t.db.tenant, Kind: src.Kind, Title: opts.Title, Labels: cloneLabels(opts.Labels),
		Version: 1, CreatedAt: now, UpdatedAt: now}
	if head != nil {
		r.Head = head.ID
	}
	if op == OpFork {
		r.ForkedFrom = ForkPoint{Thread: src.ID, Message: opts.At}
		if point != nil {
			r.ForkedFrom.Commit = point.ID
		}
	}
	b.Create = append(b.Create, store.Creation{Record: r, Op: op})
	return r, head, nil
}

// splitAt finds the message id on the way back from head and returns the
// commit that ends with it, adding a split commit to b when the message is
// inside a commit. The walk costs the messages after the id.
func (t *Thread) splitAt(ctx context.Context, head *Commit, id string, now time.Time, b *store.Batch) (*Commit, error) {
	if head == nil {
		return nil, fmt.Errorf("message %q: %w", id, ErrNotFound)
	}
	var found *Commit
	idx := -1
	for c, err := range t.db.store.Ancestors(ctx, head.ID, 0) {
		if err != nil {
			return nil, err
		}
		for i := len(c.Messages) - 1; i >= 0; i-- {
			if c.Messages[i].ID == id {
				found, idx = c, i
				break
			}
		}
		if found != nil {
			break
		}
	}
	if found == nil {
		return nil, fmt.Errorf("message %q: %w", id, ErrNotFound)
	}
	if idx == len(found.Messages)-1 {
		return found, nil
	}
	// The prefix of found up to the message, on found's parent, with the
	// state in effect before found: its state change belongs to the whole.
	stateFrom := found.StateFrom
	if stateFrom == found.ID {
		stateFrom = ""
		if found.Parent != "" {
			p, err := t.db.store.Commit(ctx, found.Parent)
			if err != nil {
				return nil, err
			}
			stateFrom = p.StateFrom
		}
	}
	split := &Commit{ID: ids.New("c_"), Parent: found.Parent, Depth: found.Depth - int64(len(found.Messages)-1-idx),
		Messages: found.Messages[:idx+1], StateFrom: stateFrom, Op: OpFork, Time: now}
	b.Commits = append(b.Commits, split)
	return split, nil
}
