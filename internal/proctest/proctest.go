// Package proctest checks stores across OS processes: crash safety (a
// writer killed with SIGKILL loses nothing it acknowledged) and concurrency
// (several processes appending to one thread lose nothing and never share a
// version).
//
// The child processes are the test binary itself, re-executed to run only
// TestChildProcess, which every store package that uses proctest declares:
//
//	func TestChildProcess(t *testing.T) { proctest.Child(t) }
//
//	func TestCrash(t *testing.T) { proctest.Crash(t, "sqlite://"+path, 5) }
//
// A child opens the store with thread.Open, so the store's package (imported
// by its own test binary) must register its URL scheme.
//
// Killed is the same re-execution for a program that kills itself in the
// middle of a run (the examples' -crash), so that a test can show that the
// next run resumes.
package proctest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

const envSpec = "LOOM_PROCTEST_CHILD"

// spec tells a child what to do.
type spec struct {
	URL    string `json:"url"`
	Thread string `json:"thread"`
	Writer string `json:"writer"`
	Count  int    `json:"count"` // 0: until killed
	// Mixed makes every fifth step a fork of the thread and every fifth a
	// checkpoint, so that batches that create threads and checkpoints are
	// killed too, not only appends.
	Mixed bool `json:"mixed"`
}

// Child runs the work of a child process when the test binary was started
// by Crash, Concurrent or GCCrash, and skips otherwise.
func Child(t *testing.T) {
	if url := os.Getenv(envGC); url != "" {
		gcChild(t, url)
		return
	}
	raw := os.Getenv(envSpec)
	if raw == "" {
		t.Skip("runs only as a child process of proctest.Crash, proctest.Concurrent or proctest.GCCrash")
	}
	var s spec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatalf("child spec: %v", err)
	}
	ctx := context.Background()
	db, err := thread.Open(ctx, s.URL, &thread.Options{AppendRetries: 100_000})
	if err != nil {
		t.Fatalf("child open: %v", err)
	}
	defer db.Close()
	th, err := db.Thread(ctx, s.Thread)
	if err != nil {
		t.Fatalf("child thread: %v", err)
	}
	last := "" // the last message this child appended
	for i := 0; s.Count == 0 || i < s.Count; i++ {
		// One write(2) per line: once it returns, the parent can read it,
		// whatever happens to this process next.
		switch {
		case s.Mixed && i%5 == 3 && last != "":
			id := fmt.Sprintf("f-%s-%d", s.Writer, i)
			if _, err := th.Fork(ctx, thread.ForkOptions{ID: id, At: last}); err != nil {
				t.Fatalf("child fork %d: %v", i, err)
			}
			fmt.Fprintf(os.Stdout, "ack fork %s %s\n", id, last)
		case s.Mixed && i%5 == 4:
			name := fmt.Sprintf("cp-%s-%d", s.Writer, i)
			if err := th.Refresh(ctx); err != nil {
				t.Fatalf("child refresh %d: %v", i, err)
			}
			if _, err := th.Checkpoint(ctx, name); err != nil {
				t.Fatalf("child checkpoint %d: %v", i, err)
			}
			fmt.Fprintf(os.Stdout, "ack cp %s %s\n", name, th.Record().Head)
		default:
			c, err := th.Append(ctx, message.User(fmt.Sprintf("%s-%d", s.Writer, i)))
			if err != nil {
				t.Fatalf("child append %d: %v", i, err)
			}
			last = c.Messages[0].ID
			fmt.Fprintf(os.Stdout, "ack msg %s %s\n", s.Writer, last)
		}
	}
}

// child is a running child process and the appends it acknowledged.
type child struct {
	cmd   *exec.Cmd
	done  chan struct{}
	mu    sync.Mutex
	acks  []string    // message ids, in order
	forks [][2]string // thread id, the message it was forked at
	cps   [][2]string // checkpoint name, commit
	out   strings.Builder
}

func start(t *testing.T, s spec) *child {
	t.Helper()
	raw, _ := json.Marshal(s)
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildProcess$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(), envSpec+"="+string(raw))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &lockedWriter{c: c}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			f := strings.Fields(line)
			switch {
			case len(f) == 4 && f[0] == "ack" && f[1] == "msg":
				c.acks = append(c.acks, f[3])
			case len(f) == 4 && f[0] == "ack" && f[1] == "fork":
				c.forks = append(c.forks, [2]string{f[2], f[3]})
			case len(f) == 4 && f[0] == "ack" && f[1] == "cp":
				c.cps = append(c.cps, [2]string{f[2], f[3]})
			default:
				c.out.WriteString(line + "\n")
			}
			c.mu.Unlock()
		}
	}()
	return c
}

