package testserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// RecordEnv is the variable that names the directory where the servers
// the tests start, and what they hand to Track, are recorded. `make test`
// sets it to a fresh directory per run, so that a server left by an
// earlier, killed run is never taken for one of this run's.
const RecordEnv = "LOOM_TESTSERVERS"

// A Record is a process and a folder that the tests started or made and
// that must be gone once they end.
type Record struct {
	What string `json:"what"`          // what it is, for the message: "redis-server", "loom binary"
	Name string `json:"name,omitzero"` // the process's command name, to tell it from a later process with its pid
	PID  int    `json:"pid,omitzero"`  // 0 for a folder alone
	Dir  string `json:"dir,omitzero"`  // "" for a process alone
}

func (r Record) String() string {
	var parts []string
	if r.PID != 0 {
		parts = append(parts, "pid "+strconv.Itoa(r.PID))
	}
	if r.Dir != "" {
		parts = append(parts, r.Dir)
	}
	return fmt.Sprintf("%s (%s)", r.What, strings.Join(parts, ", "))
}

// tracked is what this test binary recorded; Main checks it after its
// teardown. Guarded by mu.
var tracked []Record

// Track records a process the tests started (pid, or 0) and a folder they
// made (dir, or "") that the package's teardown or a test's cleanup is to
// end and remove: Main fails the run if the process is still alive or the
// folder still there once the tests and teardown are done, and so does
// `make test`'s leftover check (see RecordEnv) if the test binary never got
// that far. name is the process's command name ("redis-server"), which
// tells it from a later process that reuses the pid.
func Track(what, name string, pid int, dir string) {
	mu.Lock()
	defer mu.Unlock()
	track(Record{What: what, Name: name, PID: pid, Dir: dir})
}

// track is Track with mu held.
func track(r Record) {
	tracked = append(tracked, r)
	dir := os.Getenv(RecordEnv)
	if dir == "" {
		return
	}
	b, _ := json.Marshal(r)
	f, err := os.CreateTemp(dir, "*.json")
	if err == nil {
		_, err = f.Write(b)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		// The check after the run cannot see this one; say so rather
		// than fail a test over bookkeeping.
		fmt.Fprintf(os.Stderr, "testserver: cannot record %s in $%s: %v\n", r, RecordEnv, err)
	}
}

// Leftovers reads the records in dir (see RecordEnv) and returns those
// whose process is still running or whose folder is still there, and how
// many records it read.
func Leftovers(dir string) (left []Record, n int, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	var all []Record
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, 0, err
		}
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, 0, fmt.Errorf("%s: %w", e.Name(), err)
		}
		all = append(all, r)
	}
	return leftovers(all), len(all), nil
}

func leftovers(rs []Record) []Record {
	var left []Record
	for _, r := range rs {
		if r.PID != 0 && alive(r.PID, r.Name) {
			left = append(left, r)
			continue
		}
		if r.Dir != "" {
			if _, err := os.Lstat(r.Dir); !errors.Is(err, fs.ErrNotExist) {
				left = append(left, r)
			}
		}
	}
	return left
}

// alive reports whether pid is a running process (not a zombie) and, where
// /proc tells, one called name.
func alive(pid int, name string) bool {
	if runtime.GOOS == "linux" {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		// pid (comm) state …; comm may hold spaces and parentheses.
		i, j := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if i < 0 || j < i || j+2 >= len(stat) {
			return true
		}
		comm, state := string(stat[i+1:j]), stat[j+2]
		if state == 'Z' || state == 'X' {
			return false
		}
		// The kernel keeps 15 bytes of the name.
		return name == "" || strings.HasPrefix(name, comm)
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
