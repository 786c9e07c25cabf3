package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/loomthreads/loom/thread/store"
)

// world is what a store holds, for planning: threads, commits and
// checkpoints, with a log of every question the planner asks.
type world struct {
	threads map[string]store.ThreadFact
	commits map[string]bool
	cps     map[store.CheckpointKey]string
	asked   []string
}

func (w *world) Thread(_ context.Context, id string) (int64, string, bool, error) {
	w.asked = append(w.asked, "t:"+id)
	t, ok := w.threads[id]
	return t.Version, t.Head, ok, nil
}

func (w *world) Commit(_ context.Context, id string) (bool, error) {
	w.asked = append(w.asked, "c:"+id)
	return w.commits[id], nil
}

func (w *world) Checkpoint(_ context.Context, thread, name string) (string, bool, error) {
	w.asked = append(w.asked, "k:"+thread+"/"+name)
	c, ok := w.cps[store.CheckpointKey{Thread: thread, Name: name}]
	return c, ok, nil
}

func randomWorld(r *rand.Rand) *world {
	w := &world{threads: map[string]store.ThreadFact{}, commits: map[string]bool{}, cps: map[store.CheckpointKey]string{}}
	for i := range 6 {
		if r.IntN(2) == 0 {
			w.commits[fmt.Sprint("c", i)] = true
		}
	}
	var stored []string
	for id := range w.commits {
		stored = append(stored, id)
	}
	slices.Sort(stored)
	pick := func() string {
		if len(stored) == 0 || r.IntN(4) == 0 {
			return ""
		}
		return stored[r.IntN(len(stored))]
	}
	for i := range 4 {
		if r.IntN(3) == 0 {
			continue
		}
		id := fmt.Sprint("t", i)
		w.threads[id] = store.ThreadFact{Version: int64(1 + r.IntN(3)), Head: pick()}
		for _, name := range []string{"a", "b"} {
			if c := pick(); c != "" && r.IntN(2) == 0 {
				w.cps[store.CheckpointKey{Thread: id, Name: name}] = c
			}
		}
	}
	return w
}

// randomBatch names threads, commits and checkpoints that may or may not
// exist, so that every rule gets broken now and then.
func randomBatch(r *rand.Rand) *store.Batch {
	commit := func() string { return fmt.Sprint("c", r.IntN(9)) }
	maybeCommit := func() string {
		if r.IntN(5) == 0 {
			return ""
		}
		return commit()
	}
	th := func() string { return fmt.Sprint("t", r.IntN(5)) }
	name := func() string { return []string{"a", "b"}[r.IntN(2)] }
	now := time.Unix(1, 0).UTC()
	b := &store.Batch{}
	for range r.IntN(3) {
		id := fmt.Sprint("n", r.IntN(3)) // new, mostly
		if r.IntN(6) == 0 {
			id = commit()
		}
		b.Commits = append(b.Commits, &store.Commit{ID: id, Parent: maybeCommit(), Op: store.OpAppend, Time: now})
	}
	for range r.IntN(2) {
		rec := &store.Record{ID: th(), Head: maybeCommit(), Version: 1, Kind: store.KindLocal, CreatedAt: now, UpdatedAt: now}
		cr := store.Creation{Record: rec, Op: store.OpCreate}
		if r.IntN(3) == 0 {
			cr.History = []store.HistoryEntry{{Version: 1, Commit: maybeCommit()}, {Version: 2, Commit: rec.Head}}
			rec.Version = 2
		}
		b.Create = append(b.Create, cr)
	}
	for range r.IntN(3) {
		b.Moves = append(b.Moves, store.Move{Thread: th(), From: int64(1 + r.IntN(3)), Head: maybeCommit(), Op: store.OpAppend, Time: now})
	}
	for range r.IntN(2) {
		b.DropCheckpoints = append(b.DropCheckpoints, store.CheckpointKey{Thread: th(), Name: name()})
	}
	for range r.IntN(2) {
		b.Checkpoints = append(b.Checkpoints, store.Checkpoint{Thread: th(), Name: name(), Commit: maybeCommit()})
	}
	for range r.IntN(2) {
		b.Delete = append(b.Delete, store.Deletion{Thread: th(), Version: int64(r.IntN(3))})
	}
	return b
}

