package proctest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// envGC holds the URL of the store a GC child collects.
const envGC = "LOOM_PROCTEST_GC"

// GCOptions configure GCCrash. Zero fields mean the defaults.
type GCOptions struct {
	// Rounds is how many GC processes are killed; default 3.
	Rounds int
	// Versions is how many versions the large thread grows by before the
	// first GC; default 3000. Each later round adds a tenth of it.
	Versions int
	// Expired is how many expired threads each round adds; default 16.
	Expired int
	// Check, when not nil, checks the store's own bookkeeping after each
	// kill and at the end (reference counts against the references
	// actually there): a store's test-only consistency check.
	Check func(t *testing.T)
}

// gcChild runs one DB.GC on the store at url, saying when it starts and
// when it is done, for GCCrash to kill it in between.
func gcChild(t *testing.T, url string) {
	ctx := context.Background()
	db, err := thread.Open(ctx, url, nil)
	if err != nil {
		t.Fatalf("gc child open: %v", err)
	}
	defer db.Close()
	fmt.Fprintln(os.Stdout, "gc start")
	start := time.Now()
	rep, err := thread.New(telling{db.Store()}, nil).GC(ctx, thread.GCOptions{})
	if err != nil {
		t.Fatalf("gc child: %v", err)
	}
	fmt.Fprintf(os.Stdout, "gc done %d %d %d\n", time.Since(start).Nanoseconds(), rep.Expired, rep.Versions)
}

// telling is a store that says each batch it applied, in a line.
type telling struct{ store.Store }

func (s telling) Apply(ctx context.Context, b *store.Batch) error {
	if err := s.Store.Apply(ctx, b); err != nil {
		return err
	}
	for _, pr := range b.Prune {
		fmt.Fprintf(os.Stdout, "gc prune %s\n", pr.Thread)
	}
	for _, d := range b.Delete {
		fmt.Fprintf(os.Stdout, "gc delete %s\n", d.Thread)
	}
	return nil
}

// GCCrash checks that DB.GC is crash-safe on the store at url. It grows a
// thread of o.Versions versions with branches that restores abandon (their
// commits reached only by history) and a few checkpoints, keeping its last
// 10 versions, and threads that have expired (forks of the large thread, so
// that deleting them frees commits the thread's pruned versions shared),
// then runs rounds of: a child process runs DB.GC and is killed with SIGKILL
// at a random moment; the parent reopens the store and checks that the
// large thread is whole — its history a contiguous run ending at its
// version, every kept version reading the messages it read before, its
// checkpoints there — that each expired thread is whole or gone, and the
// store's own Check. Each round grows the thread and adds expired threads
// again. At the end a GC in the parent must finish what the killed ones
// left, to the same threads, histories, checkpoints and commits as one
// uninterrupted GC of the same data in a memory store.
//
// The data is written with store.Apply batches of deterministic ids, the
// same batches to the store and to the reference.
func GCCrash(t *testing.T, url string, o GCOptions) {
	t.Helper()
	if o.Rounds == 0 {
		o.Rounds = 3
	}
	if o.Versions == 0 {
		o.Versions = 3000
	}
	if o.Expired == 0 {
		o.Expired = 16
	}
	ctx := t.Context()
	ref := thread.New(thread.NewMemoryStore(), nil)
	b := &gcData{t: t, ref: ref.Store(), texts: map[string]*textNode{}, depth: map[string]int64{}, hist: map[int64]string{}}
	db := open(t, url)
	b.st = db.Store()
	b.create()
	db.Close()

	est := 200 * time.Millisecond // how long a GC takes; learnt from the rounds that finish
	for round := range o.Rounds {
		db := open(t, url)
		b.st = db.Store()
		n := o.Versions
		if round > 0 {
			n = max(o.Versions/10, 1)
		}
		b.grow(round, n)
		b.expired(round, o.Expired)
		db.Close()

		c, delay := startGC(t, url, est)
		done, took, batches, pruned := c.finished()
		if done {
			est = took
		} else {
			est *= 2 // a GC longer than thought: kill later too
		}
		t.Logf("round %d: the GC child was killed %v after it started, after %d batches (the large thread's prune among them: %v); it had finished: %v (in %v)",
			round, delay, batches, pruned, done, took)

		db = open(t, url)
		b.st = db.Store()
		b.verify(ctx, db, fmt.Sprintf("round %d", round))
		if o.Check != nil {
			o.Check(t)
		}
		db.Close()
	}

	// One more GC finishes what the killed ones left, to where one
	// uninterrupted GC of the same data gets.
	db = open(t, url)
	defer db.Close()
	b.st = db.Store()
	if _, err := db.GC(ctx, thread.GCOptions{}); err != nil {
		t.Fatalf("gc after the kills: %v", err)
	}
	if _, err := ref.GC(ctx, thread.GCOptions{}); err != nil {
		t.Fatalf("reference gc: %v", err)
	}
	b.verify(ctx, db, "after the last gc")
	b.same(ctx, db, ref)
	if o.Check != nil {
		o.Check(t)
	}
	rep, err := db.GC(ctx, thread.GCOptions{})
	if err != nil || rep.Expired != 0 || rep.Versions != 0 {
		t.Fatalf("a GC after a complete one: %+v, %v; want nothing to do", rep, err)
	}
}

