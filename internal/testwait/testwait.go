// Package testwait lets a test wait for a condition instead of sleeping: it
// polls the condition with a short backoff until it holds or a deadline
// passes, so that a test is as fast as the code it waits for and still ends
// when that code never gets there.
//
//	testwait.Until(t, 10*time.Second, "the listener stops", func() bool {
//		return l.Stopped()
//	})
//
// Until fails the test on timeout; Within only reports, for a goroutine
// other than the test's or a message that needs the state at the deadline:
//
//	if !testwait.Within(5*time.Second, func() bool { return n.Load() == 3 }) {
//		t.Fatalf("%d tries, want 3", n.Load())
//	}
//
// Polling is for state that tells nobody when it changes. Where the code
// under test closes a channel, writes a line or calls a hook, wait on that;
// where it only uses timers, use testing/synctest.
package testwait

import (
	"testing"
	"time"
)

// The backoff between two polls starts at minPause and doubles up to
// maxPause: a condition that holds soon is seen soon, and one that takes a
// while is not asked thousands of times.
const (
	minPause = 50 * time.Microsecond
	maxPause = 20 * time.Millisecond
)

// Until polls cond until it returns true and fails tb with "never: what" if
// it has not after timeout. cond is called once more after the deadline, so
// a condition that holds by then passes however slow the machine.
//
// Until calls tb.Fatalf, which must run on the goroutine that runs the test
// (or benchmark): from any other goroutine, use Within and report with
// tb.Errorf.
func Until(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	if !Within(timeout, cond) {
		tb.Fatalf("never: %s (waited %v)", what, timeout)
	}
}

// Within polls cond until it returns true or timeout has passed, and
// reports whether it held. cond is called once more after the deadline.
// Within is safe from any goroutine.
func Within(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for pause := minPause; ; pause = min(2*pause, maxPause) {
		if cond() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(pause, left)) // the poll's interval
	}
}
