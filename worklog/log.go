package worklog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The files in a Log's directory. Each is written whole and atomically
// under an flock of a lock file beside it (".threads.json.lock",
// ".sessions.json.lock"); temporary files start with ".threads.json.tmp-"
// and ".sessions.json.tmp-".
const (
	// ThreadsFile holds the items: the seed's .gitmem/threads.json, a
	// JSON array of item objects, two-space indented.
	ThreadsFile = "threads.json"
	// SessionsFile holds the session records of FileSessions.
	SessionsFile = "sessions.json"
)

// DefaultDir is the seed's directory for the files, relative to a
// project's root.
const DefaultDir = ".gitmem"

// DefaultProject is the project of a Log whose Options name none.
const DefaultProject = "default"

// Options configure a Log. A nil *Options means the defaults.
type Options struct {
	// Project is the project the Log's directory belongs to; "" means
	// DefaultProject. Sessions are recorded under it.
	Project string
	// Sessions keeps the session records; nil means a FileSessions in
	// the Log's directory.
	Sessions SessionStore
	// LockTimeout is how long a write waits for the file's lock, held by
	// a writer of this or another process, before failing with
	// ErrLockTimeout. Zero means DefaultLockTimeout; a negative value
	// waits as long as the context allows.
	LockTimeout time.Duration
	// NoSync skips every fsync: writes stay atomic but may not survive a
	// power cut. For tests and benchmarks.
	NoSync bool
	// Now returns the current time, for created_at, resolved_at and the
	// 14-day window; nil means time.Now. Times are kept to the
	// millisecond, as the seed's are.
	Now func() time.Time
}

// Log is the work items of one project: the local file (dir/threads.json)
// and the session records of a SessionStore. It is safe for concurrent
// use by many goroutines and, through the file's lock, by many processes
// sharing the directory: no write is lost, and readers see whole files.
//
// Reads parse the file only when it changed since this Log last read or
// wrote it, so that a list of a large file costs a copy of its items, not
// a parse: every write counts itself in the lock file, and a reader that
// finds the count and the file's inode, size and modification time as it
// last saw them reads nothing more; otherwise it reads the file and
// parses it if its content (a 64-bit hash) differs. A writer that does
// not take the lock (the seed's own code) is seen by the change of the
// file, but can lose updates in any case.
type Log struct {
	dir      string
	project  string
	sessions SessionStore
	// remote is set when sessions is not the local FileSessions: its
	// calls count as network calls.
	remote bool
	now    func() time.Time
	items  itemStore
	// shared is set on the Logs of a server (see Logs): many callers
	// share them, so there is no current session to fall back on.
	shared bool

	mu      sync.Mutex
	current string // the session SessionStart started, "" if none
}

// Open returns the Log of the items in directory dir (".gitmem" in a
// project, say), which is created at the first write. An existing
// threads.json is read as it is and written back in its own form. opts
// may be nil.
func Open(dir string, opts *Options) (*Log, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.Sessions == nil {
		o.Sessions = NewFileSessions(dir, &o)
	}
	l := logOf(o)
	l.dir = dir
	l.items = &fileItems{f: newLockedFile(dir, ThreadsFile, &o), clock: l.clock}
	return l, nil
}

// withDefaults returns a copy of the options (nil: the defaults) with
// the default project and clock filled in, checked.
func (opts *Options) withDefaults() (Options, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Project == "" {
		o.Project = DefaultProject
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, checkProject(o.Project)
}

// logOf returns the Log of options o (withDefaults), without its items:
// its session calls count as network calls unless o.Sessions is a
// FileSessions.
func logOf(o Options) *Log {
	_, local := o.Sessions.(*FileSessions)
	return &Log{project: o.Project, sessions: o.Sessions, remote: !local, now: o.Now}
}

// Dir returns the Log's directory.
func (l *Log) Dir() string { return l.dir }

// Project returns the Log's project.
func (l *Log) Project() string { return l.project }

// Session returns the id of the session SessionStart started and
// SessionClose has not closed, "" if none. Create and Resolve record it
// as the item's source_session and resolved_by_session when their options
// name no session.
func (l *Log) Session() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.current
}

