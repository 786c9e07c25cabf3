//go:build !unix

// Package flock takes and releases flock(2) locks on open files; on this
// system there are none.
package flock

import (
	"fmt"
	"os"

	"github.com/loomthreads/loom/thread"
)

// TryLock fails: this system has no flock(2).
func TryLock(f *os.File) (bool, error) {
	return false, fmt.Errorf("flock(2), which this system lacks: %w", thread.ErrUnsupported)
}

// Unlock does nothing.
func Unlock(f *os.File) error { return nil }
