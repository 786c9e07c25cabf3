package thread

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/loomthreads/loom/thread/store"
)

// The labels that hold a thread's own retention (see Retention). They are
// ordinary labels — set by SetRetention, or by anyone who sets labels, such
// as the HTTP API — so every store keeps them, copies and forks inherit
// them, and a listing can filter on them.
const (
	LabelTTL      = "loom.ttl"       // a duration, such as "720h"; "0" never expires
	LabelKeepLast = "loom.keep_last" // a count of versions; "0" keeps them all
	LabelKeepFor  = "loom.keep_for"  // a duration; "0" keeps them all
)

// StateLinks is the state key under which a thread names, for each thread
// linked to it (CreateOptions.Parent), the oldest version of that thread
// which this version of it, or any later one, may need: a JSON object of
// thread id to version, in which a key that ends in "." is a group, its
// value an object of the rest of each id to its version
// ({"wf.": {"main": 3, "writer": 7}} names wf.main and wf.writer), so that
// thousands of ids that share a prefix do not repeat it. Package workflow
// keeps it for its sub-threads,
// whose versions its own versions record (a workflow restored to a
// version moves each sub-thread back to the version recorded there).
//
// DB.GC keeps those versions of a linked thread, and every one after:
// its history limits drop only versions that no version its parent keeps
// (the oldest in the parent's history, and the parent's checkpoints) may
// need. A linked thread whose parent keeps a version whose state has no
// StateLinks keeps its whole history while that version is kept. A
// thread that the head state of a workflow thread (KindWorkflow) names,
// without being linked to it — a workflow's fork forks the source's
// sub-threads — counts as linked to that workflow: it does not expire
// while the workflow lives, and keeps what the workflow's kept versions
// name.
const StateLinks = "loom.links"

// Retention says how long a thread is kept, and how much of its history.
// Every thread keeps every version until a retention says otherwise:
// that is what makes time travel free, and what a long-lived store must
// bound.
//
// A thread's retention is its own labels (LabelTTL, LabelKeepLast,
// LabelKeepFor), each falling back to the store-wide default of
// Options.Retention. DB.GC applies it; nothing is dropped between runs.
type Retention struct {
	// TTL deletes the thread once it has gone TTL without a change (its
	// UpdatedAt plus TTL): an idle conversation expires, one in use never
	// does. The thread is deleted with its history and checkpoints, and so
	// is every commit that no other thread reaches (a fork keeps what it
	// shares). A thread linked to a parent (CreateOptions.Parent: a
	// workflow's sub-thread) never goes before its parent, however idle:
	// it goes with it, in the same batch. 0 keeps the thread for ever.
	TTL time.Duration
	// KeepLast keeps the newest KeepLast versions of the thread's history;
	// older versions can no longer be read, restored or forked from, and
	// the commits that only they reached are freed. Named checkpoints are
	// always kept, and so is the current version; a thread linked to a
	// parent keeps besides what the parent's kept versions may need (see
	// StateLinks). 0 sets no count.
	KeepLast int64
	// KeepFor keeps the versions younger than KeepFor (by the time of
	// their history entry). With KeepLast too, a version either keeps is
	// kept. 0 sets no age.
	KeepFor time.Duration
}

// IsZero reports whether r keeps everything for ever.
func (r Retention) IsZero() bool { return r == Retention{} }

// Expires returns when a thread last changed at updated expires under r;
// the zero time when it never does.
func (r Retention) Expires(updated time.Time) time.Time {
	if r.TTL <= 0 {
		return time.Time{}
	}
	return updated.Add(r.TTL)
}

// Labels returns r as the labels that hold it, every field written (a
// zero field as "0", which overrides a store-wide default).
func (r Retention) Labels() map[string]string {
	return map[string]string{
		LabelTTL:      formatDuration(r.TTL),
		LabelKeepLast: strconv.FormatInt(r.KeepLast, 10),
		LabelKeepFor:  formatDuration(r.KeepFor),
	}
}

