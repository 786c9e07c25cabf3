package sqlite

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/storetest"
)

// gcChildEnv tells the test binary, run again, to be TestGCCrashChild.
const gcChildEnv = "LOOM_SQLITE_GC_CHILD"

// gcSpec is what a GC child does: one GC of the file at Path, judged at Now.
type gcSpec struct {
	Path string    `json:"path"`
	Now  time.Time `json:"now"`
}

// gcClock is the time the GC crash test's store is built at; its GC runs
// two hours later, when the threads with a TTL of an hour have expired.
var gcClock = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// TestGCCrashChild is the child of TestGCCrash: it opens the store, says
// so on stdout, and runs one GC, until it is killed or done.
func TestGCCrashChild(t *testing.T) {
	raw := os.Getenv(gcChildEnv)
	if raw == "" {
		t.Skip("runs only as a child process of TestGCCrash")
	}
	var spec gcSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), spec.Path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	os.Stdout.WriteString("ready\n")
	rep, err := thread.New(s, nil).GC(context.Background(), thread.GCOptions{Now: spec.Now})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(os.Stdout, "done %+v\n", rep)
}

// gcBuild makes the store the GC crash test collects, at path: a thread
// "big" of several thousand versions keeping its last 10, whose head goes
// back now and then (each time leaving a branch that only old versions
// reach), with a checkpoint on one of those branches; forks of it and
// small threads that expire (TTL 1h). It returns the version of big and
// the messages (ids) of a sample of its versions.
func gcBuild(t *testing.T, path string, versions int64) (int64, map[int64][]string) {
	t.Helper()
	ctx := t.Context()
	s, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	clk := gcClock
	db := thread.New(s, &thread.Options{Now: func() time.Time { return clk }})
	big, err := db.Create(ctx, thread.CreateOptions{ID: "big"})
	if err != nil {
		t.Fatal(err)
	}
	if err := big.SetRetention(ctx, thread.Retention{KeepLast: 10}); err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("words of a message ", 10)
	forks := 0
	for big.Version() < versions {
		v := big.Version()
		switch {
		case v%25 == 0 && v > 20 && v < versions-10:
			// Abandon the branch of the last few versions.
			if err := big.Restore(ctx, v-7); err != nil {
				t.Fatal(err)
			}
		case v == 107:
			if _, err := big.Checkpoint(ctx, "kept"); err != nil {
				t.Fatal(err)
			}
		case v%400 == 3:
			// A fork that expires shares the commits under it.
			msgs, err := big.Messages(ctx, thread.ReadOptions{Last: 1})
			if err != nil {
				t.Fatal(err)
			}
			f, err := big.Fork(ctx, thread.ForkOptions{ID: fmt.Sprintf("fork%d", forks), At: msgs[0].ID})
			if err != nil {
				t.Fatal(err)
			}
			forks++
			if err := f.SetRetention(ctx, thread.Retention{TTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Append(ctx, message.User("on the fork")); err != nil {
				t.Fatal(err)
			}
		}
		if big.Version() == v {
			// The checkpoint and the fork did not move big.
			if _, err := big.Append(ctx, message.User(fmt.Sprintf("%d: %s", v, body))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 40 {
		th, err := db.Create(ctx, thread.CreateOptions{ID: fmt.Sprintf("old%02d", i)})
		if err != nil {
			t.Fatal(err)
		}
		for j := range 5 {
			if _, err := th.Append(ctx, message.User(fmt.Sprintf("old %d %d", i, j))); err != nil {
				t.Fatal(err)
			}
		}
		if err := th.SetRetention(ctx, thread.Retention{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	// The messages of the last versions and of a sample of the others.
	sample := map[int64][]string{}
	for v := int64(1); v <= big.Version(); v++ {
		if v > big.Version()-10 || v%401 == 0 {
			sample[v] = messageIDs(t, big, v)
		}
	}
	return big.Version(), sample
}

func messageIDs(t *testing.T, th *thread.Thread, v int64) []string {
	t.Helper()
	msgs, err := th.Messages(t.Context(), thread.ReadOptions{Version: v})
	if err != nil {
		t.Fatalf("messages of %s at version %d: %v", th.ID(), v, err)
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

// gcState is what the GC crash test compares: the threads, big's history
// (version and commit) and every commit id.
type gcState struct {
	Threads []string
	History []string
	Commits []string
}

func readGCState(t *testing.T, s *Store) gcState {
	t.Helper()
	ctx := t.Context()
	var st gcState
	strs := func(q string) []string {
		rows, err := s.r.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	st.Threads = strs(`SELECT id FROM threads ORDER BY id`)
	st.History = strs(`SELECT h.version || ' ' || coalesce(c.id, '') FROM history h JOIN threads t ON t.k = h.thread
		LEFT JOIN commits c ON c.k = h.commit_key WHERE t.id = 'big' ORDER BY h.version`)
	st.Commits = strs(`SELECT id FROM commits ORDER BY id`)
	return st
}

// gcChild is a running TestGCCrashChild.
type gcChild struct {
	cmd    *exec.Cmd
	lines  chan string // what it says on stdout after ready, until it exits
	stderr *strings.Builder
}

// startGCChild starts a child that GCs the file at path, and returns once
// it has opened the store and starts its GC.
func startGCChild(t *testing.T, path string, now time.Time) *gcChild {
	t.Helper()
	raw, _ := json.Marshal(gcSpec{Path: path, Now: now})
	cmd := exec.Command(os.Args[0], "-test.run=^TestGCCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), gcChildEnv+"="+string(raw))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &gcChild{cmd: cmd, lines: make(chan string, 16), stderr: &strings.Builder{}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	if l, ok := <-c.lines; !ok || l != "ready" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the GC child said %q, not ready:\n%s", l, c.stderr.String())
	}
	return c
}

// copyDB copies the database file from to to (the store that wrote it is
// closed, its log checkpointed into it).
func copyDB(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestGCCrash kills a process in the middle of a GC that prunes a thread
// of thousands of versions to its last 10 and deletes expired threads,
// then checks the file: every thread is whole (each kept version of big
// reads what it read before, its history is a contiguous run ending at
// its version, each expired thread is there in full or gone), the
// reference counts match the references there are, and a second GC ends
// where one GC that was not interrupted ends.
func TestGCCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx := t.Context()
	dir := t.TempDir()
	pristine := filepath.Join(dir, "pristine.db")
	start := time.Now()
	version, sample := gcBuild(t, pristine, 3000)
	t.Logf("built in %v", time.Since(start))
	gcNow := gcClock.Add(2 * time.Hour)
	// big's history before any GC: the commit of each version.
	before := map[int64]string{}
	s, err := Open(ctx, pristine, nil)
	if err != nil {
		t.Fatal(err)
	}
	bigBefore, err := thread.New(s, nil).Thread(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	for e, err := range bigBefore.History(ctx, thread.HistoryOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		before[e.Version] = e.Commit
	}
	s.Close()

	// One GC not interrupted, in a child as the others: the state every
	// GC must end at, and how long a child's GC takes.
	ref := filepath.Join(dir, "ref.db")
	copyDB(t, pristine, ref)
	c := startGCChild(t, ref, gcNow)
	start = time.Now()
	var said []string
	var took time.Duration
	for l := range c.lines {
		if took == 0 {
			took = time.Since(start) // "done"
		}
		said = append(said, l)
	}
	if err := c.cmd.Wait(); err != nil || len(said) == 0 || !strings.HasPrefix(said[0], "done ") {
		t.Fatalf("reference GC: %v, said %q:\n%s", err, said, c.stderr.String())
	}
	s, err = Open(ctx, ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := readGCState(t, s)
	checkRefs(t, s)
	s.Close()
	if len(want.History) != 10 || slices.ContainsFunc(want.Threads, func(id string) bool { return id != "big" }) {
		t.Fatalf("reference GC kept %d versions of big and threads %q, want 10 and big alone", len(want.History), want.Threads)
	}
	t.Logf("uninterrupted GC: %v, %s", took, said[0])

	const rounds = 5
	pruned := 0
	for round := range rounds {
		path := filepath.Join(dir, fmt.Sprintf("round%d.db", round))
		copyDB(t, pristine, path)
		c := startGCChild(t, path, gcNow)
		cmd, lines := c.cmd, c.lines
		// Deliberate: a random moment of the GC to kill it at, over the
		// time a whole GC takes.
		time.Sleep(time.Duration(rand.Int64N(int64(took))))
		cmd.Process.Signal(syscall.SIGKILL)
		var rest []string // what the child said after ready
		for l := range lines {
			rest = append(rest, l)
		}
		cmd.Wait()

		s, err := Open(ctx, path, nil)
		if err != nil {
			t.Fatalf("round %d: open after the kill: %v", round, err)
		}
		db := thread.New(s, nil)
		big, err := db.Thread(ctx, "big")
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if big.Version() != version {
			t.Fatalf("round %d: big at version %d, want %d", round, big.Version(), version)
		}
		var kept []int64
		for e, err := range big.History(ctx, thread.HistoryOptions{}) {
			if err != nil {
				t.Fatalf("round %d: history: %v", round, err)
			}
			if before[e.Version] != e.Commit {
				t.Fatalf("round %d: version %d at commit %s, was %s", round, e.Version, e.Commit, before[e.Version])
			}
			kept = append(kept, e.Version)
		}
		slices.Reverse(kept)
		switch {
		case len(kept) == int(version) && kept[0] == 1:
		case len(kept) == 10 && kept[0] == version-9:
			pruned++
		default:
			t.Fatalf("round %d: big keeps %d versions from %v, want all %d or the last 10", round, len(kept), kept[:1], version)
		}
		for i, v := range kept {
			if v != kept[0]+int64(i) {
				t.Fatalf("round %d: history has version %d after %d", round, v, kept[i-1])
			}
		}
		for v, ids := range sample {
			if v < kept[0] {
				continue
			}
			if diff := cmp.Diff(ids, messageIDs(t, big, v)); diff != "" {
				t.Fatalf("round %d: messages at version %d (-before +after):\n%s", round, v, diff)
			}
		}
		left := 0
		for i := range 40 {
			id := fmt.Sprintf("old%02d", i)
			th, err := db.Thread(ctx, id)
			if err != nil {
				continue // expired and deleted
			}
			left++
			if n := len(messageIDs(t, th, 0)); n != 5 {
				t.Fatalf("round %d: %s has %d messages, want 5", round, id, n)
			}
		}
		checkRefs(t, s)

		// A second GC finishes what the first began.
		if _, err := db.GC(ctx, thread.GCOptions{Now: gcNow}); err != nil {
			t.Fatalf("round %d: second GC: %v", round, err)
		}
		if diff := cmp.Diff(want, readGCState(t, s)); diff != "" {
			t.Fatalf("round %d: after a second GC (-uninterrupted +after the kill):\n%s", round, diff)
		}
		checkRefs(t, s)
		s.Close()
		os.Remove(path)
		t.Logf("round %d: big pruned before the kill: %v, %d of 40 expired threads left; child said %q", round, len(kept) == 10, left, rest)
	}
	t.Logf("%d of %d rounds killed after the prune", pruned, rounds)
}

// TestStoreBulkFree runs the suite with every collection of commits a set
// at a time (freeAll), as a large prune or deletion is.
func TestStoreBulkFree(t *testing.T) {
	defer func(n int) { bulkFree = n }(bulkFree)
	bulkFree = 1
	storetest.Run(t, newStore, &storetest.Options{Writers: 8, ForkDepth: 100})
}

// TestPruneGivesSpaceBack: a GC that frees most of a new file gives the
// pages back (vacuum.go): the file is cut in the prune's transaction, and
// few free pages are left.
func TestPruneGivesSpaceBack(t *testing.T) {
	ctx := t.Context()
	s := newStore(t).(*Store)
	gcThread(t, s, 2, 1500, 8000) // 12 MB that only old versions reach
	pages := func() (n, free int64) {
		t.Helper()
		if err := s.w.QueryRowContext(ctx, "PRAGMA page_count").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if err := s.w.QueryRowContext(ctx, "PRAGMA freelist_count").Scan(&free); err != nil {
			t.Fatal(err)
		}
		return n, free
	}
	before, _ := pages()
	rep, err := thread.New(s, nil).GC(ctx, thread.GCOptions{})
	if err != nil || rep.Pruned != 1 {
		t.Fatalf("GC: %+v, %v", rep, err)
	}
	after, free := pages()
	if after*4 > before || free >= vacuumMinPages {
		t.Fatalf("%d pages before the GC, %d after with %d free: want a quarter at most, and fewer than %d free", before, after, free, vacuumMinPages)
	}
	checkRefs(t, s)
}

// TestPruneOnOldFile: a file made before auto_vacuum was set (by an older
// loom) prunes as well, keeps the freed pages for later writes instead of
// cutting the file, and a VACUUM with the setting gives them back.
func TestPruneOnOldFile(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "old.db")
	raw := rawDB(t, path)
	if _, err := raw.ExecContext(ctx, "PRAGMA journal_mode=WAL"); err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, raw, migrations); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	s, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var av int64
	if err := s.w.QueryRowContext(ctx, "PRAGMA auto_vacuum").Scan(&av); err != nil || av != 0 {
		t.Fatalf("auto_vacuum %d, %v: want the old file's 0", av, err)
	}
	gcThread(t, s, 2, 1500, 8000)
	pages := func() (n, free int64) {
		t.Helper()
		s.w.QueryRowContext(ctx, "PRAGMA page_count").Scan(&n)
		s.w.QueryRowContext(ctx, "PRAGMA freelist_count").Scan(&free)
		return n, free
	}
	before, _ := pages()
	rep, err := thread.New(s, nil).GC(ctx, thread.GCOptions{})
	if err != nil || rep.Pruned != 1 {
		t.Fatalf("GC: %+v, %v", rep, err)
	}
	after, free := pages()
	if after != before || free*2 < before {
		t.Fatalf("%d pages before the GC, %d after with %d free: want the file kept, most of it free", before, after, free)
	}
	checkRefs(t, s)
	if _, err := s.w.ExecContext(ctx, "PRAGMA auto_vacuum=INCREMENTAL"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, "VACUUM"); err != nil {
		t.Fatal(err)
	}
	if n, free := pages(); n*4 > before || free != 0 {
		t.Fatalf("%d pages, %d free after VACUUM; %d before the GC", n, free, before)
	}
	if err := s.w.QueryRowContext(ctx, "PRAGMA auto_vacuum").Scan(&av); err != nil || av != 2 {
		t.Fatalf("auto_vacuum %d, %v after VACUUM: want 2 (incremental)", av, err)
	}
}
