package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// clock is a settable clock for retention cases: expiry and ages are judged
// against it.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

// commitGone checks that the store freed commit id.
func commitGone(t T, s store.Store, id, what string) {
	t.Helper()
	_, err := s.Commit(t.Context(), id)
	wantErr(t, err, thread.ErrNotFound, what)
}

// commitKept checks that the store still holds commit id.
func commitKept(t T, s store.Store, id, what string) {
	t.Helper()
	_, err := s.Commit(t.Context(), id)
	check(t, err, what)
}

// versions returns the versions a thread's history lists, oldest first.
func versions(t T, s store.Store, id string) []int64 {
	t.Helper()
	var out []int64
	for e, err := range s.History(t.Context(), id, thread.HistoryOptions{}) {
		check(t, err, "history of "+id)
		out = append(out, e.Version)
	}
	slices.Reverse(out)
	return out
}

func span(from, to int64) []int64 {
	var out []int64
	for v := from; v <= to; v++ {
		out = append(out, v)
	}
	return out
}

// retentionTTL: a thread idle past its TTL is deleted with what only it
// reaches; a fork keeps what it shares; a thread in use, one without a TTL,
// and one whose own label says "0" stay; a dry run changes nothing.
func retentionTTL(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	clk := newClock()
	db := thread.New(s, &thread.Options{Now: clk.now, Retention: thread.Retention{TTL: 24 * time.Hour}})

	a, err := db.Create(ctx, thread.CreateOptions{ID: "a", Messages: numbered("shared", 2)})
	check(t, err, "create a")
	shared := a.Record().Head
	aOwn, err := a.Append(ctx, message.User("a-own"))
	check(t, err, "append a")
	fork, err := a.Fork(ctx, thread.ForkOptions{ID: "fork", At: read(t, a, thread.ReadOptions{})[1].ID})
	check(t, err, "fork")
	forever, err := db.Create(ctx, thread.CreateOptions{ID: "forever", Messages: numbered("f", 1)})
	check(t, err, "create forever")
	check(t, forever.SetRetention(ctx, thread.Retention{}), "forever's own retention")
	short, err := db.Create(ctx, thread.CreateOptions{ID: "short", Messages: numbered("s", 1)})
	check(t, err, "create short")
	check(t, short.SetRetention(ctx, thread.Retention{TTL: time.Hour}), "short's own retention")
	if r, err := short.Retention(); err != nil || r.TTL != time.Hour {
		t.Errorf("short's retention = %+v, %v; want TTL 1h", r, err)
	}
	if r, err := a.Retention(); err != nil || r.TTL != 24*time.Hour {
		t.Errorf("a's retention = %+v, %v; want the default's TTL 24h", r, err)
	}

	clk.advance(2 * time.Hour)
	rep, err := db.GC(ctx, thread.GCOptions{})
	check(t, err, "gc after 2h")
	if rep.Expired != 1 || rep.Threads != 4 {
		t.Errorf("gc after 2h: %+v; want 4 threads looked at, 1 expired (short)", rep)
	}
	_, err = db.Thread(ctx, "short")
	wantErr(t, err, thread.ErrNotFound, "short after its hour")

	// The fork is used at 12h; a and forever are not.
	clk.advance(10 * time.Hour)
	_, err = fork.Append(ctx, message.User("fork-own"))
	check(t, err, "append fork")
	clk.advance(14 * time.Hour) // 26h: a idle past 24h, fork idle 14h
	dry, err := db.GC(ctx, thread.GCOptions{DryRun: true})
	check(t, err, "dry gc")
	if dry.Expired != 1 {
		t.Errorf("dry gc: %+v; want 1 expired (a)", dry)
	}
	_, err = db.Thread(ctx, "a")
	check(t, err, "a after a dry run")
	rep, err = db.GC(ctx, thread.GCOptions{})
	check(t, err, "gc after 26h")
	if rep.Expired != 1 {
		t.Errorf("gc after 26h: %+v; want 1 expired (a)", rep)
	}
	_, err = db.Thread(ctx, "a")
	wantErr(t, err, thread.ErrNotFound, "a after expiry")
	commitGone(t, s, aOwn.ID, "a's own commit after a expired")
	commitKept(t, s, shared, "the commit a shared with its fork")
	fork, err = db.Thread(ctx, "fork")
	check(t, err, "fork after a expired")
	wantTexts(t, read(t, fork, thread.ReadOptions{}), []string{"shared0", "shared1", "fork-own"}, "fork after a expired")
	_, err = db.Thread(ctx, "forever")
	check(t, err, "forever, whose own TTL of 0 overrides the default")

	clk.advance(48 * time.Hour)
	_, err = db.GC(ctx, thread.GCOptions{})
	check(t, err, "gc after 74h")
	_, err = db.Thread(ctx, "fork")
	wantErr(t, err, thread.ErrNotFound, "fork after its day idle")
	commitGone(t, s, shared, "the shared commit once no thread reaches it")
	_, err = db.Thread(ctx, "forever")
	check(t, err, "forever after 74h")

	// A thread linked to a parent (a workflow's sub-thread) does not go
	// before its parent, however idle; it goes with it, in one batch.
	parent, err := db.Create(ctx, thread.CreateOptions{ID: "parent"})
	check(t, err, "create parent")
	_, err = db.Create(ctx, thread.CreateOptions{ID: "parent.sub", Parent: "parent", Messages: numbered("sub", 1)})
	check(t, err, "create the linked thread")
	clk.advance(20 * time.Hour)
	_, err = parent.Append(ctx, message.User("busy"))
	check(t, err, "append parent")
	clk.advance(20 * time.Hour) // the linked thread idle 40h, its parent 20h
	_, err = db.GC(ctx, thread.GCOptions{})
	check(t, err, "gc with an idle linked thread")
	_, err = db.Thread(ctx, "parent.sub")
	check(t, err, "the idle linked thread while its parent is in use")
	clk.advance(5 * time.Hour)
	rep, err = db.GC(ctx, thread.GCOptions{})
	check(t, err, "gc after the parent's day")
	if rep.Expired != 2 || rep.Skipped != 0 {
		t.Errorf("gc after the parent's day: %+v; want the parent and its linked thread expired together", rep)
	}
	for _, id := range []string{"parent", "parent.sub"} {
		_, err = db.Thread(ctx, id)
		wantErr(t, err, thread.ErrNotFound, id+" after its parent expired")
	}

	// A label that does not parse leaves the thread to the default, and is
	// reported.
	bad, err := db.Create(ctx, thread.CreateOptions{ID: "bad", Labels: map[string]string{thread.LabelTTL: "soon"}})
	check(t, err, "create bad")
	_, err = bad.Retention()
	wantErr(t, err, thread.ErrInvalid, "a TTL label that does not parse")
	rep, err = db.GC(ctx, thread.GCOptions{})
	check(t, err, "gc with a bad label")
	if len(rep.Errors) != 1 {
		t.Errorf("gc with a bad label reported %q; want one error", rep.Errors)
	}
	wantErr(t, bad.SetRetention(ctx, thread.Retention{TTL: -time.Second}), thread.ErrInvalid, "a negative TTL")
}