func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return d.String()
}

func (r Retention) validate() error {
	if r.TTL < 0 || r.KeepLast < 0 || r.KeepFor < 0 {
		return fmt.Errorf("retention %+v: a negative limit: %w", r, ErrInvalid)
	}
	return nil
}

// WithRetention returns a DB on the same store, tenant and options whose
// store-wide default retention is r, as Options.Retention sets it: a
// server opens its store once and sets the default its flags give.
func (db *DB) WithRetention(r Retention) *DB {
	c := *db
	c.retention = r
	return &c
}

// DefaultRetention returns the DB's store-wide default retention
// (Options.Retention).
func (db *DB) DefaultRetention() Retention { return db.retention }

// RetentionOf returns the retention of the thread r: its own labels, each
// missing one taken from def. A label that does not parse is ErrInvalid,
// and the retention returned is then def's for that field.
func RetentionOf(r *Record, def Retention) (Retention, error) {
	out := def
	var errs []error
	dur := func(key string, d *time.Duration) {
		s, ok := r.Labels[key]
		if !ok {
			return
		}
		v, err := time.ParseDuration(s)
		if err != nil || v < 0 {
			errs = append(errs, fmt.Errorf("thread %s: label %s=%q is not a duration such as 720h: %w", r.ID, key, clip(s), ErrInvalid))
			return
		}
		*d = v
	}
	dur(LabelTTL, &out.TTL)
	dur(LabelKeepFor, &out.KeepFor)
	if s, ok := r.Labels[LabelKeepLast]; ok {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			errs = append(errs, fmt.Errorf("thread %s: label %s=%q is not a count: %w", r.ID, LabelKeepLast, clip(s), ErrInvalid))
		} else {
			out.KeepLast = v
		}
	}
	return out, errors.Join(errs...)
}

// Retention returns the thread's retention as of the handle's record: its
// own, each field it does not set taken from the DB's default.
func (t *Thread) Retention() (Retention, error) {
	r := t.snapshot()
	return RetentionOf(r, t.db.retention)
}

// SetRetention gives the thread a retention of its own, every field of r
// (a zero field keeps that for ever, whatever the DB's default says); it
// moves the thread one version (op update), and takes effect at the next
// DB.GC. ClearRetention goes back to the default.
func (t *Thread) SetRetention(ctx context.Context, r Retention) error {
	if err := r.validate(); err != nil {
		return err
	}
	labels := t.snapshot().Labels
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, r.Labels())
	return t.Update(ctx, UpdateOptions{Labels: out})
}

// ClearRetention drops the thread's own retention: the DB's default
// applies again.
func (t *Thread) ClearRetention(ctx context.Context) error {
	out := maps.Clone(t.snapshot().Labels)
	delete(out, LabelTTL)
	delete(out, LabelKeepLast)
	delete(out, LabelKeepFor)
	if out == nil {
		out = map[string]string{}
	}
	return t.Update(ctx, UpdateOptions{Labels: out})
}

// GCOptions tune DB.GC.
type GCOptions struct {
	// DryRun reports what GC would drop, and drops nothing.
	DryRun bool
	// AllTenants collects every tenant's threads; otherwise only the DB's
	// tenant's.
	AllTenants bool
	// Now is the time expiry and ages are judged at; zero means the DB's
	// clock.
	Now time.Time
}

// GCReport says what a GC dropped (or, dry, would drop).
type GCReport struct {
	// Threads counts the threads looked at.
	Threads int `json:"threads"`
	// Expired counts the threads deleted (TTL).
	Expired int `json:"expired"`
	// Pruned counts the threads whose oldest versions were dropped, and
	// Versions the versions dropped from them.
	Pruned   int   `json:"pruned"`
	Versions int64 `json:"versions"`
	// Skipped counts the threads that changed while GC looked at them, and
	// were left for the next GC.
	Skipped int `json:"skipped"`
	// Errors are the threads whose labels do not parse, which GC left as
	// they are (the default applies to the fields that do not parse).
	Errors []string `json:"errors,omitzero"`
}

