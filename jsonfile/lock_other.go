//go:build !unix

package jsonfile

import (
	"fmt"
	"os"

	"github.com/loomthreads/loom/thread"
)

func tryFlock(f *os.File) (bool, error) {
	return false, fmt.Errorf("jsonfile needs flock(2), which this system lacks: %w", thread.ErrUnsupported)
}

func funlock(f *os.File) error { return nil }
