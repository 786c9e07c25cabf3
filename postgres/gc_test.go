package postgres

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// gcWorld builds the same threads in any store, by batches: a big thread
// whose history is a main line with branches that a rollback left every
// so often (each commit one ~size-byte message), a fork of one of those
// branches and a checkpoint on another, and short threads that expire.
type gcWorld struct {
	at      time.Time // the clock of the writes: a microsecond a version
	big     string
	version int64
	head    string
	depth   int64
	commits int
	rounds  int
	rng     *rand.Rand
	size    int
}

func newGCWorld() *gcWorld {
	return &gcWorld{at: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), big: "big", rng: rand.New(rand.NewPCG(29, 1)), size: 64}
}

// text is a message of about w.size bytes.
func (w *gcWorld) text(id string) string {
	if len(id) >= w.size {
		return id
	}
	return id + " " + strings.Repeat("x", w.size-len(id)-1)
}

func (w *gcWorld) tick() time.Time {
	w.at = w.at.Add(time.Microsecond)
	return w.at
}

// commit makes a commit on parent (at depth-1) with one message.
func (w *gcWorld) commit(parent string, depth int64) *thread.Commit {
	w.commits++
	id := fmt.Sprintf("c%07d", w.commits)
	return &thread.Commit{ID: id, Parent: parent, Depth: depth, Op: thread.OpAppend, Time: w.tick(),
		Messages: []message.Message{{ID: "m" + id, Role: message.RoleUser, Contents: []message.Content{message.Text{Text: w.text(id)}}}}}
}

// create makes the big thread, empty, with its retention.
func (w *gcWorld) create(tb testing.TB, s store.Store) {
	tb.Helper()
	now := w.tick()
	rec := &thread.Record{ID: w.big, Kind: thread.KindLocal, Version: 1, CreatedAt: now, UpdatedAt: now,
		Labels: thread.Retention{KeepLast: 10}.Labels()}
	if err := s.Apply(context.Background(), &store.Batch{Create: []store.Creation{{Record: rec, Op: thread.OpCreate}}}); err != nil {
		tb.Fatal(err)
	}
	w.version = 1
}

// grow adds about n versions to the big thread, in batches of a few
// hundred: appends, and every 40th a branch of three commits that a
// restore of the main line then leaves; in the first round, a fork of
// such a branch and a checkpoint on another. It adds expire threads
// that expire an hour after they were made.
func (w *gcWorld) grow(tb testing.TB, s store.Store, n, expire int) {
	tb.Helper()
	ctx := context.Background()
	var b store.Batch
	flush := func() {
		if len(b.Commits)+len(b.Moves)+len(b.Create)+len(b.Checkpoints) == 0 {
			return
		}
		if err := s.Apply(ctx, &b); err != nil {
			tb.Fatalf("grow: %v", err)
		}
		b = store.Batch{}
	}
	move := func(head string, op thread.Op) {
		b.Moves = append(b.Moves, store.Move{Thread: w.big, From: w.version, Head: head, Op: op, Time: w.tick()})
		w.version++
	}
	for i := 0; i < n; i++ {
		if i%40 == 39 {
			main, depth := w.head, w.depth
			parent, d := main, depth
			for range 3 {
				c := w.commit(parent, d+1)
				b.Commits = append(b.Commits, c)
				move(c.ID, thread.OpAppend)
				parent, d = c.ID, d+1
			}
			switch {
			case w.rounds == 0 && i == 39:
				now := w.tick()
				fork := &thread.Record{ID: "fork", Kind: thread.KindLocal, Head: parent, Version: 1, CreatedAt: now, UpdatedAt: now,
					ForkedFrom: thread.ForkPoint{Thread: w.big, Commit: parent}}
				b.Create = append(b.Create, store.Creation{Record: fork, Op: thread.OpFork})
			case w.rounds == 0 && i == 79:
				b.Checkpoints = append(b.Checkpoints, store.Checkpoint{Thread: w.big, Name: "kept", Commit: parent, Version: w.version, CreatedAt: w.tick()})
			}
			move(main, thread.OpRestore)
			i += 3
		} else {
			c := w.commit(w.head, w.depth+1)
			b.Commits = append(b.Commits, c)
			move(c.ID, thread.OpAppend)
			w.head, w.depth = c.ID, w.depth+1
		}
		if len(b.Moves) >= 500 {
			flush()
		}
	}
	for i := range expire {
		now := w.tick()
		c := w.commit("", 1)
		rec := &thread.Record{ID: fmt.Sprintf("tmp-%d-%d", w.rounds, i), Kind: thread.KindLocal, Head: c.ID, Version: 1,
			CreatedAt: now, UpdatedAt: now, Labels: thread.Retention{TTL: time.Hour}.Labels()}
		b.Commits = append(b.Commits, c)
		b.Create = append(b.Create, store.Creation{Record: rec, Op: thread.OpCreate})
	}
	flush()
	w.rounds++
}

