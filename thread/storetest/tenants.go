package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// tenantNamespaces checks that each tenant has its own namespace of thread
// ids: two tenants (and the default one) use the same ids for creates,
// forks, copies, loads, checkpoints and deletes, and nothing one does is
// seen by, blocks or changes another.
func tenantNamespaces(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	base := thread.New(s, nil)
	dbs := map[string]*thread.DB{"": base, "alice": base.WithTenant("alice"), "bob": base.WithTenant("bob")}
	order := []string{"alice", "bob", ""}
	say := func(tenant, what string) string { return fmt.Sprintf("%s of %q", what, tenant) }

	for _, tn := range order {
		db := dbs[tn]
		th, err := db.Create(ctx, thread.CreateOptions{ID: "secret", Title: "of " + tn, Labels: map[string]string{"owner": tn + "x"},
			Messages: []message.Message{message.User("hello from " + tn)}})
		check(t, err, say(tn, "create secret"))
		_, err = th.Checkpoint(ctx, "cp")
		check(t, err, say(tn, "checkpoint cp"))
		_, err = th.Append(ctx, message.Assistant("reply to "+tn))
		check(t, err, say(tn, "append"))
		_, err = th.Fork(ctx, thread.ForkOptions{ID: "fork"})
		check(t, err, say(tn, "fork to an id another tenant has"))
		_, err = th.Copy(ctx, thread.ForkOptions{ID: "copy"})
		check(t, err, say(tn, "copy to an id another tenant has"))
		var doc bytes.Buffer
		check(t, th.Save(ctx, &doc, thread.SaveOptions{History: true}), say(tn, "save"))
		_, err = db.Load(ctx, &doc, thread.LoadOptions{ID: "loaded"})
		check(t, err, say(tn, "load to an id another tenant has"))
		// The tenant's own ids still conflict within its namespace.
		_, err = db.Create(ctx, thread.CreateOptions{ID: "secret"})
		wantErr(t, err, thread.ErrConflict, say(tn, "create secret again"))
	}

	for _, tn := range order {
		db := dbs[tn]
		th, err := db.Thread(ctx, "secret")
		check(t, err, say(tn, "get secret"))
		if r := th.Record(); r.Title != "of "+tn || r.Tenant != tn || r.ID != "secret" || r.Version != 2 {
			t.Fatalf("%s: record %+v", say(tn, "secret"), r)
		}
		wantTexts(t, read(t, th, thread.ReadOptions{}), []string{"hello from " + tn, "reply to " + tn}, say(tn, "messages"))
		f, err := db.Thread(ctx, "fork")
		check(t, err, say(tn, "get fork"))
		if ff := f.Record().ForkedFrom; ff.Thread != "secret" {
			t.Fatalf("%s: forked from %+v, want thread \"secret\"", say(tn, "fork"), ff)
		}
		wantTexts(t, read(t, f, thread.ReadOptions{}), []string{"hello from " + tn, "reply to " + tn}, say(tn, "fork messages"))
		var got []string
		for th, err := range db.Threads(ctx, thread.ListOptions{}) {
			check(t, err, say(tn, "list"))
			got = append(got, th.ID())
		}
		if want := []string{"copy", "fork", "loaded", "secret"}; !slices.Equal(got, want) {
			t.Fatalf("%s: %v, want %v", say(tn, "list"), got, want)
		}
		got = got[:0]
		for th, err := range db.Threads(ctx, thread.ListOptions{After: "fork", Limit: 1}) {
			check(t, err, say(tn, "list a page"))
			got = append(got, th.ID())
		}
		if !slices.Equal(got, []string{"loaded"}) {
			t.Fatalf("%s: %v, want [loaded]", say(tn, "page after fork"), got)
		}
		for _, other := range order {
			got = got[:0]
			for th, err := range db.Threads(ctx, thread.ListOptions{Labels: map[string]string{"owner": other + "x"}}) {
				check(t, err, say(tn, "list by label"))
				got = append(got, th.ID())
			}
			if other == tn && len(got) != 4 || other != tn && len(got) != 0 {
				t.Fatalf("%s: the label of %q lists %v", say(tn, "list by label"), other, got)
			}
		}
		var cps []string
		for cp, err := range th.Checkpoints(ctx) {
			check(t, err, say(tn, "checkpoints"))
			if cp.Thread != "secret" {
				t.Fatalf("%s: checkpoint of thread %q", say(tn, "checkpoints"), cp.Thread)
			}
			cps = append(cps, cp.Name)
		}
		if !slices.Equal(cps, []string{"cp"}) {
			t.Fatalf("%s: %v", say(tn, "checkpoints"), cps)
		}
		n := 0
		for _, err := range th.History(ctx, thread.HistoryOptions{}) {
			check(t, err, say(tn, "history"))
			n++
		}
		if n != 2 {
			t.Fatalf("%s: %d entries, want 2", say(tn, "history"), n)
		}
	}

	// Bob rolls back, drops the checkpoint and deletes: nobody else moves.
	bob, err := dbs["bob"].Thread(ctx, "secret")
	check(t, err, "get bob's secret")
	check(t, bob.Rollback(ctx, "cp"), "bob rolls back")
	check(t, bob.DeleteCheckpoint(ctx, "cp"), "bob drops cp")
	check(t, dbs["bob"].Delete(ctx, "secret"), "bob deletes secret")
	check(t, dbs["bob"].Delete(ctx, "fork"), "bob deletes fork")
	_, err = dbs["bob"].Thread(ctx, "secret")
	wantErr(t, err, thread.ErrNotFound, "bob's deleted secret")
	for _, tn := range []string{"alice", ""} {
		th, err := dbs[tn].Thread(ctx, "secret")
		check(t, err, say(tn, "secret after bob's delete"))
		if th.Version() != 2 {
			t.Fatalf("%s: version %d, want 2", say(tn, "secret after bob's rollback"), th.Version())
		}
		wantTexts(t, read(t, th, thread.ReadOptions{}), []string{"hello from " + tn, "reply to " + tn}, say(tn, "secret after bob's delete"))
		wantTexts(t, read(t, th, thread.ReadOptions{Version: 1}), []string{"hello from " + tn}, say(tn, "secret at version 1"))
		if err := th.Rollback(ctx, "cp"); err != nil {
			t.Fatalf("%s: %v (bob's drop took it?)", say(tn, "rollback to cp"), err)
		}
	}
	// Bob can take the id again, in his namespace only.
	_, err = dbs["bob"].Create(ctx, thread.CreateOptions{ID: "secret"})
	check(t, err, "bob makes secret again")

	// The store keeps each thread under its tenant's key.
	for _, tn := range order {
		r, err := s.Thread(ctx, thread.Key(tn, "secret"))
		check(t, err, say(tn, "store record of the key"))
		if r.Tenant != tn {
			t.Fatalf("key %q holds a thread of tenant %q", thread.Key(tn, "secret"), r.Tenant)
		}
	}
	// A tenant that could make keys of another reading is refused.
	for _, bad := range []string{"a/b", "../x", "a b"} {
		_, err := base.WithTenant(bad).Create(ctx, thread.CreateOptions{ID: "x"})
		wantErr(t, err, thread.ErrInvalid, fmt.Sprintf("create as tenant %q", bad))
	}
	// No id names another tenant's key.
	for _, id := range []string{thread.Key("alice", "secret"), "alice/secret", "/secret"} {
		_, err := dbs["bob"].Thread(ctx, id)
		if !errors.Is(err, thread.ErrInvalid) {
			t.Fatalf("bob gets %q: %v, want ErrInvalid", id, err)
		}
	}
}

