package storetest

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// listByUpdated checks thread.OrderUpdated: most recently updated first,
// ties by id descending, pages that join up with cursors, filters and
// tenants kept, and a thread that moves going to the front.
func listByUpdated(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	var mu sync.Mutex
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := base
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	at := func(sec int) { mu.Lock(); now = base.Add(time.Duration(sec) * time.Second); mu.Unlock() }
	db := thread.New(s, &thread.Options{Now: clock})

	// u00..u11 made two by two at the same second (ties by id), in an
	// order that is not id order: u11 and u10 first, u01 and u00 last;
	// want is u01 u00 u03 u02 … u11 u10.
	var want []string // most recently updated first
	for i := 11; i >= 0; i-- {
		at((11 - i) / 2)
		id := fmt.Sprintf("u%02d", i)
		_, err := db.Create(ctx, thread.CreateOptions{ID: id, Labels: map[string]string{"half": fmt.Sprint(i % 2)}})
		check(t, err, "create "+id)
	}
	for sec := 5; sec >= 0; sec-- {
		// Made at sec: u(11-2sec) and u(10-2sec); the larger id first.
		want = append(want, fmt.Sprintf("u%02d", 11-2*sec), fmt.Sprintf("u%02d", 10-2*sec))
	}
	_, err := db.WithTenant("other").Create(ctx, thread.CreateOptions{ID: "u99"})
	check(t, err, "create in another tenant")

	list := func(o thread.ListOptions) []*thread.Record {
		o.Order = thread.OrderUpdated
		var out []*thread.Record
		for th, err := range db.Threads(ctx, o) {
			check(t, err, "list by updated")
			r := th.Record()
			out = append(out, &r)
		}
		return out
	}
	idsOf := func(recs []*thread.Record) []string {
		out := make([]string, len(recs))
		for i, r := range recs {
			out[i] = r.ID
		}
		return out
	}
	paged := func(o thread.ListOptions, size int) []string {
		var out []string
		o.Limit = size
		for range 20 {
			page := list(o)
			if len(page) > size {
				t.Fatalf("page of %d with limit %d", len(page), size)
			}
			out = append(out, idsOf(page)...)
			if len(page) < size {
				return out
			}
			last := page[len(page)-1]
			o.After, o.AfterUpdated = last.ID, last.UpdatedAt
		}
		t.Fatalf("paging by updated did not end: %v", out)
		return nil
	}

	if got := idsOf(list(thread.ListOptions{})); !slices.Equal(got, want) {
		t.Fatalf("by updated: %v, want %v", got, want)
	}
	// Desc has no effect on OrderUpdated.
	if got := idsOf(list(thread.ListOptions{Desc: true})); !slices.Equal(got, want) {
		t.Fatalf("by updated with Desc: %v, want %v", got, want)
	}
	for _, size := range []int{1, 3, 5} {
		if got := paged(thread.ListOptions{}, size); !slices.Equal(got, want) {
			t.Fatalf("by updated in pages of %d: %v, want %v", size, got, want)
		}
	}
	// A cursor inside a tie continues with the smaller ids of that second.
	tie := list(thread.ListOptions{Limit: 3})[2] // u03, made at second 4 with u02
	if got := idsOf(list(thread.ListOptions{After: tie.ID, AfterUpdated: tie.UpdatedAt, Limit: 2})); !slices.Equal(got, want[3:5]) {
		t.Fatalf("after %s: %v, want %v", tie.ID, got, want[3:5])
	}
	var odd []string
	for _, id := range want {
		if (id[2]-'0')%2 == 1 {
			odd = append(odd, id)
		}
	}
	if got := paged(thread.ListOptions{Labels: map[string]string{"half": "1"}}, 2); !slices.Equal(got, odd) {
		t.Fatalf("by updated, half=1, in pages of 2: %v, want %v", got, odd)
	}

	// An append to the least recently updated thread, u10, moves it to
	// the front; a page read with the old cursor goes on without it.
	first := list(thread.ListOptions{Limit: 4})
	at(100)
	th, err := db.Thread(ctx, "u10")
	check(t, err, "open u10")
	_, err = th.Append(ctx, message.User("news"))
	check(t, err, "append to u10")
	moved := append([]string{"u10"}, want[:len(want)-1]...)
	if got := idsOf(list(thread.ListOptions{})); !slices.Equal(got, moved) {
		t.Fatalf("after an append to u10: %v, want %v", got, moved)
	}
	last := first[len(first)-1]
	if got := idsOf(list(thread.ListOptions{After: last.ID, AfterUpdated: last.UpdatedAt})); !slices.Equal(got, want[4:len(want)-1]) {
		t.Fatalf("the page after %s once u00 moved: %v, want %v", last.ID, got, want[4:len(want)-1])
	}
	if r := list(thread.ListOptions{Limit: 1})[0]; !r.UpdatedAt.Equal(base.Add(100 * time.Second)) {
		t.Fatalf("u10 updated at %v, want %v", r.UpdatedAt, base.Add(100*time.Second))
	}
	// The store itself, below DB: every tenant, by update time.
	var every []string
	for r, err := range s.Threads(ctx, thread.ListOptions{AllTenants: true, Order: thread.OrderUpdated}) {
		check(t, err, "list all tenants by updated")
		every = append(every, r.ID)
	}
	if len(every) != 13 || every[0] != "u10" || !slices.Contains(every, thread.Key("other", "u99")) {
		t.Fatalf("all tenants by updated: %v", every)
	}
}

