package thread

import (
	"context"
	"fmt"
	"iter"
	"strings"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/thread/store"
)

// Key returns the key under which a store keeps the thread id of tenant:
// the id itself for the default tenant "", and tenant + "/" + id for any
// other. Each tenant thus has its own namespace of ids in every store,
// with nothing a store must know about tenants: a DB scoped to a tenant
// turns the ids it is given into keys and the keys it reads back into ids,
// and ids hold no '/', so no id of one tenant can name a key of another.
// Stores check thread ids with ValidKey. Tools that work on a whole store
// (Copy, loom copy) see the keys.
func Key(tenant, id string) string { return ids.Key(tenant, id) }

// SplitKey returns the tenant and id of a key made by Key.
func SplitKey(key string) (tenant, id string) { return ids.SplitKey(key) }

// ValidKey reports whether s is a key Key makes of a valid tenant and id.
func ValidKey(s string) bool { return ids.ValidKey(s) }

// tenantStore is a Store as one tenant other than "" sees it: thread ids
// in, keys to the store; keys from the store, ids out. Commits are shared
// by every tenant (their ids are random and reach a caller only through
// the tenant's own threads), so they pass through unchanged.
type tenantStore struct {
	store.Store
	prefix string // tenant + "/"
}

func newTenantStore(s store.Store, tenant string) *tenantStore {
	return &tenantStore{Store: s, prefix: tenant + "/"}
}

func (s *tenantStore) key(id string) string { return s.prefix + id }

// id returns the id of key, or "" for a key of another tenant (which a
// well-behaved store never hands this tenant).
func (s *tenantStore) id(key string) string {
	id, ok := strings.CutPrefix(key, s.prefix)
	if !ok {
		return ""
	}
	return id
}

func (s *tenantStore) out(r *Record) *Record {
	r.ID = s.id(r.ID)
	if r.ForkedFrom.Thread != "" {
		r.ForkedFrom.Thread = s.id(r.ForkedFrom.Thread)
	}
	return r
}

// unkey makes err name the tenant's threads by their ids, as the tenant
// knows them, rather than by the keys the store reported: "b/x" is "x".
// errors.Is and As see err as it is.
func (s *tenantStore) unkey(err error) error {
	if err == nil {
		return nil
	}
	return &unkeyedError{err: err, prefix: s.prefix}
}

type unkeyedError struct {
	err    error
	prefix string
}

func (e *unkeyedError) Error() string {
	msg := e.err.Error()
	// Keys stand quoted or after a space; ids hold no '/', so nothing else
	// of the message reads as a key of this tenant.
	msg = strings.ReplaceAll(msg, `"`+e.prefix, `"`)
	return strings.ReplaceAll(msg, " "+e.prefix, " ")
}

func (e *unkeyedError) Unwrap() error { return e.err }

func (s *tenantStore) CachedCommit(id string) *Commit {
	if cc, ok := s.Store.(store.CommitCache); ok {
		return cc.CachedCommit(id)
	}
	return nil
}

func (s *tenantStore) Thread(ctx context.Context, id string) (*Record, error) {
	r, err := s.Store.Thread(ctx, s.key(id))
	if err != nil {
		return nil, s.unkey(err)
	}
	return s.out(r), nil
}

func (s *tenantStore) Threads(ctx context.Context, opts ListOptions) iter.Seq2[*Record, error] {
	opts.Tenant, opts.AllTenants = strings.TrimSuffix(s.prefix, "/"), false
	if opts.After != "" {
		opts.After = s.key(opts.After)
	}
	return func(yield func(*Record, error) bool) {
		for r, err := range s.Store.Threads(ctx, opts) {
			if err == nil {
				// The store filters by tenant; a record of another tenant
				// that it let through all the same never reaches this one.
				if tenant, _ := SplitKey(r.ID); tenant != opts.Tenant {
					continue
				}
				r = s.out(r)
			}
			if !yield(r, s.unkey(err)) || err != nil {
				return
			}
		}
	}
}

func (s *tenantStore) History(ctx context.Context, thread string, opts HistoryOptions) iter.Seq2[HistoryEntry, error] {
	return func(yield func(HistoryEntry, error) bool) {
		for e, err := range s.Store.History(ctx, s.key(thread), opts) {
			if !yield(e, s.unkey(err)) || err != nil {
				return
			}
		}
	}
}

func (s *tenantStore) Checkpoints(ctx context.Context, thread string) iter.Seq2[Checkpoint, error] {
	return func(yield func(Checkpoint, error) bool) {
		for cp, err := range s.Store.Checkpoints(ctx, s.key(thread)) {
			cp.Thread = thread
			if !yield(cp, s.unkey(err)) || err != nil {
				return
			}
		}
	}
}

// Apply applies a copy of b whose thread ids are keys; b is not changed.
func (s *tenantStore) Apply(ctx context.Context, b *store.Batch) error {
	return s.unkey(s.Store.Apply(ctx, s.keyed(b)))
}

// AppendAt forwards to the store's AppendAt, with keys in and ids out; a
// store without one is never asked (appender reports it).
func (s *tenantStore) AppendAt(ctx context.Context, thread string, build func(r *Record, head *Commit) (*store.Batch, error)) error {
	return s.unkey(s.Store.(store.Appender).AppendAt(ctx, s.key(thread), func(r *Record, head *Commit) (*store.Batch, error) {
		c := *r
		b, err := build(s.out(&c), head)
		if err != nil {
			return nil, err
		}
		return s.keyed(b), nil
	}))
}

