package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomthreads/loom/thread"
)

// threads list shows people's threads, most recently updated first, 50 at
// a time, and says on stderr when there are more; --limit, --all,
// --internal and --order change that.
func TestThreadsListPagesAndInternal(t *testing.T) {
	t.Parallel()
	store := sqliteStore(t)
	var mu sync.Mutex
	now := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Second); return now }
	db, err := thread.Open(t.Context(), store, &thread.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	// t00..t59 made in reverse: t59 is the oldest, t00 the most recently
	// updated; every tenth is a work log's.
	var people []string
	for i := 59; i >= 0; i-- {
		o := thread.CreateOptions{ID: fmt.Sprintf("t%02d", i)}
		if i%10 == 5 {
			o.Labels = map[string]string{thread.LabelOwner: "worklog"}
		} else {
			people = append(people, o.ID)
		}
		if _, err := db.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	slices.Reverse(people) // most recently updated first
	list := func(args ...string) ([]string, string) {
		t.Helper()
		r := loom(t, append([]string{"threads", "list", "--store", store, "--json"}, args...)...).ok(t)
		var ids []string
		for _, rec := range lines[recordJSON](t, r) {
			ids = append(ids, rec.ID)
		}
		return ids, r.stderr
	}
	const more = "… more threads than these"
	got, stderr := list()
	if !slices.Equal(got, people[:50]) || !strings.Contains(stderr, more+" 50: --limit N or --all") {
		t.Errorf("default: %v\nstderr %q", got, stderr)
	}
	if got, stderr = list("--limit", "3"); !slices.Equal(got, people[:3]) || !strings.Contains(stderr, more+" 3") {
		t.Errorf("--limit 3: %v\nstderr %q", got, stderr)
	}
	if got, stderr = list("--all"); !slices.Equal(got, people) || stderr != "" {
		t.Errorf("--all: %v\nstderr %q", got, stderr)
	}
	if got, stderr = list("--limit", "54"); len(got) != 54 || stderr != "" {
		t.Errorf("--limit 54 of 54: %d threads, stderr %q", len(got), stderr)
	}
	if got, _ = list("--all", "--internal"); len(got) != 60 || got[0] != "t00" || !slices.Contains(got, "t05") {
		t.Errorf("--all --internal: %v", got)
	}
	if got, _ = list("--order", "id", "--limit", "3"); !slices.Equal(got, []string{"t00", "t01", "t02"}) {
		t.Errorf("--order id: %v", got)
	}
	if got, _ = list("--order", "newest", "--limit", "3", "--internal"); !slices.Equal(got, []string{"t59", "t58", "t57"}) {
		t.Errorf("--order newest: %v", got)
	}
	// The table says the same on stderr; stdout has only rows.
	r := loom(t, "threads", "list", "--store", store, "--limit", "2").ok(t)
	if n := strings.Count(r.stdout, "\n"); n != 3 || strings.Contains(r.stdout, more) || !strings.Contains(r.stderr, more+" 2") {
		t.Errorf("table:\n%s\nstderr %q", r.stdout, r.stderr)
	}
	if r := loom(t, "threads", "list", "--store", store, "--order", "oldest"); r.code != 2 || !strings.Contains(r.stderr, `--order "oldest": updated, id or newest`) {
		t.Errorf("--order oldest: code %d, stderr %q", r.code, r.stderr)
	}
}
