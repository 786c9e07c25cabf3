package redis

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// Commit implements store.Store.
func (s *Store) Commit(ctx context.Context, id string) (c *thread.Commit, err error) {
	defer func() { err = mapError(ctx, err) }()
	if !ids.Valid(id) {
		return nil, fmt.Errorf("commit %q: %w", clip(id), thread.ErrNotFound)
	}
	for fresh := false; ; fresh = true {
		fam, cached, err := s.family(ctx, "c:"+id, fresh)
		if err != nil {
			return nil, fmt.Errorf("commit %s: %w", id, err)
		}
		if fam == "" {
			return nil, fmt.Errorf("commit %q: %w", id, thread.ErrNotFound)
		}
		blob, err := s.rdb.HGet(ctx, s.famKey(fam, "c"), id).Bytes()
		if errors.Is(err, goredis.Nil) {
			if cached {
				continue
			}
			return nil, fmt.Errorf("commit %q: %w", id, thread.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("commit %s: %w", id, err)
		}
		return decodeCommit(id, blob)
	}
}

// Ancestors implements store.Store: one script walks the parents on the
// server and returns up to a page of commits per round trip.
func (s *Store) Ancestors(ctx context.Context, id string, floor int64) iter.Seq2[*thread.Commit, error] {
	return func(yield func(*thread.Commit, error) bool) {
		yield = mapYield(ctx, yield)
		if !ids.Valid(id) {
			yield(nil, fmt.Errorf("commit %q: %w", clip(id), thread.ErrNotFound))
			return
		}
		fam, cached, err := s.family(ctx, "c:"+id, false)
		if err == nil && fam == "" {
			err = fmt.Errorf("commit %q: %w", id, thread.ErrNotFound)
		}
		if err != nil {
			yield(nil, err)
			return
		}
		page := 128
		for first := true; id != ""; first = false {
			res, err := ancestorsScript.Run(ctx, s.rdb, []string{s.famKey(fam, "m")}, s.prefix, fam, id, floor, page, 4<<20).Slice()
			if err != nil {
				yield(nil, fmt.Errorf("ancestors of %s: %w", id, err))
				return
			}
			if len(res) == 1 && res[0] == "N" {
				if first && cached {
					if fam, _, err = s.family(ctx, "c:"+id, true); err == nil && fam != "" {
						cached = false
						continue
					}
				}
				yield(nil, fmt.Errorf("commit %q: %w", id, thread.ErrNotFound))
				return
			}
			if len(res) != 4 || res[0] != "C" {
				yield(nil, fmt.Errorf("ancestors of %s: missing commit %v", id, res[1:]))
				return
			}
			id, _ = res[1].(string)
			fam, _ = res[2].(string)
			out, _ := res[3].([]any)
			for i := 0; i+1 < len(out); i += 2 {
				cid, _ := out[i].(string)
				blob, _ := out[i+1].(string)
				c, err := decodeCommit(cid, []byte(blob))
				if err != nil {
					yield(nil, err)
					return
				}
				if !yield(c, nil) {
					return
				}
			}
			page = 1024
		}
	}
}

// record reads a thread's record and its family; expired threads are
// returned too (exp says when).
func (s *Store) record(ctx context.Context, id string) (r *thread.Record, fam string, exp int64, err error) {
	if !ids.ValidKey(id) {
		return nil, "", 0, fmt.Errorf("thread %q: %w", clip(id), thread.ErrNotFound)
	}
	for fresh := false; ; fresh = true {
		fam, cached, err := s.family(ctx, "t:"+id, fresh)
		if err != nil {
			return nil, "", 0, fmt.Errorf("thread %s: %w", id, err)
		}
		if fam == "" {
			return nil, "", 0, fmt.Errorf("thread %q: %w", id, thread.ErrNotFound)
		}
		h, err := s.rdb.HGetAll(ctx, s.recKey(fam, id)).Result()
		if err != nil {
			return nil, "", 0, fmt.Errorf("thread %s: %w", id, err)
		}
		if len(h) == 0 {
			if cached {
				continue
			}
			return nil, "", 0, fmt.Errorf("thread %q: %w", id, thread.ErrNotFound)
		}
		r, exp, err := decodeRecord(h)
		if err != nil {
			return nil, "", 0, fmt.Errorf("thread %s: %w", id, err)
		}
		return r, fam, exp, nil
	}
}

func (s *Store) expired(exp int64) bool { return exp != 0 && exp <= micros(s.now()) }

// Thread implements store.Store. An expired thread is not found, even
// before the sweeper deletes it.
func (s *Store) Thread(ctx context.Context, id string) (*thread.Record, error) {
	r, _, exp, err := s.record(ctx, id)
	if err != nil {
		return nil, mapError(ctx, err)
	}
	if s.expired(exp) {
		return nil, fmt.Errorf("thread %q expired: %w", id, thread.ErrNotFound)
	}
	return r, nil
}

// Threads implements store.Store. It pages through a sorted set of thread
// ids (one per tenant, one for all) in lexical order and filters the
// records by kind and labels on the client. OrderUpdated reads every
// record of the tenant and sorts them (store.ListByUpdated).
func (s *Store) Threads(ctx context.Context, opts thread.ListOptions) iter.Seq2[*thread.Record, error] {
	if opts.Order == thread.OrderUpdated {
		return store.ListByUpdated(ctx, opts, s.Threads)
	}
	return func(yield func(*thread.Record, error) bool) {
		yield = mapYield(ctx, yield)
		key := s.allKey()
		if !opts.AllTenants {
			key = s.tenantKey(opts.Tenant)
			if len(opts.Labels) > 0 && !s.cluster {
				var err error
				if key, err = s.labelSet(ctx, opts.Tenant, opts.Labels); err != nil {
					yield(nil, fmt.Errorf("list threads: %w", err))
					return
				}
			}
		}
		// A first page of the limit's size (most ids of a label set, and
		// every id of a listing without filters, match), then larger ones.
		page := 256
		if opts.Limit > 0 {
			page = min(page, opts.Limit)
		}
		cursor, started, n := opts.After, opts.After != "", 0
		for {
			var idsPage []string
			var err error
			if opts.Desc {
				max := "+"
				if started {
					max = "(" + cursor
				}
				idsPage, err = s.rdb.ZRevRangeByLex(ctx, key, &goredis.ZRangeBy{Min: "-", Max: max, Count: int64(page)}).Result()
			} else {
				min := "-"
				if started {
					min = "(" + cursor
				}
				idsPage, err = s.rdb.ZRangeByLex(ctx, key, &goredis.ZRangeBy{Min: min, Max: "+", Count: int64(page)}).Result()
			}
			if err != nil {
				yield(nil, fmt.Errorf("list threads: %w", err))
				return
			}
			if len(idsPage) == 0 {
				return
			}
			cursor, started = idsPage[len(idsPage)-1], true
			recs, err := s.records(ctx, idsPage)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, r := range recs {
				if r == nil || !opts.Match(r) {
					continue
				}
				if opts.Limit > 0 && n >= opts.Limit {
					return
				}
				n++
				if !yield(r, nil) {
					return
				}
			}
			if len(idsPage) < page || (opts.Limit > 0 && n >= opts.Limit) {
				return
			}
			page = 256
		}
	}
}

// labelSet returns the label set of tenant that lists the fewest threads
// among those of labels: a listing filtered by labels pages through it
// and checks each record, so a page of a rare label reads that page.
func (s *Store) labelSet(ctx context.Context, tenant string, labels map[string]string) (string, error) {
	keys := make([]string, 0, len(labels))
	for k, v := range labels {
		keys = append(keys, s.labelKey(tenant, k, v))
	}
	if len(keys) == 1 {
		return keys[0], nil
	}
	cards := make([]*goredis.IntCmd, len(keys))
	if _, err := s.rdb.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
		for i, k := range keys {
			cards[i] = pipe.ZCard(ctx, k)
		}
		return nil
	}); err != nil {
		return "", err
	}
	best := 0
	for i, c := range cards {
		if c.Val() < cards[best].Val() {
			best = i
		}
	}
	return keys[best], nil
}

