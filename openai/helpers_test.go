package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/agent"
)

// seen is one request a test server received.
type seen struct {
	Method string
	Path   string
	Header http.Header
	Raw    []byte
	Body   map[string]any
}

// server is an httptest server that records what it is sent.
type server struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

// newServer starts a server whose handler gets the number (from 1) of the
// request it answers.
func newServer(tb testing.TB, handle func(w http.ResponseWriter, r *http.Request, n int)) *server {
	tb.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		s.mu.Lock()
		s.reqs = append(s.reqs, seen{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Raw: raw, Body: body})
		n := len(s.reqs)
		s.mu.Unlock()
		handle(w, r, n)
	}))
	tb.Cleanup(s.Close)
	return s
}

func (s *server) requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.reqs...)
}

// last returns the last request, failing the test if there was none.
func (s *server) last(tb testing.TB) seen {
	tb.Helper()
	reqs := s.requests()
	if len(reqs) == 0 {
		tb.Fatal("server saw no request")
	}
	return reqs[len(reqs)-1]
}

// options point a client at the server, without retries so failures are
// fast.
func (s *server) options() Options {
	return Options{Model: "test-model", APIKey: "sk-test", BaseURL: s.URL + "/v1", MaxRetries: -1}
}

func testdata(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// writeJSON answers with a status and a JSON body.
func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// writeSSE answers with the events of an SSE file, flushing each one, as a
// server that streams would.
func writeSSE(w http.ResponseWriter, events []string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	f := w.(http.Flusher)
	for _, e := range events {
		io.WriteString(w, e)
		f.Flush()
	}
}

// sseEvents splits an SSE file into its events, each with its blank line.
func sseEvents(b []byte) []string {
	var out []string
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		cur.WriteString(sc.Text() + "\n")
		if sc.Text() == "" {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// cutAfter sends the first n events and then drops the connection, as a
// server or proxy that fails mid-stream does.
func cutAfter(w http.ResponseWriter, events []string, n int) {
	writeSSE(w, events[:n])
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

// collect runs a stream to its end and returns its updates and its error.
func collect(seq iter.Seq2[agent.Update, error]) ([]agent.Update, error) {
	var ups []agent.Update
	for u, err := range seq {
		if err != nil {
			return ups, err
		}
		ups = append(ups, u)
	}
	return ups, nil
}

// deltas drops the final update, which tests compare on its own.
func deltas(ups []agent.Update) []agent.Update {
	if n := len(ups); n > 0 && ups[n-1].Response != nil {
		return ups[:n-1]
	}
	return ups
}

// final returns the response of the last update, failing if there is none.
func final(tb testing.TB, ups []agent.Update) *agent.ChatResponse {
	tb.Helper()
	if len(ups) == 0 || ups[len(ups)-1].Response == nil {
		tb.Fatalf("stream ended without a response: %+v", ups)
	}
	return ups[len(ups)-1].Response
}

// jsonEqual compares a request body with the JSON a test expects.
func jsonEqual(tb testing.TB, got map[string]any, want string) {
	tb.Helper()
	var w map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		tb.Fatalf("bad want: %v", err)
	}
	if d := cmp.Diff(w, got); d != "" {
		tb.Errorf("request body (-want +got):\n%s", d)
	}
}

func ptr[T any](v T) *T { return &v }
