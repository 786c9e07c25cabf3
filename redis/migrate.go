package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/loomthreads/loom/internal/sessionrec"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// migrations[v-1] brings data at schema version v up to v+1. Version 1 is
// the first layout; version 2 keeps the threads of a tenant other than the
// default under their keys, and the work log's session records in threads;
// version 3 keeps the fork and label sets (Store.Forks, label listings).
var migrations = []func(ctx context.Context, s *Store, l *migrationLock) error{
	migrateToKeys,
	migrateSets,
}

// migrateSets brings data of schema 2 to schema 3: it lists every thread
// in the set of the thread it was forked from and (but in cluster mode,
// which keeps none) in a set per label, and writes the record's field s,
// a page of 256 threads at a time, reporting each page. Listing is
// idempotent: a run cut short is finished by the next.
func migrateSets(ctx context.Context, s *Store, l *migrationLock) error {
	const page = 256
	total, err := s.rdb.ZCard(ctx, s.allKey()).Result()
	if err != nil {
		return fmt.Errorf("count threads: %w", err)
	}
	p := thread.MigrationProgress{Store: "redis", Step: "fork and label sets", Total: int(total)}
	for after := "-"; ; {
		idList, err := s.rdb.ZRangeByLex(ctx, s.allKey(), &goredis.ZRangeBy{Min: after, Max: "+", Count: page}).Result()
		if err != nil {
			return fmt.Errorf("list threads: %w", err)
		}
		if len(idList) == 0 {
			break
		}
		if err := l.hold(ctx); err != nil {
			return err
		}
		fams := make([]*goredis.StringCmd, len(idList))
		if _, err := s.rdb.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
			for i, id := range idList {
				fams[i] = pipe.Get(ctx, s.threadIndexKey(id))
			}
			return nil
		}); err != nil && !errors.Is(err, goredis.Nil) {
			return fmt.Errorf("read index keys: %w", err)
		}
		recs := make([]*goredis.MapStringStringCmd, len(idList))
		if _, err := s.rdb.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
			for i, id := range idList {
				if f := fams[i].Val(); f != "" {
					recs[i] = pipe.HGetAll(ctx, s.recKey(f, id))
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("read records: %w", err)
		}
		if _, err := s.rdb.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
			for i, id := range idList {
				if recs[i] == nil || len(recs[i].Val()) == 0 {
					continue
				}
				r, _, err := decodeRecord(recs[i].Val())
				if err != nil {
					return fmt.Errorf("thread %s: %w", id, err)
				}
				var sets []string
				if ff := r.ForkedFrom.Thread; ff != "" {
					sets = append(sets, s.forkKey(ff))
				}
				if !s.cluster {
					for k, v := range r.Labels {
						sets = append(sets, s.labelKey(r.Tenant, k, v))
					}
				}
				for _, key := range sets {
					pipe.ZAdd(ctx, key, goredis.Z{Member: id})
				}
				if len(sets) > 0 {
					pipe.HSet(ctx, s.recKey(fams[i].Val(), id), fSets, strings.Join(sets, "\t"))
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("list threads in their sets: %w", err)
		}
		p.Done = min(p.Done+len(idList), p.Total)
		if p.Total > 0 {
			store.ReportMigration(ctx, p)
		}
		if len(idList) < page {
			break
		}
		after = "(" + idList[len(idList)-1]
	}
	return nil
}

