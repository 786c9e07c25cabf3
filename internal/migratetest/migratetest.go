// Package migratetest checks, for every durable store, that a store written
// by loom's release before tenants had their own namespaces (commit
// 26c53b2) opens with everything in it: the stores' migration tests load
// their fixture of that release (in their testdata, made by
// testdata/genfixture.go.txt here) and call Check.
package migratetest

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
	"github.com/loomthreads/loom/worklog"
)

// Options say what the fixture holds.
type Options struct {
	// Sessions is set when the store kept the work log's session records
	// (a sessions table or keys of its own) and so must have carried them
	// into threads.
	Sessions bool
}

func texts(tb testing.TB, th *thread.Thread, v int64) []string {
	tb.Helper()
	msgs, err := th.Messages(tb.Context(), thread.ReadOptions{Version: v})
	if err != nil {
		tb.Fatalf("%s at version %d: %v", th.ID(), v, err)
	}
	out := []string{}
	for _, m := range msgs {
		out = append(out, m.Text())
	}
	return out
}

func get(tb testing.TB, db *thread.DB, id string) *thread.Thread {
	tb.Helper()
	th, err := db.Thread(tb.Context(), id)
	if err != nil {
		tb.Fatalf("tenant %q: thread %s: %v", db.Tenant(), id, err)
	}
	return th
}

func wantVersions(tb testing.TB, th *thread.Thread, want [][]string) {
	tb.Helper()
	if th.Version() != int64(len(want)) {
		tb.Errorf("%s: version %d, want %d", th.ID(), th.Version(), len(want))
	}
	for i, w := range want {
		if got := texts(tb, th, int64(i+1)); !slices.Equal(got, w) {
			tb.Errorf("%s at version %d: %q, want %q", th.ID(), i+1, got, w)
		}
	}
}

func list(tb testing.TB, db *thread.DB) []string {
	tb.Helper()
	var out []string
	for th, err := range db.Threads(tb.Context(), thread.ListOptions{}) {
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, th.ID())
	}
	return out
}

