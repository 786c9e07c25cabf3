package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// queryPlan returns the details of SQLite's plan of query, a line each.
func queryPlan(tb testing.TB, db *sql.DB, query string, args ...any) []string {
	tb.Helper()
	rows, err := db.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			tb.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return plan
}

// checkPlan fails unless the plan of query uses index and reads no
// table or index whole (a SCAN of anything but the recursive query's
// queue d) and sorts nothing.
func checkPlan(t *testing.T, db *sql.DB, index, query string, args ...any) {
	t.Helper()
	plan := queryPlan(t, db, query, args...)
	text := strings.Join(plan, "\n")
	if !strings.Contains(text, "INDEX "+index+" ") {
		t.Errorf("the plan does not use %s:\n%s", index, text)
	}
	for _, line := range plan {
		if (strings.HasPrefix(line, "SCAN ") && line != "SCAN d") || strings.Contains(line, "TEMP B-TREE") {
			t.Errorf("the plan scans or sorts (%s):\n%s", line, text)
		}
	}
}

// TestIndexPlans: Forks, Descendants and a tenant's page of a label are
// seeks in their indexes, whatever the store holds.
func TestIndexPlans(t *testing.T) {
	s := newStore(t).(*Store)
	checkPlan(t, s.r, "threads_by_fork", qForks, "p", "", forksPage)
	checkPlan(t, s.r, "threads_by_fork", qDescendants, "p", 10)
	for _, c := range []struct {
		index string
		opts  thread.ListOptions
	}{
		{"label_index_by_id", thread.ListOptions{Labels: map[string]string{"k": "v"}}},
		{"label_index_by_id", thread.ListOptions{Tenant: "t1", Labels: map[string]string{"k": "v", "k2": "v2"}, Desc: true}},
		{"label_index_by_id", thread.ListOptions{Labels: map[string]string{"k": "v"}, Kind: "chat"}},
		{"label_index_by_updated", thread.ListOptions{Labels: map[string]string{"k": "v"}, Order: thread.OrderUpdated}},
		{"threads_by_tenant", thread.ListOptions{}},
		{"threads_by_updated", thread.ListOptions{Order: thread.OrderUpdated}},
	} {
		t.Run(fmt.Sprint(c.opts.Labels, c.opts.Order, c.opts.Desc, c.opts.Kind), func(t *testing.T) {
			first, paged, args, cursor := listSQL(c.opts)
			checkPlan(t, s.r, c.index, first, append(args, 50)...)
			checkPlan(t, s.r, c.index, paged, append(append(args, cursor(&thread.Record{ID: "x"})...), 50)...)
		})
	}
}

// checkLabelIndex fails unless label_index holds exactly the labels
// rows, each with its thread's tenant, id and update time.
func checkLabelIndex(t *testing.T, db *sql.DB) {
	t.Helper()
	const index = `SELECT thread, key, value, tenant, id, updated FROM label_index`
	const labels = `SELECT l.thread, l.key, l.value, t.tenant, t.id, t.updated FROM labels l JOIN threads t ON t.k = l.thread`
	for _, q := range []string{index + ` EXCEPT ` + labels, labels + ` EXCEPT ` + index} {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM (` + q + `)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("label_index and labels differ: %d rows of %s", n, q)
		}
	}
}

// labelled lists the ids of the threads of db with labels, in opts'
// order, in pages of 2.
func labelled(t *testing.T, db *thread.DB, labels map[string]string, order thread.Order) []string {
	t.Helper()
	var ids []string
	opts := thread.ListOptions{Labels: labels, Order: order, Limit: 2}
	for {
		n := 0
		for th, err := range db.Threads(t.Context(), opts) {
			if err != nil {
				t.Fatal(err)
			}
			n++
			ids = append(ids, th.ID())
			opts.After, opts.AfterUpdated = th.ID(), th.Record().UpdatedAt
		}
		if n < opts.Limit {
			return ids
		}
	}
}

