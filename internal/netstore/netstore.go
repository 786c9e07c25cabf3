// Package netstore holds the rules shared by the stores that reach their
// server over a network (postgres, redis): how long a call waits for the
// server by default, how a store URL writes those deadlines, and which of
// a driver's errors mean that the server could not be reached or did not
// answer in time (thread.ErrUnavailable). Each store adds only what its
// driver says in its own words.
package netstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/loomthreads/loom/thread/store"
)

// The deadlines of a store when neither its Options nor its URL set them:
// a server that does not answer fails a call with thread.ErrUnavailable in
// seconds, not after the operating system's TCP timeouts (minutes).
const (
	DefaultConnectTimeout = 5 * time.Second
	DefaultTimeout        = 10 * time.Second
)

// TakeTimeouts takes a store URL's deadlines out of its query q: the
// parameters connect_timeout and timeout (see ParseTimeout), into connect
// and timeout where they are zero (Options win over the URL). A bad value
// is an error that names its parameter.
func TakeTimeouts(q url.Values, connect, timeout *time.Duration) error {
	for _, p := range []struct {
		name string
		dst  *time.Duration
	}{{"connect_timeout", connect}, {"timeout", timeout}} {
		if v := q.Get(p.name); v != "" {
			d, err := ParseTimeout(v)
			if err != nil {
				return fmt.Errorf("%s=%q: %v", p.name, v, err)
			}
			if *p.dst == 0 {
				*p.dst = d
			}
		}
		q.Del(p.name)
	}
	return nil
}

// ParseTimeout reads a deadline of a store URL (connect_timeout=,
// timeout=): a Go duration (5s, 500ms) or a whole number of seconds (5, as
// libpq's connect_timeout). 0 means no deadline and is returned as -1, so
// that it differs from the zero value, "not set"; a negative value is
// refused.
func ParseTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.ParseUint(v, 10, 31)
		if nerr != nil {
			return 0, errors.New("want a duration such as 5s")
		}
		d = time.Duration(n) * time.Second
	}
	if d < 0 {
		return 0, errors.New("want a positive duration")
	}
	if d == 0 {
		d = -1
	}
	return d, nil
}

// Outage returns err as a thread.ErrUnavailable naming server (as a client
// may read it: "PostgreSQL", "Redis") when err shows that the server did
// not answer in time (a deadline or the network's timeout, or timedOut:
// the driver's own way of saying so) or could not be reached (the
// network's errors, a connection refused, reset or cut, or cut: the
// driver's own), and nil when it does not. ctx is the caller's: once it
// ended, its own cancel or deadline is the cause, and Outage returns nil.
func Outage(ctx context.Context, server string, err error, timedOut, cut bool) error {
	if err == nil || ctx.Err() != nil {
		return nil
	}
	var ne net.Error
	switch {
	case timedOut, errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return store.Unavailable(server+" did not answer in time", err)
	case cut, errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE):
		return store.Unavailable("cannot reach "+server, err)
	}
	return nil
}