// migrate reads the schema version, brings older data up to SchemaVersion
// and refuses data written by a newer version. Migrations run under the
// migration lock and the version moves only when one has finished, so a
// migration cut short (a crash, a lost lock, a cancelled Open) runs again
// at the next Open: each is written to be safe to run again from any point.
func (s *Store) migrate(ctx context.Context) error {
	for {
		v, err := s.schemaVersion(ctx)
		if err != nil || v == SchemaVersion {
			return err
		}
		if v != 0 {
			break
		}
		// No version: nothing was ever written under this prefix (every
		// loom writes the version before anything else), so a new store
		// starts at the latest. Compare and set, then read again: another
		// process may have set it first.
		if err := s.setSchemaVersion(ctx, 0, SchemaVersion); err != nil {
			return err
		}
	}
	return s.withMigrationLock(ctx, func(ctx context.Context, l *migrationLock) error {
		for {
			// Again under the lock: the process that held it before may
			// have migrated the data while this one waited.
			v, err := s.schemaVersion(ctx)
			if err != nil || v == SchemaVersion {
				return err
			}
			if err := migrations[v-1](ctx, s, l); err != nil {
				return fmt.Errorf("redis store %q: migrate to schema version %d: %w", s.prefix, v+1, err)
			}
			if err := l.hold(ctx); err != nil {
				return fmt.Errorf("redis store %q: migrate to schema version %d: %w", s.prefix, v+1, err)
			}
			if err := s.setSchemaVersion(ctx, v, v+1); err != nil {
				return err
			}
		}
	})
}

// schemaVersion reads the schema version: 0 when there is none, an error
// when it is one this package cannot read.
func (s *Store) schemaVersion(ctx context.Context) (int, error) {
	v, err := s.rdb.Get(ctx, s.schemaKey()).Int()
	switch {
	case errors.Is(err, goredis.Nil):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("redis store %q: read schema version: %w", s.prefix, err)
	case v > SchemaVersion:
		return 0, fmt.Errorf("redis store %q: schema version %d was written by a newer loom (this one reads up to %d); upgrade loom: %w",
			s.prefix, v, SchemaVersion, thread.ErrUnsupported)
	case v < 0:
		return 0, fmt.Errorf("redis store %q: schema version %d: %w", s.prefix, v, thread.ErrInvalid)
	}
	return v, nil
}

// setSchemaVersion moves the schema version from one to another, if it is
// still the one.
func (s *Store) setSchemaVersion(ctx context.Context, from, to int) error {
	if err := migrateScript.Run(ctx, s.rdb, []string{s.schemaKey()}, from, to).Err(); err != nil && !errors.Is(err, goredis.Nil) {
		return fmt.Errorf("redis store %q: set schema version %d: %w", s.prefix, to, err)
	}
	return nil
}

// migrationLockTTL bounds how long a crashed migrator holds the lock; a
// live one renews it every third of that.
var migrationLockTTL = 30 * time.Second

// errLockLost is returned by a migration that found the lock no longer its
// own: it stalled longer than migrationLockTTL and another process took
// over. It stops; the data is left for the other process (or the next
// Open) to finish.
var errLockLost = errors.New("the migration lock was lost to another process")

// migrationLock is the store's migration lock as one process holds it:
// P:migrating, set with NX and an expiry to a token of its own.
type migrationLock struct {
	rdb        goredis.UniversalClient
	key, token string
}

// hold renews the lock, or returns errLockLost if it is no longer this
// process's: the fencing check a migrator makes before each step, so that
// a process that stalled past the expiry stops rather than work beside the
// one that took over. (Each step is also safe beside another migrator's
// same step; the check keeps the overlap to one step.)
func (l *migrationLock) hold(ctx context.Context) error {
	n, err := holdScript.Run(ctx, l.rdb, []string{l.key}, l.token, migrationLockTTL.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	if n == 0 {
		return errLockLost
	}
	return nil
}

// withMigrationLock runs f holding the store's migration lock: of the
// processes opening the store at once, one migrates while the others wait
// (then find the work done), and a crashed holder lets go when the lock
// expires. While f runs the lock is renewed in the background; if it is
// lost, f's context is cancelled.
func (s *Store) withMigrationLock(ctx context.Context, f func(context.Context, *migrationLock) error) error {
	l := &migrationLock{rdb: s.rdb, key: s.prefix + ":migrating", token: strconv.FormatUint(rand.Uint64(), 36)}
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		ok, err := s.rdb.SetNX(ctx, l.key, l.token, migrationLockTTL).Result()
		if err != nil {
			return fmt.Errorf("redis store %q: migration lock: %w", s.prefix, err)
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redis store %q: wait for the migration lock: %w", s.prefix, ctx.Err())
		case <-time.After(wait):
		}
	}
	fctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	var keeper sync.WaitGroup
	keeper.Go(func() {
		t := time.NewTicker(migrationLockTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := l.hold(fctx); err != nil {
					cancel(err)
					return
				}
			}
		}
	})
	err := f(fctx, l)
	close(done)
	keeper.Wait()
	if cause := context.Cause(fctx); err != nil && cause != nil && !errors.Is(err, cause) && ctx.Err() == nil {
		err = fmt.Errorf("%w: %w", cause, err)
	}
	cancel(nil)
	unlockScript.Run(context.WithoutCancel(ctx), s.rdb, []string{l.key}, l.token)
	return err
}