// retentionThread builds a thread of 20 versions with a branch that a
// rollback left behind and a checkpoint on it, and returns the thread, the
// messages it held at each version, and the commits only the branch holds.
func retentionThread(t T, db *thread.DB, id string) (*thread.Thread, map[int64][]string, []string) {
	ctx := t.Context()
	th, err := db.Create(ctx, thread.CreateOptions{ID: id})
	check(t, err, "create "+id)
	at := map[int64][]string{1: nil}
	var want []string
	var branch []string
	note := func() { at[th.Version()] = slices.Clone(want) }
	for i := range 3 {
		_, err := th.Append(ctx, message.User(fmt.Sprint("m", i)))
		check(t, err, "append")
		want = append(want, fmt.Sprint("m", i))
		note()
	}
	_, err = th.Checkpoint(ctx, "base")
	check(t, err, "checkpoint base")
	for i := range 3 {
		c, err := th.Append(ctx, message.User(fmt.Sprint("lost", i)))
		check(t, err, "append to the branch")
		branch = append(branch, c.ID)
		want = append(want, fmt.Sprint("lost", i))
		note()
	}
	_, err = th.SetState(ctx, map[string]json.RawMessage{"k": json.RawMessage(`"branch"`)})
	check(t, err, "state on the branch")
	note()
	check(t, th.Rollback(ctx, "base"), "rollback to base")
	want = want[:3]
	note()
	for th.Version() < 20 {
		_, err := th.SetState(ctx, map[string]json.RawMessage{"k": json.RawMessage(fmt.Sprint(th.Version()))})
		check(t, err, "state")
		note()
		if th.Version() < 20 {
			_, err := th.Append(ctx, message.User(fmt.Sprint("v", th.Version())))
			check(t, err, "append")
			want = append(want, fmt.Sprint("v", th.Version()-1))
			note()
		}
	}
	return th, at, branch
}

