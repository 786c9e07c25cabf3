package storetest

import (
	"fmt"
	"slices"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// forks checks fork families: DB.Family finds every fork of every member,
// and leaves out deleted forks and other tenants' threads. A store with a
// store.ForkIndex answers Forks with exactly the threads forked from a
// parent, as its records say, before and after a deletion.
func forks(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	for _, tenant := range []string{"", "t1"} {
		db := thread.New(s, nil).WithTenant(tenant)
		root, err := db.Create(ctx, thread.CreateOptions{ID: "root"})
		check(t, err, "create root")
		_, err = root.Append(ctx, message.User("one"))
		check(t, err, "append")
		fork := func(from *thread.Thread, id string) *thread.Thread {
			f, err := from.Fork(ctx, thread.ForkOptions{ID: id})
			check(t, err, "fork "+id)
			return f
		}
		f1, f2 := fork(root, "f1"), fork(root, "f2")
		g1 := fork(f1, "g1")
		fork(f2, "g2")
		_, err = db.Create(ctx, thread.CreateOptions{ID: "lone"})
		check(t, err, "create lone")

		family := func(id string) (string, []string) {
			r, fam, err := db.Family(ctx, id)
			check(t, err, "family of "+id)
			var out []string
			for _, rec := range fam {
				out = append(out, rec.ID)
			}
			slices.Sort(out)
			return r, out
		}
		for _, id := range []string{"root", "f2", "g1"} {
			r, fam := family(id)
			if want := []string{"f1", "f2", "g1", "g2", "root"}; r != "root" || !slices.Equal(fam, want) {
				t.Errorf("tenant %q: family of %s = %s %v, want root %v", tenant, id, r, fam, want)
			}
		}
		check(t, db.Delete(ctx, "f2"), "delete f2")
		// g2's parent is gone: g2 is the root of its own family now.
		if r, fam := family("g1"); r != "root" || !slices.Equal(fam, []string{"f1", "g1", "root"}) {
			t.Errorf("tenant %q: family after deleting f2 = %s %v", tenant, r, fam)
		}
		if r, fam := family("g2"); r != "g2" || !slices.Equal(fam, []string{"g2"}) {
			t.Errorf("tenant %q: family of g2 after deleting its parent = %s %v", tenant, r, fam)
		}
		_ = g1

		// A cycle of forks: cb forked from ca, ca deleted and made again
		// as a fork of cb. Families and indexes must end.
		ca, err := db.Create(ctx, thread.CreateOptions{ID: "ca"})
		check(t, err, "create ca")
		fork(ca, "cb")
		check(t, db.Delete(ctx, "ca"), "delete ca")
		cb, err := db.Thread(ctx, "cb")
		check(t, err, "open cb")
		fork(cb, "ca")
		for _, id := range []string{"ca", "cb"} {
			if _, fam := family(id); !slices.Equal(fam, []string{"ca", "cb"}) {
				t.Errorf("tenant %q: family of %s in a cycle = %v", tenant, id, fam)
			}
		}
		if di, ok := s.(store.DescendantIndex); ok {
			desc := func(root string) []string {
				var out []string
				for r, err := range di.Descendants(ctx, thread.Key(tenant, root)) {
					check(t, err, "descendants of "+root)
					if !slices.Contains(out, r.ID) {
						out = append(out, r.ID)
					}
				}
				slices.Sort(out)
				return out
			}
			k := func(ids ...string) []string {
				for i, id := range ids {
					ids[i] = thread.Key(tenant, id)
				}
				return ids
			}
			if got := desc("root"); !slices.Equal(got, k("f1", "g1")) {
				t.Errorf("Descendants(root) = %v, want %v", got, k("f1", "g1"))
			}
			if got := desc("lone"); len(got) != 0 {
				t.Errorf("Descendants(lone) = %v", got)
			}
			if got := desc("ca"); !slices.Contains(got, thread.Key(tenant, "cb")) {
				t.Errorf("Descendants(ca) in a cycle = %v", got)
			}
		}

		fi, ok := s.(store.ForkIndex)
		if !ok {
			continue
		}
		forksOf := func(parent string) []string {
			var out []string
			for r, err := range fi.Forks(ctx, thread.Key(tenant, parent)) {
				check(t, err, "forks of "+parent)
				if r.ForkedFrom.Thread != thread.Key(tenant, parent) {
					t.Errorf("Forks(%s) yielded %s, forked from %q", parent, r.ID, r.ForkedFrom.Thread)
				}
				out = append(out, r.ID)
			}
			slices.Sort(out)
			return out
		}
		k := func(ids ...string) []string {
			for i, id := range ids {
				ids[i] = thread.Key(tenant, id)
			}
			return ids
		}
		if got := forksOf("root"); !slices.Equal(got, k("f1")) {
			t.Errorf("Forks(root) = %v, want %v", got, k("f1"))
		}
		if got := forksOf("f1"); !slices.Equal(got, k("g1")) {
			t.Errorf("Forks(f1) = %v, want %v", got, k("g1"))
		}
		// g2's record still names its deleted parent.
		if got := forksOf("f2"); !slices.Equal(got, k("g2")) {
			t.Errorf("Forks(f2) = %v, want %v", got, k("g2"))
		}
		for _, none := range []string{"lone", "g1", "nosuch"} {
			if got := forksOf(none); len(got) != 0 {
				t.Errorf("Forks(%s) = %v, want none", none, got)
			}
		}
	}
}

// labelIndex checks that a listing by label follows labels as they
// change: a thread relabelled leaves the old label's listing and joins the
// new one's, a deleted thread leaves both, and pages of a label join up.
func labelIndex(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	const n = 12
	for i := range n {
		labels := map[string]string{"team": "blue", "n": fmt.Sprint(i)}
		if i%3 == 0 {
			labels["rare"] = "yes"
		}
		_, err := db.Create(ctx, thread.CreateOptions{ID: fmt.Sprintf("l%02d", i), Labels: labels})
		check(t, err, "create")
	}
	_, err := db.WithTenant("t1").Create(ctx, thread.CreateOptions{ID: "l00", Labels: map[string]string{"rare": "yes"}})
	check(t, err, "create in another tenant")
	list := func(labels map[string]string, limit int) []string {
		var out []string
		after := ""
		for {
			var page []string
			for r, err := range s.Threads(ctx, thread.ListOptions{Labels: labels, After: after, Limit: limit}) {
				check(t, err, "list")
				page = append(page, r.ID)
			}
			out = append(out, page...)
			if limit == 0 || len(page) < limit {
				return out
			}
			after = page[len(page)-1]
		}
	}
	want := func(labels map[string]string, ids ...string) {
		t.Helper()
		for _, limit := range []int{0, 1, 2} {
			if got := list(labels, limit); !slices.Equal(got, ids) {
				t.Errorf("list %v (pages of %d) = %v, want %v", labels, limit, got, ids)
			}
		}
	}
	want(map[string]string{"rare": "yes"}, "l00", "l03", "l06", "l09")
	want(map[string]string{"rare": "yes", "n": "3"}, "l03")
	want(map[string]string{"rare": "no"})

	th, err := db.Thread(ctx, "l03")
	check(t, err, "open l03")
	check(t, th.Update(ctx, thread.UpdateOptions{Labels: map[string]string{"rare": "no", "team": "red"}}), "relabel l03")
	want(map[string]string{"rare": "yes"}, "l00", "l06", "l09")
	want(map[string]string{"rare": "no"}, "l03")
	want(map[string]string{"team": "red"}, "l03")
	if got := list(map[string]string{"team": "blue"}, 0); slices.Contains(got, "l03") || len(got) != n-1 {
		t.Errorf("team=blue after relabelling l03 = %v", got)
	}
	check(t, db.Delete(ctx, "l06"), "delete l06")
	want(map[string]string{"rare": "yes"}, "l00", "l09")
	// An append keeps the labels.
	th, err = db.Thread(ctx, "l09")
	check(t, err, "open l09")
	_, err = th.Append(ctx, message.User("hi"))
	check(t, err, "append")
	want(map[string]string{"rare": "yes"}, "l00", "l09")
}
