//go:build unix

// Package flock takes and releases flock(2) locks on open files: the lock
// that keeps the writers of loom's file stores (jsonfile, worklog) in
// several processes from losing each other's updates. The kernel releases
// it when the process dies.
package flock

import (
	"errors"
	"os"
	"syscall"
)

// TryLock tries to take an exclusive flock on f without waiting: false if
// another open file holds it.
func TryLock(f *os.File) (bool, error) {
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

// Unlock releases the flock on f.
func Unlock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		if err != syscall.EINTR {
			return err
		}
	}
}
