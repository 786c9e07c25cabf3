package sqlite

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
)

// worklogItems is how many items the work-log benchmarks start with: the
// issue's latency target is 5 ms p99 for list_threads, create_thread and
// resolve_thread with 10,000 items.
const worklogItems = 10_000

// worklogFile is a work log kept in a SQLite file: the items and the
// session records in threads of a Store.
type worklogFile struct {
	db *thread.DB
}

// openWorklogFile opens the database at path for work logs, with the
// store's defaults (synchronous=normal); both handles close when the test
// ends.
func openWorklogFile(tb testing.TB, path string, opts *Options) *worklogFile {
	tb.Helper()
	ctx := tb.Context()
	s, err := Open(ctx, path, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return &worklogFile{db: thread.New(s, nil)}
}

// log returns a new Log of the default project, with nothing cached.
func (f *worklogFile) log(tb testing.TB) *worklog.Log {
	tb.Helper()
	l, err := worklog.OpenDB(f.db, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// seedWorklog adds n open items to l in one change (a session close that
// carries them all), in the shape of worklog's own benchmarks, and
// returns their ids.
func seedWorklog(tb testing.TB, l *worklog.Log, n int) []string {
	tb.Helper()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	raws := make([]json.RawMessage, n)
	ids := make([]string, n)
	for i := range n {
		it := worklog.Item{ID: fmt.Sprintf("t-%08x", i), Text: fmt.Sprintf("Work item %d: follow up on the %dth open question of the migration", i, i),
			Status: worklog.StatusOpen, CreatedAt: base.Add(time.Duration(i) * time.Second), SourceSession: "c2d841be-fff2-4ac9-ae1e-4d604e2e4d69"}
		raw, err := json.Marshal(it)
		if err != nil {
			tb.Fatal(err)
		}
		raws[i], ids[i] = raw, it.ID
	}
	res, err := l.SessionClose(tb.Context(), worklog.CloseOptions{OpenThreads: raws})
	if err != nil {
		tb.Fatal(err)
	}
	if len(res.Created) != n {
		tb.Fatalf("seeded %d items, want %d", len(res.Created), n)
	}
	return ids
}

// latencies records the time of each operation and reports percentiles
// (worklog/bench_test.go's).
type latencies []time.Duration

func (ls *latencies) time(f func()) {
	start := time.Now()
	f()
	*ls = append(*ls, time.Since(start))
}

func (ls latencies) report(b *testing.B) {
	if len(ls) == 0 {
		return
	}
	slices.Sort(ls)
	at := func(p float64) float64 {
		return float64(ls[min(len(ls)-1, int(p*float64(len(ls))))].Nanoseconds()) / 1e6
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// BenchmarkWorklog measures list_threads, create_thread and resolve_thread
// on a work log of 10,000 items kept in a SQLite file with the store's
// default durability; list_threads/cold is a fresh Log each time (a
// process that starts: every event read and folded), with the store's
// cache of decoded commits and without it.
func BenchmarkWorklog(b *testing.B) {
	ctx := b.Context()
	// setup returns a warm Log on a new file of worklogItems items.
	setup := func(b *testing.B, opts *Options) (*worklogFile, *worklog.Log, []string) {
		f := openWorklogFile(b, filepath.Join(b.TempDir(), "loom.db"), opts)
		l := f.log(b)
		ids := seedWorklog(b, l, worklogItems)
		if _, err := l.List(ctx, worklog.ListOptions{}); err != nil {
			b.Fatal(err)
		}
		return f, l, ids
	}
	b.Run("list_threads", func(b *testing.B) {
		_, l, _ := setup(b, nil)
		var ls latencies
		for b.Loop() {
			ls.time(func() {
				res, err := l.List(ctx, worklog.ListOptions{})
				if err != nil || len(res.Threads) != worklogItems {
					b.Fatal(err)
				}
			})
		}
		ls.report(b)
	})
	for _, cold := range []struct {
		name string
		opts *Options
	}{{"list_threads/cold", nil}, {"list_threads/cold/nocache", &Options{CacheBytes: -1}}} {
		b.Run(cold.name, func(b *testing.B) {
			f, _, _ := setup(b, cold.opts)
			var ls latencies
			for b.Loop() {
				l := f.log(b)
				ls.time(func() {
					res, err := l.List(ctx, worklog.ListOptions{})
					if err != nil || len(res.Threads) != worklogItems {
						b.Fatal(err)
					}
				})
			}
			ls.report(b)
		})
	}
	b.Run("create_thread", func(b *testing.B) {
		_, l, _ := setup(b, nil)
		var ls latencies
		for i := 0; b.Loop(); i++ {
			ls.time(func() {
				res, err := l.Create(ctx, worklog.CreateOptions{Text: fmt.Sprint("New item number ", i)})
				if err != nil || res.Deduplicated {
					b.Fatal(err)
				}
			})
		}
		ls.report(b)
	})
	b.Run("resolve_thread", func(b *testing.B) {
		_, l, ids := setup(b, nil)
		var ls latencies
		for i := 0; b.Loop(); i++ {
			// Past worklogItems iterations the items are resolved
			// already and nothing is written.
			ls.time(func() {
				if _, err := l.Resolve(ctx, worklog.ResolveOptions{ID: ids[i%len(ids)], Note: "done"}); err != nil {
					b.Fatal(err)
				}
			})
		}
		ls.report(b)
	})
	// The session tools, with the session records in a thread of the
	// same file (worklog.ThreadSessions): a close appends one record, a
	// start reads the project's records (cached by the thread's head) and
	// merges what the last 5 closed sessions carry.
	b.Run("session_close", func(b *testing.B) {
		_, l, _ := setup(b, nil)
		var ls latencies
		for i := 0; b.Loop(); i++ {
			carried := []json.RawMessage{json.RawMessage(fmt.Sprintf(`"left open by session %d"`, i))}
			if _, err := l.SessionStart(ctx, worklog.StartOptions{SessionID: fmt.Sprint("s-", i)}); err != nil {
				b.Fatal(err)
			}
			ls.time(func() {
				if _, err := l.SessionClose(ctx, worklog.CloseOptions{SessionID: fmt.Sprint("s-", i), OpenThreads: carried}); err != nil {
					b.Fatal(err)
				}
			})
		}
		ls.report(b)
	})
	b.Run("session_start", func(b *testing.B) {
		_, l, _ := setup(b, nil)
		for range 20 {
			if _, err := l.SessionClose(ctx, worklog.CloseOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		var ls latencies
		for i := 0; b.Loop(); i++ {
			ls.time(func() {
				res, err := l.SessionStart(ctx, worklog.StartOptions{SessionID: fmt.Sprint("new-", i)})
				if err != nil || res.SessionsAggregated == 0 {
					b.Fatal(res, err)
				}
			})
		}
		ls.report(b)
	})
	b.Run("resolve_thread/text", func(b *testing.B) {
		_, l, _ := setup(b, nil)
		var ls latencies
		for i := 0; b.Loop(); i++ {
			ls.time(func() {
				if _, err := l.Resolve(ctx, worklog.ResolveOptions{TextMatch: fmt.Sprintf("item %d:", i%worklogItems), Note: "done"}); err != nil {
					b.Fatal(err)
				}
			})
		}
		ls.report(b)
	})
}

// The multi-process tests re-execute the test binary: each child runs only
// TestWorklogChild, which creates items in the work log of the file the
// parent names and prints "ack ID" once Create returned.

const envWorklogChild = "LOOM_SQLITE_WORKLOG_CHILD"

type worklogChildSpec struct {
	Path       string `json:"path"`
	Writer     string `json:"writer"`
	Goroutines int    `json:"goroutines"`
	Each       int    `json:"each"` // per goroutine; 0: until killed
	// Gate makes the child print "ready" once its Log is open and wait
	// for its standard input to close before it writes, so that the
	// children start writing together.
	Gate bool `json:"gate"`
}

func TestWorklogChild(t *testing.T) {
	raw := os.Getenv(envWorklogChild)
	if raw == "" {
		t.Skip("runs only as a child process of TestWorklogProcesses and TestWorklogCrash")
	}
	var s worklogChildSpec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatal(err)
	}
	l := openWorklogFile(t, s.Path, nil).log(t)
	if s.Gate {
		fmt.Fprintln(os.Stdout, "ready")
		io.Copy(io.Discard, os.Stdin)
	}
	var (
		wg  sync.WaitGroup
		out sync.Mutex
	)
	for g := range max(s.Goroutines, 1) {
		wg.Go(func() {
			for i := 0; s.Each == 0 || i < s.Each; i++ {
				res, err := l.Create(t.Context(), worklog.CreateOptions{Text: fmt.Sprintf("item %s-%d-%d", s.Writer, g, i)})
				if err != nil {
					t.Errorf("create %d-%d: %v", g, i, err)
					return
				}
				if res.Deduplicated {
					t.Errorf("create %d-%d: deduplicated with %s", g, i, res.Thread.ID)
					return
				}
				// One write(2) per line: once it returns, the parent
				// can read it, whatever happens to this process next.
				out.Lock()
				fmt.Fprintf(os.Stdout, "ack %s\n", res.Thread.ID)
				out.Unlock()
			}
		})
	}
	wg.Wait()
}

// worklogChild is a running child process and the ids it acknowledged.
type worklogChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
	ready chan struct{} // closed when the child said "ready"
	mu    sync.Mutex
	acks  []string
	out   strings.Builder
}

func startWorklogChild(t *testing.T, s worklogChildSpec) *worklogChild {
	t.Helper()
	raw, _ := json.Marshal(s)
	c := &worklogChild{done: make(chan struct{}), ready: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestWorklogChild$", "-test.count=1", "-test.v=false")
	c.cmd.Env = append(os.Environ(), envWorklogChild+"="+string(raw))
	c.cmd.Stderr = (*worklogChildErr)(c)
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.mu.Lock()
			if id, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
				c.acks = append(c.acks, id)
			} else if sc.Text() == "ready" {
				close(c.ready)
			} else {
				c.out.WriteString(sc.Text() + "\n")
			}
			c.mu.Unlock()
		}
	}()
	return c
}

type worklogChildErr worklogChild

func (w *worklogChildErr) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.Write(p)
}

var _ io.Writer = (*worklogChildErr)(nil)

func (c *worklogChild) acked() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.acks)
}