// retentionKeepLast: keeping the last N versions drops the older ones from
// history and time travel, frees the commits only they reached (a
// branch a rollback left), and keeps the checkpoints, the kept versions'
// messages and state exactly, and a second GC has nothing to do.
func retentionKeepLast(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	clk := newClock()
	db := thread.New(s, &thread.Options{Now: clk.now})
	th, at, branch := retentionThread(t, db, "kept")
	states := map[int64]string{}
	for v := int64(1); v <= 20; v++ {
		st, err := th.State(ctx, v)
		check(t, err, "state")
		states[v] = encode(t, st)
	}
	_, err := db.Create(ctx, thread.CreateOptions{ID: "other", Messages: numbered("o", 3)})
	check(t, err, "create other")

	check(t, th.SetRetention(ctx, thread.Retention{KeepLast: 5}), "keep the last 5")
	rep, err := db.GC(ctx, thread.GCOptions{DryRun: true})
	check(t, err, "dry gc")
	if rep.Pruned != 1 || rep.Versions != 16 {
		t.Errorf("dry gc: %+v; want 1 thread pruned of 16 versions", rep)
	}
	if got := versions(t, s, "kept"); len(got) != 21 {
		t.Errorf("history after a dry run: %v; want all 21 versions", got)
	}
	rep, err = db.GC(ctx, thread.GCOptions{})
	check(t, err, "gc")
	if rep.Pruned != 1 || rep.Versions != 16 {
		t.Errorf("gc: %+v; want 1 thread pruned of 16 versions", rep)
	}
	if got, want := versions(t, s, "kept"), span(17, 21); !slices.Equal(got, want) {
		t.Errorf("history after gc: %v; want %v", got, want)
	}
	// Below the oldest kept version there is nothing, and no error: GC
	// finds the oldest by asking so.
	for _, b := range []int64{17, 9, 1} {
		for e, err := range s.History(ctx, "kept", thread.HistoryOptions{Before: b, Limit: 1}) {
			t.Errorf("history before version %d of a thread kept from 17: %+v, %v; want nothing", b, e, err)
		}
	}
	fresh, err := db.Thread(ctx, "kept")
	check(t, err, "reopen kept")
	for v := int64(17); v <= 20; v++ {
		wantTexts(t, read(t, fresh, thread.ReadOptions{Version: v}), at[v], fmt.Sprintf("kept version %d", v))
		st, err := fresh.State(ctx, v)
		check(t, err, "state")
		if got := encode(t, st); got != states[v] {
			t.Errorf("state at kept version %d = %s; want %s", v, got, states[v])
		}
	}
	for _, v := range []int64{1, 8, 16} {
		_, err := fresh.Messages(ctx, thread.ReadOptions{Version: v})
		wantErr(t, err, thread.ErrNotFound, fmt.Sprintf("reading pruned version %d", v))
		wantErr(t, fresh.Restore(ctx, v), thread.ErrNotFound, fmt.Sprintf("restoring pruned version %d", v))
		_, err = fresh.Fork(ctx, thread.ForkOptions{Version: v})
		wantErr(t, err, thread.ErrNotFound, fmt.Sprintf("forking pruned version %d", v))
	}
	for _, id := range branch {
		commitGone(t, s, id, "a commit only pruned versions reached")
	}
	// The checkpoint keeps its commit, and rolling back to it works.
	check(t, fresh.Rollback(ctx, "base"), "rollback to the kept checkpoint")
	wantTexts(t, read(t, fresh, thread.ReadOptions{}), []string{"m0", "m1", "m2"}, "after rollback to base")
	wantTexts(t, read(t, mustThread(t, db, "other"), thread.ReadOptions{}), []string{"o0", "o1", "o2"}, "another thread")

	// Pruned history survives a save and load, and a copy.
	var buf bytes.Buffer
	check(t, fresh.Save(ctx, &buf, thread.SaveOptions{History: true}), "save a pruned thread")
	loaded, err := db.Load(ctx, &buf, thread.LoadOptions{ID: "loaded"})
	check(t, err, "load a pruned thread")
	if got, want := versions(t, s, "loaded"), versions(t, s, "kept"); !slices.Equal(got, want) {
		t.Errorf("loaded history %v; want %v", got, want)
	}
	wantTexts(t, read(t, loaded, thread.ReadOptions{Version: 18}), at[18], "loaded version 18")

	// Nothing left to drop: a second GC is a no-op, and appending more
	// versions drops only those past the limit.
	clk.advance(time.Second)
	rep, err = db.GC(ctx, thread.GCOptions{})
	check(t, err, "second gc")
	if rep.Pruned == 0 {
		t.Errorf("second gc: %+v; want kept pruned again", rep)
	}
	if got, want := versions(t, s, "kept"), span(18, 22); !slices.Equal(got, want) { // the rollback made one more
		t.Errorf("history after the second gc: %v; want %v", got, want)
	}
	rep, err = db.GC(ctx, thread.GCOptions{})
	check(t, err, "third gc")
	if rep.Pruned != 0 || rep.Versions != 0 {
		t.Errorf("third gc: %+v; want nothing", rep)
	}

	// KeepFor: versions younger than an hour stay, older ones go.
	young, err := db.Create(ctx, thread.CreateOptions{ID: "young", Labels: thread.Retention{KeepFor: time.Hour}.Labels()})
	check(t, err, "create young")
	for i := range 4 {
		_, err := young.Append(ctx, message.User(fmt.Sprint("old", i)))
		check(t, err, "append old")
	}
	clk.advance(2 * time.Hour)
	for i := range 3 {
		_, err := young.Append(ctx, message.User(fmt.Sprint("new", i)))
		check(t, err, "append new")
	}
	_, err = db.GC(ctx, thread.GCOptions{})
	check(t, err, "gc of young")
	if got, want := versions(t, s, "young"), span(6, 8); !slices.Equal(got, want) {
		t.Errorf("young's history after gc: %v; want %v (the last hour's)", got, want)
	}
	wantTexts(t, read(t, young, thread.ReadOptions{}), []string{"old0", "old1", "old2", "old3", "new0", "new1", "new2"}, "young's messages")
}

