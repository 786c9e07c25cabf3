package worklog

import (
	"slices"
	"time"
)

// Merge merges lists of items into one, in order, each item once: a later
// item that is the same as an earlier one is dropped, except that if the
// later one is resolved and the earlier one open, the earlier one takes
// its resolution (status, resolved_at, resolved_by_session,
// resolution_note). The first seen keeps its place, id, text and
// created_at.
//
// Two items are the same when they have the same id, or when their texts
// have the same NormalizeText key — unless one was created after the
// other was resolved: that is the work coming back, a new item. An item
// whose created_at is zero (unknown) is never taken for such a return.
//
// Items that record project state are merged like the others; Aggregate
// keeps them apart.
func Merge(lists ...[]Item) []Item {
	var m merger
	for _, l := range lists {
		for _, it := range l {
			m.add(it, 0)
		}
	}
	return m.out
}

// merger is the state of a Merge. Each add costs one NormalizeText and a
// few map operations, so merging n items is O(n).
type merger struct {
	out []Item
	// src is, for each item of out, the tag it was added with, and keys
	// its NormalizeText key.
	src    []int
	keys   []string
	byID   map[string]int
	byText map[string][]int
	// kept holds the ids of the items keep appended, which merge with
	// nothing but still take their ids (hasID).
	kept map[string]struct{}
}

// find returns the index in out of the item that it is the same as.
func (m *merger) find(it Item, key string) (int, bool) {
	if i, ok := m.byID[it.ID]; ok {
		return i, true
	}
	for _, i := range m.byText[key] {
		if !returns(m.out[i], it) && !returns(it, m.out[i]) {
			return i, true
		}
	}
	return -1, false
}

// returns reports whether b was created after a was resolved.
func returns(a, b Item) bool {
	return !a.Open() && !a.ResolvedAt.IsZero() && !b.CreatedAt.IsZero() && b.CreatedAt.After(a.ResolvedAt)
}

// newMerger returns a merger with room for n items.
func newMerger(n int) *merger {
	return &merger{
		out: make([]Item, 0, n), src: make([]int, 0, n), keys: make([]string, 0, n),
		byID: make(map[string]int, n), byText: make(map[string][]int, n),
	}
}

// add merges it, tagged src, and returns its index in out.
func (m *merger) add(it Item, src int) int { return m.addKeyed(it, NormalizeText(it.Text), src) }

// addKeyed is add for an item whose NormalizeText key is known.
func (m *merger) addKeyed(it Item, key string, src int) int {
	if m.byID == nil {
		m.byID, m.byText = map[string]int{}, map[string][]int{}
	}
	i, ok := m.find(it, key)
	if !ok {
		i = len(m.out)
		m.out = append(m.out, it)
		m.src = append(m.src, src)
		m.keys = append(m.keys, key)
	} else if k := &m.out[i]; k.Open() && !it.Open() {
		k.Status, k.ResolvedAt = StatusResolved, it.ResolvedAt
		k.ResolvedBySession, k.ResolutionNote = it.ResolvedBySession, it.ResolutionNote
	}
	if _, ok := m.byID[it.ID]; !ok {
		m.byID[it.ID] = i
	}
	if !slices.Contains(m.byText[key], i) {
		m.byText[key] = append(m.byText[key], i)
	}
	return i
}

// keep appends it, tagged src, without merging it with anything.
func (m *merger) keep(it Item, src int) {
	m.out = append(m.out, it)
	m.src = append(m.src, src)
	m.keys = append(m.keys, NormalizeText(it.Text))
	if m.kept == nil {
		m.kept = map[string]struct{}{}
	}
	m.kept[it.ID] = struct{}{}
}

// The defaults of AggregateOptions.
const (
	DefaultMaxSessions = 5
	DefaultMaxAge      = 14 * 24 * time.Hour
)

// AggregateOptions configure Aggregate and SelectSessions.
type AggregateOptions struct {
	// Now is the time the window ends at; zero means time.Now().
	Now time.Time
	// Project, if not "", leaves out the sessions of other projects.
	Project string
	// MaxSessions is how many closed sessions are aggregated, newest
	// first; zero means DefaultMaxSessions.
	MaxSessions int
	// MaxAge is how long ago a session may have closed and still count;
	// zero means DefaultMaxAge (14 days).
	MaxAge time.Duration
}

func (o AggregateOptions) withDefaults() AggregateOptions {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultMaxAge
	}
	return o
}