func (c *worklogChild) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// wait waits for the child to exit and for its output to be read.
func (c *worklogChild) wait() error {
	<-c.done
	return c.cmd.Wait()
}

// checkWorklog lists every item of the file's work log in a fresh Log and
// checks that each acknowledged id is there once; it returns the items.
func checkWorklog(t *testing.T, f *worklogFile, acked []string) []worklog.Item {
	t.Helper()
	res, err := f.log(t).List(t.Context(), worklog.ListOptions{IncludeResolved: true})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	have := make(map[string]bool, len(res.Threads))
	for _, it := range res.Threads {
		if have[it.ID] {
			t.Errorf("item %s twice", it.ID)
		}
		have[it.ID] = true
	}
	for _, id := range acked {
		if !have[id] {
			t.Errorf("acknowledged item %s is lost (%d items listed, %d acknowledged)", id, len(res.Threads), len(acked))
		}
	}
	return res.Threads
}

// TestWorklogProcesses has three processes, two goroutines each, create
// items in one work log of a SQLite file at the same time, from its very
// first write: none is lost, none is there twice.
func TestWorklogProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const procs, goroutines, each = 3, 2, 20
	path := filepath.Join(t.TempDir(), "loom.db")
	openWorklogFile(t, path, nil) // the schema, so that the children do not race to make it
	children := make([]*worklogChild, procs)
	for p := range procs {
		children[p] = startWorklogChild(t, worklogChildSpec{Path: path, Writer: fmt.Sprint("p", p), Goroutines: goroutines, Each: each, Gate: true})
	}
	for p, c := range children {
		select {
		case <-c.ready:
		case <-c.done:
			c.wait()
			t.Fatalf("child %d exited before it was ready:\n%s", p, c.output())
		}
	}
	for _, c := range children {
		c.stdin.Close()
	}
	var acked []string
	for p, c := range children {
		if err := c.wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", p, err, c.output())
		}
		got := c.acked()
		if len(got) != goroutines*each {
			t.Fatalf("child %d acknowledged %d creates, want %d:\n%s", p, len(got), goroutines*each, c.output())
		}
		acked = append(acked, got...)
	}
	items := checkWorklog(t, openWorklogFile(t, path, nil), acked)
	if len(items) != procs*goroutines*each {
		t.Errorf("%d items, want %d", len(items), procs*goroutines*each)
	}
	// How much the processes' writes interleaved, for the log: a run that
	// kept them apart tests less.
	switches := 0
	for i := 1; i < len(items); i++ {
		if writer(items[i]) != writer(items[i-1]) {
			switches++
		}
	}
	t.Logf("%d items; the writing process changed %d times along the list", len(items), switches)
}

