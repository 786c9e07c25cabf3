package thread

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"sync"
	"time"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread/store"
	"github.com/loomthreads/loom/tokens"
	"go.opentelemetry.io/otel/trace"
)

// Options configure a DB. The zero value means the defaults.
type Options struct {
	// Limits cap what one call may write; zero fields take the defaults.
	Limits Limits
	// Tenant scopes the DB: it creates threads for this tenant and sees no
	// other tenant's threads. "" is the default tenant.
	Tenant string
	// AppendRetries is how many times Append rebases a pure append onto a
	// newer head after ErrConflict before it gives up; 0 means 100, and a
	// negative value means never.
	AppendRetries int
	// MessageIDCache caps how many message ids the DB remembers, over all
	// threads and tenants (about 64 bytes each), so that an append of
	// messages that come with ids of their own is checked against the ids
	// on its thread's line without reading the line (see ErrDuplicateID
	// and CommitOptions.FreshIDs). A line longer than the budget is read
	// on every such append; many threads written in turn share it. 0
	// means 1<<18 (about 16 MiB); a negative value remembers nothing.
	MessageIDCache int
	// Now is the clock; nil means time.Now. Times are kept in UTC with
	// microsecond precision, which every store can hold exactly.
	Now func() time.Time
	// Retention is the store-wide default of every thread's retention
	// (see Retention): each field a thread's own labels do not set. The
	// zero value keeps everything for ever. DB.GC applies it.
	Retention Retention
	// TracerProvider, when not nil, gets a span for each operation on
	// threads (create, open, refresh, commit, messages, state, view, fork,
	// copy, delete), named "thread.<operation>", with the store's name and
	// the thread's id (AttrStore, AttrThread). nil means no spans, at no
	// cost; the global provider is not used.
	TracerProvider trace.TracerProvider
}

// Limits cap the size of what is written. Zero fields take the defaults.
type Limits struct {
	// MessageBytes caps one message (message.Size); default 1 MiB.
	MessageBytes int
	// MessagesPerCommit caps the messages of one call; default 10,000.
	MessagesPerCommit int
	// StateBytes caps the whole state map of a thread; default 1 MiB.
	StateBytes int
	// TitleBytes caps a title; default 1 KiB.
	TitleBytes int
	// Labels caps the number of labels; default 64. Keys follow the id
	// rules; values are capped at LabelBytes (default 256).
	Labels, LabelBytes int
	// DocumentBytes caps a document read by Load; default 256 MiB.
	DocumentBytes int64
	// JSONDepth caps how deeply the JSON a thread holds may nest: each
	// state value, a message's metadata (one level for the metadata object
	// itself) and the raw JSON of a content of a type this version does not
	// know; default 128. Deeper JSON is ErrTooDeep. Function call arguments
	// and results are text, whatever they hold, and are not counted.
	JSONDepth int
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MessageBytes, 1<<20)
	def(&l.MessagesPerCommit, 10_000)
	def(&l.StateBytes, 1<<20)
	def(&l.TitleBytes, 1<<10)
	def(&l.Labels, 64)
	def(&l.LabelBytes, 256)
	def(&l.JSONDepth, 128)
	if l.DocumentBytes <= 0 {
		l.DocumentBytes = 256 << 20
	}
	return l
}

// DB is the entry point to threads: a Store with limits, a clock and a
// tenant. It is safe for concurrent use.
type DB struct {
	raw     store.Store // the store as opened
	store   store.Store // raw, or raw as the tenant sees it (tenantStore)
	limits  Limits
	tenant  string
	retries int
	now     func() time.Time
	// retention is Options.Retention.
	retention Retention
	shared    *shared  // what db and its copies share
	ids       *idLines // the message ids of recent lines (msgids.go)
	// tracer makes the spans of Options.TracerProvider; nil makes none.
	tracer *tracer
}

