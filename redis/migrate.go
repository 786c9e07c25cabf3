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
)

// migrationLockTTL bounds how long a crashed migrator holds the lock.
const migrationLockTTL = 30 * time.Second

// withMigrationLock runs f holding the store's migration lock (a key set
// with NX and an expiry, so that a crashed holder lets go): of processes
// opening the store at once, one migrates while the others wait, then
// find the work done.
func (s *Store) withMigrationLock(ctx context.Context, f func() error) error {
	key, token := s.prefix+":migrating", strconv.FormatUint(rand.Uint64(), 36)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		ok, err := s.rdb.SetNX(ctx, key, token, migrationLockTTL).Result()
		if err != nil {
			return fmt.Errorf("migration lock: %w", err)
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("migration lock: %w", ctx.Err())
		case <-time.After(wait):
		}
	}
	defer unlockScript.Run(context.WithoutCancel(ctx), s.rdb, []string{key}, token)
	return f()
}

var unlockScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// migrateTenantKeys brings data of schema 1 to schema 2: each tenant its
// own namespace of thread ids. A thread of a tenant other than the default
// moves from its id to its key (thread.Key): its record (whose id, and
// forked_from, become keys), history and checkpoints within its family's
// slot, its index key, and its place in the listings and the deadlines.
// Families keep their names. Each step can run again, so a migration cut
// short is finished by the next Open: the key a thread moves to is written
// in the family first (P:{F}:mv:<id>), and the old index key goes last.
func migrateTenantKeys(ctx context.Context, s *Store) error {
	return s.withMigrationLock(ctx, func() error {
		if v, err := s.rdb.Get(ctx, s.schemaKey()).Int(); err == nil && v >= 2 {
			return nil // another process did it while this one waited
		}
		ids, err := s.rdb.ZRange(ctx, s.allKey(), 0, -1).Result()
		if err != nil {
			return err
		}
		for _, id := range ids {
			if strings.Contains(id, "/") {
				continue
			}
			if err := s.moveToKey(ctx, id); err != nil {
				return fmt.Errorf("thread %s: %w", id, err)
			}
		}
		return nil
	})
}

