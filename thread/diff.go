package thread

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/loomthreads/loom/message"
)

// The limits of DiffQuery.Limit.
const (
	// DefaultDiffLimit is the cap on a diff's entries when
	// DiffQuery.Limit is 0.
	DefaultDiffLimit = 500
	// MaxDiffLimit is the largest DiffQuery.Limit; a larger one is
	// ErrInvalid.
	MaxDiffLimit = 10_000
)

// DiffQuery names the two points DB.Diff compares: a thread at a version
// (from), and a thread at a version (to). With only Thread set, it
// compares the thread's head with itself.
type DiffQuery struct {
	// Thread is the thread diffed from.
	Thread string
	// Version is Thread's version; 0 means its current version.
	Version int64
	// To is the thread diffed to; "" means Thread (two versions of one
	// thread). Any thread of the DB's tenant will do: a fork, its
	// parent, or one that shares nothing.
	To string
	// ToVersion is To's version; 0 means its current version.
	ToVersion int64
	// Limit caps Diff.Entries, and Diff.State apart; 0 means
	// DefaultDiffLimit, and more than MaxDiffLimit is ErrInvalid.
	Limit int
}

// DiffChange says how an entry of a diff differs.
type DiffChange string

// The changes of a diff's entries.
const (
	// DiffSame is a message both sides hold, equal, after the point where
	// they first differ.
	DiffSame DiffChange = "same"
	// DiffAdded is a message (or state key) only the to side holds.
	DiffAdded DiffChange = "added"
	// DiffRemoved is a message (or state key) only the from side holds.
	DiffRemoved DiffChange = "removed"
	// DiffChanged is a message both sides hold by id with different
	// contents (or a state key with different values).
	DiffChanged DiffChange = "changed"
)

// Diff is the difference between two (thread, version) points, as DB.Diff
// finds it. Its JSON is the answer of GET /v1/threads/{id}/diff.
//
// Two messages are equal when they have the same id, role, author,
// contents and metadata (their times aside). The messages both sides
// begin with, equal, are counted (Shared), not listed. Entries are the rest, in order and aligned side by side: a
// message both sides hold by id is one entry (same or changed), and
// between two such messages come those only from holds (removed), then
// those only to holds (added). So the from side's messages are its first
// Shared messages followed by each entry's From, and the to side's are
// the same Shared messages followed by each entry's To (when not
// Truncated).
type Diff struct {
	From DiffSide `json:"from"`
	To   DiffSide `json:"to"`
	// Shared counts the leading messages both sides hold, equal.
	Shared int64 `json:"shared"`
	// Entries are the messages after the shared ones, at most Limit.
	Entries []DiffEntry `json:"entries"`
	// State are the state keys whose values differ, in key order, at most
	// Limit.
	State []StateChange `json:"state"`
	// Truncated says that Entries or State were cut at Limit.
	Truncated bool `json:"truncated"`
}

// DiffSide is one point of a diff: a thread, the version compared, and
// how many messages the thread holds at that version.
type DiffSide struct {
	Thread   string `json:"thread"`
	Version  int64  `json:"version"`
	Messages int64  `json:"messages"`
}

// DiffEntry is one message of a diff: From is the from side's message,
// nil when the message was added; To the to side's, nil when removed.
type DiffEntry struct {
	Change DiffChange       `json:"change"`
	From   *message.Message `json:"from,omitzero"`
	To     *message.Message `json:"to,omitzero"`
}

// StateChange is one state key whose value differs: From is the from
// side's value, nil when the key was added; To the to side's, nil when
// removed.
type StateChange struct {
	Key    string          `json:"key"`
	Change DiffChange      `json:"change"`
	From   json.RawMessage `json:"from,omitzero"`
	To     json.RawMessage `json:"to,omitzero"`
}