// writer returns the process that created it, from its text: "p1" for
// "item p1-0-7".
func writer(it worklog.Item) string {
	w, _, _ := strings.Cut(strings.TrimPrefix(it.Text, "item "), "-")
	return w
}

// TestWorklogCrash kills a process that creates items as fast as it can
// (SIGKILL, at a random moment), and checks that the file holds every item
// it acknowledged, lists whole and takes new items.
func TestWorklogCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const rounds = 3
	path := filepath.Join(t.TempDir(), "loom.db")
	openWorklogFile(t, path, nil)
	var all []string // every acknowledged id, over all rounds
	for round := range rounds {
		c := startWorklogChild(t, worklogChildSpec{Path: path, Writer: fmt.Sprint("r", round), Goroutines: 2})
		exited := func() bool {
			select {
			case <-c.done:
				return true
			default:
				return false
			}
		}
		if !testwait.Within(30*time.Second, func() bool { return len(c.acked()) > 0 || exited() }) {
			c.cmd.Process.Kill()
			c.wait()
			t.Fatalf("round %d: the child acknowledged nothing in 30s:\n%s", round, c.output())
		}
		if len(c.acked()) == 0 {
			c.wait()
			t.Fatalf("round %d: the child exited early:\n%s", round, c.output())
		}
		// Deliberate: a random moment of the child's writing to kill it at.
		time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
		if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		c.wait()
		acks := c.acked()
		all = append(all, acks...)

		f := openWorklogFile(t, path, nil)
		items := checkWorklog(t, f, all)
		res, err := f.log(t).Create(t.Context(), worklog.CreateOptions{Text: fmt.Sprint("after round ", round)})
		if err != nil {
			t.Fatalf("round %d: create after the kill: %v", round, err)
		}
		all = append(all, res.Thread.ID)
		t.Logf("round %d: %d creates acknowledged before the kill; %d items listed after", round, len(acks), len(items))
	}
	checkWorklog(t, openWorklogFile(t, path, nil), all)
}
