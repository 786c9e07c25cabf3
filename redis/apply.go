package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// Apply implements store.Store. It resolves the family of every thread
// and commit the batch names, reads in one round trip the facts that
// store.NeedsOf lists, plans the batch with store.PlanBatch (every rule
// of a batch is the planner's), and runs one Lua script that writes the
// plan if those facts still hold; see the package doc.
func (s *Store) Apply(ctx context.Context, b *store.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validate(b); err != nil {
		return err
	}
	return mapError(ctx, s.applyRetry(ctx, b, false))
}

// applyRetry applies b, once more with families read afresh if a cached
// one may have been stale. With sweep, b's deletions apply only to expired
// threads.
func (s *Store) applyRetry(ctx context.Context, b *store.Batch, sweep bool) error {
	err, cached := s.apply(ctx, b, false, sweep)
	if cached && errors.Is(err, thread.ErrNotFound) {
		// A family from the cache may be stale (its thread was deleted and
		// made again elsewhere): once more from the index keys.
		err, _ = s.apply(ctx, b, true, sweep)
	}
	return err
}

func validOp(op thread.Op) bool { return len(op) <= 64 && !strings.ContainsAny(string(op), "\t") }

// validate refuses what Redis cannot hold before anything reaches the
// server: ids that cannot be stored (ErrInvalid) or so cannot exist
// (ErrNotFound), and ops the encoding cannot frame. It checks no rule of
// a batch: those are store.PlanBatch's.
func validate(b *store.Batch) error {
	ref := func(what, id string) error {
		if id != "" && !ids.Valid(id) {
			return fmt.Errorf("%s %q: %w", what, clip(id), thread.ErrNotFound)
		}
		return nil
	}
	for _, c := range b.Commits {
		if c == nil || !ids.Valid(c.ID) {
			return fmt.Errorf("commit id: %w", thread.ErrInvalid)
		}
		if !validOp(c.Op) {
			return fmt.Errorf("commit %s: op %q: %w", c.ID, clip(string(c.Op)), thread.ErrInvalid)
		}
		if err := ref("parent", c.Parent); err != nil {
			return fmt.Errorf("commit %s: %w", c.ID, err)
		}
	}
	for _, cr := range b.Create {
		r := cr.Record
		if r == nil || r.ID == "" {
			return fmt.Errorf("create: no thread id: %w", thread.ErrInvalid)
		}
		if !ids.ValidKey(r.ID) {
			return fmt.Errorf("create: thread id %q: %w", clip(r.ID), thread.ErrInvalid)
		}
		if !validOp(cr.Op) {
			return fmt.Errorf("create %s: op %q: %w", r.ID, clip(string(cr.Op)), thread.ErrInvalid)
		}
		if err := ref("head", r.Head); err != nil {
			return fmt.Errorf("create %s: %w", r.ID, err)
		}
		for _, e := range cr.History {
			if err := ref("history commit", e.Commit); err != nil {
				return fmt.Errorf("create %s: %w", r.ID, err)
			}
			if !validOp(e.Op) {
				return fmt.Errorf("create %s: op %q: %w", r.ID, clip(string(e.Op)), thread.ErrInvalid)
			}
		}
	}
	for _, m := range b.Moves {
		if !ids.ValidKey(m.Thread) {
			return fmt.Errorf("move: thread %q: %w", clip(m.Thread), thread.ErrNotFound)
		}
		if err := ref("head", m.Head); err != nil {
			return fmt.Errorf("move %s: %w", m.Thread, err)
		}
		if !validOp(m.Op) {
			return fmt.Errorf("move %s: op %q: %w", m.Thread, clip(string(m.Op)), thread.ErrInvalid)
		}
	}
	for _, k := range b.DropCheckpoints {
		if !ids.ValidKey(k.Thread) {
			return fmt.Errorf("drop checkpoint: thread %q: %w", clip(k.Thread), thread.ErrNotFound)
		}
	}
	for _, cp := range b.Checkpoints {
		if !ids.ValidKey(cp.Thread) {
			return fmt.Errorf("checkpoint: thread %q: %w", clip(cp.Thread), thread.ErrNotFound)
		}
		if !ids.Valid(cp.Commit) {
			return fmt.Errorf("checkpoint %q: commit %q: %w", clip(cp.Name), clip(cp.Commit), thread.ErrNotFound)
		}
	}
	for _, pr := range b.Prune {
		if !ids.ValidKey(pr.Thread) {
			return fmt.Errorf("prune: thread %q: %w", clip(pr.Thread), thread.ErrNotFound)
		}
	}
	for _, d := range b.Delete {
		if !ids.ValidKey(d.Thread) {
			return fmt.Errorf("delete: thread %q: %w", clip(d.Thread), thread.ErrNotFound)
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// plan is a batch with the family of everything it names.
type plan struct {
	threads map[string]string // thread id -> family (existing, or made by the batch)
	commits map[string]string // commit id -> family
	created []string          // family of each creation
	primary string
	cached  bool // some family came from the cache
	// found is where the cache or the index keys put each thread ("t:"+id)
	// and commit ("c:"+id) that exists already: where the facts are read.
	found map[string]string
}

// resolve finds the families of the threads and commits that b names and
// assigns families to the threads and commits it makes: a new commit joins
// its parent's family; a new thread joins the family of its head, its
// history or the thread it was forked from, or starts its own (named after
// its id); commits with neither join the batch's first family.
func (s *Store) resolve(ctx context.Context, b *store.Batch, fresh bool) (*plan, error) {
	p := &plan{threads: map[string]string{}, commits: map[string]string{}, created: make([]string, len(b.Create))}
	isNew := make(map[string]bool, len(b.Commits))
	for _, c := range b.Commits {
		isNew[c.ID] = true
	}
	creating := make(map[string]int, len(b.Create))
	for i, cr := range b.Create {
		creating[cr.Record.ID] = i
	}
	var keys []string // "t:"+id or "c:"+id, to look up
	seen := map[string]bool{}
	want := func(kind, id string) {
		if id == "" || (kind == "c" && isNew[id]) {
			return
		}
		k := kind + ":" + id
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for _, c := range b.Commits {
		want("c", c.Parent)
	}
	for _, cr := range b.Create {
		want("c", cr.Record.Head)
		for _, e := range cr.History {
			want("c", e.Commit)
		}
		if ff := cr.Record.ForkedFrom.Thread; ids.ValidKey(ff) {
			want("t", ff)
		}
	}
	for _, m := range b.Moves {
		want("t", m.Thread)
		want("c", m.Head)
	}
	for _, k := range b.DropCheckpoints {
		want("t", k.Thread)
	}
	for _, cp := range b.Checkpoints {
		want("t", cp.Thread)
		want("c", cp.Commit)
	}
	for _, pr := range b.Prune {
		want("t", pr.Thread)
	}
	for _, d := range b.Delete {
		want("t", d.Thread)
	}
	// From the cache, then one round trip for the rest.
	found := make(map[string]string, len(keys))
	var misses []string
	for _, k := range keys {
		if f, ok := s.fams.get(k); ok && !fresh {
			found[k], p.cached = f, true
		} else {
			misses = append(misses, k)
		}
	}
	if len(misses) > 0 {
		cmds := make([]*goredis.StringCmd, len(misses))
		_, err := s.rdb.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
			for i, k := range misses {
				cmds[i] = pipe.Get(ctx, s.indexKey(k))
			}
			return nil
		})
		if err != nil && !errors.Is(err, goredis.Nil) {
			return nil, fmt.Errorf("redis: resolve families: %w", err)
		}
		for i, k := range misses {
			if f, err := cmds[i].Result(); err == nil {
				found[k] = f
				s.fams.put(k, f)
			}
		}
	}
	p.found = found
	for k, f := range found {
		if k[0] == 't' {
			p.threads[k[2:]] = f
		} else {
			p.commits[k[2:]] = f
		}
	}

	// Assign families until nothing changes.
	threadFam := func(id string) string {
		if i, ok := creating[id]; ok {
			return p.created[i]
		}
		return p.threads[id]
	}
	for changed := true; changed; {
		changed = false
		set := func(id, f string) {
			if id != "" && f != "" && isNew[id] && p.commits[id] == "" {
				p.commits[id], changed = f, true
			}
		}
		for _, c := range b.Commits {
			if c.Parent != "" {
				set(c.ID, p.commits[c.Parent])
			}
		}
		for i, cr := range b.Create {
			if p.created[i] == "" {
				cands := []string{p.commits[cr.Record.Head]}
				for _, e := range cr.History {
					cands = append(cands, p.commits[e.Commit])
				}
				cands = append(cands, threadFam(cr.Record.ForkedFrom.Thread))
				for _, f := range cands {
					if f != "" {
						p.created[i], changed = f, true
						break
					}
				}
			}
			if f := p.created[i]; f != "" {
				set(cr.Record.Head, f)
				for _, e := range cr.History {
					set(e.Commit, f)
				}
			}
		}
		for _, m := range b.Moves {
			set(m.Head, threadFam(m.Thread))
		}
		for _, cp := range b.Checkpoints {
			set(cp.Commit, threadFam(cp.Thread))
		}
		if !changed {
			for i, cr := range b.Create {
				if p.created[i] == "" {
					p.created[i], changed = cr.Record.ID, true
					break
				}
			}
		}
	}
	// The batch's first family; what is unknown goes there, to be found
	// missing by the script.
	for _, f := range p.created {
		if p.primary == "" {
			p.primary = f
		}
	}
	for _, id := range namedThreads(b) {
		if f := threadFam(id); f != "" && p.primary == "" {
			p.primary = f
		}
	}
	for _, c := range b.Commits {
		if f := p.commits[c.ID]; f != "" && p.primary == "" {
			p.primary = f
		}
	}
	if p.primary == "" && len(b.Commits) > 0 {
		p.primary = b.Commits[0].ID
	}
	// A batch that names only threads without a family: they do not exist,
	// and the script, looking for them in a family named after the first,
	// says so.
	for _, id := range namedThreads(b) {
		if p.primary == "" {
			p.primary = id
		}
	}
	for _, c := range b.Commits {
		if p.commits[c.ID] == "" {
			p.commits[c.ID] = p.primary
		}
	}
	for i, cr := range b.Create {
		p.threads[cr.Record.ID] = p.created[i]
	}
	return p, nil
}

func threadIDs(ms []store.Move) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Thread
	}
	return out
}

