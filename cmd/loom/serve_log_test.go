package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testwait"
)

// listeningURL returns the url of loom serve's start line,
// {"msg":"listening","url":"http://…"}, when line is that line.
func listeningURL(line string) (string, bool) {
	var l struct{ Msg, URL string }
	if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "listening" || l.URL == "" {
		return "", false
	}
	return l.URL, true
}

// logWriter keeps what loom serve writes to stderr and sends the url of
// its start line on started.
type logWriter struct {
	mu      sync.Mutex
	b       strings.Builder
	started chan string
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for line := range strings.Lines(string(p)) {
		if u, ok := listeningURL(line); ok {
			w.started <- u
		}
	}
	return w.b.Write(p)
}

// lines returns each line written, decoded, failing on one that is not
// a JSON object: no plain text among the JSON lines.
func (w *logWriter) lines(t *testing.T) []map[string]any {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(w.b.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		out = append(out, m)
	}
	return out
}

// serveLogs runs `loom serve` in process with args and env, requests each
// path, stops it, and returns its log lines.
func serveLogs(t *testing.T, env map[string]string, args []string, paths ...string) []map[string]any {
	t.Helper()
	w := &logWriter{started: make(chan string, 1)}
	e := &Env{Stdout: new(strings.Builder), Stderr: w, Getenv: func(k string) string { return env[k] },
		IsTerminal: func(any) bool { return false }}
	// A free port: above INFO there is no start line to read it from.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	code := make(chan int, 1)
	go func() {
		code <- e.Main(ctx, append([]string{"serve", "--store", "memory://", "--addr", addr}, args...))
	}()
	url := "http://" + addr
	select {
	case u := <-w.started:
		if u != url {
			t.Errorf("start line url %q, want %q", u, url)
		}
	case c := <-code:
		t.Fatalf("loom serve exited with %d:\n%s", c, w.b.String())
	case <-time.After(30 * time.Second):
		t.Fatal("loom serve did not start")
	case <-waitHealthy(ctx, url):
		// Above INFO: no start line, but it answers.
	}
	for _, p := range paths {
		resp, err := http.Get(url + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", p, resp.StatusCode)
		}
	}
	cancel()
	if c := <-code; c != 0 {
		t.Fatalf("loom serve exited with %d:\n%s", c, w.b.String())
	}
	return w.lines(t)
}

// waitHealthy returns a channel closed once url/healthz answers 200. The
// caller's select has the deadline; the polling stops with ctx, or after a
// minute.
func waitHealthy(ctx context.Context, url string) <-chan struct{} {
	ok := make(chan struct{})
	go func() {
		healthy := false
		testwait.Within(time.Minute, func() bool {
			if ctx.Err() != nil {
				return true // the caller stopped waiting
			}
			if resp, err := http.Get(url + "/healthz"); err == nil {
				resp.Body.Close()
				healthy = resp.StatusCode == http.StatusOK
			}
			return healthy
		})
		if healthy {
			close(ok)
		}
	}()
	return ok
}

// requestLevels returns the level of each "http request" line by route.
func requestLevels(lines []map[string]any) map[string][]any {
	out := map[string][]any{}
	for _, l := range lines {
		if l["msg"] == "http request" {
			out[l["route"].(string)] = append(out[l["route"].(string)], l["level"])
		}
	}
	return out
}

