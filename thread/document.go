package thread

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/internal/jsonerr"
	"github.com/loomthreads/loom/internal/jsonguard"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread/store"
)

// DocumentFormat is the format version written in every portable document.
const DocumentFormat = "loom.thread/v1"

// The portable document; docs/portable-document.md describes it. Commit ids
// are not in it: commits are named by their index, so that a document loads
// into any store (with fresh ids) and saves back byte for byte.
type document struct {
	Format      string                     `json:"format"`
	Thread      docThread                  `json:"thread"`
	Messages    []message.Message          `json:"messages"`
	State       map[string]json.RawMessage `json:"state,omitzero"`
	Checkpoints []docCheckpoint            `json:"checkpoints,omitzero"`
	History     *docHistory                `json:"history,omitzero"`
}

type docThread struct {
	ID         string            `json:"id"`
	Kind       Kind              `json:"kind"`
	Title      string            `json:"title,omitzero"`
	Labels     map[string]string `json:"labels,omitzero"`
	CreatedAt  time.Time         `json:"created_at"`
	UpdatedAt  time.Time         `json:"updated_at"`
	ForkedFrom docForkPoint      `json:"forked_from,omitzero"`
}

// docForkPoint is a ForkPoint without the commit: commit ids do not travel
// (a loaded thread's commits get fresh ones), thread and message ids do.
type docForkPoint struct {
	Thread  string `json:"thread"`
	Message string `json:"message,omitzero"`
}

type docCheckpoint struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	// Without history: the checkpoint's place on the head's line, as a
	// message count, and the state in effect there.
	Depth *int64                     `json:"depth,omitzero"`
	State map[string]json.RawMessage `json:"state,omitzero"`
	// With history: the commit's index and the version it was made at.
	Commit  *int  `json:"commit,omitzero"`
	Version int64 `json:"version,omitzero"`
}

type docHistory struct {
	Version int64       `json:"version"`
	Head    int         `json:"head"` // commit index, -1 for the empty root
	Commits []docCommit `json:"commits"`
	Entries []docEntry  `json:"entries"`
}

type docCommit struct {
	Parent   int                        `json:"parent"` // index, -1 for the root
	Op       Op                         `json:"op"`
	Time     time.Time                  `json:"time"`
	Messages []message.Message          `json:"messages,omitzero"`
	State    map[string]json.RawMessage `json:"state,omitzero"`
	Metadata map[string]string          `json:"metadata,omitzero"`
}

type docEntry struct {
	Version int64     `json:"version"`
	Commit  int       `json:"commit"` // index, -1 for the empty root
	Op      Op        `json:"op"`
	Time    time.Time `json:"time"`
}

// SaveOptions choose what Save writes.
type SaveOptions struct {
	// History adds every commit the thread's history and checkpoints reach,
	// and the history itself, so that time travel survives the move. Without
	// it, a checkpoint that is not on the head's line of commits (one left
	// behind by a rollback) is not saved.
	History bool
}

// Save writes the thread, as of the handle's version, as a portable JSON
// document: the thread's record, its messages, state and checkpoints, and
// with opts.History its whole history. Load reads it into any store, and
// Save → Load → Save writes the same bytes.
func (t *Thread) Save(ctx context.Context, w io.Writer, opts SaveOptions) error {
	doc, err := t.document(ctx, opts)
	if err != nil {
		return fmt.Errorf("save %s: %w", t.ID(), err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("save %s: %w", t.ID(), err)
	}
	bw := bufio.NewWriter(w)
	writeIndented(bw, b, indentLevels)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("save %s: %w", t.ID(), err)
	}
	return nil
}

// indentLevels is how many levels of a document Save indents. The
// document's own structure is at most 8 levels deep (a content's fields,
// in a document with history) and the values in it get two more; deeper
// values are written on one line. Indenting every level would make a
// document grow with the square of its values' depth (each of n levels
// indented by up to n), where this keeps it linear in what it holds.
const indentLevels = 10

