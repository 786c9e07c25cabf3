package testwait

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestWithinHolds(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 5 {
			n.Add(1)
		}
	}()
	if !Within(10*time.Second, func() bool { return n.Load() == 5 }) {
		t.Fatalf("n is %d, want 5", n.Load())
	}
}

func TestWithinTimesOut(t *testing.T) {
	calls := 0
	start := time.Now()
	if Within(30*time.Millisecond, func() bool { calls++; return false }) {
		t.Fatal("a condition that never holds held")
	}
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Fatalf("gave up after %v, before the timeout", took)
	}
	// The backoff: a few dozen polls at most, not one per microsecond.
	if calls < 2 || calls > 100 {
		t.Fatalf("%d polls in 30ms", calls)
	}
}

// TestWithinLastLook: a condition that holds only once the deadline has
// passed still counts.
func TestWithinLastLook(t *testing.T) {
	deadline := time.Now().Add(10 * time.Millisecond)
	if !Within(10*time.Millisecond, func() bool { return !time.Now().Before(deadline) }) {
		t.Fatal("the look after the deadline did not count")
	}
}

// fatalTB records Fatalf instead of stopping the test.
type fatalTB struct {
	testing.TB
	failed string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

func TestUntil(t *testing.T) {
	tb := &fatalTB{TB: t}
	Until(tb, time.Second, "it holds", func() bool { return true })
	if tb.failed != "" {
		t.Fatalf("a condition that holds failed the test: %s", tb.failed)
	}
	Until(tb, time.Millisecond, "the sky falls", func() bool { return false })
	if want := "never: the sky falls (waited 1ms)"; tb.failed != want {
		t.Fatalf("failed with %q, want %q", tb.failed, want)
	}
}
