package jsonfile

import (
	"fmt"
	"slices"
	"testing"

	"github.com/loomthreads/loom/thread"
)

// TestIndexFollowsOtherWriters: the fork and label indexes of one Store
// follow what another Store on the same directory (as another process
// would) creates, relabels and deletes, through the change log, also when
// the log begins anew.
func TestIndexFollowsOtherWriters(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	a := openTest(t, dir, &Options{NoSync: true})
	b := openTest(t, dir, &Options{NoSync: true})
	dbB := thread.New(b, nil)
	root, err := dbB.Create(ctx, thread.CreateOptions{ID: "root"})
	if err != nil {
		t.Fatal(err)
	}
	forks := func() []string {
		t.Helper()
		var out []string
		for r, err := range a.Forks(ctx, "root") {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r.ID)
		}
		slices.Sort(out)
		return out
	}
	labelled := func() []string {
		t.Helper()
		var out []string
		for r, err := range a.Threads(ctx, thread.ListOptions{Labels: map[string]string{"rare": "yes"}}) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r.ID)
		}
		return out
	}
	if got := forks(); len(got) != 0 { // builds a's index
		t.Fatalf("forks before any: %v", got)
	}
	for i := range 3 {
		if _, err := root.Fork(ctx, thread.ForkOptions{ID: fmt.Sprintf("f%d", i), Labels: map[string]string{"rare": "yes"}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := forks(); !slices.Equal(got, []string{"f0", "f1", "f2"}) {
		t.Errorf("forks made by another store: %v", got)
	}
	f1, err := dbB.Thread(ctx, "f1")
	if err != nil {
		t.Fatal(err)
	}
	if err := f1.Update(ctx, thread.UpdateOptions{Labels: map[string]string{"rare": "no"}}); err != nil {
		t.Fatal(err)
	}
	if err := dbB.Delete(ctx, "f2"); err != nil {
		t.Fatal(err)
	}
	if got := labelled(); !slices.Equal(got, []string{"f0"}) {
		t.Errorf("rare=yes after another store relabelled f1 and deleted f2: %v", got)
	}
	if got := forks(); !slices.Equal(got, []string{"f0", "f1"}) {
		t.Errorf("forks after another store deleted f2: %v", got)
	}

	// A log past its size begins anew: a's index is built again.
	defer func(old int64) { maxChanges = old }(maxChanges)
	maxChanges = 0
	if _, err := root.Fork(ctx, thread.ForkOptions{ID: "f3", Labels: map[string]string{"rare": "yes"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Fork(ctx, thread.ForkOptions{ID: "f4"}); err != nil {
		t.Fatal(err)
	}
	if got := forks(); !slices.Equal(got, []string{"f0", "f1", "f3", "f4"}) {
		t.Errorf("forks after the log began anew: %v", got)
	}
	if got := labelled(); !slices.Equal(got, []string{"f0", "f3"}) {
		t.Errorf("rare=yes after the log began anew: %v", got)
	}
	// A log that a's own write begins anew leaves a's index built: it
	// follows the new log from its start.
	rootA, err := thread.New(a, nil).Thread(ctx, "root")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rootA.Fork(ctx, thread.ForkOptions{ID: "f5"}); err != nil {
		t.Fatal(err)
	}
	a.ix.mu.Lock()
	built, epoch := a.ix.built, a.ix.epoch
	a.ix.mu.Unlock()
	if logEpoch, _, err := a.logHead(); err != nil || !built || epoch != logEpoch {
		t.Errorf("after its own write began the log anew, a's index: built %v, epoch %q, log's %q (%v)", built, epoch, logEpoch, err)
	}
	if got := forks(); !slices.Equal(got, []string{"f0", "f1", "f3", "f4", "f5"}) {
		t.Errorf("forks after a's own write began the log anew: %v", got)
	}
}

// TestLabelPagesWindows: a listing by a label held by more threads than
// the index hands out at once pages through them all, in both orders.
func TestLabelPagesWindows(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, t.TempDir(), &Options{NoSync: true})
	db := thread.New(s, nil)
	var want []string
	for i := range 1100 {
		labels := map[string]string{"team": "blue"}
		if i%7 == 0 {
			labels["odd"] = "yes"
		}
		id := fmt.Sprintf("w%04d", i)
		if _, err := db.Create(ctx, thread.CreateOptions{ID: id, Labels: labels}); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	for _, desc := range []bool{false, true} {
		var got []string
		for r, err := range s.Threads(ctx, thread.ListOptions{Labels: map[string]string{"team": "blue"}, Desc: desc}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, r.ID)
		}
		w := slices.Clone(want)
		if desc {
			slices.Reverse(w)
		}
		if !slices.Equal(got, w) {
			t.Errorf("desc %v: %d threads, want %d", desc, len(got), len(w))
		}
	}
	// Only every 7th matches both: windows of the rarer label's keys, filtered.
	n := 0
	for r, err := range s.Threads(ctx, thread.ListOptions{Labels: map[string]string{"team": "blue", "odd": "yes"}, Limit: 100}) {
		if err != nil || r.Labels["odd"] != "yes" {
			t.Fatal(r, err)
		}
		n++
	}
	if n != 100 {
		t.Errorf("%d threads with both labels, want 100", n)
	}
}
