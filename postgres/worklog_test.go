package postgres

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
)

// TestWorklogTwoServers has two servers (two stores, so two pools, as two
// processes would have) keep one project's work items in the database,
// creating items from several goroutines each at the same time, from the
// work log's first write: none is lost, no id is given twice. A Log of
// another tenant on the same project sees none of them, and they see none
// of its.
func TestWorklogTwoServers(t *testing.T) {
	dsn := testserver.Postgres(t)
	ctx := t.Context()
	const project, goroutines, each = "loom", 4, 10
	var dbs [2]*thread.DB
	var logs [2]*worklog.Log
	for i := range dbs {
		dbs[i] = thread.New(open(t, dsn, nil), nil)
		l, err := worklog.OpenDB(dbs[i], &worklog.Options{Project: project})
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = l
	}

	var (
		mu      sync.Mutex
		created []string
		wg      sync.WaitGroup
	)
	start := make(chan struct{})
	for i, l := range logs {
		for g := range goroutines {
			wg.Go(func() {
				<-start
				for n := range each {
					res, err := l.Create(ctx, worklog.CreateOptions{Text: fmt.Sprintf("server %d, writer %d, item %d", i, g, n)})
					if err != nil {
						t.Errorf("server %d writer %d: create %d: %v", i, g, n, err)
						return
					}
					if res.Deduplicated {
						t.Errorf("server %d writer %d: create %d was deduplicated with %s", i, g, n, res.Thread.ID)
						return
					}
					mu.Lock()
					created = append(created, res.Thread.ID)
					mu.Unlock()
				}
			})
		}
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	const total = 2 * goroutines * each
	seen := make(map[string]bool, len(created))
	for _, id := range created {
		if seen[id] {
			t.Errorf("id %s given twice", id)
		}
		seen[id] = true
	}
	for i, l := range logs {
		res, err := l.List(ctx, worklog.ListOptions{IncludeResolved: true})
		if err != nil {
			t.Fatalf("server %d: list: %v", i, err)
		}
		have := make(map[string]bool, len(res.Threads))
		for _, it := range res.Threads {
			if have[it.ID] {
				t.Errorf("server %d: item %s listed twice", i, it.ID)
			}
			have[it.ID] = true
		}
		for _, id := range created {
			if !have[id] {
				t.Errorf("server %d: item %s is lost", i, id)
			}
		}
		if len(res.Threads) != total || res.TotalOpen != total {
			t.Errorf("server %d lists %d items, %d open; want %d", i, len(res.Threads), res.TotalOpen, total)
		}
	}

	// Another tenant, same project, same database.
	other := dbs[0].WithTenant("acme")
	ol, err := worklog.OpenDB(other, &worklog.Options{Project: project})
	if err != nil {
		t.Fatal(err)
	}
	if got := worklog.ThreadID(other.Tenant(), project); got == worklog.ThreadID(dbs[0].Tenant(), project) {
		t.Fatalf("tenants share the thread %s", got)
	}
	res, err := ol.List(ctx, worklog.ListOptions{IncludeResolved: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Threads) != 0 || res.TotalOpen != 0 {
		t.Fatalf("tenant acme sees %d items of the default tenant", len(res.Threads))
	}
	if _, err := ol.Resolve(ctx, worklog.ResolveOptions{ID: created[0]}); !errors.Is(err, worklog.ErrNotFound) {
		t.Errorf("tenant acme resolves the default tenant's item %s: %v, want ErrNotFound", created[0], err)
	}
	mine, err := ol.Create(ctx, worklog.CreateOptions{Text: "server 0, writer 0, item 0"})
	if err != nil {
		t.Fatal(err)
	}
	if mine.Deduplicated {
		t.Errorf("tenant acme's item was deduplicated with the default tenant's %s", mine.Thread.ID)
	}
	res, err = logs[1].List(ctx, worklog.ListOptions{IncludeResolved: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range res.Threads {
		if it.ID == mine.Thread.ID && !seen[it.ID] {
			t.Errorf("the default tenant sees tenant acme's item %s", it.ID)
		}
	}
	if len(res.Threads) != total {
		t.Errorf("the default tenant lists %d items after tenant acme's create, want %d", len(res.Threads), total)
	}
}
