package redis

import (
	"context"
	"errors"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/loomthreads/loom/internal/netstore"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// The store's deadlines when neither Options nor the URL set them: a
// Redis that does not answer fails a call with thread.ErrUnavailable in
// seconds. They are every networked store's (package postgres too).
const (
	DefaultConnectTimeout = netstore.DefaultConnectTimeout
	DefaultTimeout        = netstore.DefaultTimeout
)

// deadlines is the hook of a client the store dials: it bounds every
// command (and pipeline) by the store's timeout, its retries included.
// The errors of an outage are mapped where the store returns them
// (mapError), so that a client given in Options.Client has them too.
type deadlines struct{ timeout time.Duration }

func (deadlines) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (d deadlines) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		cctx, cancel := d.bound(ctx)
		defer cancel()
		return next(cctx, cmd)
	}
}

func (d deadlines) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		cctx, cancel := d.bound(ctx)
		defer cancel()
		return next(cctx, cmds)
	}
}

func (d deadlines) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if d.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d.timeout)
}

// mapError turns the errors of a Redis that cannot be reached, did not
// answer in time, is loading or is out of memory or disk into
// thread.ErrUnavailable and thread.ErrStorageFull, and leaves the others,
// and the network's once the caller's ctx ended (its own cancel or
// deadline), as they are. Every exported method of the Store returns its
// errors through it.
func mapError(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, goredis.Nil) || errors.Is(err, thread.ErrUnavailable) || errors.Is(err, thread.ErrStorageFull) {
		return err
	}
	var re goredis.Error
	switch {
	case goredis.IsOOMError(err):
		return store.StorageFull("Redis is out of memory", err)
	case errors.As(err, &re) && strings.HasPrefix(re.Error(), "MISCONF "):
		return store.StorageFull("Redis cannot write to its disk", err)
	case goredis.IsLoadingError(err), goredis.IsReadOnlyError(err), goredis.IsClusterDownError(err),
		goredis.IsMasterDownError(err), goredis.IsMaxClientsError(err), goredis.IsTryAgainError(err):
		return store.Unavailable("Redis is not accepting commands", err)
	}
	if m := netstore.Outage(ctx, "Redis", err, errors.Is(err, goredis.ErrPoolTimeout), false); m != nil {
		return m
	}
	return err
}

// mapYield returns yield with its errors mapped by mapError, for the
// Store's iterators.
func mapYield[T any](ctx context.Context, yield func(T, error) bool) func(T, error) bool {
	return func(v T, err error) bool { return yield(v, mapError(ctx, err)) }
}