// gcRun is a GC child process.
type gcRun struct {
	cmd   *exec.Cmd
	lines chan string
	out   strings.Builder
}

// startGC starts a GC child, waits until it starts collecting, kills it at
// a random moment within est, and returns it once it is gone.
func startGC(t *testing.T, url string, est time.Duration) (*gcRun, time.Duration) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildProcess$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(), envGC+"="+url)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r := &gcRun{cmd: cmd, lines: make(chan string, 16)}
	cmd.Stderr = &r.out // read only after Wait
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
	}()
	select {
	case line, ok := <-r.lines:
		if !ok || line != "gc start" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the GC child did not start (%q):\n%s", line, r.out.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the GC child did not start in 60s")
	}
	// Deliberate: a random moment of the GC to kill it at.
	delay := time.Duration(rand.Int64N(int64(est) + 1))
	time.Sleep(delay)
	cmd.Process.Signal(syscall.SIGKILL)
	err = cmd.Wait()
	if exit, ok := err.(*exec.ExitError); ok && exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the GC child failed: %v\n%s", err, r.out.String())
	}
	return r, delay
}

// finished reports whether the child said it was done, how long its GC
// took, and the batches it said it applied.
func (r *gcRun) finished() (done bool, took time.Duration, batches int, pruned bool) {
	for line := range r.lines {
		switch f := strings.Fields(line); {
		case len(f) == 5 && f[0] == "gc" && f[1] == "done":
			ns, _ := strconv.ParseInt(f[2], 10, 64)
			done, took = true, time.Duration(ns)
		case len(f) == 3 && f[0] == "gc":
			batches++
			pruned = pruned || (f[1] == "prune" && f[2] == gcBig)
		}
	}
	return done, took, batches, pruned
}

// textNode is a message text and the texts before it: what a commit reads.
type textNode struct {
	text   string
	parent *textNode
}

func (n *textNode) texts() []string {
	var out []string
	for ; n != nil; n = n.parent {
		out = append(out, n.text)
	}
	slices.Reverse(out)
	return out
}

// gcData writes the same batches to the store and to the reference, and
// remembers what each commit and version reads.
type gcData struct {
	t   *testing.T
	st  store.Store
	ref store.Store

	texts   map[string]*textNode // commit -> what it reads
	depth   map[string]int64     // commit -> its depth
	commits []string             // every commit made
	round   []string             // the commits grow made this round
	hist    map[int64]string     // the large thread's version -> head
	head    string
	version int64
	cps     map[string]string // the large thread's checkpoints
	exp     []string          // the expired threads
	seq     int
}

const (
	gcBig     = "gc-big"
	gcStaying = "gc-staying"
)

var gcEpoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// clock is the time of the next write: a microsecond later each.
func (b *gcData) clock() time.Time {
	b.seq++
	return gcEpoch.Add(time.Duration(b.seq) * time.Microsecond)
}

func (b *gcData) apply(batch *store.Batch) {
	b.t.Helper()
	ctx := b.t.Context()
	if err := b.ref.Apply(ctx, batch); err != nil {
		b.t.Fatalf("reference apply: %v", err)
	}
	if err := b.st.Apply(ctx, batch); err != nil {
		b.t.Fatalf("apply: %v", err)
	}
}

// commit makes a commit of one message on parent.
func (b *gcData) commit(id, parent, text string) *store.Commit {
	tm := b.clock()
	m := message.User(text)
	m.ID, m.CreatedAt = "m-"+id, tm
	depth := b.depth[parent] + 1
	b.depth[id] = depth
	b.texts[id] = &textNode{text: text, parent: b.texts[parent]}
	b.commits = append(b.commits, id)
	return &store.Commit{ID: id, Parent: parent, Depth: depth, Messages: []message.Message{m}, Op: thread.OpAppend, Time: tm}
}

// create makes the large thread, keeping its last 10 versions, and a
// thread that stays.
func (b *gcData) create() {
	tm := b.clock()
	big := &store.Record{ID: gcBig, Kind: thread.KindLocal, Version: 1, CreatedAt: tm, UpdatedAt: tm,
		Labels: thread.Retention{KeepLast: 10}.Labels()}
	stay := &store.Record{ID: gcStaying, Kind: thread.KindLocal, Version: 1, CreatedAt: tm, UpdatedAt: tm,
		Labels: thread.Retention{KeepLast: 1000}.Labels()}
	b.apply(&store.Batch{Create: []store.Creation{{Record: big, Op: thread.OpCreate}, {Record: stay, Op: thread.OpCreate}}})
	b.version, b.hist[1] = 1, ""
	b.cps = map[string]string{}
}