// New returns a DB on store; opts may be nil.
func New(store store.Store, opts *Options) *DB {
	var o Options
	if opts != nil {
		o = *opts
	}
	db := &DB{raw: store, limits: o.Limits.withDefaults(), retries: o.AppendRetries, now: o.Now, retention: o.Retention,
		shared: newShared(), ids: &idLines{budget: o.MessageIDCache}}
	db.scope(o.Tenant)
	if db.retries == 0 {
		db.retries = 100
	}
	if db.ids.budget == 0 {
		db.ids.budget = defaultIDCache
	}
	if db.now == nil {
		db.now = time.Now
	}
	if o.TracerProvider != nil {
		db.tracer = &tracer{o.TracerProvider.Tracer(tracerName), storeName(store)}
	}
	return db
}

// shared is the state that a DB opened by New keeps for itself and the
// copies made from it (WithTenant, WithTracerProvider), as database/sql
// keeps its pool on the *sql.DB that Open returns: nothing of it is
// process-wide, and two DBs opened on one store share none of it. Open a
// DB once per store and share it.
type shared struct {
	// hub is the change feed of the DB and its copies (feed.go).
	hub localHub
	// counter counts the tokens of views that bring no counter of their
	// own, with its cache of counted messages.
	counter func() *tokens.Counter
	// values are the state that packages built on thread keep per DB (see
	// DB.Shared), such as package agent's runs.
	values sync.Map
}

func newShared() *shared {
	return &shared{counter: sync.OnceValue(func() *tokens.Counter { return tokens.NewCounter(nil) })}
}

// Shared returns the value that db and the DBs copied from it keep under
// key, calling newValue to create it on first use; concurrent first calls get
// the same value. It is for packages built on thread that keep state per
// DB rather than per process (package agent keeps its registry of running
// runs here, so that a run is exclusive among the agents of one DB); key
// should be a value of an unexported type of the calling package, as with
// context.WithValue.
func (db *DB) Shared(key any, newValue func() any) any {
	if v, ok := db.shared.values.Load(key); ok {
		return v
	}
	v, _ := db.shared.values.LoadOrStore(key, newValue())
	return v
}

// Store returns the store under db, as opened: its thread ids are keys
// (see Key), and it holds every tenant's threads.
func (db *DB) Store() store.Store { return db.raw }

// Tenant returns the tenant db is scoped to.
func (db *DB) Tenant() string { return db.tenant }

// WithTenant returns a DB on the same store scoped to tenant: its own
// namespace of thread ids (see Key). A tenant follows the id rules; a DB
// of any other tenant answers every call with ErrInvalid.
func (db *DB) WithTenant(tenant string) *DB {
	c := *db
	c.scope(tenant)
	return &c
}

// WithTracerProvider returns a DB on the same store, tenant and options
// whose operations make spans with tp, as Options.TracerProvider does; nil
// makes none.
func (db *DB) WithTracerProvider(tp trace.TracerProvider) *DB {
	c := *db
	c.tracer = nil
	if tp != nil {
		c.tracer = &tracer{tp.Tracer(tracerName), storeName(db.raw)}
	}
	return &c
}

// scope points db at tenant's namespace of thread ids. A tenant that is
// not a valid id could make keys of another reading: its DB refuses
// everything with ErrInvalid.
func (db *DB) scope(tenant string) {
	db.tenant, db.store = tenant, db.raw
	switch {
	case tenant != "" && !ids.Valid(tenant):
		db.store = badTenant{tenant}
	case tenant != "":
		db.store = newTenantStore(db.raw, tenant)
	}
}