func dropIDs(ks []store.CheckpointKey) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.Thread
	}
	return out
}

func cpIDs(cps []thread.Checkpoint) []string {
	out := make([]string, len(cps))
	for i, cp := range cps {
		out[i] = cp.Thread
	}
	return out
}

// namedThreads returns the threads a batch names that must exist already
// (or be made by it): those it moves, checkpoints, prunes and deletes.
func namedThreads(b *store.Batch) []string {
	out := append(append(threadIDs(b.Moves), dropIDs(b.DropCheckpoints)...), cpIDs(b.Checkpoints)...)
	for _, pr := range b.Prune {
		out = append(out, pr.Thread)
	}
	return append(out, delIDs(b.Delete)...)
}

func delIDs(ds []store.Deletion) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Thread
	}
	return out
}

// fam returns the family of a thread or commit the batch names, the
// primary one for what does not exist.
func (p *plan) thread(id string) string {
	if f := p.threads[id]; f != "" {
		return f
	}
	return p.primary
}

func (p *plan) commit(id string) string {
	if id == "" {
		return p.primary
	}
	if f := p.commits[id]; f != "" {
		return f
	}
	return p.primary
}

// rel is the family of a commit as a history entry or checkpoint stores
// it: "" when it is the thread's own.
func rel(commitFam, threadFam string) string {
	if commitFam == threadFam {
		return ""
	}
	return commitFam
}