type lockedWriter struct{ c *child }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.c.out.Write(p)
}

func (c *child) acked() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.acks...)
}

func (c *child) forksAndCheckpoints() (forks, cps [][2]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][2]string(nil), c.forks...), append([][2]string(nil), c.cps...)
}

func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// wait waits for the child to exit and for its output to be read.
func (c *child) wait() error {
	err := c.cmd.Wait()
	<-c.done
	return err
}

// Killed runs the test binary again, to run only its test named test with
// the environment variable env set to value, and fails t unless that child
// was killed by SIGKILL. It returns what the child wrote, stdout and stderr.
func Killed(t *testing.T, test, env, value string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), env+"="+value)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("%s: %v, want killed by SIGKILL\n%s", test, err, out)
	}
	return string(out)
}

func open(t *testing.T, url string) *thread.DB {
	t.Helper()
	db, err := thread.Open(t.Context(), url, nil)
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	return db
}

// Crash runs rounds of: a child appends to one thread of the store at url
// as fast as it can, and every fifth step forks it or checkpoints it; it is
// killed with SIGKILL at a random moment; the store is opened afresh and must
// hold every append, fork and checkpoint the child acknowledged, in a thread
// that reads back whole and takes new writes.
func Crash(t *testing.T, url string, rounds int) {
	t.Helper()
	ctx := t.Context()
	db := open(t, url)
	th, err := db.Create(ctx, thread.CreateOptions{Title: "crash test"})
	if err != nil {
		t.Fatal(err)
	}
	id := th.ID()
	db.Close()
	var all []string // every acknowledged message id, over all rounds
	for round := range rounds {
		c := start(t, spec{URL: url, Thread: id, Writer: fmt.Sprintf("r%d", round), Mixed: true})
		// Wait for the first acknowledgement, then kill at a random moment.
		deadline := time.Now().Add(60 * time.Second)
		for len(c.acked()) == 0 {
			if time.Now().After(deadline) {
				c.cmd.Process.Kill()
				c.wait()
				t.Fatalf("round %d: the child acknowledged nothing in 60s:\n%s", round, c.output())
			}
			select {
			case <-c.done:
				c.wait()
				t.Fatalf("round %d: the child exited early:\n%s", round, c.output())
			case <-time.After(time.Millisecond):
			}
		}
		// Deliberate: a random moment of the child's writing to kill it at.
		time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond)
		c.cmd.Process.Signal(syscall.SIGKILL)
		c.wait()
		acks := c.acked()
		all = append(all, acks...)

		db := open(t, url)
		th, err := db.Thread(ctx, id)
		if err != nil {
			t.Fatalf("round %d: after the kill: %v", round, err)
		}
		msgs, err := th.Messages(ctx, thread.ReadOptions{})
		if err != nil {
			t.Fatalf("round %d: read after the kill: %v", round, err)
		}
		checkAcked(t, fmt.Sprintf("round %d", round), msgs, all)
		forks, cps := c.forksAndCheckpoints()
		for _, f := range forks {
			ft, err := db.Thread(ctx, f[0])
			if err != nil {
				t.Fatalf("round %d: acknowledged fork %s: %v", round, f[0], err)
			}
			fm, err := ft.Messages(ctx, thread.ReadOptions{Last: 1})
			if err != nil || len(fm) != 1 || fm[0].ID != f[1] {
				t.Fatalf("round %d: fork %s should end at %s: %v %v", round, f[0], f[1], fm, err)
			}
		}
		have := map[string]string{}
		for cp, err := range th.Checkpoints(ctx) {
			if err != nil {
				t.Fatalf("round %d: checkpoints: %v", round, err)
			}
			have[cp.Name] = cp.Commit
		}
		for _, cp := range cps {
			if have[cp[0]] != cp[1] {
				t.Fatalf("round %d: acknowledged checkpoint %s at %s reads back as %q", round, cp[0], cp[1], have[cp[0]])
			}
		}
		// The history is whole: one entry per version, the last at the head.
		// A network store's server may still finish the dead child's last
		// COMMIT (or script) after the kill, which moves the thread once
		// more after th was read: the history and the head are then read
		// again, until they are of one moment.
		for try := 0; ; try++ {
			var versions []int64
			for e, err := range th.History(ctx, thread.HistoryOptions{}) {
				if err != nil {
					t.Fatalf("round %d: history: %v", round, err)
				}
				versions = append(versions, e.Version)
			}
			if len(versions) > 0 && versions[0] > th.Version() && try < 50 {
				time.Sleep(20 * time.Millisecond) // deliberate: the server finishing the dead child's write
				if err := th.Refresh(ctx); err != nil {
					t.Fatalf("round %d: refresh: %v", round, err)
				}
				continue
			}
			for n, v := range versions {
				if v != th.Version()-int64(n) {
					t.Fatalf("round %d: history entry %d has version %d, want %d", round, n, v, th.Version()-int64(n))
				}
			}
			if int64(len(versions)) != th.Version() {
				t.Fatalf("round %d: %d history entries at version %d", round, len(versions), th.Version())
			}
			break
		}
		// And it takes new writes.
		c2, err := th.Append(ctx, message.User(fmt.Sprintf("after round %d", round)))
		if err != nil {
			t.Fatalf("round %d: append after the kill: %v", round, err)
		}
		all = append(all, c2.Messages[0].ID)
		db.Close()
		t.Logf("round %d: %d appends, %d forks and %d checkpoints acknowledged before the kill; %d messages in the thread",
			round, len(acks), len(forks), len(cps), len(msgs)+1)
	}
}

