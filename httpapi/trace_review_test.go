package httpapi

// Found by the review of issue 17: each test failed before its fix.

import "testing"

// A request's span name built from r.Method as the client sent it would
// let any client mint span names without bound ("BREW1 unmatched",
// "BREW2 unmatched", …): an unknown method is OTHER, as in the metrics.
func TestReviewSpanNameOfAnUnknownMethodIsBounded(t *testing.T) {
	tp, exp := recordSpans(t)
	s := newServer(t, Options{TracerProvider: tp})
	for _, m := range []string{"BREW1", "BREW2", "X-ANYTHING-THE-CLIENT-WANTS"} {
		do(t, s, req{method: m, path: "/v1/threads"})
	}
	names := map[string]bool{}
	for _, sp := range exp.GetSpans() {
		names[sp.Name] = true
	}
	if len(names) != 1 {
		t.Errorf("three unknown methods made %d span names: %v", len(names), names)
	}
}