// families returns the distinct families the batch touches.
func (p *plan) families(b *store.Batch) []string {
	var out []string
	add := func(f string) {
		for _, x := range out {
			if x == f {
				return
			}
		}
		out = append(out, f)
	}
	add(p.primary)
	for _, c := range b.Commits {
		add(p.commit(c.ID))
		if c.Parent != "" {
			add(p.commit(c.Parent))
		}
	}
	for _, f := range p.created {
		add(f)
	}
	for _, cr := range b.Create {
		add(p.commit(cr.Record.Head))
		for _, e := range cr.History {
			add(p.commit(e.Commit))
		}
	}
	for _, m := range b.Moves {
		add(p.thread(m.Thread))
		add(p.commit(m.Head))
	}
	for _, k := range b.DropCheckpoints {
		add(p.thread(k.Thread))
	}
	for _, cp := range b.Checkpoints {
		add(p.thread(cp.Thread))
		add(p.commit(cp.Commit))
	}
	for _, pr := range b.Prune {
		add(p.thread(pr.Thread))
	}
	for _, d := range b.Delete {
		add(p.thread(d.Thread))
	}
	return out
}

// claim is an index key of a new commit, written before the script (in
// cluster mode), to be taken back if the script refuses the batch.
// (Index keys of new threads are left: they point at nothing, readers skip
// them, and the next creation of the id takes them over. Taking them back
// could race with another process creating the same id.)
type claim struct {
	key, fam string
}

// claims is what claim wrote before the script, in cluster mode.
type claims struct {
	keys   []claim
	listed []listed // listing entries the batch added
	// threads and commits are what claim found alive in another family
	// than the batch's, for the planner: the facts of that family's slot,
	// which the batch's script cannot read.
	threads map[string]store.ThreadFact
	commits []string
}

// tell adds what the claim found to the facts.
func (cl *claims) tell(fs *facts) {
	for id, t := range cl.threads {
		if _, _, ok, _ := fs.Thread(context.Background(), id); !ok {
			fs.threads = append(fs.threads, threadFact{id, t})
		}
	}
	for _, id := range cl.commits {
		fs.commits = append(fs.commits, id)
	}
}

type listed struct{ key, id string }

// maxAttempts bounds how often apply plans a batch again because the
// facts it was planned on changed before its script ran.
const maxAttempts = 8

func (s *Store) apply(ctx context.Context, b *store.Batch, fresh, sweep bool) (err error, cached bool) {
	if len(b.Commits)+len(b.Create)+len(b.Moves)+len(b.DropCheckpoints)+len(b.Checkpoints)+len(b.Prune)+len(b.Delete) == 0 {
		return nil, false // an empty batch
	}
	for attempt := 1; ; attempt++ {
		done, err, cached := s.applyOnce(ctx, b, fresh, sweep, true)
		if done {
			return err, cached
		}
		if attempt == maxAttempts {
			return fmt.Errorf("redis: apply: the store kept changing under the batch (%d attempts): %w", attempt, thread.ErrConflict), false
		}
		// The facts changed between the read and the script: read them
		// again, every family from its index key, and plan again; the
		// planner's verdict on the fresh facts decides.
		fresh = true
	}
}

