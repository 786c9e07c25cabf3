package redis

import (
	"context"
	"errors"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// dueScript removes a thread from the expiry set if its deadline is still
// at or before ARGV[1] (µs), so that a deadline moved meanwhile stays.
var dueScript = goredis.NewScript(`
local s = redis.call('ZSCORE', KEYS[1], ARGV[2])
if s and tonumber(s) <= tonumber(ARGV[1]) then return redis.call('ZREM', KEYS[1], ARGV[2]) end
return 0
`)

// Sweep deletes the threads whose TTL has passed, as Batch deletions that
// apply only to an expired thread at the version read (a thread created
// again under the id meanwhile is kept), and
// returns how many it deleted. The background sweeper calls it every
// Options.SweepInterval; a store without a TTL has nothing to sweep.
func (s *Store) Sweep(ctx context.Context) (n int, err error) {
	defer func() { err = mapError(ctx, err) }()
	deleted := 0
	for range 64 { // bounded: a thread that keeps moving waits for the next sweep
		now := micros(s.now())
		due, err := s.rdb.ZRangeByScore(ctx, s.expiryKey(), &goredis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(now, 10), Count: 256}).Result()
		if err != nil {
			return deleted, err
		}
		progress := false
		for _, id := range due {
			r, _, exp, err := s.record(ctx, id)
			switch {
			case errors.Is(err, thread.ErrNotFound):
				// Gone, or never made: drop the entry.
				err = dueScript.Run(ctx, s.rdb, []string{s.expiryKey()}, now, id).Err()
			case err != nil:
			case exp == 0 || exp > now:
				// Its deadline moved (or it has none any more): put it right.
				if exp == 0 {
					err = s.rdb.ZRem(ctx, s.expiryKey(), id).Err()
				} else {
					err = s.rdb.ZAdd(ctx, s.expiryKey(), goredis.Z{Score: float64(exp), Member: id}).Err()
				}
			default:
				err = s.applyRetry(ctx, &store.Batch{Delete: []store.Deletion{{Thread: id, Version: r.Version}}}, true)
				if err == nil {
					deleted++
				} else if errors.Is(err, thread.ErrConflict) || errors.Is(err, thread.ErrNotFound) {
					err = nil // it was made again meanwhile: its new deadline is in the set
				}
			}
			if err != nil {
				return deleted, err
			}
			progress = true
		}
		if len(due) < 256 || !progress {
			return deleted, nil
		}
	}
	return deleted, nil
}

func (s *Store) sweepLoop(every time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("redis store: sweep expired threads", "err", err)
			}
		}
	}
}