// Diff compares two points of the DB tenant's threads: two versions of a
// thread, a thread and its fork, or any two threads (see DiffQuery). A
// thread or version that does not exist is ErrNotFound; a bad id,
// version or limit is ErrInvalid.
//
// It costs what differs, not what is shared: both sides walk back from
// their heads, a little further each round, until they reach a commit
// they share (forks and versions of one thread share commits, DESIGN §1);
// everything before it is counted by its depth, not read. Only the
// messages after that commit are read and compared, by id and then by
// content. Two threads that share no commit are read whole.
func (db *DB) Diff(ctx context.Context, q DiffQuery) (_ *Diff, err error) {
	ctx, span := db.startSpan(ctx, "diff", q.Thread)
	defer endSpan(span, &err)
	if q.To == "" {
		q.To = q.Thread
	}
	switch {
	case q.Version < 0 || q.ToVersion < 0:
		return nil, fmt.Errorf("diff %s: a negative version: %w", clip(q.Thread), ErrInvalid)
	case q.Limit < 0 || q.Limit > MaxDiffLimit:
		return nil, fmt.Errorf("diff %s: limit %d: 1 to %d (0: %d): %w", clip(q.Thread), q.Limit, MaxDiffLimit, DefaultDiffLimit, ErrInvalid)
	case q.Limit == 0:
		q.Limit = DefaultDiffLimit
	}
	from, err := db.diffPoint(ctx, q.Thread, q.Version)
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	to, err := db.diffPoint(ctx, q.To, q.ToVersion)
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	d := &Diff{From: from.side(), To: to.side(), Entries: []DiffEntry{}, State: []StateChange{}}
	if err := db.diffMessages(ctx, d, from.head, to.head, q.Limit); err != nil {
		return nil, fmt.Errorf("diff %s and %s: %w", from.th.ID(), to.th.ID(), err)
	}
	if err := diffState(ctx, d, from, to, q.Limit); err != nil {
		return nil, fmt.Errorf("diff the state of %s and %s: %w", from.th.ID(), to.th.ID(), err)
	}
	return d, nil
}

// diffPoint is one side of a diff as read: the thread, the version and
// the head commit there (nil for an empty head).
type diffPoint struct {
	th      *Thread
	version int64
	head    *Commit
}

func (p diffPoint) side() DiffSide {
	s := DiffSide{Thread: p.th.ID(), Version: p.version}
	if p.head != nil {
		s.Messages = p.head.Depth
	}
	return s
}

// diffPoint reads thread id at version (0: its current version).
func (db *DB) diffPoint(ctx context.Context, id string, version int64) (diffPoint, error) {
	th, err := db.Thread(ctx, id)
	if err != nil {
		return diffPoint{}, err
	}
	if version == 0 {
		version = th.Version()
	}
	pt := diffPoint{th: th, version: version}
	if version == th.Version() {
		_, pt.head, err = th.headCommit(ctx)
		return pt, err
	}
	// Another version's head: its history entry names it, and the head
	// of this one is not read.
	head, err := th.headIDAt(ctx, version)
	if err != nil || head == "" {
		return pt, err
	}
	pt.head, err = db.store.Commit(ctx, head)
	return pt, err
}

// diffWalk is one side's walk back from its head: the commits read,
// newest first, and where to go on.
type diffWalk struct {
	head  *Commit // nil for an empty head
	next  string  // the id of the next commit to read; "" at the root
	chain []*Commit
	at    map[string]int // commit id → index in chain
}

// diffMessages fills d's Shared, Entries and Truncated with the
// difference between the messages at the heads a and b (nil: empty).
func (db *DB) diffMessages(ctx context.Context, d *Diff, a, b *Commit, limit int) error {
	if a != nil && b != nil && a.ID == b.ID {
		d.Shared = a.Depth // one commit: nothing to read
		return nil
	}
	wa, wb := newDiffWalk(a), newDiffWalk(b)
	base, err := db.meet(ctx, wa, wb)
	if err != nil {
		return err
	}
	from, to := wa.messages(), wb.messages()
	d.Shared = base
	// Commits apart may hold equal messages (a fork inside a commit
	// splits it; a copy loaded from a document makes new commits): the
	// shared run goes on as long as the messages are equal.
	n := 0
	for n < len(from) && n < len(to) && sameMessage(&from[n], &to[n]) {
		n++
	}
	d.Shared += int64(n)
	d.Entries, d.Truncated = alignMessages(from[n:], to[n:], limit)
	return nil
}

