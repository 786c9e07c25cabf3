package postgres

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loomthreads/loom/thread"
)

// TestDeadlineURL: the store's deadlines in a URL DSN, as Go durations or
// whole seconds (libpq's connect_timeout), leave the DSN that pgx parses;
// Options win over the URL, 0 in the URL means no deadline, and a bad
// value is refused with ErrInvalid.
func TestDeadlineURL(t *testing.T) {
	for _, tc := range []struct {
		dsn              string
		opts             Options
		connect, timeout time.Duration
		left             string
	}{
		{"postgres://u@h/db?sslmode=disable", Options{}, 0, 0, "postgres://u@h/db?sslmode=disable"},
		{"postgres://u@h/db?connect_timeout=3&timeout=500ms", Options{}, 3 * time.Second, 500 * time.Millisecond, "postgres://u@h/db"},
		{"postgresql://u@h/db?timeout=0", Options{}, 0, -1, "postgresql://u@h/db"},
		{"postgres://u@h/db?timeout=2s", Options{Timeout: time.Second}, 0, time.Second, "postgres://u@h/db"},
		{"host=h connect_timeout=3", Options{}, 0, 0, "host=h connect_timeout=3"},
	} {
		o := tc.opts
		left, err := takeTimeouts(tc.dsn, &o)
		if err != nil || left != tc.left || o.ConnectTimeout != tc.connect || o.Timeout != tc.timeout {
			t.Errorf("%s: %q %v %v %v, want %q %v %v", tc.dsn, left, o.ConnectTimeout, o.Timeout, err, tc.left, tc.connect, tc.timeout)
		}
	}
	for _, dsn := range []string{"postgres://h/db?timeout=soon", "postgres://h/db?connect_timeout=-1s"} {
		if _, err := takeTimeouts(dsn, &Options{}); !errors.Is(err, thread.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", dsn, err)
		}
	}
}

// TestBoundCloses: a dial through the store's DialFunc gives up within the
// limit though the dialer would wait for ever (a cancel request's dial to
// a server that drops SYNs has pgx's 15 s), and a dialed connection keeps
// the limit as its deadline until AfterNetConnect clears it — the store's
// own connections; a later deadline pgx sets is cut to the limit.
func TestBoundCloses(t *testing.T) {
	cfg, err := pgx.ParseConfig("postgres://loom@127.0.0.1:1/loom")
	if err != nil {
		t.Fatal(err)
	}
	const limit = 200 * time.Millisecond
	server, client := net.Pipe()
	defer server.Close()
	var hooked bool
	dials := 0
	cfg.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) {
		dials++
		if dials == 1 {
			<-ctx.Done() // a dial that never completes
			return nil, ctx.Err()
		}
		return client, nil
	}
	cfg.AfterNetConnect = func(_ context.Context, _ *pgconn.Config, c net.Conn) (net.Conn, error) {
		hooked = true
		return c, nil
	}
	boundCloses(cfg, limit)
	start := time.Now()
	if _, err := cfg.DialFunc(context.Background(), "tcp", "x"); err == nil || time.Since(start) > 10*limit {
		t.Fatalf("a dial that hangs: %v after %v", err, time.Since(start))
	}
	c, err := cfg.DialFunc(context.Background(), "tcp", "x")
	if err != nil {
		t.Fatal(err)
	}
	// A cancel connection (no AfterNetConnect): a read gives up by the limit.
	start = time.Now()
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) > 10*limit {
		t.Fatalf("read of a cancel connection: %v after %v", err, time.Since(start))
	}
	// pgx's 15 s close deadline is cut to the limit.
	c.SetDeadline(time.Now().Add(15 * time.Second))
	start = time.Now()
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) > 10*limit {
		t.Fatalf("read under pgx's close deadline: %v after %v", err, time.Since(start))
	}
	// The store's own connection: the deadline is cleared, and the hook
	// Configure set still runs.
	c.SetDeadline(time.Now().Add(limit))
	if _, err := cfg.AfterNetConnect(context.Background(), &cfg.Config, c); err != nil || !hooked {
		t.Fatalf("after net connect: %v, hooked %t", err, hooked)
	}
	go func() {
		time.Sleep(3 * limit) // deliberate: the byte comes after the limit has passed
		server.Write([]byte{1})
	}()
	if _, err := c.Read(make([]byte, 1)); err != nil {
		t.Fatalf("a store connection read past the limit: %v", err)
	}
}
