// Package testserver starts throwaway PostgreSQL and Redis servers for tests,
// from the binaries on PATH (and, for PostgreSQL, Debian's
// /usr/lib/postgresql/*/bin). One server of each kind is started per test
// binary, on first use, and stopped by Main; every call hands out a fresh,
// empty database on it.
//
// Every package whose tests use it has the same TestMain, which runs the
// tests, then the package's own teardown (a binary it built, a folder it
// made), then stops the servers:
//
//	func TestMain(m *testing.M) { testserver.Main(m) }
//	func TestMain(m *testing.M) { testserver.Main(m, removeBinary) }
//
// Where $LOOM_TESTSERVERS names a directory (`make test` makes a fresh one
// per run), each server started, and whatever a test hands to Track, is
// recorded there, and `go run ./internal/testserver/leftovers DIR` after
// the tests fails if one of them is still running or its folder is still
// on disk.
//
// Without the binaries a test is skipped with a message that says what to
// install, unless LOOM_REQUIRE_SERVERS=1 (set by `make test` in CI), which
// makes it a failure.
//
// A store package's tests use it as:
//
//	func TestStore(t *testing.T) {
//		dsn := testserver.Postgres(t)
//		…
//	}
package testserver

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RequireEnv is the variable that turns a missing server into a failure.
const RequireEnv = "LOOM_REQUIRE_SERVERS"

var (
	mu       sync.Mutex
	pg       *pgServer
	pgErr    error
	rd       *redisServer
	rdErr    error
	stoppers []func()
)

// Main is the TestMain of every package that uses testserver: it runs the
// tests, then each teardown (the last given first), then stops the servers
// the tests started, and exits with the tests' code, or 1 if a server or a
// process given to Track outlives its stop.
func Main(m *testing.M, teardown ...func()) {
	code := m.Run()
	for _, f := range slices.Backward(teardown) {
		f()
	}
	mu.Lock()
	for _, stop := range slices.Backward(stoppers) {
		stop()
	}
	stoppers = nil
	left := leftovers(tracked)
	mu.Unlock()
	for _, l := range left {
		fmt.Fprintf(os.Stderr, "testserver: %s outlived the tests\n", l)
		code = 1
	}
	os.Exit(code)
}

// Unavailable skips t because what (a server it needs) could not be
// started, or fails it when LOOM_REQUIRE_SERVERS=1: for a test that starts
// a server of its own, such as a Redis Cluster.
func Unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s is required (%s=1) but could not be started: %v", what, RequireEnv, err)
	}
	t.Skipf("skipping: %s is not available (%v); install it (Debian: apt-get install postgresql redis-server) or run `make test` as root", what, err)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// --- PostgreSQL ---

type pgServer struct {
	bin, dir string
	port     int
	cred     *syscall.Credential
	next     int
}

// Postgres returns the URL of a fresh, empty database on a throwaway
// PostgreSQL server: postgres://loom@127.0.0.1:PORT/loom_N?sslmode=disable.
func Postgres(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if pg == nil && pgErr == nil {
		pg, pgErr = startPostgres()
		if pgErr == nil {
			s := pg
			stoppers = append(stoppers, s.stop)
		}
	}
	if pgErr != nil {
		Unavailable(t, "PostgreSQL", pgErr)
	}
	pg.next++
	name := fmt.Sprintf("loom_%d", pg.next)
	out, err := pg.run("createdb", "-h", "127.0.0.1", "-p", strconv.Itoa(pg.port), "-U", "loom", name)
	if err != nil {
		t.Fatalf("createdb %s: %v\n%s", name, err, out)
	}
	return fmt.Sprintf("postgres://loom@127.0.0.1:%d/%s?sslmode=disable", pg.port, name)
}

// StartPostgres starts a throwaway PostgreSQL server outside a test and
// returns the URLs of n fresh, empty databases on it, and a stop that
// removes the server and its files. The command pgserve hands it to tests
// written in other languages.
func StartPostgres(n int) (urls []string, stop func(), err error) {
	mu.Lock()
	s, err := startPostgres()
	mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("loom_%d", i)
		if out, err := s.run("createdb", "-h", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", "loom", name); err != nil {
			s.stop()
			return nil, nil, fmt.Errorf("createdb %s: %v\n%s", name, err, out)
		}
		urls = append(urls, fmt.Sprintf("postgres://loom@127.0.0.1:%d/%s?sslmode=disable", s.port, name))
	}
	return urls, s.stop, nil
}

