package httpapi

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Metrics counts what the server does, for /metrics in the Prometheus text
// format: requests by route, method and status, request durations by route,
// thread operations by name, and write conflicts. It is safe for concurrent
// use; handlers mounted with Server.Protect are counted without doing
// anything, and may count their thread operations with StoreOp.
type Metrics struct {
	conflicts atomic.Uint64

	mu        sync.Mutex
	requests  map[requestKey]uint64
	durations map[string]*histogram
	ops       map[string]uint64
}

type requestKey struct {
	route, method string
	code          int
}

type histogram struct {
	counts []uint64 // per bucket of durationBuckets, not cumulative
	sum    float64
	count  uint64
}

// durationBuckets are the upper bounds of the request duration histogram,
// in seconds.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

func newMetrics() *Metrics {
	return &Metrics{requests: map[requestKey]uint64{}, durations: map[string]*histogram{}, ops: map[string]uint64{}}
}

// Request counts one request to route (a ServeMux pattern, or "unmatched")
// answered with status after d.
func (m *Metrics) Request(route, method string, status int, d time.Duration) {
	method = normalMethod(method)
	sec := d.Seconds()
	i, _ := slices.BinarySearch(durationBuckets, sec)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[requestKey{route, method, status}]++
	h := m.durations[route]
	if h == nil {
		h = &histogram{counts: make([]uint64, len(durationBuckets)+1)}
		m.durations[route] = h
	}
	h.counts[i]++
	h.sum += sec
	h.count++
}

// StoreOp counts one thread operation, such as "append" or "fork".
func (m *Metrics) StoreOp(op string) {
	m.mu.Lock()
	m.ops[op]++
	m.mu.Unlock()
}

// Conflict counts one write that lost a compare-and-swap (thread.ErrConflict).
func (m *Metrics) Conflict() { m.conflicts.Add(1) }

// WriteTo writes the metrics in the Prometheus text exposition format
// (version 0.0.4), series sorted so that the output is stable.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	m.mu.Lock()
	reqs := maps.Clone(m.requests)
	ops := maps.Clone(m.ops)
	durs := make(map[string]histogram, len(m.durations))
	for route, h := range m.durations {
		durs[route] = histogram{counts: slices.Clone(h.counts), sum: h.sum, count: h.count}
	}
	m.mu.Unlock()

	cw := &countWriter{w: bufio.NewWriter(w)}
	p := func(format string, args ...any) { fmt.Fprintf(cw, format, args...) }

	p("# HELP loom_http_requests_total HTTP requests answered, by route pattern, method and status code.\n")
	p("# TYPE loom_http_requests_total counter\n")
	keys := slices.SortedFunc(maps.Keys(reqs), func(a, b requestKey) int {
		return cmp.Or(strings.Compare(a.route, b.route), strings.Compare(a.method, b.method), cmp.Compare(a.code, b.code))
	})
	for _, k := range keys {
		p("loom_http_requests_total{route=%s,method=%s,code=\"%d\"} %d\n", label(k.route), label(k.method), k.code, reqs[k])
	}

	p("# HELP loom_http_request_duration_seconds Time to answer HTTP requests, by route pattern.\n")
	p("# TYPE loom_http_request_duration_seconds histogram\n")
	for _, route := range slices.Sorted(maps.Keys(durs)) {
		h := durs[route]
		var cum uint64
		for i, le := range durationBuckets {
			cum += h.counts[i]
			p("loom_http_request_duration_seconds_bucket{route=%s,le=\"%s\"} %d\n", label(route), strconv.FormatFloat(le, 'g', -1, 64), cum)
		}
		p("loom_http_request_duration_seconds_bucket{route=%s,le=\"+Inf\"} %d\n", label(route), h.count)
		p("loom_http_request_duration_seconds_sum{route=%s} %s\n", label(route), formatFloat(h.sum))
		p("loom_http_request_duration_seconds_count{route=%s} %d\n", label(route), h.count)
	}

	p("# HELP loom_store_operations_total Thread operations the server's handlers called, by operation.\n")
	p("# TYPE loom_store_operations_total counter\n")
	for _, op := range slices.Sorted(maps.Keys(ops)) {
		p("loom_store_operations_total{op=%s} %d\n", label(op), ops[op])
	}

	p("# HELP loom_conflicts_total Writes refused because the thread had moved (compare-and-swap lost).\n")
	p("# TYPE loom_conflicts_total counter\n")
	p("loom_conflicts_total %d\n", m.conflicts.Load())

	if cw.err == nil {
		cw.err = cw.w.Flush()
	}
	return cw.n, cw.err
}

// serve answers a scrape.
func (m *Metrics) serve(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, err := m.WriteTo(w)
	return err
}

type countWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

// label quotes a label value as the text format wants it.
func label(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(v) + `"`
}

func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// normalMethod keeps the method label's values to a known few.
func normalMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "OTHER"
}