// writeIndented writes the compact JSON src to w as json.Indent with two
// spaces would, and a newline after it, down to levels deep; what is
// nested deeper stays compact.
func writeIndented(w *bufio.Writer, src []byte, levels int) {
	depth := 0
	newline := func() {
		w.WriteByte('\n')
		for range depth {
			w.WriteString("  ")
		}
	}
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case '"':
			j := i + 1
			for ; j < len(src) && src[j] != '"'; j++ {
				if src[j] == '\\' {
					j++
				}
			}
			w.Write(src[i:min(j+1, len(src))])
			i = j
		case '{', '[':
			w.WriteByte(c)
			if i+1 < len(src) && (src[i+1] == '}' || src[i+1] == ']') {
				w.WriteByte(src[i+1])
				i++
				continue
			}
			depth++
			if depth <= levels {
				newline()
			}
		case '}', ']':
			depth--
			if depth < levels {
				newline()
			}
			w.WriteByte(c)
		case ',':
			w.WriteByte(c)
			if depth <= levels {
				newline()
			}
		case ':':
			w.WriteByte(c)
			if depth <= levels {
				w.WriteByte(' ')
			}
		default:
			w.WriteByte(c)
		}
	}
	w.WriteByte('\n')
}

func (t *Thread) document(ctx context.Context, opts SaveOptions) (*document, error) {
	r, head, err := t.headCommit(ctx)
	if err != nil {
		return nil, err
	}
	doc := &document{Format: DocumentFormat, Thread: docThread{ID: r.ID, Kind: r.Kind, Title: r.Title, Labels: cloneLabels(r.Labels),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, ForkedFrom: docForkPoint{r.ForkedFrom.Thread, r.ForkedFrom.Message}}, Messages: []message.Message{}}

	// The head's line, every commit of it, oldest first.
	var line []*Commit
	if head != nil {
		for c, err := range t.db.store.Ancestors(ctx, head.ID, -1) {
			if err != nil {
				return nil, err
			}
			line = append(line, c)
		}
		slices.Reverse(line)
	}
	onLine := make(map[string]*Commit, len(line))
	for _, c := range line {
		onLine[c.ID] = c
		doc.Messages = append(doc.Messages, c.Messages...)
	}
	stateOf := func(c *Commit) map[string]json.RawMessage {
		if c == nil || c.StateFrom == "" {
			return nil
		}
		return onLine[c.StateFrom].State
	}
	if st := stateOf(head); len(st) > 0 {
		doc.State = st
	}
	var cps []Checkpoint
	for cp, err := range t.db.store.Checkpoints(ctx, r.ID) {
		if err != nil {
			return nil, err
		}
		if cp.Version <= r.Version { // not those made after the handle's version
			cps = append(cps, cp)
		}
	}
	if !opts.History {
		for _, cp := range cps {
			c := onLine[cp.Commit]
			if c == nil {
				continue // left behind by a rollback: only History can keep it
			}
			dc := docCheckpoint{Name: cp.Name, CreatedAt: cp.CreatedAt, Depth: &c.Depth}
			if st := stateOf(c); len(st) > 0 {
				dc.State = st
			}
			doc.Checkpoints = append(doc.Checkpoints, dc)
		}
		return doc, nil
	}

	// With history: every commit reachable from an entry or a checkpoint,
	// parents first: the head's line (read already), then what the history
	// and the checkpoints reach besides, in the order they reach it. Those
	// are fetched one commit at a time until they meet a commit already in:
	// they are short branches off the line.
	var entries []HistoryEntry
	for e, err := range t.db.store.History(ctx, r.ID, HistoryOptions{Before: r.Version + 1}) {
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	slices.Reverse(entries)
	h := &docHistory{Version: r.Version, Head: -1, Commits: []docCommit{}}
	index := map[string]int{}
	put := func(c *Commit) {
		parent := -1
		if c.Parent != "" {
			parent = index[c.Parent]
		}
		index[c.ID] = len(h.Commits)
		dc := docCommit{Parent: parent, Op: c.Op, Time: c.Time}
		if len(c.Messages) > 0 {
			dc.Messages = c.Messages
		}
		if c.StateFrom == c.ID {
			dc.State = c.State
			if dc.State == nil {
				dc.State = map[string]json.RawMessage{}
			}
		}
		if len(c.Metadata) > 0 {
			dc.Metadata = c.Metadata
		}
		h.Commits = append(h.Commits, dc)
	}
	for _, c := range line {
		put(c)
	}
	add := func(id string) (int, error) {
		if id == "" {
			return -1, nil
		}
		if i, ok := index[id]; ok {
			return i, nil
		}
		var path []*Commit
		for next := id; next != ""; {
			if _, ok := index[next]; ok {
				break
			}
			c, err := t.db.store.Commit(ctx, next)
			if err != nil {
				return 0, err
			}
			path = append(path, c)
			next = c.Parent
		}
		for _, c := range slices.Backward(path) {
			put(c)
		}
		return index[id], nil
	}
	for _, e := range entries {
		i, err := add(e.Commit)
		if err != nil {
			return nil, err
		}
		h.Entries = append(h.Entries, docEntry{Version: e.Version, Commit: i, Op: e.Op, Time: e.Time})
	}
	for _, cp := range cps {
		i, err := add(cp.Commit)
		if err != nil {
			return nil, err
		}
		doc.Checkpoints = append(doc.Checkpoints, docCheckpoint{Name: cp.Name, CreatedAt: cp.CreatedAt, Commit: &i, Version: cp.Version})
	}
	if h.Head, err = add(r.Head); err != nil {
		return nil, err
	}
	doc.History = h
	return doc, nil
}

// LoadOptions adjust Load.
type LoadOptions struct {
	// ID, when not "", names the loaded thread instead of the document's id.
	ID string
	// Restore says that the document is a thread's own, saved by this
	// tenant, being put back (after a loss, or into another store). A
	// service-managed thread that holds messages — the mirror of its
	// service's conversation — loads only as a restore, and only under
	// its document's id: any other load would make a thread of messages
	// its client wrote and a service's id (DESIGN §2: service-managed or
	// local, never both). Load cannot tell a thread's own document from a
	// hand-made one, so only a caller that can says Restore: the HTTP
	// import and `loom import` do not.
	Restore bool
	// Progress, when set, is called after each commit that Load builds
	// from the document, and once more when the thread is written (with
	// Written set). Nil reports nothing.
	Progress func(LoadProgress)
}

// LoadProgress reports how far a Load has got.
type LoadProgress struct {
	// Done counts the messages of the commits built so far, Total the
	// messages of every commit the document makes (the messages of its
	// line, or of each of its commits with history).
	Done, Total int
	// Commits counts the commits built so far.
	Commits int
	// Written is set in the last report: the thread is in the store.
	Written bool
}

// Load reads a portable document written by Save and creates the thread it
// describes, with fresh commit ids. A thread with the same id is ErrConflict
// (use LoadOptions.ID to load a second copy); a malformed or inconsistent
// document is ErrInvalid, and nothing is written. A service-managed thread
// that holds messages (the mirror of its service's conversation) loads
// only as a restore (LoadOptions.Restore), under its own id; otherwise it
// is ErrInvalid. Fork and Copy keep a thread's kind: a fork of a service
// thread shares its mirror and is a service thread too, and Copy keeps
// every id, as a restore does.
func (db *DB) Load(ctx context.Context, r io.Reader, opts LoadOptions) (*Thread, error) {
	limit := db.limits.DocumentBytes
	if limit < math.MaxInt64 {
		limit++ // one byte more, to tell a document at the limit from one over it
	}
	data, err := io.ReadAll(io.LimitReader(r, limit))
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if int64(len(data)) > db.limits.DocumentBytes {
		return nil, fmt.Errorf("load: document over the limit of %d bytes: %w", db.limits.DocumentBytes, ErrInvalid)
	}
	// encoding/json reads bytes that are not UTF-8, and \u escapes of lone
	// surrogates, as U+FFFD: a document that holds them would load as
	// something else than it says.
	if err := jsonguard.Check(data, 0); err != nil {
		return nil, fmt.Errorf("load: %v: %w", err, ErrInvalid)
	}
	var doc document
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("load: %s: %w", jsonerr.Describe(&doc, err), ErrInvalid)
	}
	if dec.More() {
		return nil, fmt.Errorf("load: data after the document: %w", ErrInvalid)
	}
	th, err := db.load(ctx, &doc, opts)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	return th, nil
}