// tenantErrorsNameIDs checks that a tenant's errors name its threads by
// their ids, never by the keys the store keeps them under.
func tenantErrorsNameIDs(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	db := thread.New(s, nil).WithTenant("acme")
	_, err := db.Thread(ctx, "nope")
	wantErr(t, err, thread.ErrNotFound, "get nope")
	th, err := db.Create(ctx, thread.CreateOptions{ID: "x", Messages: []message.Message{message.User("hi")}})
	check(t, err, "create x")
	_, err = db.Create(ctx, thread.CreateOptions{ID: "x"})
	wantErr(t, err, thread.ErrConflict, "create x again")
	_, cperr := th.Checkpoint(ctx, "cp")
	check(t, cperr, "checkpoint")
	_, cerr := th.Checkpoint(ctx, "cp")
	wantErr(t, cerr, thread.ErrConflict, "checkpoint cp again")
	for _, e := range []error{err, cerr} {
		if e != nil && strings.Contains(e.Error(), "acme/") {
			t.Errorf("the error %q names a key", e)
		}
	}
	for _, e := range []error{mustErr(db.Thread(ctx, "nope")), mustErr(db.Create(ctx, thread.CreateOptions{ID: "x"}))} {
		if strings.Contains(e.Error(), "acme/") {
			t.Errorf("the error %q names a key", e)
		}
	}
}

func mustErr[V any](_ V, err error) error {
	if err == nil {
		return errors.New("no error")
	}
	return err
}