func newDiffWalk(head *Commit) *diffWalk {
	w := &diffWalk{head: head, at: map[string]int{}}
	if head != nil {
		w.next = head.ID
	}
	return w
}

// holds reports whether id is a commit w knows to be on its line — its
// head, or one it has read — with its depth, and cuts w's chain just
// before it.
func (w *diffWalk) holds(id string) (int64, bool) {
	if i, ok := w.at[id]; ok {
		depth := w.chain[i].Depth
		w.chain = w.chain[:i]
		return depth, true
	}
	if w.head != nil && id == w.head.ID {
		w.chain = w.chain[:0]
		return w.head.Depth, true
	}
	return 0, false
}

// meet walks a and b back until one reaches a commit the other knows to
// be on its line, and returns its depth: the messages up to it are
// shared, counted, not read. Each round reads the commits above a floor
// that falls four times further than the last (from the shallower head),
// so that a fork made k messages back costs a few times k commits read,
// whatever the threads' length. The walks end cut just above the commit
// met; with none (threads that share nothing), both go to the root and
// the depth is 0.
//
// The first commit met is the deepest the two lines share: each walk
// goes newest first, so it comes to the deepest shared commit before any
// older one, and whichever walk comes to it second finds it known to the
// other.
func (db *DB) meet(ctx context.Context, a, b *diffWalk) (int64, error) {
	floor := min(depthOf(a.head), depthOf(b.head))
	for step := int64(16); ; step *= 4 {
		for _, w := range [2]*diffWalk{a, b} {
			other := b
			if w == b {
				other = a
			}
			depth, met, err := db.walkTo(ctx, w, other, floor)
			if err != nil || met {
				return depth, err
			}
		}
		if floor < 0 || a.next == "" && b.next == "" {
			return 0, nil
		}
		floor = max(floor-step, -1)
	}
}

func depthOf(c *Commit) int64 {
	if c == nil {
		return 0
	}
	return c.Depth
}

// walkTo reads w's commits above floor until the next one is a commit
// other holds (see holds), and returns that commit's depth.
func (db *DB) walkTo(ctx context.Context, w, other *diffWalk, floor int64) (int64, bool, error) {
	if w.next == "" {
		return 0, false, nil
	}
	if depth, ok := other.holds(w.next); ok {
		return depth, true, nil
	}
	for c, err := range db.store.Ancestors(ctx, w.next, floor) {
		if err != nil {
			return 0, false, err
		}
		w.at[c.ID] = len(w.chain)
		w.chain = append(w.chain, c)
		w.next = c.Parent
		if c.Parent == "" {
			break
		}
		if depth, ok := other.holds(c.Parent); ok {
			return depth, true, nil
		}
	}
	return 0, false, nil
}

// messages returns the messages of w's chain, oldest first.
func (w *diffWalk) messages() []message.Message {
	n := 0
	for _, c := range w.chain {
		n += len(c.Messages)
	}
	out := make([]message.Message, 0, n)
	for _, c := range slices.Backward(w.chain) {
		out = append(out, c.Messages...)
	}
	return out
}

// sameMessage reports whether a and b are the same message: the same id
// and the same role, author, contents and metadata. The time is not
// compared: one message appended (by its id) to two branches at two times
// says the same thing in both.
func sameMessage(a, b *message.Message) bool {
	if a.ID != b.ID {
		return false
	}
	x, y := *a, *b
	x.CreatedAt, y.CreatedAt = time.Time{}, time.Time{}
	ja, err := x.AppendJSON(nil)
	if err != nil {
		return false
	}
	jb, err := y.AppendJSON(nil)
	return err == nil && bytes.Equal(ja, jb)
}