// keyed returns a copy of b whose thread ids are keys.
func (s *tenantStore) keyed(b *store.Batch) *store.Batch {
	k := &store.Batch{Commits: b.Commits}
	if len(b.Create) > 0 {
		k.Create = make([]store.Creation, len(b.Create))
		for i, cr := range b.Create {
			r := *cr.Record
			r.ID = s.key(r.ID)
			if r.ForkedFrom.Thread != "" {
				r.ForkedFrom.Thread = s.key(r.ForkedFrom.Thread)
			}
			cr.Record = &r
			k.Create[i] = cr
		}
	}
	if len(b.Moves) > 0 {
		k.Moves = make([]store.Move, len(b.Moves))
		for i, mv := range b.Moves {
			mv.Thread = s.key(mv.Thread)
			k.Moves[i] = mv
		}
	}
	if len(b.DropCheckpoints) > 0 {
		k.DropCheckpoints = make([]store.CheckpointKey, len(b.DropCheckpoints))
		for i, ck := range b.DropCheckpoints {
			ck.Thread = s.key(ck.Thread)
			k.DropCheckpoints[i] = ck
		}
	}
	if len(b.Checkpoints) > 0 {
		k.Checkpoints = make([]Checkpoint, len(b.Checkpoints))
		for i, cp := range b.Checkpoints {
			cp.Thread = s.key(cp.Thread)
			k.Checkpoints[i] = cp
		}
	}
	if len(b.Prune) > 0 {
		k.Prune = make([]store.Prune, len(b.Prune))
		for i, pr := range b.Prune {
			pr.Thread = s.key(pr.Thread)
			k.Prune[i] = pr
		}
	}
	if len(b.Delete) > 0 {
		k.Delete = make([]store.Deletion, len(b.Delete))
		for i, d := range b.Delete {
			d.Thread = s.key(d.Thread)
			k.Delete[i] = d
		}
	}
	return k
}

// appender returns the Appender of a DB's store, if the store under it has
// one.
func appender(st store.Store) (store.Appender, bool) {
	switch s := st.(type) {
	case *tenantStore:
		_, ok := s.Store.(store.Appender)
		return s, ok
	case store.Appender:
		return s, true
	}
	return nil, false
}

// badTenant is the store of a DB whose tenant is not a valid id.
type badTenant struct{ tenant string }

func (b badTenant) err() error {
	return fmt.Errorf("tenant %q: letters, digits, '_', '-', '.' only: %w", clip(b.tenant), ErrInvalid)
}

func (b badTenant) Commit(context.Context, string) (*Commit, error) { return nil, b.err() }
func (b badTenant) Ancestors(context.Context, string, int64) iter.Seq2[*Commit, error] {
	return func(yield func(*Commit, error) bool) { yield(nil, b.err()) }
}
func (b badTenant) Thread(context.Context, string) (*Record, error) { return nil, b.err() }
func (b badTenant) Threads(context.Context, ListOptions) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) { yield(nil, b.err()) }
}
func (b badTenant) History(context.Context, string, HistoryOptions) iter.Seq2[HistoryEntry, error] {
	return func(yield func(HistoryEntry, error) bool) { yield(HistoryEntry{}, b.err()) }
}
func (b badTenant) Checkpoints(context.Context, string) iter.Seq2[Checkpoint, error] {
	return func(yield func(Checkpoint, error) bool) { yield(Checkpoint{}, b.err()) }
}
func (b badTenant) Apply(context.Context, *store.Batch) error { return b.err() }

// forkIndex returns s's ForkIndex, seen through a tenant's keys when s is
// scoped to one, or nil.
func forkIndex(s store.Store) store.ForkIndex {
	if ts, ok := s.(*tenantStore); ok {
		if fi, ok := ts.Store.(store.ForkIndex); ok {
			return tenantForks{ts, fi}
		}
		return nil
	}
	fi, _ := s.(store.ForkIndex)
	return fi
}

// descendantIndex returns s's DescendantIndex, seen through a tenant's
// keys when s is scoped to one, or nil.
func descendantIndex(s store.Store) store.DescendantIndex {
	if ts, ok := s.(*tenantStore); ok {
		if di, ok := ts.Store.(store.DescendantIndex); ok {
			return tenantDescendants{ts, di}
		}
		return nil
	}
	di, _ := s.(store.DescendantIndex)
	return di
}

type tenantDescendants struct {
	s  *tenantStore
	di store.DescendantIndex
}

func (t tenantDescendants) Descendants(ctx context.Context, root string) iter.Seq2[*Record, error] {
	return t.s.scoped(t.di.Descendants(ctx, t.s.key(root)))
}

// scoped yields the records of recs that are the tenant's, as it sees them.
func (s *tenantStore) scoped(recs iter.Seq2[*Record, error]) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		for r, err := range recs {
			if err != nil {
				yield(nil, err)
				return
			}
			if !strings.HasPrefix(r.ID, s.prefix) {
				continue // another tenant's: never this one's
			}
			if !yield(s.out(r), nil) {
				return
			}
		}
	}
}

type tenantForks struct {
	s  *tenantStore
	fi store.ForkIndex
}

func (t tenantForks) Forks(ctx context.Context, parent string) iter.Seq2[*Record, error] {
	return t.s.scoped(t.fi.Forks(ctx, t.s.key(parent)))
}
