package store

import (
	"context"
	"fmt"
)

// Facts is what a store reads for the batch planner, inside the
// transaction that then writes the plan. Each method answers about what
// the store holds now, before any of the batch's writes; the planner
// layers the batch's own changes on top. A store that applies several
// batches in one transaction (group commit) answers each as the batches
// before it in that transaction left the store. A store may answer from a lock
// it holds, a read in the same transaction, or a prefetch of everything
// Needs lists (see NewFacts).
type Facts interface {
	// Thread returns a thread's version and head commit; ok is false for a
	// thread the store does not hold.
	Thread(ctx context.Context, id string) (version int64, head string, ok bool, err error)
	// Commit reports whether the store holds the commit.
	Commit(ctx context.Context, id string) (ok bool, err error)
	// Checkpoint returns the commit of a thread's checkpoint; ok is false
	// when the thread has no checkpoint of that name.
	Checkpoint(ctx context.Context, thread, name string) (commit string, ok bool, err error)
}

// Plan is a batch that passed every rule of the store contract (see
// Batch), with the reference counts its writes make. A store writes it in
// this order, all in one transaction:
//
//  1. Batch.Commits, each with NewRefs[i] references (the batch's own
//     references to it: children in the batch, history entries, heads,
//     checkpoints). A store whose key for the commit id is taken already
//     by then (another process won a race the facts did not see) fails
//     the batch with ErrConflict.
//  2. Refs: one more reference to each stored commit, N times.
//  3. Batch.Create: the record, its history (Creation.Entries) and labels.
//  4. Batch.Moves: the record at Move.From+1 with the move's fields, and
//     the history entry Move.Entry.
//  5. Batch.DropCheckpoints, each letting go of the reference its
//     checkpoint held (DropCommits[i]).
//  6. Batch.Checkpoints.
//  7. Batch.Prune: the thread's history entries below Before, each letting
//     go of its reference.
//  8. Batch.Delete: the thread, its history, checkpoints and labels, each
//     entry and checkpoint letting go of its reference.
//  9. Collection: every commit the batch left without references is
//     deleted, and so are the ancestors that only it kept.
//
// New references all count (1, 2) before any is let go (5, 7, 8), so a batch
// that replaces a checkpoint never frees what the new one keeps.
type Plan struct {
	Batch *Batch
	// NewRefs counts the batch's references to each of Batch.Commits.
	NewRefs []int64
	// Refs are the references the batch adds to commits the store holds.
	Refs []RefDelta
	// DropCommits are the commits of the dropped checkpoints, in the order
	// of Batch.DropCheckpoints.
	DropCommits []string

	newRefs [2]int64
	refs    [2]RefDelta
}

// RefDelta is a count of new references to a stored commit.
type RefDelta struct {
	Commit string
	N      int64
}

// Entries returns the history a creation writes: its History, or the one
// entry {1, Record.Head, Op, Record.CreatedAt}.
func (cr Creation) Entries() []HistoryEntry {
	if len(cr.History) > 0 {
		return cr.History
	}
	return []HistoryEntry{{Version: 1, Commit: cr.Record.Head, Op: cr.Op, Time: cr.Record.CreatedAt}}
}

// Entry is the history entry a move writes.
func (m Move) Entry() HistoryEntry {
	return HistoryEntry{Version: m.From + 1, Commit: m.Head, Op: m.Op, Time: m.Time}
}

// Needs lists what PlanBatch will ask f about b: the threads, commits and
// checkpoints b names. A store that reads in round trips (a server) fetches
// them all at once, with its locks, and answers from NewFacts; a store that
// reads cheaply inside its transaction need not call it.
type Needs struct {
	Threads     []string
	Commits     []string
	Checkpoints []CheckpointKey
}