// alignMessages aligns from and to side by side, at most limit entries:
// the messages both hold by id, in an order both keep (the longest such
// run, found as a longest increasing subsequence of to's positions), are
// the anchors; between anchors come from's others (removed), then to's
// (added).
func alignMessages(from, to []message.Message, limit int) ([]DiffEntry, bool) {
	at := make(map[string]int, len(to))
	for j, m := range to {
		if _, dup := at[m.ID]; !dup && m.ID != "" {
			at[m.ID] = j
		}
	}
	type pair struct{ i, j int }
	var pairs []pair
	for i, m := range from {
		if j, ok := at[m.ID]; ok && m.ID != "" {
			pairs = append(pairs, pair{i, j})
		}
	}
	// Longest increasing subsequence of the pairs' j (they come in i
	// order): tails[k] is the index in pairs of the smallest j that ends
	// an increasing run of k+1, prev links each pair to the one before it.
	var tails []int
	prev := make([]int, len(pairs))
	for p := range pairs {
		k := sort.Search(len(tails), func(k int) bool { return pairs[tails[k]].j >= pairs[p].j })
		prev[p] = -1
		if k > 0 {
			prev[p] = tails[k-1]
		}
		if k == len(tails) {
			tails = append(tails, p)
		} else {
			tails[k] = p
		}
	}
	anchors := make([]pair, len(tails))
	if len(tails) > 0 {
		for k, p := len(tails)-1, tails[len(tails)-1]; p >= 0; k, p = k-1, prev[p] {
			anchors[k] = pairs[p]
		}
	}

	entries := []DiffEntry{}
	full := func() bool { return len(entries) >= limit }
	i, j := 0, 0
	emit := func(ai, aj int) bool {
		for ; i < ai; i++ {
			if full() {
				return false
			}
			entries = append(entries, DiffEntry{Change: DiffRemoved, From: &from[i]})
		}
		for ; j < aj; j++ {
			if full() {
				return false
			}
			entries = append(entries, DiffEntry{Change: DiffAdded, To: &to[j]})
		}
		return true
	}
	for _, a := range anchors {
		if !emit(a.i, a.j) || full() {
			return entries, true
		}
		change := DiffSame
		if !sameMessage(&from[a.i], &to[a.j]) {
			change = DiffChanged
		}
		entries = append(entries, DiffEntry{Change: change, From: &from[a.i], To: &to[a.j]})
		i, j = a.i+1, a.j+1
	}
	if !emit(len(from), len(to)) {
		return entries, true
	}
	return entries, false
}

// diffState fills d.State with the keys whose values differ between the
// states in effect at the two points.
func diffState(ctx context.Context, d *Diff, from, to diffPoint, limit int) error {
	if stateFromOf(from.head) == stateFromOf(to.head) {
		return nil // one snapshot, or none on both sides
	}
	a, err := from.th.stateAt(ctx, from.head)
	if err != nil {
		return err
	}
	b, err := to.th.stateAt(ctx, to.head)
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		va, inA := a[k]
		vb, inB := b[k]
		var c StateChange
		switch {
		case !inA:
			c = StateChange{Key: k, Change: DiffAdded, To: vb}
		case !inB:
			c = StateChange{Key: k, Change: DiffRemoved, From: va}
		case !sameJSON(va, vb):
			c = StateChange{Key: k, Change: DiffChanged, From: va, To: vb}
		default:
			continue
		}
		if len(d.State) >= limit {
			d.Truncated = true
			break
		}
		d.State = append(d.State, c)
	}
	return nil
}

func stateFromOf(c *Commit) string {
	if c == nil {
		return ""
	}
	return c.StateFrom
}

// sameJSON reports whether a and b are the same JSON, whitespace aside.
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}