// GC applies retention (see Retention) to every thread of the DB's tenant
// (or, with AllTenants, of the store): it deletes the threads that
// expired and drops the versions their history limits no longer keep,
// freeing every commit nothing reaches any more. Each thread's change is
// one batch of the store, checked against the thread's version, so GC is
// safe while others write (a thread that moves meanwhile is left for the
// next GC) and after a crash at any point (what was dropped is dropped in
// full; a later GC finishes the rest). It reads every record, and the
// history it drops.
func (db *DB) GC(ctx context.Context, opts GCOptions) (GCReport, error) {
	now := opts.Now
	if now.IsZero() {
		now = db.clock()
	}
	var rep GCReport
	// Every tenant's threads are the raw store's, by key; the DB's own
	// tenant's go through its tenant view.
	st, list := db.store, ListOptions{Tenant: db.tenant}
	if opts.AllTenants {
		st, list = db.raw, ListOptions{AllTenants: true}
	}
	g := gc{db: db, st: st, now: now, dry: opts.DryRun, raw: opts.AllTenants, rep: &rep, list: list}
	// A page at a time, read before it is written to: a store's listing
	// need not stand writes made while it iterates.
	const page = 256
	for {
		list.Limit = page
		var recs []*Record
		for r, err := range st.Threads(ctx, list) {
			if err != nil {
				return rep, err
			}
			recs = append(recs, r)
		}
		for _, r := range recs {
			if err := g.thread(ctx, r); err != nil {
				return rep, err
			}
		}
		if len(recs) < page {
			return rep, nil
		}
		list.After = recs[len(recs)-1].ID
	}
}

// gc is one run of DB.GC.
type gc struct {
	db  *DB
	st  store.Store // the DB's store, or with raw the store under it
	raw bool
	now time.Time
	dry bool
	rep *GCReport
	// gone are the threads this GC deleted with another (linked), which
	// its listing may still hold.
	gone map[string]bool
	// list lists the threads GC covers; named maps each thread that a
	// workflow thread's StateLinks name to that workflow (read once, on
	// first need: see parentOf).
	list  ListOptions
	named map[string]string
	// parents are what the parents of linked threads keep, read once.
	parents map[string]*keptLinks
}

// apply applies b to the store GC reads, and makes its changes heard.
func (g *gc) apply(ctx context.Context, b *store.Batch) error {
	if !g.raw {
		return g.db.apply(ctx, b)
	}
	if err := g.st.Apply(ctx, b); err != nil {
		return err
	}
	if _, ok := g.db.raw.(store.Watcher); !ok {
		if h := g.db.hub(false); h != nil {
			if changes := b.Changes(g.db.clock()); len(changes) > 0 {
				h.publish(changes) // keys already
			}
		}
	}
	return nil
}