// Check checks that s holds what the release's generator wrote, each
// tenant's threads in its own namespace, and that the namespaces work.
func Check(tb testing.TB, s store.Store, opts Options) {
	tb.Helper()
	ctx := tb.Context()
	db := thread.New(s, nil)
	alice, bob := db.WithTenant("alice"), db.WithTenant("bob")

	rich := get(tb, db, "rich")
	if r := rich.Record(); r.Title != "rich" || r.Labels["team"] != "a" || r.Tenant != "" {
		tb.Errorf("rich: %+v", r)
	}
	wantVersions(tb, rich, [][]string{{}, {"r1", "r2"}, {"r1", "r2", "r3"}, {"r1", "r2", "r3"}, {"r1", "r2"}, {"r1", "r2", "r4"}})
	var ops []thread.Op
	for e, err := range rich.History(ctx, thread.HistoryOptions{}) {
		if err != nil {
			tb.Fatal(err)
		}
		ops = append(ops, e.Op)
	}
	if want := []thread.Op{thread.OpAppend, thread.OpRollback, thread.OpState, thread.OpAppend, thread.OpAppend, thread.OpCreate}; !slices.Equal(ops, want) {
		tb.Errorf("rich's history: %v, want %v", ops, want)
	}
	st4, err := rich.State(ctx, 4)
	if err != nil || string(st4["ctx/x"]) != `{"n":1}` {
		tb.Errorf("rich's state at version 4: %s, %v", st4, err)
	}
	if st, err := rich.State(ctx, 0); err != nil || st["ctx/x"] != nil {
		tb.Errorf("rich's state after the rollback: %s, %v", st, err)
	}
	checkpoints(tb, rich, "cp1", 2)
	fork := get(tb, db, "rich-fork")
	if ff := fork.Record().ForkedFrom; ff.Thread != "rich" {
		tb.Errorf("rich-fork forked from %+v", ff)
	}
	if got := texts(tb, fork, 0); !slices.Equal(got, []string{"r1", "r2", "f1"}) {
		tb.Errorf("rich-fork: %q", got)
	}
	wantVersions(tb, get(tb, db, "empty"), [][]string{{}})

	secret := get(tb, alice, "secret")
	if secret.Record().Tenant != "alice" {
		tb.Errorf("secret: %+v", secret.Record())
	}
	wantVersions(tb, secret, [][]string{{"a1", "a2"}, {"a1", "a2", "a3"}})
	checkpoints(tb, secret, "acp", 1)
	sf := get(tb, alice, "secret-fork")
	if ff := sf.Record().ForkedFrom; ff.Thread != "secret" {
		tb.Errorf("secret-fork forked from %+v", ff)
	}
	if got := texts(tb, sf, 0); !slices.Equal(got, []string{"a1", "a2", "a3"}) {
		tb.Errorf("secret-fork: %q", got)
	}
	wantVersions(tb, get(tb, bob, "bobs"), [][]string{{"b1"}})
	carol := db.WithTenant("carol")
	long := get(tb, carol, "long")
	if long.Version() != 71 {
		tb.Errorf("carol's long: version %d, want 71", long.Version())
	}
	if got := texts(tb, long, 5); !slices.Equal(got, []string{"l0", "l1", "l2", "l3"}) {
		tb.Errorf("carol's long at version 5: %q", got)
	}
	n := 0
	for _, err := range long.History(ctx, thread.HistoryOptions{}) {
		if err != nil {
			tb.Fatal(err)
		}
		n++
	}
	if n != 71 {
		tb.Errorf("carol's long: %d history entries, want 71", n)
	}

	// Each tenant lists its own, by id; the store keeps them by key.
	wl := func(tenant, project string) string { return worklog.ThreadID(tenant, project) }
	wantLists := map[*thread.DB][]string{
		db:    {"empty", "rich", "rich-fork", wl("", worklog.DefaultProject)},
		alice: {"secret", "secret-fork", wl("alice", "victim")},
		bob:   {"bobs"},
		carol: {"long"},
	}
	if opts.Sessions {
		wantLists[db] = append(wantLists[db], "wls_") // the sessions' thread, checked below
		wantLists[alice] = append(wantLists[alice], "wls_")
	}
	for d, want := range wantLists {
		got := list(tb, d)
		for i := range got {
			if len(got[i]) > 4 && got[i][:4] == "wls_" {
				got[i] = "wls_"
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			tb.Errorf("tenant %q lists %q, want %q", d.Tenant(), got, want)
		}
	}
	if r, err := s.Thread(ctx, thread.Key("alice", "secret")); err != nil || r.Tenant != "alice" {
		tb.Errorf("the store's key alice/secret: %+v, %v", r, err)
	}

	// The work items, through the work log as a server keeps it.
	logs := worklog.NewLogs(db, nil)
	items := func(tenant, project string) map[string]worklog.Status {
		tb.Helper()
		l, err := logs.Log(tenant, project)
		if err != nil {
			tb.Fatal(err)
		}
		res, err := l.List(ctx, worklog.ListOptions{IncludeResolved: true})
		if err != nil {
			tb.Fatalf("items of %q/%s: %v", tenant, project, err)
		}
		out := map[string]worklog.Status{}
		for _, it := range res.Threads {
			out[it.Text] = it.Status
		}
		return out
	}
	if got := items("alice", "victim"); len(got) != 2 || got["alice item one"] != worklog.StatusResolved || got["alice item two"] != worklog.StatusOpen {
		tb.Errorf("alice's items: %v", got)
	}
	if got := items("", ""); len(got) != 1 || got["default item"] != worklog.StatusOpen {
		tb.Errorf("the default tenant's items: %v", got)
	}
	if got := items("bob", "victim"); len(got) != 0 {
		tb.Errorf("bob's items: %v", got)
	}
	if opts.Sessions {
		sessions := func(tenant, project, id string, carried string) {
			tb.Helper()
			ss, err := worklog.NewThreadSessions(db.WithTenant(tenant)).ClosedSessions(ctx, worklog.ClosedOptions{Project: project})
			if err != nil || len(ss) != 1 || ss[0].ID != id || ss[0].StartedAt.IsZero() {
				tb.Fatalf("%q's sessions of %s: %+v, %v", tenant, project, ss, err)
			}
			found := false
			for _, raw := range ss[0].OpenThreads {
				var it struct{ Text string }
				if json.Unmarshal(raw, &it) == nil && it.Text == carried {
					found = true
				}
			}
			if !found {
				tb.Errorf("%q's session %s carries %s, not %q", tenant, id, ss[0].OpenThreads, carried)
			}
		}
		sessions("alice", "victim", "s-alice-1", "alice item two")
		sessions("", worklog.DefaultProject, "s-default-1", "default item")
		// And session_start carries them forward.
		l, _ := logs.Log("alice", "victim")
		res, err := l.SessionStart(ctx, worklog.StartOptions{})
		if err != nil || res.SessionsAggregated != 1 {
			tb.Errorf("alice's session start: %+v, %v", res, err)
		}
	}

	// The namespaces work: bob and the default tenant take alice's ids.
	for _, d := range []*thread.DB{bob, db} {
		for _, id := range []string{"secret", "secret-fork"} {
			if _, err := d.Create(ctx, thread.CreateOptions{ID: id, Messages: []message.Message{message.User("mine")}}); err != nil {
				tb.Errorf("tenant %q creates %s: %v", d.Tenant(), id, err)
			}
		}
	}
	if _, err := alice.Create(ctx, thread.CreateOptions{ID: "secret"}); !errors.Is(err, thread.ErrConflict) {
		tb.Errorf("alice creates secret again: %v", err)
	}
	if got := texts(tb, get(tb, alice, "secret"), 0); !slices.Equal(got, []string{"a1", "a2", "a3"}) {
		tb.Errorf("alice's secret after the others took its id: %q", got)
	}
}

func checkpoints(tb testing.TB, th *thread.Thread, name string, version int64) {
	tb.Helper()
	var got []thread.Checkpoint
	for cp, err := range th.Checkpoints(tb.Context()) {
		if err != nil {
			tb.Fatal(err)
		}
		got = append(got, cp)
	}
	if len(got) != 1 || got[0].Name != name || got[0].Version != version || got[0].Thread != th.ID() {
		tb.Errorf("%s's checkpoints: %+v, want %s at version %d", th.ID(), got, name, version)
	}
}