// applyOnce resolves the families of b, finds the facts the planner
// needs (with guess, first from what the Store remembers), plans and runs
// the script that writes the plan if the facts still hold. done is false
// when they did not (nothing was written).
func (s *Store) applyOnce(ctx context.Context, b *store.Batch, fresh, sweep, guess bool) (done bool, err error, cached bool) {
	p, err := s.resolve(ctx, b, fresh)
	if err != nil {
		return true, err, false
	}
	if fams := p.families(b); s.cluster && len(fams) > 1 {
		return true, fmt.Errorf("batch spans the thread families %q: a Redis Cluster store keeps a family in one hash slot and applies a batch within one: %w",
			fams, thread.ErrUnsupported), p.cached
	}
	now := s.now()
	var expires int64
	if s.ttl > 0 {
		expires = micros(now.Add(s.ttl))
	}
	// On a single server the script claims index keys and lists threads
	// itself, atomically with its guard; a cluster script can touch only
	// its family's slot, so the client claims them first.
	inline := !s.cluster
	var cl claims
	if !inline {
		if cl, err = s.claim(ctx, b, p, expires); errors.Is(err, errStale) {
			return false, nil, p.cached
		} else if err != nil {
			return true, err, p.cached
		}
	}
	// First on what the Store remembers (no round trip); a plan that
	// fails on that is made again on facts read now, whose verdict is
	// the one returned.
	fs, err := s.readFacts(ctx, b, p, fresh, sweep, inline, guess && !fresh && !sweep, micros(now))
	var plan *store.Plan
	var args []any
	if err == nil {
		cl.tell(fs)
		plan, err = store.PlanBatch(ctx, fs, b)
		if err != nil && fs.guessed {
			s.forget(fs.probes)
			if fs, err = s.readFacts(ctx, b, p, fresh, sweep, inline, false, micros(now)); err == nil {
				cl.tell(fs)
				plan, err = store.PlanBatch(ctx, fs, b)
			}
		}
	}
	if err == nil {
		args, err = s.scriptArgs(plan, p, fs, inline, micros(now), expires)
	}
	if err != nil {
		s.unclaim(context.WithoutCancel(ctx), cl)
		return true, err, p.cached
	}
	if s.hook != nil {
		s.hook("script")
	}
	res, err := applyScript.Run(ctx, s.rdb, []string{s.famKey(p.primary, "m")}, args...).Slice()
	if err != nil {
		// Whether it ran is unknown: leave the claims, which point at
		// nothing if it did not.
		return true, fmt.Errorf("redis: apply: %w", err), p.cached
	}
	after := context.WithoutCancel(ctx)
	if len(res) == 1 && res[0] == "STALE" {
		s.unclaim(after, cl)
		s.forget(fs.probes)
		if fs.guessed {
			// Only the Store's memory was stale: read, not fresh.
			return s.applyOnce(ctx, b, fresh, sweep, false)
		}
		return false, nil, p.cached
	}
	if len(res) != 5 || res[0] != "OK" {
		return true, fmt.Errorf("redis: apply: unexpected reply %v", res), p.cached
	}
	freed, _ := res[1].([]any)
	tenants, _ := res[2].([]any)
	replaced, _ := res[3].([]any)
	unlisted, _ := res[4].([]any)
	s.remember(plan, p, expires, freed)
	for _, c := range b.Commits {
		s.fams.put("c:"+c.ID, p.commit(c.ID))
	}
	for i, cr := range b.Create {
		s.fams.put("t:"+cr.Record.ID, p.created[i])
	}
	for i := 0; i < len(freed); i += 2 {
		id, _ := freed[i].(string)
		s.fams.drop("c:" + id)
	}
	for _, d := range b.Delete {
		s.fams.drop("t:" + d.Thread)
	}
	if s.hook != nil {
		s.hook("cleanup")
	}
	// Take the index keys and listing entries of what is gone. A crash
	// here leaves keys that point at nothing, which readers treat as
	// missing, and listing entries that readers skip.
	newTenant := map[string]string{}
	for _, cr := range b.Create {
		newTenant[cr.Record.ID] = cr.Record.Tenant
	}
	var gone [][2]string // thread id, tenant whose listing it may leave
	for i, d := range b.Delete {
		tenant := ""
		if i < len(tenants) {
			tenant, _ = tenants[i].(string)
		}
		gone = append(gone, [2]string{d.Thread, tenant})
	}
	for i := 0; i+1 < len(replaced); i += 2 {
		id, _ := replaced[i].(string)
		tenant, _ := replaced[i+1].(string)
		if tenant != newTenant[id] {
			gone = append(gone, [2]string{id, tenant})
		}
	}
	if len(gone) == 0 && (inline || (len(freed) == 0 && len(unlisted) == 0 && (expires == 0 || len(b.Moves) == 0))) {
		return true, nil, p.cached
	}
	nowUS := micros(now)
	_, err = s.rdb.Pipelined(after, func(pipe goredis.Pipeliner) error {
		if inline {
			// The script took the index keys and the shared listings; a
			// tenant's listing is named by a digest the script cannot make.
			// It goes unless the id lives in that tenant again.
			for _, g := range gone {
				delistScript.Eval(after, pipe, []string{s.tenantKey(g[1])}, s.prefix, g[0], g[1], nowUS)
			}
			return nil
		}
		for i := 0; i+1 < len(freed); i += 2 {
			id, _ := freed[i].(string)
			fam, _ := freed[i+1].(string)
			unclaimScript.Eval(after, pipe, []string{s.commitIndexKey(id)}, fam)
		}
		for _, d := range b.Delete {
			unclaimScript.Eval(after, pipe, []string{s.threadIndexKey(d.Thread)}, p.thread(d.Thread))
			pipe.ZRem(after, s.allKey(), d.Thread)
			pipe.ZRem(after, s.expiryKey(), d.Thread)
		}
		for _, g := range gone {
			pipe.ZRem(after, s.tenantKey(g[1]), g[0])
		}
		for i := 0; i+1 < len(unlisted); i += 2 {
			key, _ := unlisted[i].(string)
			id, _ := unlisted[i+1].(string)
			if _, made := newTenant[id]; !made { // the claim listed the new thread
				pipe.ZRem(after, key, id)
			}
		}
		if expires != 0 {
			// A move pushes the deadline only once it is applied.
			for _, m := range b.Moves {
				pipe.ZAdd(after, s.expiryKey(), goredis.Z{Score: float64(expires), Member: m.Thread})
			}
		}
		return nil
	})
	if err != nil {
		s.log.Warn("redis store: clean up index keys after a batch", "err", err)
	}
	return true, nil, p.cached
}

// facts are what the planner is told, with the reads the script repeats
// before it writes (guard) and the expired records each creation
// replaces (purge, by creation).
type facts struct {
	threads []threadFact
	commits []string // those that exist
	cps     []cpFact
	// index are the guard's checks of index keys (kind "i"), after the
	// probes: kind, key, field, value.
	index []string
	purge [][]string
	// probes are the reads, for remembering what the script wrote.
	probes []probe
	// guessed says the values came from what this Store remembers (or
	// assumes of a new id), not from a read.
	guessed bool
}

// A probe is one read of the facts, as the apply script's guard repeats
// it: kind r (a record's version, head and deadline), e (a commit's
// existence) or k (a checkpoint), and the value read, as the guard
// compares it.
type probe struct {
	kind, key, field string
	val              string
	id               string // the thread or commit
	fam              string // of a record
	cp               store.CheckpointKey
}

