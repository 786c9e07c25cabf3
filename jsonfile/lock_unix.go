//go:build unix

package jsonfile

import (
	"os"
	"syscall"
)

// flock takes (or releases) an exclusive flock on f, waiting for it.
func flock(f *os.File, lock bool) error {
	how := syscall.LOCK_UN
	if lock {
		how = syscall.LOCK_EX
	}
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}