// Forks implements store.ForkIndex: it reads the set of the threads
// forked from parent, then their records (two round trips, one when their
// families are cached), and yields those whose record names parent.
func (s *Store) Forks(ctx context.Context, parent string) iter.Seq2[*thread.Record, error] {
	return func(yield func(*thread.Record, error) bool) {
		yield = mapYield(ctx, yield)
		idList, err := s.rdb.ZRange(ctx, s.forkKey(parent), 0, -1).Result()
		if err != nil {
			yield(nil, fmt.Errorf("forks of %s: %w", clip(parent), err))
			return
		}
		for len(idList) > 0 {
			n := min(len(idList), 1024)
			recs, err := s.records(ctx, idList[:n])
			if err != nil {
				yield(nil, fmt.Errorf("forks of %s: %w", clip(parent), err))
				return
			}
			idList = idList[n:]
			for _, r := range recs {
				if r != nil && r.ForkedFrom.Thread == parent && !yield(r, nil) {
					return
				}
			}
		}
	}
}

var (
	_ store.ForkIndex       = (*Store)(nil)
	_ store.DescendantIndex = (*Store)(nil)
)

// Descendants implements store.DescendantIndex: it yields, in no order,
// every thread forked from root or from its forks (a deleted thread ends
// its branch), down to thread.MaxFamily of them: the fork sets of a level
// of the tree in one pipelined round trip, then its records, so that a
// family costs a few round trips a level rather than one per member.
func (s *Store) Descendants(ctx context.Context, root string) iter.Seq2[*thread.Record, error] {
	return func(yield func(*thread.Record, error) bool) {
		yield = mapYield(ctx, yield)
		seen := map[string]bool{root: true}
		frontier := []string{root}
		for len(frontier) > 0 && len(seen) <= thread.MaxFamily {
			sets := make([]*goredis.StringSliceCmd, len(frontier))
			if _, err := s.rdb.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
				for i, p := range frontier {
					sets[i] = pipe.ZRange(ctx, s.forkKey(p), 0, -1)
				}
				return nil
			}); err != nil {
				yield(nil, fmt.Errorf("descendants of %s: %w", clip(root), err))
				return
			}
			var idList []string
			under := map[string][]string{} // the sets an id was found in
			for i, cmd := range sets {
				for _, id := range cmd.Val() {
					if seen[id] {
						continue
					}
					if under[id] == nil {
						idList = append(idList, id)
					}
					under[id] = append(under[id], frontier[i])
				}
			}
			recs, err := s.records(ctx, idList)
			if err != nil {
				yield(nil, fmt.Errorf("descendants of %s: %w", clip(root), err))
				return
			}
			frontier = frontier[:0]
			for _, r := range recs {
				if r == nil || seen[r.ID] || !slices.Contains(under[r.ID], r.ForkedFrom.Thread) {
					continue
				}
				seen[r.ID] = true
				frontier = append(frontier, r.ID) // before yield, which may change r
				if !yield(r, nil) {
					return
				}
			}
		}
	}
}