// NeedsOf returns what planning b reads.
func NeedsOf(b *Batch) Needs {
	var n Needs
	var threads, commits set[string]
	addT := func(id string) {
		if id != "" && !threads.has(id) {
			threads.add(id)
			n.Threads = append(n.Threads, id)
		}
	}
	addC := func(id string) {
		if id != "" && !commits.has(id) {
			commits.add(id)
			n.Commits = append(n.Commits, id)
		}
	}
	for _, c := range b.Commits {
		if c != nil {
			addC(c.ID)
			addC(c.Parent)
		}
	}
	for _, cr := range b.Create {
		if cr.Record != nil {
			addT(cr.Record.ID)
			addC(cr.Record.Head)
			for _, e := range cr.History {
				addC(e.Commit)
			}
		}
	}
	for _, m := range b.Moves {
		addT(m.Thread)
		addC(m.Head)
	}
	for _, k := range b.DropCheckpoints {
		addT(k.Thread)
		n.Checkpoints = append(n.Checkpoints, k)
	}
	for _, cp := range b.Checkpoints {
		addT(cp.Thread)
		addC(cp.Commit)
		n.Checkpoints = append(n.Checkpoints, CheckpointKey{cp.Thread, cp.Name})
	}
	for _, pr := range b.Prune {
		addT(pr.Thread)
	}
	for _, d := range b.Delete {
		addT(d.Thread)
	}
	return n
}

// ThreadFact is what a store knows of a thread for planning.
type ThreadFact struct {
	Version int64
	Head    string
}

// MapFacts answers Facts from maps a store filled in one read of what
// NeedsOf listed: a thread, commit or checkpoint missing from its map does
// not exist.
type MapFacts struct {
	Threads     map[string]ThreadFact
	Commits     map[string]bool
	Checkpoints map[CheckpointKey]string
}

// Thread implements Facts.
func (f *MapFacts) Thread(_ context.Context, id string) (int64, string, bool, error) {
	t, ok := f.Threads[id]
	return t.Version, t.Head, ok, nil
}

// Commit implements Facts.
func (f *MapFacts) Commit(_ context.Context, id string) (bool, error) {
	return f.Commits[id], nil
}

// Checkpoint implements Facts.
func (f *MapFacts) Checkpoint(_ context.Context, thread, name string) (string, bool, error) {
	c, ok := f.Checkpoints[CheckpointKey{thread, name}]
	return c, ok, nil
}

// PlanBatch checks b against the store's facts and its own earlier changes
// and returns what to write. It is every rule of a Batch, written once:
// a store reads f inside its transaction, calls PlanBatch, and writes the
// plan in that same transaction, restating none of the rules. Errors are
// ErrInvalid, ErrConflict or ErrNotFound (wrapped), or f's own.
func PlanBatch(ctx context.Context, f Facts, b *Batch) (*Plan, error) {
	// The plan and the planner's scratch in one allocation: most batches
	// are one commit and one move, and fit the arrays.
	a := &struct {
		p       Plan
		version [2]threadVersion
		facts   [2]threadFact
	}{}
	a.p.Batch = b
	pl := planner{ctx: ctx, f: f, p: &a.p, version: a.version[:0], facts: a.facts[:0]}
	if err := pl.run(b); err != nil {
		return nil, err
	}
	return &a.p, nil
}

type planner struct {
	ctx context.Context
	f   Facts
	p   *Plan

	newCommits set[string]
	// known are commits the facts said exist (thread heads among them).
	known set[string]
	// version is each thread touched as the batch leaves it, newest last.
	version []threadVersion
	created set[string]
	// facts remembers what the store said of each thread, so that a batch
	// that names a thread twice reads it once.
	facts []threadFact
}

type threadFact struct {
	id      string
	version int64
	ok      bool
}

type threadVersion struct {
	id string
	v  int64
}

// commitExists reports whether id is the empty root, a commit of the
// batch, or one the store holds.
func (pl *planner) commitExists(id string) (bool, error) {
	if id == "" || pl.newCommits.has(id) || pl.known.has(id) {
		return true, nil
	}
	ok, err := pl.f.Commit(pl.ctx, id)
	if ok {
		pl.known.add(id)
	}
	return ok, err
}

// stored returns a thread's version in the store, before the batch.
func (pl *planner) stored(id string) (int64, bool, error) {
	for _, t := range pl.facts {
		if t.id == id {
			return t.version, t.ok, nil
		}
	}
	v, head, ok, err := pl.f.Thread(pl.ctx, id)
	if err != nil {
		return 0, false, err
	}
	if ok && head != "" {
		pl.known.add(head) // a head exists: the store keeps what it points to
	}
	pl.facts = append(pl.facts, threadFact{id, v, ok})
	return v, ok, nil
}

// lookup returns a thread's version as the batch leaves it so far.
func (pl *planner) lookup(id string) (int64, bool, error) {
	for i := len(pl.version) - 1; i >= 0; i-- {
		if pl.version[i].id == id {
			return pl.version[i].v, pl.version[i].v > 0, nil
		}
	}
	return pl.stored(id)
}