func mustThread(t T, db *thread.DB, id string) *thread.Thread {
	t.Helper()
	th, err := db.Thread(t.Context(), id)
	check(t, err, "open "+id)
	return th
}

// retentionForkKeepsShared: a fork made from a version that GC later drops
// keeps the commits it shares alive, until it goes too.
func retentionForkKeepsShared(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	a, err := db.Create(ctx, thread.CreateOptions{ID: "a", Messages: numbered("base", 1)})
	check(t, err, "create a")
	_, err = a.Checkpoint(ctx, "start")
	check(t, err, "checkpoint")
	side, err := a.Append(ctx, message.User("side"))
	check(t, err, "append side")
	sideVersion := a.Version()
	check(t, a.Rollback(ctx, "start"), "rollback")
	b, err := a.Fork(ctx, thread.ForkOptions{ID: "b", Version: sideVersion})
	check(t, err, "fork the side version")
	for i := range 3 {
		_, err := a.Append(ctx, message.User(fmt.Sprint("a", i)))
		check(t, err, "append a")
	}
	check(t, a.SetRetention(ctx, thread.Retention{KeepLast: 1}), "keep the last version")
	_, err = db.GC(ctx, thread.GCOptions{})
	check(t, err, "gc")
	if got := versions(t, s, "a"); len(got) != 1 {
		t.Errorf("a's history after gc: %v; want one version", got)
	}
	commitKept(t, s, side.ID, "the side commit the fork shares")
	wantTexts(t, read(t, mustThread(t, db, "b"), thread.ReadOptions{}), []string{"base0", "side"}, "the fork after its source's gc")
	check(t, b.Delete(ctx), "delete the fork")
	commitGone(t, s, side.ID, "the side commit once the fork is gone")
	wantTexts(t, read(t, mustThread(t, db, "a"), thread.ReadOptions{}), []string{"base0", "a0", "a1", "a2"}, "a after its fork is gone")
}