// moveToKey moves one thread of schema 1 to its key, if it is a tenant's.
func (s *Store) moveToKey(ctx context.Context, id string) error {
	fam, err := s.rdb.Get(ctx, s.threadIndexKey(id)).Result()
	if errors.Is(err, goredis.Nil) {
		return nil // deleted meanwhile, or already moved
	}
	if err != nil {
		return err
	}
	mark := s.famKey(fam, "mv:"+id)
	key, err := s.rdb.Get(ctx, mark).Result()
	switch {
	case errors.Is(err, goredis.Nil):
		tenant, err := s.rdb.HGet(ctx, s.recKey(fam, id), fTenant).Result()
		if errors.Is(err, goredis.Nil) || err == nil && tenant == "" {
			return nil // the default tenant's: it keeps its id
		}
		if err != nil {
			return err
		}
		key = thread.Key(tenant, id)
		if err := s.rdb.Set(ctx, mark, key, 0).Err(); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	tenant, _ := thread.SplitKey(key)
	// The record: its id and forked_from become keys, then its name.
	if n, err := s.rdb.Exists(ctx, s.recKey(fam, id)).Result(); err != nil {
		return err
	} else if n == 1 {
		fields := []any{fID, key}
		ff, err := s.rdb.HGet(ctx, s.recKey(fam, id), fForked).Result()
		if err != nil && !errors.Is(err, goredis.Nil) {
			return err
		}
		if ff != "" {
			rd := &reader{b: []byte(ff)}
			p := thread.ForkPoint{Thread: rd.str(), Commit: rd.str(), Message: rd.str()}
			if rd.err != nil {
				return fmt.Errorf("record field %s: %w", fForked, errCorrupt)
			}
			if p.Thread != "" && !strings.Contains(p.Thread, "/") {
				p.Thread = thread.Key(tenant, p.Thread)
			}
			fields = append(fields, fForked, string(appendStr(appendStr(appendStr(nil, p.Thread), p.Commit), p.Message)))
		}
		if err := s.rdb.HSet(ctx, s.recKey(fam, id), fields...).Err(); err != nil {
			return err
		}
	}
	for _, kind := range []string{"r:", "h:", "k:"} {
		// One slot (the family's), so RENAME works in a cluster too; a key
		// already moved (or a thread without checkpoints) has no source.
		if err := s.rdb.Rename(ctx, s.famKey(fam, kind+id), s.famKey(fam, kind+key)).Err(); err != nil && !isNoSuchKey(err) {
			return err
		}
	}
	for _, z := range []string{s.allKey(), s.tenantKey(tenant)} {
		if err := s.rdb.ZAdd(ctx, z, goredis.Z{Member: key}).Err(); err != nil {
			return err
		}
		if err := s.rdb.ZRem(ctx, z, id).Err(); err != nil {
			return err
		}
	}
	if at, err := s.rdb.ZScore(ctx, s.expiryKey(), id).Result(); err == nil {
		if err := s.rdb.ZAdd(ctx, s.expiryKey(), goredis.Z{Score: at, Member: key}).Err(); err != nil {
			return err
		}
		if err := s.rdb.ZRem(ctx, s.expiryKey(), id).Err(); err != nil {
			return err
		}
	} else if !errors.Is(err, goredis.Nil) {
		return err
	}
	if err := s.rdb.Set(ctx, s.threadIndexKey(key), fam, 0).Err(); err != nil {
		return err
	}
	if err := s.rdb.Del(ctx, s.threadIndexKey(id)).Err(); err != nil {
		return err
	}
	s.fams.drop("t:" + id)
	return s.rdb.Del(ctx, mark).Err()
}

func isNoSuchKey(err error) bool { return err != nil && strings.Contains(err.Error(), "no such key") }

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
// threads (sessionrec.LegacyBatch), then deletes those keys. The batch is
// atomic; a crash before the deletes leaves the keys, and the next Open
// finds the threads made (ErrConflict) and deletes them. It holds the
// migration lock, so processes opening the store at once take turns.
func (s *Store) carrySessions(ctx context.Context) error {
	keys, err := s.scan(ctx, s.prefix+":s:{*")
	if err != nil || len(keys) == 0 {
		return err
	}
	return s.withMigrationLock(ctx, func() error {
		type row struct {
			tag string
			seq int64
			l   sessionrec.Legacy
		}
		var rows []row
		for _, k := range keys {
			rest := strings.TrimPrefix(k, s.prefix+":s:")
			tag, id, ok := strings.Cut(rest, "}:r:")
			if !ok {
				continue
			}
			h, err := s.rdb.HGetAll(ctx, k).Result()
			if err != nil {
				return err
			}
			if len(h) == 0 {
				continue // carried and deleted by another process meanwhile
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
		slices.SortFunc(rows, func(a, b row) int { return cmp.Or(cmp.Compare(a.tag, b.tag), cmp.Compare(a.seq, b.seq)) })
		legacy := make([]sessionrec.Legacy, len(rows))
		for i, r := range rows {
			legacy[i] = r.l
		}
		b, err := sessionrec.LegacyBatch(legacy, time.Now())
		if err != nil {
			return fmt.Errorf("carry the session records into threads: %w", err)
		}
		if len(b.Create) > 0 {
			// One family per thread: a cluster takes the batch a thread at
			// a time.
			for i, cr := range b.Create {
				one := &thread.Batch{Commits: b.Commits[i : i+1], Create: []thread.Creation{cr}}
				if err := s.Apply(ctx, one); err != nil && !errors.Is(err, thread.ErrConflict) {
					return fmt.Errorf("carry the session records into threads: %w", err)
				}
			}
		}
		for _, k := range keys {
			if err := s.rdb.Del(ctx, k).Err(); err != nil {
				return err
			}
		}
		return nil
	})
}
