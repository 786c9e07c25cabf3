//go:build unix

package workflow

import (
	"errors"
	"syscall"
)

// processAlive reports whether a process with the id runs on this host.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