// holdScript renews the lock KEYS[1] for ARGV[2] ms if its token is ARGV[1].
var holdScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`)

// unlockScript deletes the lock KEYS[1] if its token is ARGV[1].
var unlockScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// migrateToKeys brings data of schema 1 to schema 2: it moves the threads
// of tenants other than the default to their keys (moveToKey), then
// carries the session records of the work log into threads
// (carrySessions). It reports after each thread it looks at, the default
// tenant's that keep their ids too (store.ReportMigration).
func migrateToKeys(ctx context.Context, s *Store, l *migrationLock) error {
	const page = 256
	total, err := s.rdb.ZCard(ctx, s.allKey()).Result()
	if err != nil {
		return fmt.Errorf("count threads: %w", err)
	}
	p := thread.MigrationProgress{Store: "redis", Step: "tenant keys", Total: int(total)}
	// Paged in lexical order after the last id seen, which neither the
	// removal of moved ids nor the keys added (skipped: they hold a '/')
	// disturbs.
	for after := "-"; ; {
		ids, err := s.rdb.ZRangeByLex(ctx, s.allKey(), &goredis.ZRangeBy{Min: after, Max: "+", Count: page}).Result()
		if err != nil {
			return fmt.Errorf("list threads: %w", err)
		}
		for _, id := range ids {
			if strings.Contains(id, "/") {
				continue
			}
			if err := l.hold(ctx); err != nil {
				return err
			}
			if err := s.moveToKey(ctx, id); err != nil {
				return fmt.Errorf("thread %s: %w", id, err)
			}
			p.Done = min(p.Done+1, p.Total)
			store.ReportMigration(ctx, p)
		}
		if len(ids) < page {
			break
		}
		after = "(" + ids[len(ids)-1]
	}
	if p.Done < p.Total {
		// Keys that a run cut short moved already, skipped above.
		p.Done = p.Total
		store.ReportMigration(ctx, p)
	}
	return s.carrySessions(ctx, l)
}

// moveToKey moves a thread of schema 1 to its key, if it is a tenant's:
// its record (whose id and forked_from become keys), history and
// checkpoints at once, by a script in its family's slot (moveScript), then
// its place in the listings and the deadlines, its index key, and last its
// old index key. Families keep their names, so the thread stays in its
// family's slot. The script first writes the key it moves to in the family
// (P:{F}:mv:<id>, deleted last): a move cut short after it is finished
// from there by the next run, and every later step is safe to repeat, or
// to run beside another migrator's same step.
func (s *Store) moveToKey(ctx context.Context, id string) error {
	fam, err := s.rdb.Get(ctx, s.threadIndexKey(id)).Result()
	if errors.Is(err, goredis.Nil) {
		return nil // deleted meanwhile, or moved
	}
	if err != nil {
		return err
	}
	mark := s.famKey(fam, "mv:"+id)
	var (
		markCmd *goredis.StringCmd
		recCmd  *goredis.SliceCmd
	)
	if _, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		markCmd = p.Get(ctx, mark)
		recCmd = p.HMGet(ctx, s.recKey(fam, id), fID, fTenant, fForked)
		return nil
	}); err != nil && !errors.Is(err, goredis.Nil) {
		return err
	}
	key, err := markCmd.Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return err
	}
	rec, err := recCmd.Result()
	if err != nil {
		return err
	}
	hasRec := rec[0] != nil
	tenant, _ := rec[1].(string)
	ff, _ := rec[2].(string)
	if key == "" {
		if !hasRec || tenant == "" {
			return nil // the default tenant's thread keeps its id
		}
		key = thread.Key(tenant, id)
	}
	args := []any{key}
	if hasRec {
		args = append(args, fID, key)
		if ff != "" {
			// A fork's source is a thread of its own tenant, moved too.
			rd := &reader{b: []byte(ff)}
			p := thread.ForkPoint{Thread: rd.str(), Commit: rd.str(), Message: rd.str()}
			if rd.err != nil {
				return fmt.Errorf("record field %s: %w", fForked, errCorrupt)
			}
			if p.Thread != "" && !strings.Contains(p.Thread, "/") {
				p.Thread = thread.Key(tenant, p.Thread)
			}
			args = append(args, fForked, string(appendStr(appendStr(appendStr(nil, p.Thread), p.Commit), p.Message)))
		}
	}
	keys := []string{mark, s.recKey(fam, id), s.histKey(fam, id), s.cpKey(fam, id), s.recKey(fam, key), s.histKey(fam, key), s.cpKey(fam, key)}
	if err := moveScript.Run(ctx, s.rdb, keys, args...).Err(); err != nil && !errors.Is(err, goredis.Nil) {
		return err
	}
	if !hasRec {
		// A move cut short: the record is under its key already.
		if tenant, err = s.rdb.HGet(ctx, s.recKey(fam, key), fTenant).Result(); errors.Is(err, goredis.Nil) {
			tenant, _ = thread.SplitKey(key)
		} else if err != nil {
			return err
		}
	}
	// Outside the family: the new names first, then the old ones go, so
	// that the thread is listed and found throughout.
	var at *goredis.FloatCmd
	if _, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.ZAdd(ctx, s.allKey(), goredis.Z{Member: key})
		p.ZAdd(ctx, s.tenantKey(tenant), goredis.Z{Member: key})
		p.Set(ctx, s.threadIndexKey(key), fam, 0)
		at = p.ZScore(ctx, s.expiryKey(), id)
		return nil
	}); err != nil && !errors.Is(err, goredis.Nil) {
		return err
	}
	deadline, err := at.Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return err
	}
	hasDeadline := err == nil
	if _, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		if hasDeadline {
			p.ZAdd(ctx, s.expiryKey(), goredis.Z{Score: deadline, Member: key})
			p.ZRem(ctx, s.expiryKey(), id)
		}
		p.ZRem(ctx, s.allKey(), id)
		p.ZRem(ctx, s.tenantKey(tenant), id)
		return nil
	}); err != nil {
		return err
	}
	if err := s.rdb.Del(ctx, s.threadIndexKey(id)).Err(); err != nil {
		return err
	}
	s.fams.drop("t:" + id)
	return s.rdb.Del(ctx, mark).Err()
}

// moveScript moves a thread within its family's slot, at once: it writes
// the key it moves to (ARGV[1]) in the mark, sets the record's fields
// (ARGV[2..], field and value) if the record is still under its id, and
// renames the record, history and checkpoints to the key, each that is
// still under the id and not yet under the key. KEYS: mark, the record,
// history and checkpoints under the id, then under the key.
var moveScript = goredis.NewScript(`
redis.call('SET', KEYS[1], ARGV[1])
if #ARGV > 1 and redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HSET', KEYS[2], unpack(ARGV, 2))
end
for i = 2, 4 do
  if redis.call('EXISTS', KEYS[i]) == 1 and redis.call('EXISTS', KEYS[i + 3]) == 0 then
    redis.call('RENAME', KEYS[i], KEYS[i + 3])
  end
