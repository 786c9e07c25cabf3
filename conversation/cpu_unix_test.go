//go:build unix

package conversation

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user and system) the process has used,
// which the benchmarks beside their floor report as well as wall time: on
// a loaded machine, wall time counts the waits for a core too.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