func pgBinDir() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		// Debian links a few binaries into PATH; the rest (createdb) sit
		// beside the real one.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		d := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "createdb")); err == nil {
				return d, nil
			}
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { // newest major version first
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no initdb and pg_ctl on PATH or in /usr/lib/postgresql/*/bin")
}

// startPostgres starts a server; on failure it leaves nothing behind.
// Called with mu held, it records the server (see Track).
func startPostgres() (*pgServer, error) {
	bin, err := pgBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "loom-pg-")
	if err != nil {
		return nil, err
	}
	s, err := initPostgres(bin, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	pid := 0
	if b, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid")); err == nil {
		pid, _ = strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	}
	track(Record{What: "PostgreSQL", Name: "postgres", PID: pid, Dir: dir})
	return s, nil
}

func initPostgres(bin, dir string) (*pgServer, error) {
	s := &pgServer{bin: bin, dir: dir}
	// initdb and postgres refuse to run as root: run them as the postgres
	// user (or nobody) and give it the directory.
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			u, err = user.Lookup("nobody")
		}
		if err != nil {
			return nil, fmt.Errorf("running as root and no postgres or nobody user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := s.run("initdb", "-D", data, "-U", "loom", "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C"); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	for attempt := 0; ; attempt++ {
		var err error
		if s.port, err = freePort(); err != nil {
			return nil, err
		}
		opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=64MB", s.port, dir)
		out, err := s.run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start")
		if err == nil {
			return s, nil
		}
		if attempt == 2 {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			return nil, fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
		}
	}
}

func (s *pgServer) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd.CombinedOutput()
}

func (s *pgServer) stop() {
	s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	os.RemoveAll(s.dir)
}

// --- Redis ---

type redisServer struct {
	cmd  *exec.Cmd
	dir  string
	port int
	next int
}

// Redis returns the URL of a fresh, empty logical database on a throwaway
// redis-server: redis://127.0.0.1:PORT/N.
func Redis(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if rd == nil && rdErr == nil {
		rd, rdErr = startRedis()
		if rdErr == nil {
			s := rd
			stoppers = append(stoppers, s.stop)
		}
	}
	if rdErr != nil {
		Unavailable(t, "Redis", rdErr)
	}
	rd.next++
	if rd.next >= redisDatabases {
		t.Fatalf("testserver: more than %d Redis databases in one test binary", redisDatabases-1)
	}
	return fmt.Sprintf("redis://127.0.0.1:%d/%d", rd.port, rd.next)
}

const redisDatabases = 4096

// startRedis starts a server; on failure it leaves nothing behind. Called
// with mu held, it records the server (see Track).
func startRedis() (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("no redis-server on PATH")
	}
	dir, err := os.MkdirTemp("", "loom-redis-")
	if err != nil {
		return nil, err
	}
	s, err := runRedis(bin, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	track(Record{What: "redis-server", Name: "redis-server", PID: s.cmd.Process.Pid, Dir: dir})
	return s, nil
}

func runRedis(bin, dir string) (*redisServer, error) {
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--databases", strconv.Itoa(redisDatabases), "--dir", dir, "--protected-mode", "no")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		cmd.Stderr = cmd.Stdout
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		s := &redisServer{cmd: cmd, dir: dir, port: port}
		ready := make(chan error, 1)
		go func() {
			sc := bufio.NewScanner(stdout)
			var lines []string
			for sc.Scan() {
				lines = append(lines, sc.Text())
				if strings.Contains(sc.Text(), "Ready to accept connections") {
					ready <- nil
					for sc.Scan() { // keep draining so the server never blocks on its log
					}
					return
				}
			}
			ready <- fmt.Errorf("redis-server exited: %s", strings.Join(lines, "\n"))
		}()
		select {
		case err = <-ready:
		case <-time.After(30 * time.Second):
			err = errors.New("redis-server did not become ready in 30s")
		}
		if err == nil {
			return s, nil
		}
		cmd.Process.Kill()
		cmd.Wait()
		if attempt == 2 {
			return nil, err
		}
	}
}

func (s *redisServer) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
	}
	os.RemoveAll(s.dir)
}
