package anthropic

import (
	"encoding/json"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/agent"
)

// fakeAPI is a local Messages API: it records every request and answers
// with respond, which is told the attempt's number (1 for the first).
type fakeAPI struct {
	mu       sync.Mutex
	requests []recorded
	respond  func(w http.ResponseWriter, r *http.Request, n int)
	url      string
}

// recorded is one request the fake API got.
type recorded struct {
	Path   string
	Header http.Header
	Body   []byte
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.requests = append(f.requests, recorded{Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	n := len(f.requests)
	f.mu.Unlock()
	f.respond(w, r, n)
}

// Requests returns the requests so far.
func (f *fakeAPI) Requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.requests...)
}

// lastBody returns the decoded body of the last request.
func (f *fakeAPI) lastBody(tb testing.TB) map[string]any {
	tb.Helper()
	reqs := f.Requests()
	if len(reqs) == 0 {
		tb.Fatal("no request was sent")
	}
	var body map[string]any
	if err := json.Unmarshal(reqs[len(reqs)-1].Body, &body); err != nil {
		tb.Fatalf("request body: %v\n%s", err, reqs[len(reqs)-1].Body)
	}
	return body
}

// newFake starts a fake API and returns it with a client that talks to it.
// opts fill in what the test does not set: a model and a key.
func newFake(tb testing.TB, opts Options, respond func(w http.ResponseWriter, r *http.Request, n int)) (*Client, *fakeAPI) {
	tb.Helper()
	f := &fakeAPI{respond: respond}
	srv := httptest.NewServer(f)
	tb.Cleanup(srv.Close)
	f.url = srv.URL
	opts.BaseURL = srv.URL
	opts.HTTPClient = srv.Client()
	if opts.APIKey == "" {
		opts.APIKey = "test-key"
	}
	if opts.Model == "" {
		opts.Model = "claude-test"
	}
	return New(opts), f
}

// reply answers every request with status and body as JSON.
func reply(status int, body string) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// replyFile answers every request with a file of testdata: JSON for .json
// files, server-sent events for .sse files.
func replyFile(tb testing.TB, name string) func(http.ResponseWriter, *http.Request, int) {
	tb.Helper()
	body := testdata(tb, name)
	ct := "application/json"
	if filepath.Ext(name) == ".sse" {
		ct = "text/event-stream; charset=utf-8"
	}
	return func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", ct)
		w.Write(body)
	}
}

func testdata(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// collect reads a whole stream: its updates before the last, the final
// response if there is one, and the error if it ends with one.
func collect(tb testing.TB, stream iter.Seq2[agent.Update, error]) (ups []agent.Update, resp *agent.ChatResponse, err error) {
	tb.Helper()
	for u, e := range stream {
		if e != nil {
			return ups, resp, e
		}
		if resp != nil {
			tb.Fatalf("update after the final response: %+v", u)
		}
		if u.Response != nil {
			resp = u.Response
			continue
		}
		ups = append(ups, u)
	}
	return ups, resp, nil
}

// jsonEqual fails tb unless got (decoded JSON) equals the JSON text want.
func jsonEqual(tb testing.TB, what string, got any, want string) {
	tb.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		tb.Fatalf("%s: bad want: %v", what, err)
	}
	if diff := cmp.Diff(w, got); diff != "" {
		tb.Errorf("%s mismatch (-want +got):\n%s", what, diff)
	}
}