func (db *DB) load(ctx context.Context, doc *document, opts LoadOptions) (*Thread, error) {
	if doc.Format != DocumentFormat {
		return nil, fmt.Errorf("format %q, want %q: %w", clip(doc.Format), DocumentFormat, ErrInvalid)
	}
	d := doc.Thread
	if opts.ID != "" {
		d.ID = opts.ID
	}
	if err := db.checkRecord(d.ID, d.Kind, d.Title, d.Labels); err != nil {
		return nil, err
	}
	if d.Kind == KindService && doc.holdsMessages() {
		switch {
		case !opts.Restore:
			return nil, fmt.Errorf("a service-managed thread with messages loads only as a restore: %w", ErrInvalid)
		case d.ID != doc.Thread.ID:
			return nil, fmt.Errorf("a service-managed thread's messages mirror its service's conversation under id %s: not restored under id %s: %w", clip(doc.Thread.ID), d.ID, ErrInvalid)
		}
	}
	if d.ForkedFrom != (docForkPoint{}) && !(ids.Valid(d.ForkedFrom.Thread) && validOptionalID(d.ForkedFrom.Message)) {
		return nil, fmt.Errorf("forked_from: %w", ErrInvalid)
	}
	now := db.clock()
	rec := &Record{ID: d.ID, Tenant: db.tenant, Kind: d.Kind, Title: d.Title, Labels: cloneLabels(d.Labels),
		CreatedAt: utcMicro(d.CreatedAt, now), UpdatedAt: utcMicro(d.UpdatedAt, now),
		ForkedFrom: ForkPoint{Thread: d.ForkedFrom.Thread, Message: d.ForkedFrom.Message}}
	if rec.UpdatedAt.Before(rec.CreatedAt) {
		rec.UpdatedAt = rec.CreatedAt
	}
	names := map[string]bool{}
	for _, cp := range doc.Checkpoints {
		if err := checkCheckpointName(cp.Name); err != nil {
			return nil, err
		}
		if names[cp.Name] {
			return nil, fmt.Errorf("checkpoint %q twice: %w", cp.Name, ErrInvalid)
		}
		names[cp.Name] = true
	}
	b := &store.Batch{}
	var p LoadProgress
	if doc.History != nil {
		for _, dc := range doc.History.Commits {
			p.Total += len(dc.Messages)
		}
	} else {
		p.Total = len(doc.Messages)
	}
	built := func(c *Commit) {
		if opts.Progress != nil {
			p.Commits++
			p.Done += len(c.Messages)
			opts.Progress(p)
		}
	}
	var head *Commit
	var err error
	if doc.History != nil {
		head, err = db.loadHistory(doc, rec, b, now, built)
	} else {
		head, err = db.loadLine(doc, rec, b, now, built)
	}
	if err != nil {
		return nil, err
	}
	if err := db.apply(ctx, b); err != nil {
		return nil, err
	}
	if opts.Progress != nil {
		p.Written = true
		opts.Progress(p)
	}
	return db.handle(rec, head), nil
}

