package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/thread"
)

// TestServeWithoutKeysRefusesForeignHost checks that a server without
// API keys, which only listens on loopback so that only this machine can
// use it, refuses requests whose Host is not a loopback name. A web page
// on a DNS-rebinding name (attacker.example resolving to 127.0.0.1) sends
// exactly such requests, from the browser of the machine's user: /mcp
// refuses them (the MCP SDK checks Host), but /v1 answers them, and the
// CORS check passes them as same-origin, since Origin and Host both name
// the attacker's host.
func TestServeWithoutKeysRefusesForeignHost(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	db := thread.New(thread.NewMemoryStore(), nil)
	if _, err := db.Create(t.Context(), thread.CreateOptions{ID: "private-notes", Title: "private"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveOn(ctx, l, db, nil, new(auth.Keys), serveConfig{shutdown: 5 * time.Second}, "test", slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveOn: %v", err)
		}
	})
	_, port, _ := net.SplitHostPort(l.Addr().String())
	foreign := "attacker.example:" + port
	client := &http.Client{Timeout: 10 * time.Second}
	for _, tc := range []struct {
		name, method, path, origin, body string
	}{
		{"read without Origin", "GET", "/v1/threads", "", ""},
		{"read with the page's Origin", "GET", "/v1/threads/private-notes/messages", "http://" + foreign, ""},
		{"write with the page's Origin", "POST", "/v1/threads", "http://" + foreign, `{"title":"planted"}`},
	} {
		var body io.Reader
		if tc.body != "" {
			body = strings.NewReader(tc.body)
		}
		r, err := http.NewRequest(tc.method, "http://"+l.Addr().String()+tc.path, body)
		if err != nil {
			t.Fatal(err)
		}
		r.Host = foreign
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if tc.body != "" {
			r.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("%s: %s %s with Host %s answered %d, want 403 or 421: %s", tc.name, tc.method, tc.path, foreign, resp.StatusCode, raw)
		}
	}
}
