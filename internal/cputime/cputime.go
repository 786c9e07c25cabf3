// Package cputime reads the CPU time the process has used, which the
// benchmarks that run beside their floor report as well as wall time: on
// a loaded machine, wall time counts the waits for a core too.
package cputime

import "time"

// Process returns the CPU time, user and system, the process has used; 0
// where the system does not say (see Available).
func Process() time.Duration { return process() }
