//go:build !unix

package worklog

import (
	"fmt"
	"os"

	"github.com/loomthreads/loom/thread"
)

func tryFlock(f *os.File) (bool, error) {
	return false, fmt.Errorf("worklog needs flock(2), which this system lacks: %w", thread.ErrUnsupported)
}

func funlock(f *os.File) error { return nil }