func (g *gc) thread(ctx context.Context, r *Record) error {
	db, rep, now, dry := g.db, g.rep, g.now, g.dry
	if g.gone[r.ID] {
		return nil
	}
	rep.Threads++
	ret, err := RetentionOf(r, db.retention)
	if err != nil {
		rep.Errors = append(rep.Errors, err.Error())
	}
	if exp := ret.Expires(r.UpdatedAt); !exp.IsZero() && !now.Before(exp) {
		parent, err := g.parentOf(ctx, r)
		if err != nil {
			return err
		}
		if parent != "" {
			// A thread linked to a parent (a workflow's sub-thread, or
			// one a workflow's fork made) goes with its parent, never
			// before it: a workflow whose steps left one idle still
			// needs it. Alone, it goes on its own TTL.
			_, err := g.st.Thread(ctx, parent)
			if err == nil {
				return nil
			}
			if !errors.Is(err, ErrNotFound) {
				return fmt.Errorf("gc: parent of %s: %w", r.ID, err)
			}
		}
		dels, err := g.withLinked(ctx, r)
		if err != nil {
			return err
		}
		if !dry {
			err := g.apply(ctx, &store.Batch{Delete: dels})
			switch {
			case errors.Is(err, ErrConflict), errors.Is(err, ErrNotFound):
				rep.Skipped++
				return nil
			case err != nil:
				return fmt.Errorf("gc: delete %s: %w", r.ID, err)
			}
		}
		rep.Expired += len(dels)
		if g.gone == nil {
			g.gone = map[string]bool{}
		}
		for _, d := range dels[1:] {
			g.gone[d.Thread] = true
			rep.Threads++
		}
		return nil
	}
	if ret.KeepLast <= 0 && ret.KeepFor <= 0 {
		return nil
	}
	// The versions below before are dropped: those that neither limit
	// keeps. KeepFor reads down from the newest the count does not keep,
	// while they are young; what is below is found by bisection, not read.
	before := r.Version
	if ret.KeepLast > 0 {
		before = max(r.Version-ret.KeepLast+1, 1)
	}
	if ret.KeepFor > 0 {
		cutoff := now.Add(-ret.KeepFor)
		for e, err := range g.st.History(ctx, r.ID, HistoryOptions{Before: before}) {
			if err != nil {
				return g.historyErr(r, err)
			}
			if e.Time.Before(cutoff) {
				break
			}
			before = e.Version // young enough: kept
		}
	}
	if parent, err := g.parentOf(ctx, r); err != nil {
		return err
	} else if parent != "" {
		floor, err := g.linkFloor(ctx, r, parent)
		if err != nil {
			return g.historyErr(r, err)
		}
		before = min(before, floor)
	}
	oldest, err := g.oldest(ctx, r.ID, before)
	if err != nil {
		return g.historyErr(r, err)
	}
	if oldest == 0 {
		return nil // nothing below before
	}
	n := before - oldest
	// Oldest first, at most pruneBatch versions a batch: a long history
	// goes in several transactions, none of which holds the store (a
	// Redis script, a PostgreSQL statement under its timeout, SQLite's
	// write lock) for long; each leaves a run of versions up to the
	// current one.
	for b := min(oldest+pruneBatch, before); !dry; b = min(b+pruneBatch, before) {
		err := g.apply(ctx, &store.Batch{Prune: []store.Prune{{Thread: r.ID, Before: b}}})
		switch {
		case errors.Is(err, ErrNotFound):
			rep.Skipped++
			return nil
		case err != nil:
			return fmt.Errorf("gc: prune %s: %w", r.ID, err)
		}
		if b == before {
			break
		}
	}
	rep.Pruned++
	rep.Versions += n
	return nil
}

// linkFloor returns the oldest version of the linked thread r that a
// version its parent keeps may need (StateLinks): the versions below it
// may go. Its parent keeps its history from the oldest entry on, and its
// checkpoints; each names, in its state, the oldest version of r that it
// or a later version of the parent needs. When it cannot tell, it keeps
// all of r (floor 0):
//
//   - r was made after the parent's oldest kept version: the versions
//     after that one may name any of r's, its first included (a step's
//     sub-thread made on first use, or one deleted and made again);
//   - a kept version names no links at all (a workflow made before the
//     key was written), or does not name r though r was there.
//
// A checkpoint older than r names another thread of its id, or none: it
// constrains nothing. A parent whose head names no links does not use
// them (a conversation and its sub-agents' threads): r keeps what its own
// limits keep, unless the parent is a workflow that has not written them
// yet. A parent that is gone names nothing.
func (g *gc) linkFloor(ctx context.Context, r *Record, parent string) (int64, error) {
	pk, err := g.kept(ctx, parent)
	switch {
	case err != nil:
		return 0, err
	case pk == nil:
		return math.MaxInt64, nil
	case !pk.uses:
		if pk.workflow {
			return 0, nil
		}
		return math.MaxInt64, nil
	}
	// The parent names r by the id its own DB sees.
	id := r.ID
	if g.raw {
		_, id = SplitKey(r.ID)
	}
	floor := int64(math.MaxInt64)
	for i, v := range pk.versions {
		if r.CreatedAt.After(v.at) {
			if i == 0 {
				return 0, nil // made after the oldest kept version
			}
			continue // a checkpoint older than r
		}
		n, ok := v.links[id]
		if v.links == nil || !ok {
			return 0, nil
		}
		floor = min(floor, n)
	}
	return floor, nil
}