// Close closes the store if it has a Close method.
func (db *DB) Close() error {
	if c, ok := db.raw.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func (db *DB) clock() time.Time { return db.now().UTC().Truncate(time.Microsecond) }

// CreateOptions describe a new thread. The zero value makes an empty,
// undetermined thread with a fresh id.
type CreateOptions struct {
	// ID names the thread; "" means a fresh id.
	ID string
	// Kind is the lifecycle kind; "" means KindUndetermined.
	Kind   Kind
	Title  string
	Labels map[string]string
	// Messages, when given, are the thread's first commit. A service
	// thread (KindService) cannot start with messages (ErrInvalid): its
	// service's conversation would not hold them.
	Messages []message.Message
	// State, when given, is the thread's initial state.
	State map[string]json.RawMessage
	// Parent, when not "", links the new thread to another thread of the
	// same tenant, as a workflow's sub-threads are linked to their
	// workflow: the new thread's ForkedFrom names the parent with no commit
	// (it shares none of its messages), and a store that keeps a fork
	// family together (Redis Cluster keeps one in a hash slot) keeps the two
	// together, so that one Group can change both.
	Parent string
}

// NewThreadID returns a fresh thread id.
func NewThreadID() string { return ids.New("th_") }

// Create makes a new thread. An existing id is ErrConflict; a Parent that
// does not exist is ErrNotFound.
func (db *DB) Create(ctx context.Context, opts CreateOptions) (_ *Thread, err error) {
	ctx, span := db.startSpan(ctx, "create", opts.ID)
	defer endSpan(span, &err)
	if opts.Parent != "" {
		if _, err := db.record(ctx, opts.Parent); err != nil {
			return nil, fmt.Errorf("create: parent: %w", err)
		}
	}
	b := &store.Batch{}
	r, head, err := db.createInto(opts, b)
	if err != nil {
		return nil, err
	}
	if err := db.apply(ctx, b); err != nil {
		return nil, fmt.Errorf("create %s: %w", r.ID, err)
	}
	return db.handle(r, head), nil
}

// createInto adds to b what creates the thread opts describe, and returns
// its record and head.
func (db *DB) createInto(opts CreateOptions, b *store.Batch) (*Record, *Commit, error) {
	now := db.clock()
	if opts.ID == "" {
		opts.ID = ids.NewAt("th_", now)
	}
	if opts.Kind == "" {
		opts.Kind = KindUndetermined
	}
	if err := db.checkRecord(opts.ID, opts.Kind, opts.Title, opts.Labels); err != nil {
		return nil, nil, fmt.Errorf("create: %w", err)
	}
	if opts.Parent != "" && (!ids.Valid(opts.Parent) || opts.Parent == opts.ID) {
		return nil, nil, fmt.Errorf("create %s: parent %q: %w", opts.ID, clip(opts.Parent), ErrInvalid)
	}
	if err := checkMirror(opts.Kind, len(opts.Messages), false); err != nil {
		return nil, nil, fmt.Errorf("create %s: %w", opts.ID, err)
	}
	r := &Record{ID: opts.ID, Tenant: db.tenant, Kind: opts.Kind, Title: opts.Title, Labels: cloneLabels(opts.Labels),
		Version: 1, CreatedAt: now, UpdatedAt: now, ForkedFrom: ForkPoint{Thread: opts.Parent}}
	var head *Commit
	if len(opts.Messages) > 0 || opts.State != nil {
		c, err := db.newCommit(nil, nil, opts.Messages, opts.State, OpAppend, nil, now)
		if err != nil {
			return nil, nil, fmt.Errorf("create %s: %w", opts.ID, err)
		}
		head, r.Head = c, c.ID
		b.Commits = append(b.Commits, c)
	}
	b.Create = append(b.Create, store.Creation{Record: r, Op: OpCreate})
	return r, head, nil
}

// Thread returns a handle on the thread id at its current version.
func (db *DB) Thread(ctx context.Context, id string) (_ *Thread, err error) {
	ctx, span := db.startSpan(ctx, "open", id)
	defer endSpan(span, &err)
	r, err := db.record(ctx, id)
	if err != nil {
		return nil, err
	}
	return db.handle(r, nil), nil
}

// record reads a thread's record and hides other tenants' threads.
func (db *DB) record(ctx context.Context, id string) (*Record, error) {
	if !ids.Valid(id) {
		return nil, fmt.Errorf("thread id %q: %w", clip(id), ErrInvalid)
	}
	r, err := db.store.Thread(ctx, id)
	if err != nil {
		return nil, err
	}
	if r.Tenant != db.tenant {
		return nil, fmt.Errorf("thread %q: %w", id, ErrNotFound)
	}
	return r, nil
}

// Threads yields handles on the threads that match opts, in opts.Order
// (see ListOptions). The DB's tenant always applies. opts.Internal is
// applied here: the store's pages are filtered, and read on after the last
// record seen until Limit threads passed, so that a page of people's
// threads is full even where loom's own crowd them.
func (db *DB) Threads(ctx context.Context, opts ListOptions) iter.Seq2[*Thread, error] {
	opts.Tenant, opts.AllTenants = db.tenant, false
	keep := keeps(opts.Internal)
	opts.Internal = InternalInclude
	return func(yield func(*Thread, error) bool) {
		limit, n := opts.Limit, 0
		for {
			seen := 0
			var last *Record
			for r, err := range db.store.Threads(ctx, opts) {
				if err != nil {
					yield(nil, err)
					return
				}
				seen, last = seen+1, r
				if keep != nil && !keep(r) {
					continue
				}
				n++
				if !yield(db.handle(r, nil), nil) || (limit > 0 && n >= limit) {
					return
				}
			}
			if keep == nil || opts.Limit == 0 || seen < opts.Limit {
				return // the store has no more
			}
			// Some of the page were filtered out: read on after it, a
			// page no smaller than listMore.
			opts.After, opts.AfterUpdated = last.ID, last.UpdatedAt
			opts.Limit = max(limit-n, listMore)
		}
	}
}

// listMore is the least page DB.Threads asks a store for when it reads on
// past threads its filter left out.
const listMore = 64

// Delete deletes the thread id, its history and checkpoints, and every
// commit no other thread or checkpoint reaches. It cannot be undone.
func (db *DB) Delete(ctx context.Context, id string) error {
	if _, err := db.record(ctx, id); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	if err := db.apply(ctx, &store.Batch{Delete: []store.Deletion{{Thread: id}}}); err != nil {
		return fmt.Errorf("delete %s: %w", id, err)
	}
	return nil
}

func (db *DB) handle(r *Record, head *Commit) *Thread {
	if head != nil && (len(head.Messages) > 0 || head.Metadata != nil) {
		head = header(head)
	}
	return &Thread{db: db, rec: r, head: head}
}

// newCommit validates and builds a commit on parent (nil for the root).
// parentState is the state in effect at parent, needed only when patch is
// not nil. Messages without an id or time get them here.
func (db *DB) newCommit(parent *Commit, parentState map[string]json.RawMessage, msgs []message.Message,
	patch map[string]json.RawMessage, op Op, meta map[string]string, now time.Time) (*Commit, error) {
	if err := db.checkParts(msgs, op, meta); err != nil {
		return nil, err
	}
	c := &Commit{ID: ids.NewAt("c_", now), Op: op, Time: now, Metadata: cloneLabels(meta)}
	if parent != nil {
		c.Parent, c.Depth, c.StateFrom = parent.ID, parent.Depth, parent.StateFrom
	}
	c.Depth += int64(len(msgs))
	if len(msgs) > 0 {
		c.Messages = make([]message.Message, len(msgs))
	}
	for i, m := range msgs {
		// A shallow copy: the store keeps a deep copy of its own, and the
		// commit returned to the caller may share the caller's contents.
		if m.ID == "" {
			m.ID = message.NewIDAt(now)
		}
		if m.CreatedAt.IsZero() {
			m.CreatedAt = now
		}
		c.Messages[i] = m
	}
	if patch != nil {
		st, err := db.applyPatch(parentState, patch)
		if err != nil {
			return nil, err
		}
		c.State, c.StateFrom = st, c.ID
	}
	return c, nil
}