// holdsMessages reports whether any commit of the document holds messages.
func (doc *document) holdsMessages() bool {
	if len(doc.Messages) > 0 {
		return true
	}
	if doc.History != nil {
		for _, c := range doc.History.Commits {
			if len(c.Messages) > 0 {
				return true
			}
		}
	}
	return false
}

func validOptionalID(s string) bool { return s == "" || ids.Valid(s) }

func utcMicro(t, def time.Time) time.Time {
	if t.IsZero() {
		return def
	}
	return t.UTC().Truncate(time.Microsecond)
}

// loadCommit builds one commit of a document on parent with a fresh id.
// snapshot, when not nil, is the whole state as of the commit.
func (db *DB) loadCommit(parent *Commit, msgs []message.Message, snapshot map[string]json.RawMessage,
	op Op, at time.Time, meta map[string]string) (*Commit, error) {
	for _, m := range msgs {
		if m.ID == "" {
			return nil, fmt.Errorf("a message without an id: %w", ErrInvalid)
		}
	}
	c, err := db.newCommit(parent, nil, msgs, snapshot, op, meta, at)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// loadLine builds the head's line of a document without history: one load
// commit per checkpoint position, so that every checkpoint lands on a commit.
// It calls built after each commit.
func (db *DB) loadLine(doc *document, rec *Record, b *store.Batch, now time.Time, built func(*Commit)) (*Commit, error) {
	type cpAt struct {
		i     int
		depth int64
	}
	var cps []cpAt
	for i, cp := range doc.Checkpoints {
		if cp.Depth == nil || cp.Commit != nil || *cp.Depth < 0 || *cp.Depth > int64(len(doc.Messages)) {
			return nil, fmt.Errorf("checkpoint %q: want a depth within the messages: %w", cp.Name, ErrInvalid)
		}
		cps = append(cps, cpAt{i, *cp.Depth})
	}
	slices.SortStableFunc(cps, func(a, b cpAt) int { return int(min(max(a.depth-b.depth, -1), 1)) })
	var head *Commit
	var state map[string]json.RawMessage // in effect at head
	// step commits the messages up to depth upto with state st in effect,
	// unless the head is there already; force makes a commit even on the
	// empty root, for a checkpoint to point at.
	step := func(upto int64, st map[string]json.RawMessage, force bool) error {
		var from int64
		if head != nil {
			from = head.Depth
		}
		if upto < from {
			return fmt.Errorf("checkpoint depth goes back: %w", ErrInvalid)
		}
		if upto == from && sameState(st, state) && (head != nil || !force) {
			return nil
		}
		var snap map[string]json.RawMessage
		if !sameState(st, state) || head == nil {
			snap = st
			if snap == nil {
				snap = map[string]json.RawMessage{}
			}
		}
		// Pieces of at most MessagesPerCommit messages, cut before an id
		// that repeats (the line may hold one id twice, a compact commit
		// restating messages before it; a commit may not). The state goes
		// on the last piece.
		msgs := doc.Messages[from:upto]
		for first := true; first || len(msgs) > 0; first = false {
			n, seen := 0, map[string]bool{}
			for n < len(msgs) && n < db.limits.MessagesPerCommit && !seen[msgs[n].ID] {
				seen[msgs[n].ID] = true
				n++
			}
			var st map[string]json.RawMessage
			if n == len(msgs) {
				st = snap
			}
			c, err := db.loadCommit(head, msgs[:n], st, OpLoad, now, nil)
			if err != nil {
				return err
			}
			if st != nil {
				state = c.State
			}
			b.Commits = append(b.Commits, c)
			head, msgs = c, msgs[n:]
			built(c)
		}
		return nil
	}
	for _, cp := range cps {
		if err := step(cp.depth, doc.Checkpoints[cp.i].State, true); err != nil {
			return nil, err
		}
		dc := doc.Checkpoints[cp.i]
		b.Checkpoints = append(b.Checkpoints, Checkpoint{Thread: rec.ID, Name: dc.Name, Commit: head.ID, Version: 1, CreatedAt: utcMicro(dc.CreatedAt, now)})
	}
	if err := step(int64(len(doc.Messages)), doc.State, false); err != nil {
		return nil, err
	}
	if head != nil {
		rec.Head = head.ID
	}
	rec.Version = 1
	b.Create = []store.Creation{{Record: rec, Op: OpLoad}}
	return head, nil
}

func sameState(a, b map[string]json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok {
			return false
		}
		cv, err1 := compactJSON(v)
		cw, err2 := compactJSON(w)
		if err1 != nil || err2 != nil || !bytes.Equal(cv, cw) {
			return false
		}
	}
	return true
}

