package cputime

import "testing"

// TestProcessGrows burns CPU and checks that Process saw it.
func TestProcessGrows(t *testing.T) {
	if !Available {
		t.Skip("no process CPU time on this system")
	}
	start := Process()
	x := 0
	for i := range 50_000_000 {
		x ^= i * i
	}
	if Process() <= start {
		t.Errorf("CPU time did not grow after a busy loop (%d)", x)
	}
}