// gcNow is when the GCs of the crash test run: every short thread is
// past its hour.
func (w *gcWorld) gcNow() time.Time { return w.at.Add(2 * time.Hour) }

// snapshot is what a GC must leave as it is: the message ids of the big
// thread at each of its last 10 versions, of its checkpoint, and of the
// fork.
func snapshot(tb testing.TB, s store.Store, w *gcWorld) map[string][]string {
	tb.Helper()
	ctx := context.Background()
	out := map[string][]string{}
	ids := func(head string) []string {
		var ids []string
		if head == "" {
			return ids
		}
		for c, err := range s.Ancestors(ctx, head, -1) {
			if err != nil {
				tb.Fatalf("ancestors of %s: %v", head, err)
			}
			for _, m := range slices.Backward(c.Messages) {
				ids = append(ids, m.ID)
			}
		}
		slices.Reverse(ids)
		return ids
	}
	db := thread.New(s, nil)
	big, err := db.Thread(ctx, w.big)
	if err != nil {
		tb.Fatal(err)
	}
	for v := big.Version() - 9; v <= big.Version(); v++ {
		msgs, err := big.Messages(ctx, thread.ReadOptions{Version: v})
		if err != nil {
			tb.Fatalf("big at version %d: %v", v, err)
		}
		var got []string
		for _, m := range msgs {
			got = append(got, m.ID)
		}
		out[fmt.Sprint("big@", v)] = got
	}
	for cp, err := range s.Checkpoints(ctx, w.big) {
		if err != nil {
			tb.Fatal(err)
		}
		out["checkpoint "+cp.Name] = ids(cp.Commit)
	}
	fork, err := s.Thread(ctx, "fork")
	if err != nil {
		tb.Fatal(err)
	}
	out["fork"] = ids(fork.Head)
	return out
}

// historyOf returns the versions of a thread's history, oldest first.
func historyOf(tb testing.TB, s store.Store, id string) []int64 {
	tb.Helper()
	var out []int64
	for e, err := range s.History(context.Background(), id, thread.HistoryOptions{}) {
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, e.Version)
	}
	slices.Reverse(out)
	return out
}

const envGCChild = "LOOM_POSTGRES_GC_CHILD"