// loadHistory builds every commit of a document with history, calling built
// after each.
func (db *DB) loadHistory(doc *document, rec *Record, b *store.Batch, now time.Time, built func(*Commit)) (*Commit, error) {
	h := doc.History
	commits := make([]*Commit, len(h.Commits))
	at := func(i int, what string) (*Commit, error) {
		if i == -1 {
			return nil, nil
		}
		if i < 0 || i >= len(commits) {
			return nil, fmt.Errorf("%s: commit index %d out of range: %w", what, i, ErrInvalid)
		}
		return commits[i], nil
	}
	for i, dc := range h.Commits {
		if dc.Parent < -1 || dc.Parent >= i {
			return nil, fmt.Errorf("commit %d: parent %d is not an earlier commit: %w", i, dc.Parent, ErrInvalid)
		}
		parent, _ := at(dc.Parent, "")
		c, err := db.loadCommit(parent, dc.Messages, dc.State, dc.Op, utcMicro(dc.Time, now), dc.Metadata)
		if err != nil {
			return nil, fmt.Errorf("commit %d: %w", i, err)
		}
		commits[i] = c
		built(c)
	}
	b.Commits = commits
	head, err := at(h.Head, "head")
	if err != nil {
		return nil, err
	}
	// A thread whose oldest versions were pruned (retention) saves the
	// entries it kept: consecutive, ending at its version.
	if len(h.Entries) == 0 || h.Entries[len(h.Entries)-1].Version != h.Version {
		return nil, fmt.Errorf("history: version %d with %d entries: %w", h.Version, len(h.Entries), ErrInvalid)
	}
	var entries []HistoryEntry
	for i, e := range h.Entries {
		c, err := at(e.Commit, fmt.Sprintf("history entry %d", i))
		if err != nil {
			return nil, err
		}
		if err := checkOp(e.Op); err != nil {
			return nil, fmt.Errorf("history entry %d: %w", i, err)
		}
		he := HistoryEntry{Version: e.Version, Op: e.Op, Time: utcMicro(e.Time, now)}
		if c != nil {
			he.Commit = c.ID
		}
		entries = append(entries, he)
	}
	if entries[len(entries)-1].Commit != idOf(head) {
		return nil, fmt.Errorf("history: the last entry is not the head: %w", ErrInvalid)
	}
	// The plain fields must agree with the commits they repeat.
	byID := make(map[string]*Commit, len(commits))
	for _, c := range commits {
		byID[c.ID] = c
	}
	var line []message.Message
	for c := head; c != nil; c = byID[c.Parent] {
		for i := len(c.Messages) - 1; i >= 0; i-- {
			line = append(line, c.Messages[i])
		}
	}
	slices.Reverse(line)
	if !sameMessages(line, doc.Messages) {
		return nil, fmt.Errorf("messages differ from the head's commits: %w", ErrInvalid)
	}
	var st map[string]json.RawMessage
	if head != nil && head.StateFrom != "" {
		st = byID[head.StateFrom].State
	}
	if !sameState(st, doc.State) {
		return nil, fmt.Errorf("state differs from the head's commits: %w", ErrInvalid)
	}
	for _, cp := range doc.Checkpoints {
		if cp.Commit == nil || cp.Depth != nil {
			return nil, fmt.Errorf("checkpoint %q: want a commit index: %w", cp.Name, ErrInvalid)
		}
		c, err := at(*cp.Commit, "checkpoint "+cp.Name)
		if err != nil {
			return nil, err
		}
		if c == nil {
			return nil, fmt.Errorf("checkpoint %q: no commit: %w", cp.Name, ErrInvalid)
		}
		if cp.Version < 1 || cp.Version > h.Version {
			return nil, fmt.Errorf("checkpoint %q: version %d outside 1 to %d: %w", cp.Name, cp.Version, h.Version, ErrInvalid)
		}
		b.Checkpoints = append(b.Checkpoints, Checkpoint{Thread: rec.ID, Name: cp.Name, Commit: c.ID, Version: cp.Version, CreatedAt: utcMicro(cp.CreatedAt, now)})
	}
	// Every commit must be reachable from an entry or a checkpoint: one that
	// is not could never be deleted.
	reached := make([]bool, len(h.Commits))
	mark := func(i int) {
		for ; i >= 0 && !reached[i]; i = h.Commits[i].Parent {
			reached[i] = true
		}
	}
	for _, e := range h.Entries {
		mark(e.Commit)
	}
	for _, cp := range doc.Checkpoints {
		mark(*cp.Commit)
	}
	if i := slices.Index(reached, false); i >= 0 {
		return nil, fmt.Errorf("commit %d: reached by no history entry or checkpoint: %w", i, ErrInvalid)
	}
	rec.Head, rec.Version = idOf(head), h.Version
	b.Create = []store.Creation{{Record: rec, History: entries}}
	return head, nil
}

func idOf(c *Commit) string {
	if c == nil {
		return ""
	}
	return c.ID
}

func sameMessages(a, b []message.Message) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 {
		return true
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