// TestServeLogLevel: --log-level, else $LOOM_LOG_LEVEL, else info, sets
// the least level logged; health checks and scrapes are DEBUG; the start
// and stop lines are JSON like the rest.
func TestServeLogLevel(t *testing.T) {
	paths := []string{"/healthz", "/metrics", "/v1/threads"}
	for _, tc := range []struct {
		name  string
		env   map[string]string
		args  []string
		want  map[string][]any // the request lines' levels by route
		start bool             // the start and stop lines are there
	}{
		{"default", nil, nil, map[string][]any{"GET /v1/threads": {"INFO"}}, true},
		{"flag debug", nil, []string{"--log-level", "debug"},
			map[string][]any{"GET /healthz": {"DEBUG"}, "GET /metrics": {"DEBUG"}, "GET /v1/threads": {"INFO"}}, true},
		{"env debug", map[string]string{"LOOM_LOG_LEVEL": "DEBUG"}, nil,
			map[string][]any{"GET /healthz": {"DEBUG"}, "GET /metrics": {"DEBUG"}, "GET /v1/threads": {"INFO"}}, true},
		{"flag beats env", map[string]string{"LOOM_LOG_LEVEL": "debug"}, []string{"--log-level=warn"}, map[string][]any{}, false},
		{"error", nil, []string{"--log-level", "error"}, map[string][]any{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := serveLogs(t, tc.env, tc.args, paths...)
			got := requestLevels(lines)
			if len(got) != len(tc.want) {
				t.Errorf("request lines %v, want %v", got, tc.want)
			}
			for route, levels := range tc.want {
				// The start's own health checks may add /healthz lines.
				if g := got[route]; len(g) < len(levels) || (route != "GET /healthz" && len(g) != len(levels)) || g[0] != levels[0] || g[len(g)-1] != levels[0] {
					t.Errorf("%s: levels %v, want %v", route, g, levels)
				}
			}
			var msgs []string
			for _, l := range lines {
				if l["msg"] != "http request" {
					msgs = append(msgs, l["msg"].(string))
				}
			}
			want := "listening,shutting down,stopped"
			if !tc.start {
				want = ""
			}
			if strings.Join(msgs, ",") != want {
				t.Errorf("other lines %q, want %q", msgs, want)
			}
		})
	}
}

// TestServeLogLevelRefused: a level that is not one of the four stops the
// start with a usage error naming where it came from.
func TestServeLogLevelRefused(t *testing.T) {
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"", []string{"--log-level", "loud"}, `--log-level "loud"`},
		{"verbose", nil, `$LOOM_LOG_LEVEL "verbose"`},
	} {
		var stderr strings.Builder
		e := &Env{Stdout: new(strings.Builder), Stderr: &stderr, IsTerminal: func(any) bool { return false },
			Getenv: func(k string) string {
				if k == "LOOM_LOG_LEVEL" {
					return tc.env
				}
				return ""
			}}
		code := e.Main(t.Context(), append([]string{"serve", "--store", "memory://", "--addr", "127.0.0.1:0"}, tc.args...))
		if code != 2 || !strings.Contains(stderr.String(), tc.want) || !strings.Contains(stderr.String(), "debug, info, warn or error") {
			t.Errorf("%v %q: exit %d, %s", tc.args, tc.env, code, stderr.String())
		}
	}
}

// TestServeLogsJSONEndToEnd runs the real binary: every line of its stderr
// is JSON, from the start line to the stop line, and its request lines
// carry the trace ids of the client's traceparent.
func TestServeLogsJSONEndToEnd(t *testing.T) {
	t.Parallel()
	s := startServer(t, "memory://", "--log-level", "debug")
	r, _ := http.NewRequest("GET", s.url+"/v1/threads", nil)
	r.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s.stop(t)
	var msgs []string
	traced := false
	for line := range strings.Lines(s.stderr.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON line: %q\n%s", line, s.stderr.String())
		}
		msgs = append(msgs, m["msg"].(string))
		if m["route"] == "GET /v1/threads" {
			traced = m["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736" && m["span_id"] == "00f067aa0ba902b7"
		}
	}
	if len(msgs) < 3 || msgs[0] != "listening" || msgs[len(msgs)-2] != "shutting down" || msgs[len(msgs)-1] != "stopped" {
		t.Errorf("lines %q: want listening first, shutting down and stopped last", msgs)
	}
	if !traced {
		t.Errorf("the request line lacks the traceparent's ids:\n%s", s.stderr.String())
	}
}