type threadFact struct {
	id string
	store.ThreadFact
}

type cpFact struct {
	key    store.CheckpointKey
	commit string
}

// Thread implements store.Facts. A batch names a few threads, commits
// and checkpoints (a document's load names thousands of commits, which
// PlanBatch asks of once each): the facts are looked up in slices.
func (f *facts) Thread(_ context.Context, id string) (int64, string, bool, error) {
	for _, t := range f.threads {
		if t.id == id {
			return t.Version, t.Head, true, nil
		}
	}
	return 0, "", false, nil
}

// Commit implements store.Facts.
func (f *facts) Commit(_ context.Context, id string) (bool, error) {
	return slices.Contains(f.commits, id), nil
}

// Checkpoint implements store.Facts.
func (f *facts) Checkpoint(_ context.Context, th, name string) (string, bool, error) {
	for _, c := range f.cps {
		if c.key == (store.CheckpointKey{Thread: th, Name: name}) {
			return c.commit, true, nil
		}
	}
	return "", false, nil
}

// probeKey names a probe in the probeCache.
type probeKey struct{ kind, key, field string }

func (pr *probe) cacheKey() probeKey { return probeKey{pr.kind, pr.key, pr.field} }

// raw is how the guard compares a value that may be missing.
func raw(v any) string {
	if s, ok := v.(string); ok {
		return "=" + s
	}
	return ""
}

// noRecord is the value of a record probe where there is none.
const noRecord = "\t\t"

// recordValue is the value of a record probe for a record at version v
// with head h and deadline x (0: none).
func recordValue(v int64, h string, x int64) string {
	xs := ""
	if x != 0 {
		xs = "=" + strconv.FormatInt(x, 10)
	}
	return "=" + strconv.FormatInt(v, 10) + "\t=" + h + "\t" + xs
}

// readFacts finds what store.NeedsOf lists: each thread's record where
// its family says (a record expired at now counts as missing; with sweep,
// only an expired one counts), each commit's existence and each
// checkpoint. With guess, it takes them from what this Store remembers
// of its own writes and reads, and assumes the ids the batch makes are
// free, when it can for all of them: no round trip. Otherwise it reads
// them in one round trip (two when fresh on a single server, which first
// reads the index keys of what the batch makes). It returns them with the
// guard: the same reads, which the script repeats and compares before it
// writes, so the plan is written only on the facts it was made on.
func (s *Store) readFacts(ctx context.Context, b *store.Batch, p *plan, fresh, sweep, inline, guess bool, now int64) (*facts, error) {
	needs := store.NeedsOf(b)
	var creating map[string]string
	if len(b.Create) > 0 {
		creating = make(map[string]string, len(b.Create))
		for i, cr := range b.Create {
			creating[cr.Record.ID] = p.created[i]
		}
	}
	isNew := make(map[string]bool, len(b.Commits))
	for _, c := range b.Commits {
		isNew[c.ID] = true
	}
	// The index keys of what the batch makes: on a single server the
	// script checks that they point at nothing live elsewhere; a second
	// attempt reads them first, to plan on what they point at.
	var indexed map[string]string
	if fresh && inline {
		indexed = map[string]string{}
		var keys []string
		for id := range creating {
			keys = append(keys, "t:"+id)
		}
		for id := range isNew {
			keys = append(keys, "c:"+id)
		}
		if len(keys) > 0 {
			cmds := make([]*goredis.StringCmd, len(keys))
			_, err := s.rdb.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
				for i, k := range keys {
					cmds[i] = pipe.Get(ctx, s.indexKey(k))
				}
				return nil
			})
			if err != nil && !errors.Is(err, goredis.Nil) {
				return nil, fmt.Errorf("redis: read index keys: %w", err)
			}
			for i, k := range keys {
				if f, err := cmds[i].Result(); err == nil {
					indexed[k] = f
				}
			}
		}
	}
	add := func(fams []string, f string) []string {
		if f == "" || slices.Contains(fams, f) {
			return fams
		}
		return append(fams, f)
	}
	fs := &facts{probes: make([]probe, 0, len(needs.Threads)+len(needs.Commits)+len(needs.Checkpoints)+2)}
	index := fs.index
	for _, id := range needs.Threads {
		var fams []string
		cf, made := creating[id]
		if made {
			fams = add(fams, cf)
			if inline {
				// A cluster store's claim deals with a family elsewhere.
				fams = add(add(fams, p.found["t:"+id]), indexed["t:"+id])
			}
		} else {
			fams = add(fams, p.found["t:"+id])
		}
		for _, f := range fams {
			fs.probes = append(fs.probes, probe{kind: "r", key: s.recKey(f, id), id: id, fam: f})
		}
		if made && inline {
			index = append(index, "i", s.threadIndexKey(id), "t:"+id, "\t"+strings.Join(fams, "\t")+"\t")
		}
	}
	for _, id := range needs.Commits {
		fams := []string{p.commit(id)}
		if isNew[id] {
			fams = add(fams, indexed["c:"+id])
		} else if f := p.found["c:"+id]; f != "" {
			fams = []string{f}
		}
		for _, f := range fams {
			fs.probes = append(fs.probes, probe{kind: "e", key: s.famKey(f, "m"), field: id, id: id})
		}
		if isNew[id] && inline {
			index = append(index, "i", s.commitIndexKey(id), "c:"+id, "\t"+strings.Join(fams, "\t")+"\t")
		}
	}
	for _, k := range needs.Checkpoints {
		if _, made := creating[k.Thread]; made {
			continue // the planner asks only of threads stored before
		}
		if f := p.found["t:"+k.Thread]; f != "" {
			fs.probes = append(fs.probes, probe{kind: "k", key: s.cpKey(f, k.Thread), field: k.Name, cp: k})
		}
	}

	fs.guessed = guess && s.guess(fs.probes, creating, isNew)
	if !fs.guessed {
		if err := s.read(ctx, fs.probes); err != nil {
			return nil, err
		}
	}

	var purge map[string][]string
	for _, pr := range fs.probes {
		switch pr.kind {
		case "r":
			parts := strings.SplitN(pr.val, "\t", 3)
			if len(parts) != 3 || parts[0] == "" {
				continue
			}
			x := strings.TrimPrefix(parts[2], "=")
			exp, _ := strconv.ParseInt(x, 10, 64)
			expired := x != "" && exp <= now
			if expired && !sweep {
				if purge == nil {
					purge = map[string][]string{}
				}
				purge[pr.id] = append(purge[pr.id], pr.fam)
			}
			if _, _, live, _ := fs.Thread(ctx, pr.id); live || expired != sweep {
				continue
			}
			n, err := strconv.ParseInt(parts[0][1:], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("redis: thread %s: version %q: %w", pr.id, parts[0], errCorrupt)
			}
			fs.threads = append(fs.threads, threadFact{pr.id, store.ThreadFact{Version: n, Head: strings.TrimPrefix(parts[1], "=")}})
		case "e":
			if pr.val == "1" {
				fs.commits = append(fs.commits, pr.id)
			}
		case "k":
			if pr.val == "" {
				continue
			}
			_, _, commit, err := splitValue(pr.val[1:])
			if err != nil {
				return nil, fmt.Errorf("redis: checkpoint %q of %s: %w", pr.cp.Name, pr.cp.Thread, err)
			}
			fs.cps = append(fs.cps, cpFact{pr.cp, commit})
		}
	}
	fs.index = index
	fs.purge = make([][]string, len(b.Create))
	for i, cr := range b.Create {
		fs.purge[i] = purge[cr.Record.ID]
	}
	return fs, nil
}