// TestGCChild is the child of TestGCCrash: it runs one GC of the database
// its environment names, at the time it names, and says when it starts.
func TestGCChild(t *testing.T) {
	spec := os.Getenv(envGCChild)
	if spec == "" {
		t.Skip("runs only as a child process of TestGCCrash")
	}
	dsn, at, _ := strings.Cut(spec, " ")
	now, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db, err := thread.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fmt.Println("gc start")
	rep, err := db.GC(ctx, thread.GCOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("gc done %+v\n", rep)
}

// TestGCCrash: a GC process killed (SIGKILL) at random moments while it
// prunes a thread of thousands of versions (KeepLast 10) with branches a
// rollback left, and deletes expired threads, leaves the store whole: the
// kept versions read as before, the history is a contiguous run ending at
// the thread's version, the reference counts are those of the references
// there, and a GC after the last kill ends where one uninterrupted GC of
// the same threads (in a memory store) does.
func TestGCCrash(t *testing.T) {
	dsn := testserver.Postgres(t)
	ctx := t.Context()
	s := open(t, dsn, nil)
	ref := thread.NewMemoryStore()
	w, wref := newGCWorld(), newGCWorld()
	w.create(t, s)
	wref.create(t, ref)
	const rounds = 4
	killed := 0
	for round := range rounds {
		n := 600
		if round == 0 {
			n = 4000
		}
		w.grow(t, s, n, 20)
		wref.grow(t, ref, n, 20)
		before := snapshot(t, s, w)
		hBefore := historyOf(t, s, w.big)

		cmd := exec.Command(os.Args[0], "-test.run=^TestGCChild$", "-test.count=1", "-test.v=false")
		cmd.Env = append(os.Environ(), envGCChild+"="+dsn+" "+w.gcNow().Format(time.RFC3339Nano))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stdout)
		if !lines.Scan() || lines.Text() != "gc start" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: the child did not start: %q\n%s", round, lines.Text(), stderr.String())
		}
		// Deliberate: a random moment of the GC to kill it at.
		time.Sleep(time.Duration(rand.IntN(150)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		var rest strings.Builder
		for lines.Scan() {
			rest.WriteString(lines.Text() + "\n")
		}
		err = cmd.Wait()
		var exit *exec.ExitError
		wasKilled := errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
		switch {
		case wasKilled && !strings.Contains(rest.String(), "gc done"):
			killed++ // mid-GC: a kill after the GC's end proves nothing
		case wasKilled:
		case err != nil:
			t.Fatalf("round %d: the child: %v\n%s%s", round, err, rest.String(), stderr.String())
		}

		// Reopened: whole, and counted right.
		s.Close()
		s = open(t, dsn, nil)
		checkRefs(t, s)
		after := snapshot(t, s, w)
		for k, v := range before {
			if !slices.Equal(after[k], v) {
				t.Errorf("round %d: %s reads %d messages after the kill, %d before", round, k, len(after[k]), len(v))
			}
		}
		rec, err := s.Thread(ctx, w.big)
		if err != nil {
			t.Fatal(err)
		}
		h := historyOf(t, s, w.big)
		if len(h) == 0 || h[len(h)-1] != rec.Version || h[len(h)-1]-h[0]+1 != int64(len(h)) {
			t.Fatalf("round %d: big's history runs %d entries from %v; want a contiguous run ending at %d", round, len(h), h[:min(len(h), 3)], rec.Version)
		}
		if !slices.Equal(h, hBefore) && !slices.Equal(h, hBefore[len(hBefore)-10:]) {
			t.Errorf("round %d: big's history has %d entries from %d; before the GC %d from %d, and a prune keeps the last 10",
				round, len(h), h[0], len(hBefore), hBefore[0])
		}
		t.Logf("round %d: killed %v (counted: %d so far); the child said %q; big's history %d entries, %d before", round, wasKilled, killed, rest.String(), len(h), len(hBefore))
	}
	if killed == 0 {
		t.Errorf("no child was killed before its GC ended: the test proved nothing")
	}

	// The GC after the crashes, and one uninterrupted GC of the same
	// threads.
	got, err := thread.New(s, nil).GC(ctx, thread.GCOptions{Now: w.gcNow()})
	if err != nil {
		t.Fatal(err)
	}
	want, err := thread.New(ref, nil).GC(ctx, thread.GCOptions{Now: wref.gcNow()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of %d rounds killed; the last GC %+v; an uninterrupted one %+v", killed, rounds, got, want)
	checkRefs(t, s)
	if g, w := historyOf(t, s, w.big), historyOf(t, ref, wref.big); !slices.Equal(g, w) {
		t.Errorf("big's history %v; the uninterrupted GC's %v", g, w)
	}
	var threads, refThreads []string
	for r, err := range s.Threads(ctx, thread.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		threads = append(threads, r.ID)
	}
	for r, err := range ref.Threads(ctx, thread.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		refThreads = append(refThreads, r.ID)
	}
	if !slices.Equal(threads, refThreads) {
		t.Errorf("threads %v; the uninterrupted GC's %v", threads, refThreads)
	}
	if g, w := snapshot(t, s, w), snapshot(t, ref, wref); !maps.EqualFunc(g, w, slices.Equal) {
		t.Errorf("the threads read otherwise than after the uninterrupted GC")
	}
	// Every commit left is reached, and so many as the reference keeps.
	var commits int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM loom_commits`).Scan(&commits); err != nil {
		t.Fatal(err)
	}
	if wantN := reachable(t, ref, refThreads); commits != wantN {
		t.Errorf("%d commits stored; the uninterrupted GC keeps %d", commits, wantN)
	}
}

// reachable counts the commits that the threads' history entries and
// checkpoints reach in s.
func reachable(tb testing.TB, s store.Store, threads []string) int {
	tb.Helper()
	ctx := context.Background()
	seen := map[string]bool{}
	walk := func(id string) {
		for c, err := range s.Ancestors(ctx, id, -1) {
			if err != nil {
				tb.Fatal(err)
			}
			if seen[c.ID] {
				return
			}
			seen[c.ID] = true
		}
	}
	for _, id := range threads {
		for e, err := range s.History(ctx, id, thread.HistoryOptions{}) {
			if err != nil {
				tb.Fatal(err)
			}
			if e.Commit != "" {
				walk(e.Commit)
			}
		}
		for cp, err := range s.Checkpoints(ctx, id) {
			if err != nil {
				tb.Fatal(err)
			}
			walk(cp.Commit)
		}
	}
	return len(seen)
}