end
return 1
`)

// scan returns the keys that match pattern, on every master of a cluster.
func (s *Store) scan(ctx context.Context, pattern string) ([]string, error) {
	var (
		mu   sync.Mutex
		keys []string
	)
	one := func(ctx context.Context, c goredis.Cmdable) error {
		it := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			mu.Lock()
			keys = append(keys, it.Val())
			mu.Unlock()
		}
		return it.Err()
	}
	if cc, ok := s.rdb.(*goredis.ClusterClient); ok {
		if err := cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error { return one(ctx, c) }); err != nil {
			return nil, err
		}
	} else if err := one(ctx, s.rdb); err != nil {
		return nil, err
	}
	slices.Sort(keys)
	return slices.Compact(keys), nil
}

// carrySessions carries the session records that this package kept for
// package worklog before they lived in threads (a hash per session,
// P:s:{project}:r:<id>, with a close set and a counter per project) into
// threads (sessionrec.LegacyBatch), then deletes those keys. Each thread
// is made by one batch (one family, so a cluster takes it); a crash before
// the deletes leaves the keys, and the next run finds the threads it made
// (ErrConflict: made whole by an earlier run, from the same keys) and
// deletes them. It reports each thread made (store.ReportMigration).
func (s *Store) carrySessions(ctx context.Context, l *migrationLock) error {
	keys, err := s.scan(ctx, s.prefix+":s:{*")
	if err != nil {
		return fmt.Errorf("find the session keys: %w", err)
	}
	if len(keys) == 0 {
		return nil
	}
	type row struct {
		tag string
		seq int64
		l   sessionrec.Legacy
	}
	var rows []row
	for _, k := range keys {
		// The tag holds no brace, so the first "}:r:" ends it; the
		// session id (no brace either) is the rest.
		tag, id, ok := strings.Cut(strings.TrimPrefix(k, s.prefix+":s:"), "}:r:")
		if !ok {
			continue // a project's close set or counter
		}
		h, err := s.rdb.HGetAll(ctx, k).Result()
		if err != nil {
			return err
		}
		if len(h) == 0 {
			continue
		}
		r := row{tag: tag, l: sessionrec.Legacy{ID: id, Project: h["p"], OpenThreads: []byte(h["o"])}}
		var errs []error
		r.seq, err = strconv.ParseInt(cmp.Or(h["q"], "0"), 10, 64)
		errs = append(errs, err)
		for f, t := range map[string]*time.Time{"s": &r.l.StartedAt, "c": &r.l.ClosedAt} {
			if h[f] != "" {
				ms, err := strconv.ParseInt(h[f], 10, 64)
				errs = append(errs, err)
				*t = time.UnixMilli(ms).UTC()
			}
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("session record %s: %v: %w", k, err, thread.ErrInvalid)
		}
		rows = append(rows, r)
	}
	// A project's sessions in the order they were first recorded.
	slices.SortFunc(rows, func(a, b row) int { return cmp.Or(cmp.Compare(a.tag, b.tag), cmp.Compare(a.seq, b.seq)) })
	legacy := make([]sessionrec.Legacy, len(rows))
	for i, r := range rows {
		legacy[i] = r.l
	}
	b, err := sessionrec.LegacyBatch(legacy, time.Now())
	if err != nil {
		return fmt.Errorf("carry the session records into threads: %w", err)
	}
	p := thread.MigrationProgress{Store: "redis", Step: "session records", Total: len(b.Create)}
	for i, cr := range b.Create {
		if err := l.hold(ctx); err != nil {
			return err
		}
		one := &store.Batch{Commits: b.Commits[i : i+1], Create: []store.Creation{cr}}
		if err := s.Apply(ctx, one); err != nil && !errors.Is(err, thread.ErrConflict) {
			return fmt.Errorf("carry the session records into threads: %w", err)
		}
		p.Done++
		store.ReportMigration(ctx, p)
	}
	if err := l.hold(ctx); err != nil {
		return err
	}
	if err := s.del(ctx, keys); err != nil {
		return fmt.Errorf("delete the session keys: %w", err)
	}
	return nil
}

// del deletes keys, a command per key (they may live in many slots).
func (s *Store) del(ctx context.Context, keys []string) error {
	_, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, k := range keys {
			p.Del(ctx, k)
		}
		return nil
	})
	return err
}