// TestNeedsListsEveryFact checks what a store that reads in round trips
// relies on: planning from a prefetch of exactly what NeedsOf lists
// gives the same plan or error as planning from the live store, and the
// planner never asks about anything NeedsOf left out.
func TestNeedsListsEveryFact(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(27, 1))
	var plans, fails int
	for i := range 20000 {
		w, b := randomWorld(r), randomBatch(r)
		live, liveErr := store.PlanBatch(ctx, w, b)

		n := store.NeedsOf(b)
		listed := map[string]bool{}
		pre := &store.MapFacts{Threads: map[string]store.ThreadFact{}, Commits: map[string]bool{}, Checkpoints: map[store.CheckpointKey]string{}}
		for _, id := range n.Threads {
			listed["t:"+id] = true
			if f, ok := w.threads[id]; ok {
				pre.Threads[id] = f
			}
		}
		for _, id := range n.Commits {
			listed["c:"+id] = true
			if w.commits[id] {
				pre.Commits[id] = true
			}
		}
		for _, k := range n.Checkpoints {
			listed["k:"+k.Thread+"/"+k.Name] = true
			if c, ok := w.cps[k]; ok {
				pre.Checkpoints[k] = c
			}
		}
		for _, q := range w.asked {
			if !listed[q] {
				t.Fatalf("case %d: the planner asked %s, which NeedsOf did not list (%+v)", i, q, n)
			}
		}
		got, gotErr := store.PlanBatch(ctx, pre, b)
		if fmt.Sprint(liveErr) != fmt.Sprint(gotErr) {
			t.Fatalf("case %d: live %v, prefetched %v", i, liveErr, gotErr)
		}
		if liveErr != nil {
			fails++
			continue
		}
		plans++
		if !reflect.DeepEqual(live.NewRefs, got.NewRefs) || !reflect.DeepEqual(live.Refs, got.Refs) || !reflect.DeepEqual(live.DropCommits, got.DropCommits) {
			t.Fatalf("case %d: plans differ:\n%+v\n%+v", i, live, got)
		}
	}
	// Both outcomes must have been tried many times for the test to mean
	// anything.
	if plans < 300 || fails < 300 {
		t.Fatalf("%d plans and %d refusals: the generator is lopsided", plans, fails)
	}
}

// TestPlanCountsReferences checks the counts a plan hands a store on a
// batch that touches a commit every way it can be referenced.
func TestPlanCountsReferences(t *testing.T) {
	w := &world{
		threads: map[string]store.ThreadFact{"t": {Version: 3, Head: "old"}},
		commits: map[string]bool{"old": true, "base": true},
		cps:     map[store.CheckpointKey]string{{Thread: "t", Name: "keep"}: "base"},
	}
	now := time.Unix(1, 0).UTC()
	b := &store.Batch{
		Commits: []*store.Commit{{ID: "n1", Parent: "old"}, {ID: "n2", Parent: "n1"}},
		Create:  []store.Creation{{Record: &store.Record{ID: "u", Head: "n1", Version: 1, CreatedAt: now, UpdatedAt: now}, Op: store.OpFork}},
		Moves:   []store.Move{{Thread: "t", From: 3, Head: "n2"}, {Thread: "t", From: 4, Head: "old"}},
		// Replacing a checkpoint: the new one counts before the old one goes.
		DropCheckpoints: []store.CheckpointKey{{Thread: "t", Name: "keep"}},
		Checkpoints:     []store.Checkpoint{{Thread: "t", Name: "keep", Commit: "base"}, {Thread: "u", Name: "x", Commit: "n2"}},
	}
	p, err := store.PlanBatch(context.Background(), w, b)
	if err != nil {
		t.Fatal(err)
	}
	// n1: child n2 and u's head; n2: t's head and u's checkpoint.
	if want := []int64{2, 2}; !slices.Equal(p.NewRefs, want) {
		t.Errorf("NewRefs = %v, want %v", p.NewRefs, want)
	}
	// old: n1's parent and t's second move; base: the new checkpoint.
	want := []store.RefDelta{{Commit: "old", N: 2}, {Commit: "base", N: 1}}
	if !slices.Equal(p.Refs, want) {
		t.Errorf("Refs = %v, want %v", p.Refs, want)
	}
	if !slices.Equal(p.DropCommits, []string{"base"}) {
		t.Errorf("DropCommits = %v", p.DropCommits)
	}
	// The same batch against a thread that moved on is refused whole.
	w.threads["t"] = store.ThreadFact{Version: 4, Head: "old"}
	if _, err := store.PlanBatch(context.Background(), w, b); err == nil {
		t.Error("a stale move was planned")
	}
}