// familyOf returns the sorted ids of the fork family of id.
func familyOf(t *testing.T, db *thread.DB, id string) []string {
	t.Helper()
	_, fam, err := db.Family(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range fam {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestMigrateV4ToV5 opens a file of schema 4 that has forks, labels (a
// fork keeps its parent's) and tenants: the migration indexes them, and the triggers keep the index
// as threads move, are relabelled and deleted.
func TestMigrateV4ToV5(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "loom.db")
	s, err := open(ctx, path, nil, migrations[:4])
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"", "t1"} {
		db := thread.New(s, nil).WithTenant(tenant)
		root, err := db.Create(ctx, thread.CreateOptions{ID: "root", Labels: map[string]string{"team": "a"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := root.Append(ctx, message.User("hi")); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			f, err := root.Fork(ctx, thread.ForkOptions{ID: fmt.Sprintf("f%d", i)})
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Update(ctx, thread.UpdateOptions{Labels: map[string]string{"team": "a", "fork": "yes"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Fork(ctx, thread.ForkOptions{ID: fmt.Sprintf("g%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.Close()
	var before int
	if err := rawDB(t, path).QueryRow(`SELECT count(*) FROM labels`).Scan(&before); err != nil || before != 26 {
		t.Fatalf("%d labels before the migration (%v), want 26", before, err)
	}

	s, err = Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	raw := rawDB(t, path)
	var v, byValue int
	if err := raw.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != 5 {
		t.Fatalf("user_version %d (%v), want 5", v, err)
	}
	if err := raw.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'labels_by_value'`).Scan(&byValue); err != nil || byValue != 0 {
		t.Errorf("labels_by_value is still there (%v)", err)
	}
	checkLabelIndex(t, raw)
	for _, tenant := range []string{"", "t1"} {
		db := thread.New(s, nil).WithTenant(tenant)
		if got, want := familyOf(t, db, "g1"), []string{"f0", "f1", "f2", "g0", "g1", "g2", "root"}; !slices.Equal(got, want) {
			t.Errorf("tenant %q: family %v, want %v", tenant, got, want)
		}
		var forks []string
		for r, err := range s.Forks(ctx, thread.Key(tenant, "root")) {
			if err != nil {
				t.Fatal(err)
			}
			forks = append(forks, r.ID)
		}
		if want := []string{thread.Key(tenant, "f0"), thread.Key(tenant, "f1"), thread.Key(tenant, "f2")}; !slices.Equal(forks, want) {
			t.Errorf("tenant %q: forks %v, want %v", tenant, forks, want)
		}
		team := map[string]string{"team": "a"}
		if got, want := labelled(t, db, team, thread.OrderID), []string{"f0", "f1", "f2", "g0", "g1", "g2", "root"}; !slices.Equal(got, want) {
			t.Errorf("tenant %q: team=a %v, want %v", tenant, got, want)
		}
		if got, want := labelled(t, db, team, thread.OrderUpdated), []string{"g2", "f2", "g1", "f1", "g0", "f0", "root"}; !slices.Equal(got, want) {
			t.Errorf("tenant %q: team=a by update %v, want %v", tenant, got, want)
		}
		// An append moves root to the front of the label's listing; a
		// relabel and a deletion take threads out of it.
		root, err := db.Thread(ctx, "root")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := root.Append(ctx, message.User("again")); err != nil {
			t.Fatal(err)
		}
		f1, err := db.Thread(ctx, "f1")
		if err != nil {
			t.Fatal(err)
		}
		if err := f1.Update(ctx, thread.UpdateOptions{Labels: map[string]string{"team": "b"}}); err != nil {
			t.Fatal(err)
		}
		if err := db.Delete(ctx, "f2"); err != nil {
			t.Fatal(err)
		}
		if got, want := labelled(t, db, team, thread.OrderUpdated), []string{"root", "g2", "g1", "g0", "f0"}; !slices.Equal(got, want) {
			t.Errorf("tenant %q: team=a by update after the changes %v, want %v", tenant, got, want)
		}
		if got, want := labelled(t, db, map[string]string{"team": "a", "fork": "yes"}, thread.OrderID), []string{"f0", "g0", "g1", "g2"}; !slices.Equal(got, want) {
			t.Errorf("tenant %q: team=a fork=yes %v, want %v", tenant, got, want)
		}
		if got, want := familyOf(t, db, "root"), []string{"f0", "f1", "g0", "g1", "root"}; !slices.Equal(got, want) {
			t.Errorf("tenant %q: family after deleting f2 %v, want %v", tenant, got, want)
		}
	}
	checkLabelIndex(t, raw)
	// Every tenant's threads of a label, in one listing.
	var all []string
	for r, err := range s.Threads(ctx, thread.ListOptions{AllTenants: true, Labels: map[string]string{"team": "a"}}) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, r.ID)
	}
	if want := []string{"f0", "g0", "g1", "g2", "root", "t1/f0", "t1/g0", "t1/g1", "t1/g2", "t1/root"}; !slices.Equal(all, want) {
		t.Errorf("every tenant's team=a: %v, want %v", all, want)
	}
}
