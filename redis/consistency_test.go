package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// Consistent checks the store's bookkeeping against what is there, for
// tests: every commit's reference count (P:{F}:n) is the number of its
// children, history entries and checkpoints, which is never 0 (a commit
// nothing reaches is freed); every commit has its body and meta; every
// history entry and checkpoint points at a commit that exists; and, on a
// single server, the index key of every commit and thread points at its
// family. It reads every key of the prefix: for small test data.
func Consistent(ctx context.Context, s *Store) error {
	type ref struct{ fam, id string }
	metas := map[ref]string{} // commit -> meta
	bodies := map[ref]bool{}
	counts := map[ref]int64{}
	want := map[ref]int64{}
	var records []ref // thread (family, id)
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	// target is the commit of a history or checkpoint value.
	target := func(v, fam string) (ref, bool) {
		f := strings.SplitN(v, "\t", 4)
		if len(f) != 4 {
			return ref{}, false
		}
		if f[3] != "" {
			fam = f[3]
		}
		return ref{fam, f[2]}, true
	}
	keys, err := s.scanKeys(ctx, s.prefix+":{*")
	if err != nil {
		return err
	}
	for _, key := range keys {
		rest := strings.TrimPrefix(key, s.prefix+":{")
		fam, kind, ok := strings.Cut(rest, "}:")
		if !ok {
			bad("key %q", key)
			continue
		}
		switch {
		case kind == "m":
			all, err := s.rdb.HGetAll(ctx, key).Result()
			if err != nil {
				return err
			}
			for id, v := range all {
				metas[ref{fam, id}] = v
			}
		case kind == "c":
			ids, err := s.rdb.HKeys(ctx, key).Result()
			if err != nil {
				return err
			}
			for _, id := range ids {
				bodies[ref{fam, id}] = true
			}
		case kind == "n":
			all, err := s.rdb.HGetAll(ctx, key).Result()
			if err != nil {
				return err
			}
			for id, v := range all {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					bad("count of %s/%s: %q", fam, id, v)
				}
				counts[ref{fam, id}] = n
			}
		case strings.HasPrefix(kind, "h:") || strings.HasPrefix(kind, "k:"):
			all, err := s.rdb.HGetAll(ctx, key).Result()
			if err != nil {
				return err
			}
			for field, v := range all {
				r, ok := target(v, fam)
				if !ok {
					bad("%s field %s: %q", key, field, v)
					continue
				}
				if r.id != "" {
					want[r]++
				}
			}
		case strings.HasPrefix(kind, "r:"):
			records = append(records, ref{fam, kind[2:]})
		}
	}
	for c, m := range metas {
		f := strings.SplitN(m, "\t", 3)
		if len(f) != 3 {
			bad("meta of %s/%s: %q", c.fam, c.id, m)
			continue
		}
		if f[1] != "" {
			pf := c.fam
			if f[2] != "" {
				pf = f[2]
			}
			want[ref{pf, f[1]}]++
		}
		if !bodies[c] {
			bad("commit %s/%s has no body", c.fam, c.id)
		}
	}
	for c := range bodies {
		if _, ok := metas[c]; !ok {
			bad("commit %s/%s has a body and no meta", c.fam, c.id)
		}
	}
	for c, n := range want {
		if _, ok := metas[c]; !ok {
			bad("commit %s/%s has %d references and does not exist", c.fam, c.id, n)
		}
	}
	for c := range metas {
		n, ok := counts[c]
		switch {
		case !ok:
			bad("commit %s/%s has no count", c.fam, c.id)
		case n != want[c]:
			bad("commit %s/%s counts %d references; %d are there", c.fam, c.id, n, want[c])
		case n <= 0:
			bad("commit %s/%s is kept with no reference", c.fam, c.id)
		}
	}
	for c := range counts {
		if _, ok := metas[c]; !ok {
			bad("a count for commit %s/%s, which does not exist", c.fam, c.id)
		}
	}
	if !s.cluster {
		for c := range metas {
			if f, err := s.rdb.Get(ctx, s.commitIndexKey(c.id)).Result(); err != nil || f != c.fam {
				bad("index key of commit %s points at %q (%v), not %s", c.id, f, err, c.fam)
			}
		}
		for _, r := range records {
			if f, err := s.rdb.Get(ctx, s.threadIndexKey(r.id)).Result(); err != nil || f != r.fam {
				bad("index key of thread %s points at %q (%v), not %s", r.id, f, err, r.fam)
			}
		}
	}
	return errors.Join(errs...)
}

// scanKeys returns the keys that match pattern, on every master of a
// cluster.
func (s *Store) scanKeys(ctx context.Context, pattern string) ([]string, error) {
	var mu sync.Mutex
	var keys []string
	scan := func(ctx context.Context, c *goredis.Client) error {
		it := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			mu.Lock()
			keys = append(keys, it.Val())
			mu.Unlock()
		}
		return it.Err()
	}
	switch c := s.rdb.(type) {
	case *goredis.ClusterClient:
		return keys, c.ForEachMaster(ctx, scan)
	case *goredis.Client:
		return keys, scan(ctx, c)
	}
	return nil, fmt.Errorf("client %T", s.rdb)
}