// retentionPruneRules: a prune is checked like every batch, and changes
// nothing when refused.
func retentionPruneRules(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "p", Messages: numbered("m", 1)})
	check(t, err, "create")
	for i := range 3 {
		_, err := th.Append(ctx, message.User(fmt.Sprint(i)))
		check(t, err, "append")
	}
	before := versions(t, s, "p")
	for _, c := range []struct {
		b    store.Batch
		want error
		what string
	}{
		{store.Batch{Prune: []store.Prune{{Thread: "nope", Before: 1}}}, thread.ErrNotFound, "an unknown thread"},
		{store.Batch{Prune: []store.Prune{{Thread: "p", Before: 0}}}, thread.ErrInvalid, "below version 1"},
		{store.Batch{Prune: []store.Prune{{Thread: "p", Before: 5}}}, thread.ErrInvalid, "past the current version"},
		{store.Batch{Create: []store.Creation{{Record: &thread.Record{ID: "new", Version: 1, Kind: thread.KindUndetermined}, Op: thread.OpCreate}},
			Prune: []store.Prune{{Thread: "new", Before: 1}}}, thread.ErrNotFound, "a thread created in the batch"},
		{store.Batch{Prune: []store.Prune{{Thread: "p", Before: 3}}, Delete: []store.Deletion{{Thread: "p", Version: 1}}}, thread.ErrConflict, "with a stale delete"},
	} {
		wantErr(t, s.Apply(ctx, &c.b), c.want, "prune of "+c.what)
	}
	if got := versions(t, s, "p"); !slices.Equal(got, before) {
		t.Errorf("history after refused prunes: %v; want %v", got, before)
	}
	_, err = db.Thread(ctx, "new")
	wantErr(t, err, thread.ErrNotFound, "the thread of a refused batch")
	// Pruning up to the current version keeps it; pruning again is no error.
	check(t, s.Apply(ctx, &store.Batch{Prune: []store.Prune{{Thread: "p", Before: 4}}}), "prune to the current version")
	check(t, s.Apply(ctx, &store.Batch{Prune: []store.Prune{{Thread: "p", Before: 2}}}), "prune below what is gone")
	if got := versions(t, s, "p"); !slices.Equal(got, []int64{4}) {
		t.Errorf("history after prune: %v; want [4]", got)
	}
	_, err = th.Append(ctx, message.User("after"))
	check(t, err, "append after a prune")
	wantTexts(t, read(t, mustThread(t, db, "p"), thread.ReadOptions{}), []string{"m0", "0", "1", "2", "after"}, "messages after a prune")
	if got := versions(t, s, "p"); !slices.Equal(got, []int64{4, 5}) {
		t.Errorf("history after prune and append: %v; want [4 5]", got)
	}
}

// stopAfter is a store that refuses every batch after the first n: a GC
// process that dies midway.
type stopAfter struct {
	store.Store
	n int
}

var errStopped = errors.New("the process died")

func (s *stopAfter) Apply(ctx context.Context, b *store.Batch) error {
	if s.n <= 0 {
		return errStopped
	}
	s.n--
	return s.Store.Apply(ctx, b)
}

// retentionGCAfterCrash: a GC that stops midway (its process died after a
// few batches; the store reopened when it is durable) leaves every thread
// whole, and the next GC ends where one uninterrupted GC would have.
func retentionGCAfterCrash(t T, s store.Store, o *Options) {
	ctx := t.Context()
	clk := newClock()
	build := func(db *thread.DB, prefix string) {
		for i := range 6 {
			th, _, _ := retentionThread(t, db, fmt.Sprintf("%s%d", prefix, i))
			check(t, th.SetRetention(ctx, thread.Retention{KeepLast: int64(2 + i), TTL: time.Duration(1+i%2) * time.Hour}), "retention")
		}
	}
	// The reference: one GC, uninterrupted, of the same threads.
	ref := thread.New(thread.NewMemoryStore(), &thread.Options{Now: clk.now})
	build(ref, "t")
	db := thread.New(s, &thread.Options{Now: clk.now})
	build(db, "t")
	clk.advance(90 * time.Minute) // the even threads expire, the odd ones are pruned

	want, err := ref.GC(ctx, thread.GCOptions{})
	check(t, err, "reference gc")
	dying := thread.New(&stopAfter{Store: s, n: 4}, &thread.Options{Now: clk.now})
	_, err = dying.GC(ctx, thread.GCOptions{})
	if !errors.Is(err, errStopped) {
		t.Fatalf("the dying gc returned %v; want it to stop midway", err)
	}
	if o.Reopen != nil {
		s2, err := o.Reopen(s)
		check(t, err, "reopen after the crash")
		s = s2
		db = thread.New(s, &thread.Options{Now: clk.now})
	}
	got, err := db.GC(ctx, thread.GCOptions{})
	check(t, err, "gc after the crash")
	if got.Expired+got.Pruned != want.Expired+want.Pruned-4 {
		t.Errorf("gc after the crash: %+v; the reference %+v less the 4 batches done", got, want)
	}
	for i := range 6 {
		id := fmt.Sprintf("t%d", i)
		_, rerr := ref.Thread(ctx, id)
		th, err := db.Thread(ctx, id)
		if (rerr == nil) != (err == nil) {
			t.Errorf("%s after gc: %v; the reference says %v", id, err, rerr)
			continue
		}
		if err != nil {
			continue
		}
		if g, w := versions(t, s, id), versions(t, ref.Store(), id); !slices.Equal(g, w) {
			t.Errorf("%s's history after gc: %v; the reference has %v", id, g, w)
		}
		wantTexts(t, read(t, th, thread.ReadOptions{}), texts(read(t, mustThread(t, ref, id), thread.ReadOptions{})), id+"'s messages")
	}
}