// records reads the records of ids in two round trips (one when the
// families are cached); missing and expired threads are nil.
func (s *Store) records(ctx context.Context, idList []string) ([]*thread.Record, error) {
	fams := make([]string, len(idList))
	var misses []int
	for i, id := range idList {
		if f, ok := s.fams.get("t:" + id); ok {
			fams[i] = f
		} else {
			misses = append(misses, i)
		}
	}
	read := func(which []int, fresh bool) ([]int, error) {
		if fresh {
			cmds := make([]*goredis.StringCmd, len(which))
			_, err := s.rdb.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
				for j, i := range which {
					cmds[j] = pipe.Get(ctx, s.threadIndexKey(idList[i]))
				}
				return nil
			})
			if err != nil && !errors.Is(err, goredis.Nil) {
				return nil, fmt.Errorf("list threads: %w", err)
			}
			for j, i := range which {
				fams[i], _ = cmds[j].Result()
				if fams[i] != "" {
					s.fams.put("t:"+idList[i], fams[i])
				}
			}
		}
		return which, nil
	}
	if _, err := read(misses, true); err != nil {
		return nil, err
	}
	out := make([]*thread.Record, len(idList))
	all := make([]int, len(idList))
	for i := range all {
		all[i] = i
	}
	fetch := func(which []int) (empty []int, err error) {
		cmds := make([]*goredis.MapStringStringCmd, len(which))
		_, err = s.rdb.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
			for j, i := range which {
				if fams[i] != "" {
					cmds[j] = pipe.HGetAll(ctx, s.recKey(fams[i], idList[i]))
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list threads: %w", err)
		}
		for j, i := range which {
			if cmds[j] == nil {
				continue
			}
			h := cmds[j].Val()
			if len(h) == 0 {
				empty = append(empty, i)
				continue
			}
			r, exp, err := decodeRecord(h)
			if err != nil {
				return nil, fmt.Errorf("thread %s: %w", idList[i], err)
			}
			if !s.expired(exp) {
				out[i] = r
			}
		}
		return empty, nil
	}
	empty, err := fetch(all)
	if err != nil {
		return nil, err
	}
	// A family from the cache may be stale: look those up afresh.
	var stale []int
	for _, i := range empty {
		if !slices.Contains(misses, i) {
			stale = append(stale, i)
		}
	}
	if len(stale) > 0 {
		if _, err := read(stale, true); err != nil {
			return nil, err
		}
		if _, err := fetch(stale); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// History implements store.Store. An expired thread is not found.
func (s *Store) History(ctx context.Context, th string, opts thread.HistoryOptions) iter.Seq2[thread.HistoryEntry, error] {
	return func(yield func(thread.HistoryEntry, error) bool) {
		yield = mapYield(ctx, yield)
		notFound := fmt.Errorf("thread %q: %w", clip(th), thread.ErrNotFound)
		if !ids.ValidKey(th) {
			yield(thread.HistoryEntry{}, notFound)
			return
		}
		fam, cached, err := s.family(ctx, "t:"+th, false)
		if err == nil && fam == "" {
			err = notFound
		}
		if err != nil {
			yield(thread.HistoryEntry{}, err)
			return
		}
		before, n, first := opts.Before, 0, true
		for {
			limit := 256
			if opts.Limit > 0 {
				limit = min(limit, opts.Limit-n)
			}
			res, err := historyScript.Run(ctx, s.rdb, []string{s.recKey(fam, th), s.histKey(fam, th)}, before, limit, micros(s.now())).Slice()
			if errors.Is(err, goredis.Nil) {
				if first && cached {
					if fam, _, err = s.family(ctx, "t:"+th, true); err == nil && fam != "" {
						cached = false
						continue
					}
				}
				if first {
					yield(thread.HistoryEntry{}, notFound)
				}
				return
			}
			first = false
			if err != nil {
				yield(thread.HistoryEntry{}, fmt.Errorf("history of %s: %w", th, err))
				return
			}
			top, _ := res[0].(int64)
			vals, _ := res[1].([]any)
			for i, v := range vals {
				str, _ := v.(string)
				e, err := decodeEntry(top-int64(i), str)
				if err != nil {
					yield(thread.HistoryEntry{}, fmt.Errorf("thread %s: %w", th, err))
					return
				}
				n++
				if !yield(e, nil) {
					return
				}
			}
			before = top - int64(len(vals)) + 1
			if len(vals) < limit || before <= 1 || (opts.Limit > 0 && n >= opts.Limit) {
				return
			}
		}
	}
}

// Checkpoints implements store.Store. An expired thread is not found.
func (s *Store) Checkpoints(ctx context.Context, th string) iter.Seq2[thread.Checkpoint, error] {
	return func(yield func(thread.Checkpoint, error) bool) {
		yield = mapYield(ctx, yield)
		notFound := fmt.Errorf("thread %q: %w", clip(th), thread.ErrNotFound)
		if !ids.ValidKey(th) {
			yield(thread.Checkpoint{}, notFound)
			return
		}
		for fresh := false; ; fresh = true {
			fam, cached, err := s.family(ctx, "t:"+th, fresh)
			if err == nil && fam == "" {
				err = notFound
			}
			if err != nil {
				yield(thread.Checkpoint{}, err)
				return
			}
			var rec *goredis.SliceCmd
			var all *goredis.MapStringStringCmd
			if _, err := s.rdb.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
				rec = pipe.HMGet(ctx, s.recKey(fam, th), fVersion, fExpires)
				all = pipe.HGetAll(ctx, s.cpKey(fam, th))
				return nil
			}); err != nil {
				yield(thread.Checkpoint{}, fmt.Errorf("checkpoints of %s: %w", th, err))
				return
			}
			if v := rec.Val(); len(v) != 2 || v[0] == nil {
				if cached {
					continue
				}
				yield(thread.Checkpoint{}, notFound)
				return
			} else if x, _ := v[1].(string); x != "" {
				if exp, err := strconv.ParseInt(x, 10, 64); err != nil || s.expired(exp) {
					yield(thread.Checkpoint{}, notFound)
					return
				}
			}
			cps := make([]thread.Checkpoint, 0, len(all.Val()))
			for name, v := range all.Val() {
				cp, err := decodeCheckpoint(th, name, v)
				if err != nil {
					yield(thread.Checkpoint{}, fmt.Errorf("thread %s: %w", th, err))
					return
				}
				cps = append(cps, cp)
			}
			slices.SortFunc(cps, func(a, b thread.Checkpoint) int { return strings.Compare(a.Name, b.Name) })
			for _, cp := range cps {
				if !yield(cp, nil) {
					return
				}
			}
			return
		}
	}
}
