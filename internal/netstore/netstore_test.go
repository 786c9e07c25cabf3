package netstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomthreads/loom/thread"
)

// TestParseTimeout: durations and whole seconds; 0 is no deadline (-1);
// negative and other text are refused.
func TestParseTimeout(t *testing.T) {
	for v, want := range map[string]time.Duration{"5s": 5 * time.Second, "500ms": 500 * time.Millisecond, "3": 3 * time.Second, "0": -1, "0s": -1} {
		if d, err := ParseTimeout(v); err != nil || d != want {
			t.Errorf("%q: %v %v, want %v", v, d, err, want)
		}
	}
	for _, v := range []string{"soon", "-1s", "-3", ""} {
		if d, err := ParseTimeout(v); err == nil {
			t.Errorf("%q: %v, want an error", v, d)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestOutage: timeouts say the server did not answer in time, cut and
// refused connections that it cannot be reached, other errors are not an
// outage, and nothing is once the caller's context ended.
func TestOutage(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		err           error
		timedOut, cut bool
		want          string // "" for no outage
	}{
		{context.DeadlineExceeded, false, false, "Redis did not answer in time"},
		{fmt.Errorf("read: %w", timeoutErr{}), false, false, "Redis did not answer in time"},
		{errors.New("driver's timeout"), true, false, "Redis did not answer in time"},
		{fmt.Errorf("read: %w", io.EOF), false, false, "cannot reach Redis"},
		{syscall.ECONNREFUSED, false, false, "cannot reach Redis"},
		{syscall.EPIPE, false, false, "cannot reach Redis"},
		{errors.New("driver's closed connection"), false, true, "cannot reach Redis"},
		{errors.New("syntax error"), false, false, ""},
	} {
		err := Outage(ctx, "Redis", tc.err, tc.timedOut, tc.cut)
		var se *thread.StoreError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v, want no outage", tc.err, err)
		case tc.want != "" && (!errors.Is(err, thread.ErrUnavailable) || !errors.As(err, &se) || se.Reason != tc.want || !errors.Is(err, tc.err)):
			t.Errorf("%v: %v, want ErrUnavailable %q wrapping it", tc.err, err, tc.want)
		}
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := Outage(done, "Redis", io.EOF, false, false); err != nil {
		t.Errorf("after the caller's cancel: %v, want nil", err)
	}
	if err := Outage(ctx, "Redis", nil, true, true); err != nil {
		t.Errorf("no error: %v", err)
	}
}

// TestTakeTimeouts: the deadlines leave the query; set values win; a bad
// one is an error naming its parameter.
func TestTakeTimeouts(t *testing.T) {
	q := url.Values{"connect_timeout": {"3"}, "timeout": {"500ms"}, "sslmode": {"disable"}}
	connect, timeout := time.Duration(0), time.Second
	if err := TakeTimeouts(q, &connect, &timeout); err != nil || connect != 3*time.Second || timeout != time.Second || q.Encode() != "sslmode=disable" {
		t.Errorf("%v %v %v %q", connect, timeout, err, q.Encode())
	}
	if err := TakeTimeouts(url.Values{"timeout": {"soon"}}, &connect, &timeout); err == nil || !strings.Contains(err.Error(), "timeout=") {
		t.Errorf("bad timeout: %v", err)
	}
}