func (pl *planner) run(b *Batch) error {
	p := pl.p
	if n := len(b.Commits); n > len(p.newRefs) {
		p.NewRefs = make([]int64, n)
	} else {
		p.NewRefs = p.newRefs[:n]
	}
	p.Refs = p.refs[:0]
	// A document's load or a copy makes thousands of commits: past a few,
	// the lookups below go through maps.
	var byID map[string]int
	if len(b.Commits) > 8 {
		byID = make(map[string]int, len(b.Commits))
	}
	var refAt map[string]int
	// ref counts one reference to id, which exists: in the batch or stored.
	ref := func(id string) {
		if id == "" {
			return
		}
		if pl.newCommits.has(id) {
			if byID != nil {
				p.NewRefs[byID[id]]++
				return
			}
			for i, c := range b.Commits {
				if c.ID == id {
					p.NewRefs[i]++
					return
				}
			}
		}
		if refAt != nil {
			if i, ok := refAt[id]; ok {
				p.Refs[i].N++
				return
			}
		} else {
			for i := range p.Refs {
				if p.Refs[i].Commit == id {
					p.Refs[i].N++
					return
				}
			}
		}
		p.Refs = append(p.Refs, RefDelta{Commit: id, N: 1})
		if refAt == nil && len(p.Refs) > 8 {
			refAt = make(map[string]int, 2*len(p.Refs))
			for i, r := range p.Refs {
				refAt[r.Commit] = i
			}
		} else if refAt != nil {
			refAt[id] = len(p.Refs) - 1
		}
	}

	for _, c := range b.Commits {
		if c == nil {
			return fmt.Errorf("a nil commit: %w", ErrInvalid)
		}
		if c.ID == "" || pl.newCommits.has(c.ID) {
			return fmt.Errorf("commit %q exists: %w", c.ID, ErrConflict)
		}
		if ok, err := pl.f.Commit(pl.ctx, c.ID); err != nil {
			return err
		} else if ok {
			return fmt.Errorf("commit %q exists: %w", c.ID, ErrConflict)
		}
		if ok, err := pl.commitExists(c.Parent); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("commit %q: parent %q: %w", c.ID, c.Parent, ErrNotFound)
		}
		ref(c.Parent)
		pl.newCommits.add(c.ID)
		if byID != nil {
			byID[c.ID] = len(byID)
		}
	}
	for _, cr := range b.Create {
		r := cr.Record
		if r == nil || r.ID == "" {
			return fmt.Errorf("create: no thread id: %w", ErrInvalid)
		}
		if _, ok, err := pl.lookup(r.ID); err != nil {
			return err
		} else if ok {
			return fmt.Errorf("thread %q exists: %w", r.ID, ErrConflict)
		}
		if err := cr.Validate(); err != nil {
			return err
		}
		if ok, err := pl.commitExists(r.Head); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("thread %q: head %q: %w", r.ID, r.Head, ErrNotFound)
		}
		for _, e := range cr.History {
			if ok, err := pl.commitExists(e.Commit); err != nil {
				return err
			} else if !ok {
				return fmt.Errorf("thread %q: history commit %q: %w", r.ID, e.Commit, ErrNotFound)
			}
		}
		if len(cr.History) == 0 {
			ref(r.Head)
		}
		for _, e := range cr.History {
			ref(e.Commit)
		}
		pl.version = append(pl.version, threadVersion{r.ID, r.Version})
		pl.created.add(r.ID)
	}
	for _, m := range b.Moves {
		v, ok, err := pl.lookup(m.Thread)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("thread %q: %w", m.Thread, ErrNotFound)
		}
		if v != m.From {
			return fmt.Errorf("thread %q is at version %d, not %d: %w", m.Thread, v, m.From, ErrConflict)
		}
		if ok, err := pl.commitExists(m.Head); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("thread %q: head %q: %w", m.Thread, m.Head, ErrNotFound)
		}
		ref(m.Head)
		pl.version = append(pl.version, threadVersion{m.Thread, m.From + 1})
	}
	// storedThread reports whether a thread existed before the batch:
	// checkpoints are dropped, and threads deleted, only there.
	storedThread := func(id string) (int64, bool, error) {
		if pl.created.has(id) {
			return 0, false, nil
		}
		return pl.stored(id)
	}
	var dropped, added set[CheckpointKey]
	if n := len(b.DropCheckpoints); n > 0 {
		p.DropCommits = make([]string, 0, n)
	}
	for _, k := range b.DropCheckpoints {
		if _, ok, err := storedThread(k.Thread); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("thread %q: %w", k.Thread, ErrNotFound)
		}
		commit, ok, err := pl.f.Checkpoint(pl.ctx, k.Thread, k.Name)
		if err != nil {
			return err
		}
		if !ok || dropped.has(k) {
			return fmt.Errorf("checkpoint %q of thread %q: %w", k.Name, k.Thread, ErrNotFound)
		}
		dropped.add(k)
		p.DropCommits = append(p.DropCommits, commit)
	}
	for _, cp := range b.Checkpoints {
		k := CheckpointKey{cp.Thread, cp.Name}
		if _, ok, err := pl.lookup(cp.Thread); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("thread %q: %w", cp.Thread, ErrNotFound)
		}
		if cp.Commit == "" {
			return fmt.Errorf("checkpoint %q: commit %q: %w", cp.Name, cp.Commit, ErrNotFound)
		}
		if ok, err := pl.commitExists(cp.Commit); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("checkpoint %q: commit %q: %w", cp.Name, cp.Commit, ErrNotFound)
		}
		taken := added.has(k)
		if !taken && !dropped.has(k) && !pl.created.has(cp.Thread) {
			_, ok, err := pl.f.Checkpoint(pl.ctx, cp.Thread, cp.Name)
			if err != nil {
				return err
			}
			taken = ok
		}
		if taken {
			return fmt.Errorf("checkpoint %q of thread %q exists: %w", cp.Name, cp.Thread, ErrConflict)
		}
		ref(cp.Commit)
		added.add(k)
	}
	for _, pr := range b.Prune {
		if _, ok, err := storedThread(pr.Thread); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("thread %q: %w", pr.Thread, ErrNotFound)
		}
		v, _, err := pl.lookup(pr.Thread)
		if err != nil {
			return err
		}
		if pr.Before < 1 || pr.Before > v {
			return fmt.Errorf("prune thread %q below version %d: it is at version %d: %w", pr.Thread, pr.Before, v, ErrInvalid)
		}
	}
	var deleted set[string]
	for _, d := range b.Delete {
		if _, ok, err := storedThread(d.Thread); err != nil {
			return err
		} else if !ok || deleted.has(d.Thread) {
			return fmt.Errorf("thread %q: %w", d.Thread, ErrNotFound)
		}
		v, _, err := pl.lookup(d.Thread)
		if err != nil {
			return err
		}
		deleted.add(d.Thread)
		if d.Version != 0 && v != d.Version {
			return fmt.Errorf("thread %q is at version %d, not %d: %w", d.Thread, v, d.Version, ErrConflict)
		}
	}
	return nil
}