// grow adds n versions to the large thread in batches: appends, and every
// 37th a restore to a version a few back, which abandons the commits after
// it; a checkpoint every 1000.
func (b *gcData) grow(round, n int) {
	const per = 250
	var made []int64 // versions made this round: restores go back only to these
	b.round = b.round[:0]
	for i := 0; i < n; {
		batch := &store.Batch{}
		for k := 0; k < per && i < n; k, i = k+1, i+1 {
			head, op := b.head, thread.OpAppend
			if i%37 == 36 && len(made) > 8 {
				head, op = b.hist[made[len(made)-6]], thread.OpRestore
			} else {
				c := b.commit(fmt.Sprintf("c-%d-%d", round, i), b.head, fmt.Sprintf("r%d-%d", round, i))
				batch.Commits = append(batch.Commits, c)
				b.round = append(b.round, c.ID)
				head = c.ID
			}
			batch.Moves = append(batch.Moves, store.Move{Thread: gcBig, From: b.version, Head: head, Op: op, Time: b.clock()})
			b.version++
			b.head, b.hist[b.version] = head, head
			made = append(made, b.version)
			if i%1000 == 500 {
				name := fmt.Sprintf("cp-%d-%d", round, i)
				batch.Checkpoints = append(batch.Checkpoints, thread.Checkpoint{Thread: gcBig, Name: name, Commit: head, Version: b.version, CreatedAt: b.clock()})
				b.cps[name] = head
			}
		}
		b.apply(batch)
	}
}

// expired adds n threads that expired long ago: half forked from commits
// grow made this round (some on branches that restores abandoned), half
// from its head, each with a commit of its own; their ids sort around the
// large thread's.
func (b *gcData) expired(round, n int) {
	old := gcEpoch.Add(-1000 * time.Hour)
	batch := &store.Batch{}
	for i := range n {
		id := fmt.Sprintf("gc-a-%d-%d", round, i)
		if i%2 == 1 {
			id = fmt.Sprintf("gc-z-%d-%d", round, i)
		}
		at := b.head
		if i%2 == 0 {
			at = b.round[(i*131)%len(b.round)]
		}
		c := b.commit("c-"+id, at, "own "+id)
		batch.Commits = append(batch.Commits, c)
		r := &store.Record{ID: id, Kind: thread.KindLocal, Version: 1, Head: c.ID, CreatedAt: old, UpdatedAt: old,
			Labels: thread.Retention{TTL: time.Hour}.Labels(), ForkedFrom: store.ForkPoint{Thread: gcBig}}
		batch.Create = append(batch.Create, store.Creation{Record: r, Op: thread.OpFork})
		b.exp = append(b.exp, id)
	}
	b.apply(batch)
}

// readTexts reads the texts of the last messages of th at version v (all
// of them with last 0).
func readTexts(t *testing.T, th *thread.Thread, v int64, last int, what string) []string {
	t.Helper()
	msgs, err := th.Messages(t.Context(), thread.ReadOptions{Version: v, Last: last})
	if err != nil {
		t.Fatalf("%s: read version %d: %v", what, v, err)
	}
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Text()
	}
	return out
}

