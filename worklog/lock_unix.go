//go:build unix

package worklog

import (
	"errors"
	"os"
	"syscall"
)

// tryFlock tries to take an exclusive flock on f without waiting: false
// if another open file holds it.
func tryFlock(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		case err != syscall.EINTR:
			return false, err
		}
	}
}

// funlock releases the flock on f.
func funlock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		if err != syscall.EINTR {
			return err
		}
	}
}