// set is a set that allocates nothing until it holds more than a few items:
// most batches are one commit and one move.
type set[K comparable] struct {
	few  [4]K
	n    int
	many map[K]bool
}

func (s *set[K]) add(k K) {
	if s.many != nil {
		s.many[k] = true
		return
	}
	if s.n < len(s.few) {
		s.few[s.n] = k
		s.n++
		return
	}
	s.many = make(map[K]bool, 16)
	for _, x := range s.few {
		s.many[x] = true
	}
	s.many[k] = true
}

func (s *set[K]) has(k K) bool {
	if s.many != nil {
		return s.many[k]
	}
	for _, x := range s.few[:s.n] {
		if x == k {
			return true
		}
	}
	return false
}

// Validate checks that a creation's history is numbered consecutively,
// from 1 or from where a prune (retention) left it, and ends at the
// record's head and version. Stores share it.
func (cr Creation) Validate() error {
	r := cr.Record
	if len(cr.History) == 0 {
		if r.Version != 1 {
			return fmt.Errorf("thread %q: version %d without history: %w", r.ID, r.Version, ErrInvalid)
		}
		return nil
	}
	first := cr.History[0].Version
	for i, e := range cr.History {
		if first < 1 || e.Version != first+int64(i) {
			return fmt.Errorf("thread %q: history entry %d has version %d: %w", r.ID, i, e.Version, ErrInvalid)
		}
	}
	last := cr.History[len(cr.History)-1]
	if last.Version != r.Version || last.Commit != r.Head {
		return fmt.Errorf("thread %q: history ends at version %d, commit %q; record says %d, %q: %w",
			r.ID, last.Version, last.Commit, r.Version, r.Head, ErrInvalid)
	}
	return nil
}