// guess fills the probes' values from what the Store remembers, assuming
// that the records of threads the batch creates and the commits it makes
// do not exist; false if it knows too little.
func (s *Store) guess(probes []probe, creating map[string]string, isNew map[string]bool) bool {
	s.seen.mu.Lock()
	defer s.seen.mu.Unlock()
	for i := range probes {
		pr := &probes[i]
		v, ok := s.seen.m[pr.cacheKey()]
		switch {
		case ok:
			pr.val = v
		case pr.kind == "r" && creating[pr.id] != "":
			pr.val = noRecord
		case pr.kind == "e" && isNew[pr.id]:
			pr.val = "0"
		default:
			return false
		}
	}
	return true
}

// read fills the probes' values in one round trip, and remembers them.
func (s *Store) read(ctx context.Context, probes []probe) error {
	if len(probes) == 0 {
		return nil
	}
	cmds := make([]goredis.Cmder, len(probes))
	_, err := s.rdb.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
		for i, pr := range probes {
			switch pr.kind {
			case "r":
				cmds[i] = pipe.HMGet(ctx, pr.key, fVersion, fHead, fExpires)
			case "e":
				cmds[i] = pipe.HExists(ctx, pr.key, pr.field)
			default:
				cmds[i] = pipe.HGet(ctx, pr.key, pr.field)
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return fmt.Errorf("redis: read the facts of a batch: %w", err)
	}
	for i := range probes {
		pr := &probes[i]
		switch cmd := cmds[i].(type) {
		case *goredis.SliceCmd:
			v := cmd.Val()
			if len(v) != 3 {
				return fmt.Errorf("redis: read thread %s: %w", pr.id, cmd.Err())
			}
			pr.val = raw(v[0]) + "\t" + raw(v[1]) + "\t" + raw(v[2])
		case *goredis.BoolCmd:
			pr.val = strconv.Itoa(flag(cmd.Val()))
		case *goredis.StringCmd:
			if v, err := cmd.Result(); err == nil {
				pr.val = "=" + v
			} else if !errors.Is(err, goredis.Nil) {
				return fmt.Errorf("redis: read checkpoint %q of %s: %w", pr.cp.Name, pr.cp.Thread, err)
			}
		}
	}
	s.seen.mu.Lock()
	defer s.seen.mu.Unlock()
	for _, pr := range probes {
		s.seen.put(pr.cacheKey(), pr.val)
	}
	return nil
}

// remember notes what a written plan leaves in the keys the next batch
// probes: the records it made and moved (and took away), and its
// commits.
func (s *Store) remember(pl *store.Plan, p *plan, expires int64, freed []any) {
	b := pl.Batch
	s.seen.mu.Lock()
	defer s.seen.mu.Unlock()
	rec := func(fam, id, v string) { s.seen.put(probeKey{"r", s.recKey(fam, id), ""}, v) }
	for _, c := range b.Commits {
		s.seen.put(probeKey{"e", s.famKey(p.commit(c.ID), "m"), c.ID}, "1")
	}
	for i, cr := range b.Create {
		rec(p.created[i], cr.Record.ID, recordValue(cr.Record.Version, cr.Record.Head, expires))
	}
	for _, m := range b.Moves {
		rec(p.thread(m.Thread), m.Thread, recordValue(m.From+1, m.Head, expires))
	}
	for _, d := range b.Delete {
		rec(p.thread(d.Thread), d.Thread, noRecord)
	}
	for i := 0; i+1 < len(freed); i += 2 {
		id, _ := freed[i].(string)
		fam, _ := freed[i+1].(string)
		s.seen.put(probeKey{"e", s.famKey(fam, "m"), id}, "0")
	}
	for _, k := range b.DropCheckpoints {
		s.seen.put(probeKey{"k", s.cpKey(p.thread(k.Thread), k.Thread), k.Name}, "")
	}
	for _, cp := range b.Checkpoints {
		f := p.thread(cp.Thread)
		s.seen.put(probeKey{"k", s.cpKey(f, cp.Thread), cp.Name}, "="+checkpointValue(cp, rel(p.commit(cp.Commit), f)))
	}
}

// probeCache remembers the values of probes (probe.cacheKey) that this
// Store read or wrote last. An entry may be stale (another process wrote
// since): the guard finds out.
type probeCache struct {
	mu sync.Mutex
	m  map[probeKey]string
}

// put remembers a value; mu is held.
func (c *probeCache) put(key probeKey, v string) {
	if c.m == nil || len(c.m) >= familyCacheSize {
		c.m = make(map[probeKey]string)
	}
	c.m[key] = v
}

// forget drops what the Store remembers of the probes, which turned out
// stale.
func (s *Store) forget(probes []probe) {
	s.seen.mu.Lock()
	defer s.seen.mu.Unlock()
	for _, pr := range probes {
		delete(s.seen.m, pr.cacheKey())
	}
}

// scriptArgs encodes the guard and the plan for the apply script.
func (s *Store) scriptArgs(pl *store.Plan, p *plan, fs *facts, inline bool, now, expires int64) ([]any, error) {
	b := pl.Batch
	args := make([]any, 0, 32+4*len(fs.probes)+len(fs.index)+7*len(b.Commits)+len(pl.Refs)*3+
		24*len(b.Create)+20*len(b.Moves)+3*len(b.DropCheckpoints)+4*len(b.Checkpoints)+3*len(b.Prune)+2*len(b.Delete))
	args = append(args, s.prefix, now, flag(inline), expires, len(fs.probes)+len(fs.index)/4)
	for _, pr := range fs.probes {
		args = append(args, pr.kind, pr.key, pr.field, pr.val)
	}
	for _, x := range fs.index {
		args = append(args, x)
	}
	args = append(args, len(b.Commits))
	for i, c := range b.Commits {
		blob, err := encodeCommit(c)
		if err != nil {
			return nil, err
		}
		args = append(args, p.commit(c.ID), c.ID, c.Parent, p.commit(c.Parent), strconv.FormatInt(c.Depth, 10), blob, pl.NewRefs[i])
	}
	args = append(args, len(pl.Refs))
	for _, r := range pl.Refs {
		args = append(args, p.commit(r.Commit), r.Commit, r.N)
	}
	args = append(args, len(b.Create))
	for i, cr := range b.Create {
		r, f := cr.Record, p.created[i]
		fk := ""
		if ff := r.ForkedFrom.Thread; ff != "" {
			fk = s.forkKey(ff)
		}
		args = append(args, f, r.ID, s.tenantKey(r.Tenant), r.Tenant, fk)
		fields := recordFields(r, expires)
		args = append(args, len(fields)/2)
		for _, x := range fields {
			args = append(args, x)
		}
		hist := cr.Entries()
		args = append(args, hist[0].Version, len(hist))
		for _, e := range hist {
			args = append(args, entryValue(e.Time, e.Op, e.Commit, rel(p.commit(e.Commit), f)))
		}
		args = append(args, len(fs.purge[i]))
		for _, pf := range fs.purge[i] {
			args = append(args, pf)
		}
		args = appendLabels(args, r.Labels, inline)
	}
	args = append(args, len(b.Moves))
	for _, m := range b.Moves {
		f, hf := p.thread(m.Thread), p.commit(m.Head)
		args = append(args, f, m.Thread, m.From, entryValue(m.Time, m.Op, m.Head, rel(hf, f)))
		fields := []string{fVersion, strconv.FormatInt(m.From+1, 10), fHead, m.Head, fUpdated, strconv.FormatInt(micros(m.Time), 10)}
		if m.Kind != "" {
			fields = append(fields, fKind, string(m.Kind))
		}
		if m.Title != nil {
			fields = append(fields, fTitle, *m.Title)
		}
		if m.Labels != nil {
			fields = append(fields, fLabels, encodeLabels(m.Labels))
		}
		if expires != 0 {
			fields = append(fields, fExpires, strconv.FormatInt(expires, 10))
		}
		args = append(args, len(fields)/2)
		for _, x := range fields {
			args = append(args, x)
		}
		// A cluster store keeps no label sets: they live in other slots.
		args = append(args, flag(m.Labels != nil && inline))
		args = appendLabels(args, m.Labels, inline)
	}
	args = append(args, len(b.DropCheckpoints))
	for _, k := range b.DropCheckpoints {
		args = append(args, p.thread(k.Thread), k.Thread, k.Name)
	}
	args = append(args, len(b.Checkpoints))
	for _, cp := range b.Checkpoints {
		f, cf := p.thread(cp.Thread), p.commit(cp.Commit)
		args = append(args, f, cp.Thread, cp.Name, checkpointValue(cp, rel(cf, f)))
	}
	args = append(args, len(b.Prune))
	for _, pr := range b.Prune {
		args = append(args, p.thread(pr.Thread), pr.Thread, pr.Before)
	}
	args = append(args, len(b.Delete))
	for _, d := range b.Delete {
		args = append(args, p.thread(d.Thread), d.Thread)
	}
	var notice []byte
	if changes := b.Changes(time.UnixMicro(now).UTC()); len(changes) > 0 {
		var err error
		if notice, err = json.Marshal(changes); err != nil {
			return nil, fmt.Errorf("redis: encode the changes of a batch: %w", err)
		}
	}
	args = append(args, s.changesChannel(), notice)
	return args, nil
}

// appendLabels appends the count and pairs of labels for the script's
// label sets; none without inline.
func appendLabels(args []any, labels map[string]string, inline bool) []any {
	if !inline {
		return append(args, 0)
	}
	args = append(args, len(labels))
	for k, v := range labels {
		args = append(args, k, v)
	}
	return args
}

func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}

