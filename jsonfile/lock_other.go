//go:build !unix

package jsonfile

import (
	"fmt"
	"os"

	"github.com/loomthreads/loom/thread"
)

func flock(f *os.File, lock bool) error {
	return fmt.Errorf("jsonfile needs flock(2), which this system lacks: %w", thread.ErrUnsupported)
}