// checkAcked checks that every acknowledged id is in msgs, in order, and
// that msgs holds nothing twice.
func checkAcked(t *testing.T, what string, msgs []message.Message, acked []string) {
	t.Helper()
	pos := make(map[string]int, len(msgs))
	for i, m := range msgs {
		if _, dup := pos[m.ID]; dup {
			t.Fatalf("%s: message %s twice", what, m.ID)
		}
		pos[m.ID] = i
	}
	last := -1
	for _, id := range acked {
		p, ok := pos[id]
		if !ok {
			t.Fatalf("%s: acknowledged message %s is lost (%d messages read, %d acknowledged)", what, id, len(msgs), len(acked))
		}
		if p < last {
			t.Fatalf("%s: acknowledged message %s is out of order", what, id)
		}
		last = p
	}
}

// Concurrent starts procs child processes that each append each messages
// to one thread of the store at url at the same time, and checks that all
// of them are there, each writer's in its order, with one version per
// append.
func Concurrent(t *testing.T, url string, procs, each int) {
	t.Helper()
	ctx := t.Context()
	db := open(t, url)
	defer db.Close()
	th, err := db.Create(ctx, thread.CreateOptions{Title: "concurrency test"})
	if err != nil {
		t.Fatal(err)
	}
	children := make([]*child, procs)
	for p := range procs {
		children[p] = start(t, spec{URL: url, Thread: th.ID(), Writer: fmt.Sprintf("p%d", p), Count: each})
	}
	var acked [][]string
	for p, c := range children {
		if err := c.wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", p, err, c.output())
		}
		if got := c.acked(); len(got) != each {
			t.Fatalf("child %d acknowledged %d appends, want %d:\n%s", p, len(got), each, c.output())
		}
		acked = append(acked, c.acked())
	}
	if err := th.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	msgs, err := th.Messages(ctx, thread.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != procs*each {
		t.Fatalf("%d messages after %d processes appended %d each: appends were lost", len(msgs), procs, each)
	}
	for p, ids := range acked {
		checkAcked(t, fmt.Sprintf("process %d", p), msgs, ids)
	}
	if want := int64(procs*each + 1); th.Version() != want {
		t.Fatalf("version %d, want %d: one version per append", th.Version(), want)
	}
	seen := map[int64]bool{}
	for e, err := range th.History(ctx, thread.HistoryOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if seen[e.Version] {
			t.Fatalf("version %d twice in the history", e.Version)
		}
		seen[e.Version] = true
	}
	if len(seen) != procs*each+1 {
		t.Fatalf("%d history entries, want %d", len(seen), procs*each+1)
	}
}

var _ io.Writer = (*lockedWriter)(nil)