// listInternal checks ListOptions.Internal, which DB.Threads applies
// above the store: loom's own threads (LabelOwner, or an older loom's
// labels) left out or kept alone, pages full and joined by cursors in
// either order, however the own threads crowd the people's.
func listInternal(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	own := []map[string]string{
		{thread.LabelOwner: "worklog"},
		{"loom.worklog": "proj"},
		{"loom.worklog.sessions": "proj"},
		{"loom.workflow": "wf", "loom.workflow.key": "k"},
	}
	var people, loom []string
	for i := range 150 {
		id := fmt.Sprintf("i%03d", i)
		var labels map[string]string
		// Runs of loom's threads longer than a page, between people's.
		if i%40 >= 3 {
			labels = own[i%len(own)]
			loom = append(loom, id)
		} else {
			people = append(people, id)
		}
		_, err := db.Create(ctx, thread.CreateOptions{ID: id, Labels: labels})
		check(t, err, "create "+id)
	}
	// A workflow's own thread is people's even with a workflow's label.
	_, err := db.Create(ctx, thread.CreateOptions{ID: "i999", Kind: thread.KindWorkflow, Labels: map[string]string{"loom.workflow": "x", "loom.workflow.key": "y"}})
	check(t, err, "create a workflow's thread")
	people = append(people, "i999")

	for _, tc := range []struct {
		internal thread.Internal
		want     []string
	}{
		{thread.InternalExclude, people},
		{thread.InternalOnly, loom},
		{thread.InternalInclude, append(slices.Clone(people), loom...)},
	} {
		for _, order := range []thread.Order{thread.OrderID, thread.OrderUpdated} {
			for _, size := range []int{0, 1, 2, 7} {
				var got []string
				o := thread.ListOptions{Internal: tc.internal, Order: order, Limit: size}
				for range 200 {
					n := 0
					var last *thread.Record
					for th, err := range db.Threads(ctx, o) {
						check(t, err, "list")
						r := th.Record()
						got, last, n = append(got, th.ID()), &r, n+1
					}
					if size == 0 || n < size {
						break
					}
					if n > size {
						t.Fatalf("page of %d with limit %d", n, size)
					}
					o.After, o.AfterUpdated = last.ID, last.UpdatedAt
				}
				want := slices.Clone(tc.want)
				slices.Sort(want)
				if order == thread.OrderUpdated {
					slices.Sort(got) // the times of these creations are the clock's
				}
				if !slices.Equal(got, want) {
					t.Fatalf("internal %d, order %d, pages of %d: %v, want %v", tc.internal, order, size, got, want)
				}
			}
		}
	}
	for th, err := range db.Threads(ctx, thread.ListOptions{Internal: thread.InternalExclude}) {
		check(t, err, "list")
		if r := th.Record(); thread.Own(&r) {
			t.Fatalf("%s listed with InternalExclude: %v", th.ID(), th.Record().Labels)
		}
	}
}
