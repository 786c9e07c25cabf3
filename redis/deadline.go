package redis

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/loomthreads/loom/thread"
)

// The store's deadlines when neither Options nor the URL set them: a
// Redis that does not answer fails a call with thread.ErrUnavailable in
// seconds. They are PostgreSQL's too (package postgres).
const (
	DefaultConnectTimeout = 5 * time.Second
	DefaultTimeout        = 10 * time.Second
)

// deadlines is the hook of a client the store dials: it bounds every
// command (and pipeline) by the store's timeout, its retries included, and
// turns the errors of a Redis that cannot be reached, did not answer in
// time, is loading or is out of memory or disk into thread.ErrUnavailable
// and thread.ErrStorageFull.
type deadlines struct{ timeout time.Duration }

func (deadlines) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (d deadlines) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		cctx, cancel := d.bound(ctx)
		defer cancel()
		err := next(cctx, cmd)
		if m := mapError(ctx, err); m != err {
			cmd.SetErr(m)
			err = m
		}
		return err
	}
}

func (d deadlines) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		cctx, cancel := d.bound(ctx)
		defer cancel()
		err := next(cctx, cmds)
		for _, cmd := range cmds {
			if m := mapError(ctx, cmd.Err()); m != cmd.Err() {
				cmd.SetErr(m)
			}
		}
		return mapError(ctx, err)
	}
}

func (d deadlines) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if d.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d.timeout)
}

// mapError turns the errors of an outage into loom's (see deadlines) and
// leaves the others, and every error once the caller's ctx ended (its own
// cancel or deadline), as they are.
func mapError(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, goredis.Nil) || errors.Is(err, thread.ErrUnavailable) || errors.Is(err, thread.ErrStorageFull) {
		return err
	}
	switch {
	case goredis.IsOOMError(err):
		return thread.StorageFull("Redis is out of memory", err)
	case strings.HasPrefix(err.Error(), "MISCONF "):
		return thread.StorageFull("Redis cannot write to its disk", err)
	case goredis.IsLoadingError(err), goredis.IsReadOnlyError(err), goredis.IsClusterDownError(err),
		goredis.IsMasterDownError(err), goredis.IsMaxClientsError(err), goredis.IsTryAgainError(err):
		return thread.Unavailable("Redis is not accepting commands", err)
	}
	if ctx.Err() != nil {
		return err
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout(), errors.Is(err, goredis.ErrPoolTimeout):
		return thread.Unavailable("Redis did not answer in time", err)
	case errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE):
		return thread.Unavailable("cannot reach Redis", err)
	}
	return err
}