// retentionLinkedKeepsNamed: a thread linked to a parent (a workflow's
// sub-thread) keeps, whatever its own history limit, every version from
// the oldest that a version its parent keeps names (thread.StateLinks) —
// the parent's oldest kept version and its checkpoints — and loses what
// none names; one made after the parent's oldest kept version keeps all;
// under a parent that uses no links it keeps what its own limit keeps,
// under a workflow that names nothing yet all. It holds for GC of one
// tenant and of all tenants (keys, not ids).
func retentionLinkedKeepsNamed(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	for _, all := range []bool{false, true} {
		db := thread.New(s, nil).WithTenant(fmt.Sprintf("linked%t", all)).WithRetention(thread.Retention{KeepLast: 2})
		links := func(v int64) map[string]json.RawMessage {
			if v%2 == 1 { // a group of the ids under "wf."
				return map[string]json.RawMessage{thread.StateLinks: json.RawMessage(fmt.Sprintf(`{"wf.":{"sub":%d,"other":1}}`, v))}
			}
			return map[string]json.RawMessage{thread.StateLinks: json.RawMessage(fmt.Sprintf(`{"wf.sub":%d}`, v))}
		}
		wf, err := db.Create(ctx, thread.CreateOptions{ID: "wf", State: map[string]json.RawMessage{"x": json.RawMessage("1")}})
		check(t, err, "create the parent")
		sub, err := db.Create(ctx, thread.CreateOptions{ID: "wf.sub", Parent: "wf", Messages: numbered("sub", 1)})
		check(t, err, "create the linked thread")
		for range 9 { // sub at version 10
			_, err := sub.Append(ctx, message.User("more"))
			check(t, err, "append to the linked thread")
		}
		// Parent versions: 1 names nothing; 2 names sub 3; 3 names 5 and
		// is checkpointed; 4 names 8; 5 names 9 (5 and 4 kept).
		for _, v := range []int64{3, 5, 8, 9} {
			_, err := wf.Commit(ctx, thread.CommitOptions{State: links(v)})
			check(t, err, "commit the parent")
			if v == 5 {
				_, err := wf.Checkpoint(ctx, "named")
				check(t, err, "checkpoint the parent")
			}
		}
		gc := func(what string) {
			t.Helper()
			_, err := db.GC(ctx, thread.GCOptions{AllTenants: all})
			check(t, err, what)
		}
		// The parent is collected first or after: either way, its
		// checkpoint at version 3 names sub version 5.
		gc("gc")
		gc("gc again")
		if got := versions(t, s, thread.Key(db.Tenant(), "wf.sub")); !slices.Equal(got, span(5, 10)) {
			t.Errorf("all=%t: linked thread's history %v, want %v: what the parent's checkpoint names and after", all, got, span(5, 10))
		}
		// Without the checkpoint, the parent's oldest kept version (4)
		// names sub version 8.
		check(t, wf.DeleteCheckpoint(ctx, "named"), "drop the checkpoint")
		gc("gc without the checkpoint")
		gc("gc again without the checkpoint")
		if got := versions(t, s, thread.Key(db.Tenant(), "wf.sub")); !slices.Equal(got, span(8, 10)) {
			t.Errorf("all=%t: linked thread's history %v, want %v", all, got, span(8, 10))
		}
		// A thread made after the parent's oldest kept version keeps all
		// of it: the parent's later versions may name its first.
		late, err := db.Create(ctx, thread.CreateOptions{ID: "wf.late", Parent: "wf", Messages: numbered("late", 1)})
		check(t, err, "create a linked thread later")
		for range 4 {
			_, err := late.Append(ctx, message.User("more"))
			check(t, err, "append")
		}
		_, err = wf.Commit(ctx, thread.CommitOptions{State: map[string]json.RawMessage{
			thread.StateLinks: json.RawMessage(`{"wf.":{"sub":9,"late":5}}`)}})
		check(t, err, "commit the parent")
		gc("gc of a thread made later")
		if got := versions(t, s, thread.Key(db.Tenant(), "wf.late")); !slices.Equal(got, span(1, 5)) {
			t.Errorf("all=%t: a linked thread made after the parent's oldest kept version: %v, want all of %v", all, got, span(1, 5))
		}
		// A parent that uses no links (a conversation and a sub-agent's
		// thread): the linked thread keeps what its own limit keeps.
		for _, kind := range []thread.Kind{thread.KindLocal, thread.KindWorkflow} {
			pid := "plain-" + string(kind)
			_, err = db.Create(ctx, thread.CreateOptions{ID: pid, Kind: kind, Messages: numbered("p", 1)})
			check(t, err, "create a parent without links")
			osub, err := db.Create(ctx, thread.CreateOptions{ID: pid + ".sub", Parent: pid, Messages: numbered("ps", 1)})
			check(t, err, "create its linked thread")
			for range 4 {
				_, err := osub.Append(ctx, message.User("more"))
				check(t, err, "append")
			}
			gc("gc of a parent that names nothing")
			// A workflow that names nothing yet (made before the key)
			// keeps all of it.
			want := span(4, 5)
			if kind == thread.KindWorkflow {
				want = span(1, 5)
			}
			if got := versions(t, s, thread.Key(db.Tenant(), pid+".sub")); !slices.Equal(got, want) {
				t.Errorf("all=%t: linked thread of a %s parent naming nothing: %v, want %v", all, kind, got, want)
			}
		}
	}
}