// clock returns the current time in UTC, to the millisecond.
func (l *Log) clock() time.Time {
	return l.now().UTC().Truncate(time.Millisecond)
}

func (l *Log) session(given string) (string, error) {
	if given == "" {
		if l.shared {
			return "", nil
		}
		return l.Session(), nil
	}
	return given, checkSessionID(given)
}

// ListOptions filter List.
type ListOptions struct {
	// Status lists the items with that status; "" means StatusOpen.
	Status Status
	// IncludeResolved lists every item, open and resolved, whatever
	// Status says.
	IncludeResolved bool
	// Project, if neither "" nor the Log's project, lists the items of
	// another project: those that its last closed sessions carry (as
	// session_start would aggregate them, without a local file), read
	// from the SessionStore. "" or the Log's own project lists the local
	// file.
	Project string
}

// ClosedSessions returns the project's closed sessions, newest close
// first: at most limit of them (DefaultMaxSessions when limit is 0 or
// less), each with the items it carried when it closed.
func (l *Log) ClosedSessions(ctx context.Context, limit int) ([]Session, error) {
	ss, err := l.sessions.ClosedSessions(ctx, ClosedOptions{Project: l.project, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("worklog: sessions of %s: %w", l.project, err)
	}
	return ss, nil
}

// List lists the items, oldest first, without those that record project
// state. TotalOpen and TotalResolved count them all.
func (l *Log) List(ctx context.Context, opts ListOptions) (*ListResult, error) {
	start := time.Now()
	switch opts.Status {
	case "", StatusOpen, StatusResolved:
	default:
		return nil, fmt.Errorf("worklog: status %q: want open or resolved: %w", opts.Status, ErrInvalid)
	}
	res := &ListResult{Threads: []Item{}}
	add := func(it Item, skip bool) {
		if skip {
			return
		}
		if it.Open() {
			res.TotalOpen++
		} else {
			res.TotalResolved++
		}
		if opts.IncludeResolved || it.Open() == (opts.Status != StatusResolved) {
			res.Threads = append(res.Threads, it)
		}
	}
	var (
		hit   bool
		calls int
	)
	if opts.Project != "" && opts.Project != l.project {
		if err := checkProject(opts.Project); err != nil {
			return nil, err
		}
		now := l.clock()
		ss, err := l.sessions.ClosedSessions(ctx, ClosedOptions{Project: opts.Project, Since: now.Add(-DefaultMaxAge), Limit: DefaultMaxSessions})
		if l.remote {
			calls++
		}
		if err != nil {
			return nil, fmt.Errorf("worklog: sessions of %s: %w", opts.Project, err)
		}
		for _, it := range Aggregate(nil, ss, AggregateOptions{Now: now, Project: opts.Project}).Items {
			add(it, it.ProjectState())
		}
	} else {
		s, h, err := l.items.load(ctx)
		if err != nil {
			return nil, err
		}
		hit = h
		v := s.listing(opts)
		res.Threads, res.TotalOpen, res.TotalResolved = v.items, v.open, v.resolved
	}
	sortByCreation(res.Threads)
	res.Performance = performance(start, len(res.Threads), hit, calls)
	return res, nil
}

// Item returns the item with the id, one that records project state
// too (which List leaves out), or an ErrNotFound error.
func (l *Log) Item(ctx context.Context, id string) (Item, error) {
	s, _, err := l.items.load(ctx)
	if err != nil {
		return Item{}, err
	}
	if i := indexID(s.entries, id); i >= 0 {
		return s.entries[i].it, nil
	}
	return Item{}, fmt.Errorf("worklog: no item has the id %q: %w", shorten(id, 80), ErrNotFound)
}

// listing is a list of a snapshot's items, as List returns it.
type listing struct {
	items          []Item
	open, resolved int
}

// listings caches a snapshot's listings, one per filter: the items do not
// change, so lists share them rather than copy 10,000 items per call
// (whose garbage made the tail of list_threads).
type listings struct {
	mu sync.Mutex
	by [3]*listing // open, resolved, all
}

// listing returns the snapshot's items that opts list, sorted, without
// project state and later copies of an id. It is cached when the
// snapshot has a cache; its items are shared, so its capacity is clipped.
func (s *snapshot) listing(opts ListOptions) *listing {
	k := 0
	switch {
	case opts.IncludeResolved:
		k = 2
	case opts.Status == StatusResolved:
		k = 1
	}
	if s.lists != nil {
		s.lists.mu.Lock()
		defer s.lists.mu.Unlock()
		if v := s.lists.by[k]; v != nil {
			return v
		}
	}
	v := &listing{items: make([]Item, 0, len(s.entries))}
	for _, e := range s.entries {
		if e.ps || e.dup {
			continue
		}
		if e.it.Open() {
			v.open++
		} else {
			v.resolved++
		}
		if k == 2 || e.it.Open() == (k == 0) {
			v.items = append(v.items, e.it)
		}
	}
	sortByCreation(v.items)
	v.items = slices.Clip(v.items)
	if s.lists != nil {
		s.lists.by[k] = v
	}
	return v
}

// sortByCreation sorts items by created_at, stably.
func sortByCreation(items []Item) {
	cmp := func(a, b Item) int { return a.CreatedAt.Compare(b.CreatedAt) }
	if !slices.IsSortedFunc(items, cmp) {
		slices.SortStableFunc(items, cmp)
	}
}

// CreateOptions are the input of Create.
type CreateOptions struct {
	// Text says what is open: not blank, at most MaxTextLen characters.
	// It is normalized as a plain string (Normalize): an old "t-xxxx: "
	// prefix is stripped, the JSON of an item gives its text, white space
	// around it is trimmed.
	Text string
	// Session is the item's source_session; "" means the Log's current
	// session (Session), if any.
	Session string
}

// Create adds an open item, unless an open item with the same normalized
// text is there already: that one is returned, Deduplicated.
func (l *Log) Create(ctx context.Context, opts CreateOptions) (*CreateResult, error) {
	start := time.Now()
	session, err := l.session(opts.Session)
	if err != nil {
		return nil, err
	}
	if err := checkLen("text", opts.Text, 4*MaxTextLen); err != nil {
		return nil, err
	}
	now := l.clock()
	n := normalizer{strict: true}
	r, err := n.str(opts.Text, 0)
	if err != nil {
		return nil, err
	}
	if err := checkLen("text", r.it.Text, MaxTextLen); err != nil {
		return nil, err
	}
	it := Item{ID: NewID(), Text: r.it.Text, Status: StatusOpen, CreatedAt: now, SourceSession: session}
	key := NormalizeText(it.Text)
	res := &CreateResult{}
	hit, err := l.items.update(ctx, func(s *snapshot) ([]*entry, bool, error) {
		for _, e := range s.entries {
			if e.it.Open() && e.textKey() == key {
				res.Thread, res.Deduplicated = e.it, true
				return s.entries, false, nil
			}
		}
		for hasID(s.entries, it.ID) {
			it.ID = NewID()
		}
		res.Thread = it
		e := newEntry(it)
		e.key = key
		return append(slices.Clip(s.entries), e), true, nil
	})
	if err != nil {
		return nil, err
	}
	res.Performance = performance(start, 1, hit, 0)
	return res, nil
}

func hasID(entries []*entry, id string) bool {
	for _, e := range entries {
		if e.it.ID == id {
			return true
		}
	}
	return false
}

// ResolveOptions say which item Resolve resolves, and how.
type ResolveOptions struct {
	// ID is the item's exact id, or "#N" for the Nth open item (oldest
	// first, as List orders them).
	ID string
	// TextMatch, used when ID is "" or names no item, is the exact id of
	// an item, "#N", or a text that the item's text contains, case
	// ignored, white space around it trimmed.
	TextMatch string
	// Note is the resolution note, at most MaxNoteLen characters. A note
	// that says "duplicate of t-xxxxxxxx" resolves that item too, if it
	// is open.
	Note string
	// Session is the resolving session; "" means the Log's current
	// session (Session), if any.
	Session string
}

// Resolve resolves an item: by exact id (which wins), by #N, or by text.
// A text match considers the open items first: one match is resolved,
// several are an *AmbiguousError that lists them; with no open match a
// single resolved match is reported as already resolved, several are
// ambiguous; no match at all is ErrNotFound. Resolving records
// resolved_at, the session and the note. An item resolved already is
// reported (AlreadyResolved) and not changed. Nothing changes on error.
func (l *Log) Resolve(ctx context.Context, opts ResolveOptions) (*ResolveResult, error) {
	start := time.Now()
	session, err := l.session(opts.Session)
	if err != nil {
		return nil, err
	}
	if err := checkLen("resolution note", opts.Note, MaxNoteLen); err != nil {
		return nil, err
	}
	if strings.TrimSpace(opts.ID) == "" && strings.TrimSpace(opts.TextMatch) == "" {
		return nil, fmt.Errorf("worklog: resolve needs an id or a text to match: %w", ErrInvalid)
	}
	now := l.clock()
	res := &ResolveResult{Success: true}
	hit, err := l.items.update(ctx, func(s *snapshot) ([]*entry, bool, error) {
		*res = ResolveResult{Success: true}
		t, err := findTarget(s.entries, opts)
		if err != nil {
			return nil, false, err
		}
		target := s.entries[t].it
		if !target.Open() {
			res.ResolvedThread, res.AlreadyResolved = target, true
			res.Message = fmt.Sprintf("%s was already resolved", target.ID)
			if !target.ResolvedAt.IsZero() {
				res.Message += " on " + formatTime(target.ResolvedAt)
			}
			res.Message += "; nothing changed"
			return s.entries, false, nil
		}
		out := slices.Clone(s.entries)
		res.ResolvedThread = resolveID(out, target.ID, now, session, opts.Note)
		res.Message = "resolved " + target.ID
		for _, id := range duplicatesIn(opts.Note) {
			if id == target.ID {
				continue
			}
			if isOpen(out, id) {
				res.AlsoResolved = append(res.AlsoResolved, resolveID(out, id, now, session, "resolved with its duplicate "+target.ID))
				res.Message += " and its duplicate " + id
			}
		}
		return out, true, nil
	})
	if err != nil {
		return nil, err
	}
	res.Performance = performance(start, 1+len(res.AlsoResolved), hit, 0)
	return res, nil
}

// resolveID resolves every open copy of the item id in entries and
// returns it resolved.
func resolveID(entries []*entry, id string, now time.Time, session, note string) Item {
	var done Item
	for i, e := range entries {
		if e.it.ID != id || !e.it.Open() {
			continue
		}
		it := e.it
		it.Status, it.ResolvedAt = StatusResolved, now
		if session != "" {
			it.ResolvedBySession = session
		}
		if note != "" {
			it.ResolutionNote = note
		}
		entries[i] = e.with(it)
		if done.ID == "" {
			done = it
		}
	}
	return done
}

// isOpen reports whether an entry with the id is open.
func isOpen(entries []*entry, id string) bool {
	for _, e := range entries {
		if e.it.ID == id && e.it.Open() {
			return true
		}
	}
	return false
}

var duplicateOf = regexp.MustCompile(`(?i)\bduplicate\s+of\s+(t-[0-9a-f]{8})\b`)

// duplicatesIn returns the ids a note names as "duplicate of t-xxxxxxxx",
// in lower case.
func duplicatesIn(note string) []string {
	var ids []string
	for _, m := range duplicateOf.FindAllStringSubmatch(note, -1) {
		if id := strings.ToLower(m[1]); !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// findTarget returns the index of the entry opts names.
func findTarget(entries []*entry, opts ResolveOptions) (int, error) {
	id, text := strings.TrimSpace(opts.ID), strings.TrimSpace(opts.TextMatch)
	if id != "" {
		if n, ok := position(id); ok {
			return nth(entries, n, id)
		}
		if i := indexID(entries, id); i >= 0 {
			return i, nil
		}
		if text == "" {
			return -1, fmt.Errorf("worklog: no item has the id %q: %w", shorten(id, 80), ErrNotFound)
		}
	}
	if n, ok := position(text); ok {
		return nth(entries, n, text)
	}
	if i := indexID(entries, text); i >= 0 {
		return i, nil
	}
	q := strings.ToLower(text)
	var open, resolved []int
	for i, e := range entries {
		if e.ps || !strings.Contains(e.lowerText(), q) {
			continue
		}
		if e.it.Open() {
			open = addDistinct(entries, open, i)
		} else {
			resolved = addDistinct(entries, resolved, i)
		}
	}
	for _, c := range [][]int{open, resolved} {
		switch {
		case len(c) == 1:
			return c[0], nil
		case len(c) > 1:
			amb := &AmbiguousError{Query: opts.TextMatch}
			for _, i := range c {
				amb.Candidates = append(amb.Candidates, entries[i].it)
			}
			return -1, amb
		}
	}
	return -1, fmt.Errorf("worklog: no item's text contains %q: %w", shorten(text, 80), ErrNotFound)
}

// addDistinct appends i to list unless an entry with its id is there.
func addDistinct(entries []*entry, list []int, i int) []int {
	for _, j := range list {
		if entries[j].it.ID == entries[i].it.ID {
			return list
		}
	}
	return append(list, i)
}

func indexID(entries []*entry, id string) int {
	for i, e := range entries {
		if e.it.ID == id {
			return i
		}
	}
	return -1
}

// position parses "#N", N a positive decimal number.
func position(s string) (int, bool) {
	if len(s) < 2 || s[0] != '#' {
		return 0, false
	}
	for _, c := range s[1:] {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s[1:])
	if err != nil {
		n = -1 // too large: out of range
	}
	return n, true
}

// nth returns the index of the Nth open item, oldest first, as List
// orders them.
func nth(entries []*entry, n int, query string) (int, error) {
	type pos struct {
		i  int
		at time.Time
	}
	var open []pos
	for i, e := range entries {
		if e.it.Open() && !e.ps && !e.dup {
			open = append(open, pos{i, e.it.CreatedAt})
		}
	}
	if n < 1 || n > len(open) {
		switch len(open) {
		case 0:
			return -1, fmt.Errorf("worklog: %s: there are no open items: %w", query, ErrNotFound)
		case 1:
			return -1, fmt.Errorf("worklog: %s: there is 1 open item: %w", query, ErrNotFound)
		}
		return -1, fmt.Errorf("worklog: %s: there are %d open items: %w", query, len(open), ErrNotFound)
	}
	slices.SortStableFunc(open, func(a, b pos) int { return a.at.Compare(b.at) })
	return open[n-1].i, nil
}

// StartOptions are the input of SessionStart.
type StartOptions struct {
	// SessionID names the session; "" makes a new UUID.
	SessionID string
}

// SessionStart starts a session: it records it in the SessionStore,
// aggregates the items that the project's last closed sessions carry
// (Aggregate: at most 5, closed within 14 days, newest first) with the
// local file, and writes the merged list back to the file. The session
// becomes the Log's current one (Session).
func (l *Log) SessionStart(ctx context.Context, opts StartOptions) (*StartResult, error) {
	start := time.Now()
	id := opts.SessionID
	if id == "" {
		id = newSessionID()
	} else if err := checkSessionID(id); err != nil {
		return nil, err
	}
	now := l.clock()
	calls := 0
	if l.remote {
		calls = 2
	}
	if err := l.sessions.StartSession(ctx, Session{ID: id, Project: l.project, StartedAt: now}); err != nil {
		return nil, fmt.Errorf("worklog: start session %s: %w", id, err)
	}
	closed, err := l.sessions.ClosedSessions(ctx, ClosedOptions{Project: l.project, Since: now.Add(-DefaultMaxAge), Limit: DefaultMaxSessions + 1})
	if err != nil {
		return nil, fmt.Errorf("worklog: sessions of %s: %w", l.project, err)
	}
	closed = slices.DeleteFunc(closed, func(s Session) bool { return s.ID == id })
	var agg Aggregation
	hit, err := l.items.update(ctx, func(s *snapshot) ([]*entry, bool, error) {
		local := make([]Item, len(s.entries))
		for i, e := range s.entries {
			local[i] = e.it
		}
		var src []int
		agg, src = aggregate(local, closed, AggregateOptions{Now: now, Project: l.project})
		out := make([]*entry, len(agg.Items))
		changed := len(out) != len(s.entries)
		for i, it := range agg.Items {
			k := src[i]
			switch {
			case k < 0:
				out[i], changed = newEntry(it), true
			case s.entries[k].it.equal(it):
				out[i], changed = s.entries[k], changed || k != i
			default:
				e := s.entries[k]
				out[i], changed = e.with(it), true
			}
		}
		return out, changed, nil
	})
	if err != nil {
		return nil, err
	}
	if !l.shared {
		l.mu.Lock()
		l.current = id
		l.mu.Unlock()
	}
	res := &StartResult{
		SessionID:          id,
		Project:            l.project,
		OpenThreads:        agg.Open(),
		RecentlyResolved:   agg.RecentlyResolved,
		ProjectState:       agg.ProjectState,
		SessionsAggregated: len(agg.Sessions),
	}
	for _, p := range []*[]Item{&res.OpenThreads, &res.RecentlyResolved, &res.ProjectState} {
		if *p == nil {
			*p = []Item{}
		}
	}
	sortByCreation(res.OpenThreads)
	res.Performance = performance(start, len(res.OpenThreads), hit, calls)
	return res, nil
}

// CloseOptions are the input of SessionClose.
type CloseOptions struct {
	// SessionID names the session, one that SessionStart started in the
	// project (ErrNotFound otherwise); "" means the Log's current
	// session, or a new UUID if there is none.
	SessionID string
	// OpenThreads are the items the session leaves open (the closing
	// payload's open_threads), each in any format Normalize reads, texts
	// at most MaxTextLen characters, all of it UTF-8 (ErrInvalid
	// otherwise). They join the local file (an item
	// that is there already is merged with it, a resolution winning).
	// nil adds nothing.
	OpenThreads []json.RawMessage
}

// SessionClose closes a session: the payload's items join the local file,
// and the session's close record, carrying the project's open items (the
// payload's first) and the items this session resolved, goes to the
// SessionStore, for the next session_start here or on another machine.
// The local file is written first; if the store then fails, calling
// SessionClose again is safe. A session named that the SessionStore has
// no record of in the project (it never started) is ErrNotFound, and
// nothing changes.
func (l *Log) SessionClose(ctx context.Context, opts CloseOptions) (*CloseResult, error) {
	start := time.Now()
	id := opts.SessionID
	switch {
	case id == "":
		if id = l.Session(); id == "" {
			id = newSessionID()
		}
	default:
		if err := checkSessionID(id); err != nil {
			return nil, err
		}
	}
	now := l.clock()
	calls := 0
	if l.remote {
		calls = 1
	}
	n := normalizer{opts: NormalizeOptions{Session: id}, strict: true}
	payload := make([]normalized, 0, len(opts.OpenThreads))
	for i, raw := range opts.OpenThreads {
		r, err := n.value(raw, 0)
		if err != nil {
			return nil, fmt.Errorf("worklog: open_threads[%d]: %w", i, err)
		}
		if err := checkLen(fmt.Sprintf("open_threads[%d] text", i), r.it.Text, MaxTextLen); err != nil {
			return nil, err
		}
		if err := checkLen(fmt.Sprintf("open_threads[%d] resolution note", i), r.it.ResolutionNote, MaxNoteLen); err != nil {
			return nil, err
		}
		payload = append(payload, r)
	}
	if opts.SessionID != "" {
		// A session named is one that started (the current session, or a
		// new one, is recorded by its close).
		_, err := l.sessions.Session(ctx, l.project, id)
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("worklog: session %s was never started in project %q (close the id a session start gave): %w", id, shorten(l.project, 80), ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("worklog: close session %s: %w", id, err)
		}
		if l.remote {
			calls++
		}
	}
	var record, created []Item
	hit, err := l.items.update(ctx, func(s *snapshot) ([]*entry, bool, error) {
		record, created = nil, nil
		m := newMerger(len(s.entries) + len(payload))
		for i, e := range s.entries {
			m.put(e.it, e.textKey(), i)
		}
		var (
			rec   = newMerger(len(payload))
			state []Item
			mine  []int // where the payload's items are in m.out
		)
		for _, p := range payload {
			it := p.it
			if it.ProjectState() {
				if it.CreatedAt.IsZero() {
					it.CreatedAt = now
				}
				state = append(state, it)
				continue
			}
			if p.freshID {
				for m.hasID(it.ID) {
					it.ID = NewID()
				}
			}
			i := m.add(it, -1)
			if m.out[i].CreatedAt.IsZero() {
				m.out[i].CreatedAt = now
			}
			mine = append(mine, i)
		}
		inRec := make([]bool, len(m.out))
		for _, i := range mine {
			rec.addKeyed(m.out[i], m.keys[i], 0)
			inRec[i] = true
		}
		for _, it := range state {
			rec.add(it, 0)
		}
		changed := false
		out := make([]*entry, len(m.out))
		for i, it := range m.out {
			switch k := m.src[i]; {
			case k < 0:
				out[i], changed = newEntry(it), true
				created = append(created, it)
			case s.entries[k].it.equal(it):
				out[i] = s.entries[k]
			default:
				e := s.entries[k]
				out[i], changed = e.with(it), true
			}
		}
		for i, it := range m.out {
			if it.ProjectState() || inRec[i] {
				continue
			}
			if it.Open() || it.ResolvedBySession == id {
				rec.addKeyed(it, m.keys[i], 0)
			}
		}
		record = rec.out
		return out, changed, nil
	})
	if err != nil {
		return nil, err
	}
	sess := Session{ID: id, Project: l.project, StartedAt: now, ClosedAt: now, OpenThreads: make([]json.RawMessage, len(record))}
	for i, it := range record {
		sess.OpenThreads[i] = appendItem(nil, it, "")
	}
	if err := l.sessions.CloseSession(ctx, sess); err != nil {
		return nil, fmt.Errorf("worklog: close session %s: %w", id, err)
	}
	l.mu.Lock()
	if l.current == id {
		l.current = ""
	}
	l.mu.Unlock()
	res := &CloseResult{SessionID: id, Project: l.project, ClosedAt: now, OpenThreads: []Item{}, Created: created}
	for _, it := range record {
		if it.Open() && !it.ProjectState() {
			res.OpenThreads = append(res.OpenThreads, it)
		}
	}
	if res.Created == nil {
		res.Created = []Item{}
	}
	res.Performance = performance(start, len(record), hit, calls)
	return res, nil
}