// SelectSessions returns the sessions that session_start aggregates: the
// closed ones (with a close record) of the project, closed at most MaxAge
// before Now, newest close first, at most MaxSessions of them. Sessions
// closed at the same instant keep their order.
func SelectSessions(sessions []Session, opts AggregateOptions) []Session {
	opts = opts.withDefaults()
	since := opts.Now.Add(-opts.MaxAge)
	var out []Session
	for _, s := range sessions {
		if s.Closed() && !s.ClosedAt.Before(since) && (opts.Project == "" || s.Project == opts.Project) {
			out = append(out, s)
		}
	}
	return newestClosed(out, opts.MaxSessions)
}

// Aggregation is what Aggregate returns.
type Aggregation struct {
	// Items is the merged list, to be written back to the local file: the
	// local items, without duplicates, then the sessions' new ones. The
	// local items that record project state stay where they are.
	Items []Item
	// ProjectState are the items whose text starts with
	// ProjectStatePrefix: the sessions' (newest session first), then the
	// local file's (newest first), one per text.
	ProjectState []Item
	// RecentlyResolved are the items of Items resolved within MaxAge,
	// newest resolution first.
	RecentlyResolved []Item
	// Sessions are the sessions that were aggregated, newest first.
	Sessions []Session
}

// Open returns the open items of Items, without project state.
func (a Aggregation) Open() []Item {
	var out []Item
	for _, it := range a.Items {
		if it.Open() && !it.ProjectState() {
			out = append(out, it)
		}
	}
	return out
}

// Aggregate merges the local items with the items carried by the sessions
// SelectSessions picks, for session_start. The local items come first;
// then each session's open_threads, newest session first, each value
// normalized (Normalize, with the session as source and its close as the
// created_at of values without one; values that are no item are
// skipped). Items whose text starts with ProjectStatePrefix are left out
// of the merge and returned as ProjectState. The rest are merged as
// Merge does: deduplicated by id and by normalized text, first seen wins,
// a resolution wins over open.
func Aggregate(local []Item, sessions []Session, opts AggregateOptions) Aggregation {
	a, _ := aggregate(local, sessions, opts)
	return a
}

// aggregate is Aggregate that also says where each of a.Items came from:
// its index in local, or -1 for an item from a session.
func aggregate(local []Item, sessions []Session, opts AggregateOptions) (Aggregation, []int) {
	opts = opts.withDefaults()
	a := Aggregation{Sessions: SelectSessions(sessions, opts)}
	var m merger
	var localState []Item
	for i, it := range local {
		if it.ProjectState() {
			m.keep(it, i)
			localState = append(localState, it)
			continue
		}
		m.add(it, i)
	}
	n := normalizer{newID: func() string {
		for {
			if id := NewID(); !m.hasID(id) {
				return id
			}
		}
	}}
	var state merger
	for k, s := range a.Sessions {
		n.opts = NormalizeOptions{Session: s.ID}
		for _, raw := range s.OpenThreads {
			r, err := n.value(raw, 0)
			if err != nil {
				continue
			}
			if r.it.ProjectState() {
				if r.it.CreatedAt.IsZero() {
					r.it.CreatedAt = s.ClosedAt
				}
				state.add(r.it, 0)
				continue
			}
			m.add(r.it, -1-k)
		}
	}
	for _, it := range slices.Backward(localState) {
		state.add(it, 0)
	}
	a.ProjectState = state.out
	for i := range m.out {
		if k := m.src[i]; k < 0 {
			m.src[i] = -1
			if m.out[i].CreatedAt.IsZero() {
				m.out[i].CreatedAt = a.Sessions[-1-k].ClosedAt
			}
		}
	}
	a.Items = m.out
	since := opts.Now.Add(-opts.MaxAge)
	for _, it := range a.Items {
		if !it.Open() && !it.ProjectState() && !it.ResolvedAt.Before(since) {
			a.RecentlyResolved = append(a.RecentlyResolved, it)
		}
	}
	slices.SortStableFunc(a.RecentlyResolved, func(x, y Item) int { return y.ResolvedAt.Compare(x.ResolvedAt) })
	return a, m.src
}

// hasID reports whether an item of out has the id: one lookup in each of
// the two indexes, so that finding a fresh id for each of n new items
// costs O(n) in all.
func (m *merger) hasID(id string) bool {
	if _, ok := m.byID[id]; ok {
		return true
	}
	_, ok := m.kept[id]
	return ok
}

// put appends it, whose NormalizeText key is key, tagged src, and indexes
// it without merging it with the items before it.
func (m *merger) put(it Item, key string, src int) {
	if m.byID == nil {
		m.byID, m.byText = map[string]int{}, map[string][]int{}
	}
	i := len(m.out)
	m.out = append(m.out, it)
	m.src = append(m.src, src)
	m.keys = append(m.keys, key)
	if _, ok := m.byID[it.ID]; !ok {
		m.byID[it.ID] = i
	}
	m.byText[key] = append(m.byText[key], i)
}
