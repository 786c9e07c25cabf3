package workflow

import (
	"os"
	"time"
)

// hostname names this host in a lease; "" if the system will not say.
func hostname() string {
	h, _ := os.Hostname()
	return h
}

// live reports whether the lease holds at now: its time has not run out,
// and its process, when it is of this host, is still there. A runner
// killed on this host frees its workflow at once, for the next Run here.
func (l *Lease) live(now time.Time) bool {
	if l == nil || !now.Before(l.Until) {
		return false
	}
	if l.Host != "" && l.Host == hostname() && l.PID > 0 && l.PID != os.Getpid() && !processAlive(l.PID) {
		return false
	}
	return true
}
