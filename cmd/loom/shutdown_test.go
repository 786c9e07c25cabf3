package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/thread"
)

// TestShutdownFinishesAcceptedWrites starts a shutdown while an append's
// body is still arriving: the append completes and is stored.
func TestShutdownFinishesAcceptedWrites(t *testing.T) {
	db, err := thread.Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Create(t.Context(), thread.CreateOptions{ID: "w"}); err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &signalListener{Listener: inner, accepted: make(chan struct{}, 1), reading: make(chan struct{}, 1), closed: make(chan struct{})}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- serveOn(ctx, l, db, nil, new(auth.Keys), serveConfig{maxBody: 1 << 20, shutdown: 10 * time.Second},
			"test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()

	body := `{"messages":[{"role":"user","contents":[{"type":"text","text":"in flight"}]}]}`
	conn, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/threads/w/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		len(body), body[:20])
	// The server took the connection (however loaded the machine), then
	// has the headers and waits for the rest of the body: the request is
	// accepted.
	signaled(t, l.accepted, "the server accepts the connection")
	signaled(t, l.reading, "the server reads the body")
	stop()
	signaled(t, l.closed, "the shutdown begins: it closes the listener first")
	io.WriteString(conn, body[20:])
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("append during shutdown: %d", resp.StatusCode)
	}
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	th, err := db.Thread(t.Context(), "w")
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := th.Messages(t.Context(), thread.ReadOptions{})
	if len(msgs) != 1 || msgs[0].Text() != "in flight" {
		t.Fatalf("stored %v", msgs)
	}
	// And nothing new is accepted.
	if _, err := net.DialTimeout("tcp", l.Addr().String(), time.Second); err == nil {
		t.Fatal("still accepting after shutdown")
	}
}

// signaled waits for a signal on ch, up to 10 s.
func signaled(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("never: %s", what)
	}
}

// signalListener tells when it has handed a connection to the server
// (accepted), when the server reads a connection again after a request's
// headers (reading: it waits for the body), and when it is closed (closed:
// a shutdown has begun).
type signalListener struct {
	net.Listener
	accepted, reading chan struct{}
	closed            chan struct{}
	closeOnce         sync.Once
}

func (l *signalListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		select {
		case l.accepted <- struct{}{}:
		default:
		}
		c = &signalConn{Conn: c, reading: l.reading}
	}
	return c, err
}

func (l *signalListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// signalConn sends on reading when it is read once what it returned holds
// the end of a request's headers.
type signalConn struct {
	net.Conn
	reading chan struct{}
	mu      sync.Mutex // the server's reads of a connection do not overlap; for the race detector
	got     []byte
}

func (c *signalConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if bytes.Contains(c.got, []byte("\r\n\r\n")) {
		select {
		case c.reading <- struct{}{}:
		default:
		}
	}
	c.mu.Unlock()
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.got = append(c.got, p[:n]...)
	c.mu.Unlock()
	return n, err
}
