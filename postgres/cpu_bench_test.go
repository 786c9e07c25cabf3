package postgres

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/cputime"
)

// cpuMeter measures the CPU time that a benchmark costs the test process
// and the PostgreSQL server it talks to (the postmaster and its children:
// backends, WAL writer, checkpointer), so that a change's cost can be
// compared on a machine shared with other work, where appends/s varies
// with the load.
type cpuMeter struct {
	postmaster     int
	client, server time.Duration
}

// startCPU starts measuring, for the server of s.
func startCPU(tb testing.TB, s *Store) *cpuMeter {
	tb.Helper()
	var backend int
	if err := s.pool.QueryRow(tb.Context(), "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		tb.Fatal(err)
	}
	m := &cpuMeter{postmaster: ppid(backend)}
	m.client, m.server = cputime.Process(), m.serverCPU()
	return m
}

// report reports the CPU time per op since startCPU.
func (m *cpuMeter) report(b *testing.B) {
	client, server := cputime.Process()-m.client, m.serverCPU()-m.server
	b.ReportMetric(float64(client.Microseconds())/float64(b.N), "client-cpu-µs/op")
	b.ReportMetric(float64(server.Microseconds())/float64(b.N), "server-cpu-µs/op")
}

// procStat returns the parent and the CPU time of process pid.
func procStat(pid int) (int, time.Duration) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	parent, _ := strconv.Atoi(f[1])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return parent, time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ = 100
}

func ppid(pid int) int { p, _ := procStat(pid); return p }

// serverCPU sums the CPU time of the postmaster and its children now alive.
func (m *cpuMeter) serverCPU() time.Duration {
	_, total := procStat(m.postmaster)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if parent, t := procStat(pid); parent == m.postmaster {
			total += t
		}
	}
	return total
}