// retentionNamedLivesWithNamer: a thread that a workflow thread's state
// names (thread.StateLinks) but that is not linked to it — a sub-thread a
// workflow's fork made by forking the source's — does not expire while
// the workflow is in use, and goes on its own TTL once the workflow is
// gone.
func retentionNamedLivesWithNamer(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	clk := newClock()
	db := thread.New(s, &thread.Options{Now: clk.now, Retention: thread.Retention{TTL: 24 * time.Hour}})
	src, err := db.Create(ctx, thread.CreateOptions{ID: "src.sub", Messages: numbered("s", 2)})
	check(t, err, "create the source's sub-thread")
	sub, err := src.Fork(ctx, thread.ForkOptions{ID: "fork.sub"})
	check(t, err, "fork it")
	wf, err := db.Create(ctx, thread.CreateOptions{ID: "fork", Kind: thread.KindWorkflow,
		State: map[string]json.RawMessage{thread.StateLinks: json.RawMessage(`{"fork.sub":1}`)}})
	check(t, err, "create the workflow that names it")
	for range 3 {
		clk.advance(20 * time.Hour) // the workflow in use, its sub-thread idle 60h
		_, err := wf.Commit(ctx, thread.CommitOptions{State: map[string]json.RawMessage{"x": json.RawMessage("1")}})
		check(t, err, "use the workflow")
		_, err = db.GC(ctx, thread.GCOptions{})
		check(t, err, "gc")
	}
	_, err = db.Thread(ctx, sub.ID())
	check(t, err, "the idle sub-thread the workflow in use names")
	_, err = db.Thread(ctx, "src.sub")
	wantErr(t, err, thread.ErrNotFound, "the idle source sub-thread no workflow names")
	check(t, wf.Delete(ctx), "delete the workflow")
	_, err = db.GC(ctx, thread.GCOptions{})
	check(t, err, "gc after the workflow went")
	_, err = db.Thread(ctx, sub.ID())
	wantErr(t, err, thread.ErrNotFound, "the idle sub-thread once its workflow went")
}