// keptLinks is what the versions a parent keeps name of its linked
// threads (see linkFloor), read once a GC pass however many they are.
type keptLinks struct {
	workflow bool // the parent is a workflow thread
	uses     bool // its head names links: it uses them
	// versions are its oldest kept version, then its checkpoints: when
	// each was made, and its links (nil: none).
	versions []keptVersion
}

type keptVersion struct {
	at    time.Time
	links map[string]int64
}

// kept returns the keptLinks of the thread parent, nil when it is gone.
func (g *gc) kept(ctx context.Context, parent string) (*keptLinks, error) {
	if pk, ok := g.parents[parent]; ok {
		return pk, nil
	}
	pk, err := g.readKept(ctx, parent)
	if err != nil {
		return nil, err
	}
	if g.parents == nil {
		g.parents = map[string]*keptLinks{}
	}
	g.parents[parent] = pk
	return pk, nil
}

func (g *gc) readKept(ctx context.Context, parent string) (*keptLinks, error) {
	p, err := g.st.Thread(ctx, parent)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	pk := &keptLinks{workflow: p.Kind == KindWorkflow}
	head, err := g.links(ctx, p.Head)
	if err != nil || head == nil {
		return pk, err
	}
	pk.uses = true
	oldest, err := g.oldest(ctx, parent, p.Version+1)
	if err != nil {
		return nil, err
	}
	for e, err := range g.st.History(ctx, parent, HistoryOptions{Before: oldest + 1, Limit: 1}) {
		if err != nil {
			return nil, err
		}
		links, err := g.links(ctx, e.Commit)
		if err != nil {
			return nil, err
		}
		pk.versions = append(pk.versions, keptVersion{at: e.Time, links: links})
	}
	if len(pk.versions) == 0 {
		// No history to read (a store that lost it): keep everything.
		pk.versions = append(pk.versions, keptVersion{})
	}
	for cp, err := range g.st.Checkpoints(ctx, parent) {
		if err != nil {
			return nil, err
		}
		links, err := g.links(ctx, cp.Commit)
		if err != nil {
			return nil, err
		}
		pk.versions = append(pk.versions, keptVersion{at: cp.CreatedAt, links: links})
	}
	return pk, nil
}

// parentOf returns the thread r goes with and whose kept versions may need
// its versions: the parent it was made linked to (CreateOptions.Parent),
// or else the workflow thread whose head state names it in StateLinks (a
// workflow's fork forks its sub-threads: they are forks of the source's,
// linked to the fork by its state only); "" when none.
func (g *gc) parentOf(ctx context.Context, r *Record) (string, error) {
	if linked(r) {
		return r.ForkedFrom.Thread, nil
	}
	if g.named == nil {
		g.named = map[string]string{}
		list := g.list
		list.Kind, list.Limit = KindWorkflow, 0
		for w, err := range g.st.Threads(ctx, list) {
			if err != nil {
				return "", fmt.Errorf("gc: workflow threads: %w", err)
			}
			links, err := g.links(ctx, w.Head)
			if err != nil {
				if errors.Is(err, ErrNotFound) {
					continue // freed meanwhile: the workflow moved or went
				}
				return "", fmt.Errorf("gc: state of %s: %w", w.ID, err)
			}
			tenant, _ := SplitKey(w.ID)
			for id := range links {
				key := id
				if g.raw {
					key = Key(tenant, id)
				}
				if key != w.ID {
					g.named[key] = w.ID
				}
			}
		}
	}
	return g.named[r.ID], nil
}