// claim points the index keys of the batch's new commits and threads at
// their families and lists new threads, before the script runs, so that a
// crash after the script never leaves data that cannot be found. Only a
// cluster store needs it (a single server's script does it itself). An
// index key that points at another family where its object exists tells
// the planner that the object exists (claims.tell), which it then refuses
// to make again; one that points at nothing is taken over if it still
// points there, and one that changed meanwhile is errStale (see the
// package doc for the race this leaves).
func (s *Store) claim(ctx context.Context, b *store.Batch, p *plan, expires int64) (claims, error) {
	type pending struct {
		c      claim
		thread bool
		id     string
		cmd    *goredis.Cmd
	}
	var todo []pending
	type add struct {
		l   listed
		cmd *goredis.IntCmd
	}
	var adds []add
	_, err := s.rdb.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
		for _, c := range b.Commits {
			k, f := s.commitIndexKey(c.ID), p.commit(c.ID)
			todo = append(todo, pending{c: claim{key: k, fam: f}, id: c.ID, cmd: claimScript.Eval(ctx, pipe, []string{k}, f)})
		}
		for i, cr := range b.Create {
			r := cr.Record
			k, f := s.threadIndexKey(r.ID), p.created[i]
			todo = append(todo, pending{c: claim{key: k, fam: f}, thread: true, id: r.ID, cmd: claimScript.Eval(ctx, pipe, []string{k}, f)})
			keys := []string{s.allKey(), s.tenantKey(r.Tenant)}
			if ff := r.ForkedFrom.Thread; ff != "" {
				keys = append(keys, s.forkKey(ff))
			}
			for _, key := range keys {
				adds = append(adds, add{listed{key, r.ID}, pipe.ZAdd(ctx, key, goredis.Z{Member: r.ID})})
			}
			if expires != 0 {
				// NX: never push the deadline of a thread that has the id
				// already; a score below the deadline the sweeper puts right.
				pipe.ZAddNX(ctx, s.expiryKey(), goredis.Z{Score: float64(expires), Member: r.ID})
			}
		}
		return nil
	})
	var cl claims
	for _, a := range adds {
		if n, _ := a.cmd.Result(); n == 1 {
			cl.listed = append(cl.listed, a.l)
		}
	}
	var others []pending
	for _, t := range todo {
		switch v, _ := t.cmd.Result(); v := v.(type) {
		case int64:
			if v == 1 && !t.thread {
				cl.keys = append(cl.keys, t.c)
			}
		case string:
			others = append(others, t)
		}
	}
	if err != nil {
		s.unclaim(context.WithoutCancel(ctx), cl)
		return claims{}, fmt.Errorf("redis: claim index keys: %w", err)
	}
	for _, o := range others {
		other, _ := o.cmd.Text()
		alive := false
		var err error
		if o.thread {
			// Expired or not: a cluster store's script cannot let go of a
			// record in another slot.
			var v []any
			v, err = s.rdb.HMGet(ctx, s.recKey(other, o.id), fVersion, fHead).Result()
			if err != nil {
				v = []any{nil, nil}
			}
			if ver, ok := v[0].(string); ok {
				alive = true
				n, perr := strconv.ParseInt(ver, 10, 64)
				if perr != nil {
					err = fmt.Errorf("thread %s: version %q: %w", o.id, ver, errCorrupt)
				}
				head, _ := v[1].(string)
				if cl.threads == nil {
					cl.threads = map[string]store.ThreadFact{}
				}
				cl.threads[o.id] = store.ThreadFact{Version: n, Head: head}
			}
		} else {
			alive, err = s.rdb.HExists(ctx, s.famKey(other, "m"), o.id).Result()
			if alive {
				cl.commits = append(cl.commits, o.id)
			}
		}
		if err == nil && !alive {
			// A key left by a crash or a refused batch: take it over,
			// unless another batch did meanwhile (then read again).
			var took int64
			took, err = takeoverScript.Run(ctx, s.rdb, []string{o.c.key}, o.c.fam, other).Int64()
			if err == nil && took == 0 {
				err = errStale
			}
			if err == nil && took == 1 && !o.thread {
				cl.keys = append(cl.keys, o.c)
			}
		}
		if err != nil {
			s.unclaim(context.WithoutCancel(ctx), cl)
			return claims{}, err
		}
	}
	return cl, nil
}

// errStale is claim's: an index key changed while it looked.
var errStale = errors.New("an index key changed")

// unclaim takes back what claim wrote for a batch that was refused.
func (s *Store) unclaim(ctx context.Context, cl claims) {
	if len(cl.keys) == 0 && len(cl.listed) == 0 {
		return
	}
	_, err := s.rdb.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
		for _, c := range cl.keys {
			unclaimScript.Eval(ctx, pipe, []string{c.key}, c.fam)
		}
		for _, l := range cl.listed {
			pipe.ZRem(ctx, l.key, l.id)
		}
		return nil
	})
	if err != nil {
		s.log.Warn("redis store: take back index keys of a refused batch", "err", err)
	}
}