// verify checks that the large thread is whole, and every expired thread
// whole or gone.
func (b *gcData) verify(ctx context.Context, db *thread.DB, what string) {
	t := b.t
	t.Helper()
	th, err := db.Thread(ctx, gcBig)
	if err != nil {
		t.Fatalf("%s: the large thread: %v", what, err)
	}
	if th.Version() != b.version || th.Record().Head != b.head {
		t.Fatalf("%s: the large thread is at version %d, head %s; want %d, %s", what, th.Version(), th.Record().Head, b.version, b.head)
	}
	var vs []int64
	for e, err := range th.History(ctx, thread.HistoryOptions{}) {
		if err != nil {
			t.Fatalf("%s: history: %v", what, err)
		}
		if want := b.version - int64(len(vs)); e.Version != want {
			t.Fatalf("%s: history entry %d has version %d, want %d: not a contiguous run ending at the version", what, len(vs), e.Version, want)
		}
		if e.Commit != b.hist[e.Version] {
			t.Fatalf("%s: version %d has head %s, want %s", what, e.Version, e.Commit, b.hist[e.Version])
		}
		vs = append(vs, e.Version)
	}
	if len(vs) < 10 {
		t.Fatalf("%s: %d versions kept; want at least the last 10", what, len(vs))
	}
	// The newest and the oldest kept versions read whole; the last
	// messages of every other kept version when there are few, else of a
	// few of them. (vs is newest first.)
	check := vs[1 : len(vs)-1]
	if len(check) > 10 {
		check = nil
		for range 6 {
			check = append(check, vs[rand.IntN(len(vs))])
		}
	}
	for i, v := range append([]int64{vs[0], vs[len(vs)-1]}, check...) {
		last := 0
		if i >= 2 {
			last = 64
		}
		want := b.texts[b.hist[v]].texts()
		if last > 0 && len(want) > last {
			want = want[len(want)-last:]
		}
		if got := readTexts(t, th, v, last, what); !slices.Equal(got, want) {
			t.Fatalf("%s: version %d reads %d messages, want %d (…%q)", what, v, len(got), len(want), want[max(len(want)-3, 0):])
		}
	}
	cps := map[string]string{}
	for cp, err := range th.Checkpoints(ctx) {
		if err != nil {
			t.Fatalf("%s: checkpoints: %v", what, err)
		}
		cps[cp.Name] = cp.Commit
		if _, err := db.Store().Commit(ctx, cp.Commit); err != nil {
			t.Fatalf("%s: the commit of checkpoint %s: %v", what, cp.Name, err)
		}
	}
	if len(cps) != len(b.cps) {
		t.Fatalf("%s: %d checkpoints, want %d", what, len(cps), len(b.cps))
	}
	for name, c := range b.cps {
		if cps[name] != c {
			t.Fatalf("%s: checkpoint %s at %q, want %s", what, name, cps[name], c)
		}
	}
	for _, id := range b.exp {
		e, err := db.Thread(ctx, id)
		if err != nil {
			if !errors.Is(err, thread.ErrNotFound) {
				t.Fatalf("%s: expired thread %s: %v", what, id, err)
			}
			continue
		}
		want := b.texts[e.Record().Head].texts()
		want = want[max(len(want)-3, 0):]
		if got := readTexts(t, e, 0, 3, what); !slices.Equal(got, want) {
			t.Fatalf("%s: expired thread %s ends with %q, want %q", what, id, got, want)
		}
	}
	if _, err := db.Thread(ctx, gcStaying); err != nil {
		t.Fatalf("%s: the thread that stays: %v", what, err)
	}
}

// same checks that the store holds what the reference does: the same
// threads, histories and checkpoints, and the same commits of all those
// ever made.
func (b *gcData) same(ctx context.Context, db, ref *thread.DB) {
	t := b.t
	t.Helper()
	list := func(s store.Store) []string {
		var out []string
		for r, err := range s.Threads(ctx, thread.ListOptions{AllTenants: true}) {
			if err != nil {
				t.Fatalf("list threads: %v", err)
			}
			out = append(out, r.ID)
		}
		return out
	}
	got, want := list(db.Store()), list(ref.Store())
	if !slices.Equal(got, want) {
		t.Fatalf("threads after gc: %q; one uninterrupted GC leaves %q", got, want)
	}
	for _, id := range got {
		h := func(s store.Store) []store.HistoryEntry {
			var out []store.HistoryEntry
			for e, err := range s.History(ctx, id, thread.HistoryOptions{}) {
				if err != nil {
					t.Fatalf("history of %s: %v", id, err)
				}
				out = append(out, e)
			}
			return out
		}
		g, w := h(db.Store()), h(ref.Store())
		if !slices.EqualFunc(g, w, func(a, b store.HistoryEntry) bool {
			return a.Version == b.Version && a.Commit == b.Commit && a.Op == b.Op && a.Time.Equal(b.Time)
		}) {
			t.Fatalf("%s's history after gc: %d entries (%v…); one uninterrupted GC leaves %d (%v…)", id, len(g), g[:min(len(g), 2)], len(w), w[:min(len(w), 2)])
		}
	}
	var extra, missing []string
	for _, id := range b.commits {
		_, gerr := db.Store().Commit(ctx, id)
		_, rerr := ref.Store().Commit(ctx, id)
		switch {
		case gerr == nil && rerr != nil:
			extra = append(extra, id)
		case gerr != nil && rerr == nil:
			missing = append(missing, id)
		}
	}
	if len(extra)+len(missing) > 0 {
		t.Fatalf("after gc the store keeps %d commits one uninterrupted GC frees (%q…) and lacks %d it keeps (%q…)",
			len(extra), extra[:min(len(extra), 3)], len(missing), missing[:min(len(missing), 3)])
	}
	var kept int
	for _, id := range b.commits {
		if _, err := ref.Store().Commit(ctx, id); err == nil {
			kept++
		}
	}
	t.Logf("after gc: %d threads, %d of %d commits kept", len(got), kept, len(b.commits))
}