// links returns the StateLinks of the state in effect at commit id; nil
// when it has none.
func (g *gc) links(ctx context.Context, id string) (map[string]int64, error) {
	if id == "" {
		return nil, nil
	}
	c, err := g.st.Commit(ctx, id)
	if err != nil {
		return nil, err
	}
	state, err := stateIn(ctx, g.st, c)
	if err != nil {
		return nil, err
	}
	raw, ok := state[StateLinks]
	if !ok {
		return nil, nil
	}
	// Not the key's shape: it names nothing GC can keep.
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		return nil, nil
	}
	links := make(map[string]int64, len(top))
	for k, v := range top {
		if !strings.HasSuffix(k, ".") {
			var n int64
			if json.Unmarshal(v, &n) != nil {
				return nil, nil
			}
			links[k] = n
			continue
		}
		var group map[string]int64
		if json.Unmarshal(v, &group) != nil {
			return nil, nil
		}
		for rest, n := range group {
			links[k+rest] = n
		}
	}
	return links, nil
}

// pruneBatch is the most versions GC drops in one batch.
const pruneBatch = 10_000

// linked reports whether r was made linked to a parent
// (CreateOptions.Parent, as a workflow's sub-threads are): it names the
// parent and shares none of its commits.
func linked(r *Record) bool { return r.ForkedFrom.Thread != "" && r.ForkedFrom.Commit == "" }

// withLinked returns the deletions of r and of the threads linked to it,
// and to those, at the versions read: one batch deletes them together, or
// none of them if one moved. A store without a ForkIndex deletes r alone;
// its linked threads then go on their own TTL.
func (g *gc) withLinked(ctx context.Context, r *Record) ([]store.Deletion, error) {
	dels := []store.Deletion{{Thread: r.ID, Version: r.Version}}
	fi := forkIndex(g.st)
	if fi == nil {
		return dels, nil
	}
	for i := 0; i < len(dels); i++ {
		for c, err := range fi.Forks(ctx, dels[i].Thread) {
			if err != nil {
				return nil, fmt.Errorf("gc: threads linked to %s: %w", dels[i].Thread, err)
			}
			if linked(c) {
				dels = append(dels, store.Deletion{Thread: c.ID, Version: c.Version})
			}
		}
	}
	return dels, nil
}

// oldest returns the oldest version of thread's history below before, or
// 0 when there is none, in O(log versions) reads: a history is a run of
// versions up to the current one, so an entry at or below v exists exactly
// when the oldest is at or below v.
func (g *gc) oldest(ctx context.Context, thread string, before int64) (int64, error) {
	below := func(v int64) (int64, error) { // the newest entry at or below v, or 0
		for e, err := range g.st.History(ctx, thread, HistoryOptions{Before: v + 1, Limit: 1}) {
			if err != nil {
				return 0, err
			}
			return e.Version, nil
		}
		return 0, nil
	}
	if before <= 1 {
		return 0, nil
	}
	hi, err := below(before - 1)
	if hi == 0 || err != nil {
		return 0, err
	}
	lo := int64(1)
	for lo < hi {
		mid := lo + (hi-lo)/2
		v, err := below(mid)
		if err != nil {
			return 0, err
		}
		if v != 0 {
			hi = v
		} else {
			lo = mid + 1
		}
	}
	return hi, nil
}

// historyErr is the end of a thread's GC on an error reading its history:
// a thread deleted meanwhile is skipped.
func (g *gc) historyErr(r *Record, err error) error {
	if errors.Is(err, ErrNotFound) {
		g.rep.Skipped++
		return nil
	}
	return fmt.Errorf("gc: history of %s: %w", r.ID, err)
}
