package storetest

import (
	"encoding/json"
	"slices"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// Groups is the case of a group of threads changed at once (thread.Group),
// as a workflow changes itself and its sub-threads: children created
// under a parent in one batch, a checkpoint of all of them, a rollback of
// all of them, a fork of all of them, and groups that fail as a whole. A
// store that keeps a fork family in one place (Redis Cluster) must take
// each of these batches, which stay within the parent's family. It is part
// of Run, and exported for stores that run it in another configuration.
func Groups(t T, s store.Store) {
	groups(t, s, nil)
}

func groups(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	for _, tenant := range []string{"", "acme"} {
		db := thread.New(s, nil).WithTenant(tenant)
		g := db.Group()
		w, err := g.Create(ctx, thread.CreateOptions{ID: "wf", Kind: thread.KindWorkflow, State: map[string]json.RawMessage{"wf/n": json.RawMessage(`0`)}})
		check(t, err, "group: create parent")
		var subs []*thread.Thread
		for _, id := range []string{"wf.a", "wf.b"} {
			sub, err := g.Create(ctx, thread.CreateOptions{ID: id, Parent: "wf", Kind: thread.KindLocal})
			check(t, err, "group: create child")
			subs = append(subs, sub)
		}
		check(t, g.Apply(ctx), "apply the creations")
		for _, sub := range subs {
			r, err := s.Thread(ctx, thread.Key(tenant, sub.ID()))
			check(t, err, "read a child")
			if r.ForkedFrom != (thread.ForkPoint{Thread: thread.Key(tenant, "wf")}) {
				t.Fatalf("child %s linked to %+v, want its parent", sub.ID(), r.ForkedFrom)
			}
			again, err := db.Thread(ctx, sub.ID())
			check(t, err, "open a child")
			if again.Record().ForkedFrom.Thread != "wf" {
				t.Fatalf("child %s seen linked to %q, want wf", sub.ID(), again.Record().ForkedFrom.Thread)
			}
		}
		for i, sub := range subs {
			_, err := sub.Append(ctx, numbered(sub.ID()+"-", i+1)...)
			check(t, err, "append to a child")
		}

		// A checkpoint of all three: a commit on the parent and a
		// checkpoint on each, in one batch.
		g = db.Group()
		_, err = g.Commit(ctx, w, thread.CommitOptions{State: map[string]json.RawMessage{"wf/n": json.RawMessage(`1`)}})
		check(t, err, "group: commit")
		for _, th := range append([]*thread.Thread{w}, subs...) {
			check(t, g.Checkpoint(ctx, th, "cp"), "group: checkpoint")
		}
		check(t, g.Apply(ctx), "apply the checkpoint")
		for _, th := range append([]*thread.Thread{w}, subs...) {
			var names []string
			for cp, err := range th.Checkpoints(ctx) {
				check(t, err, "list checkpoints")
				names = append(names, cp.Name)
				if cp.Commit != th.Record().Head {
					t.Fatalf("checkpoint of %s at %s, want its head %s", th.ID(), cp.Commit, th.Record().Head)
				}
			}
			if !slices.Equal(names, []string{"cp"}) {
				t.Fatalf("checkpoints of %s: %v", th.ID(), names)
			}
		}
		if w.Version() != 2 {
			t.Fatalf("parent at version %d after the group's commit, want 2", w.Version())
		}

		// Everything moves on, then rolls back at once.
		for _, sub := range subs {
			_, err := sub.Append(ctx, message.User("later"))
			check(t, err, "append later")
		}
		_, err = w.SetState(ctx, map[string]json.RawMessage{"wf/n": json.RawMessage(`2`)})
		check(t, err, "set state later")
		g = db.Group()
		for _, th := range append([]*thread.Thread{w}, subs...) {
			check(t, g.Rollback(ctx, th, "cp"), "group: rollback")
		}
		check(t, g.Apply(ctx), "apply the rollback")
		for i, sub := range subs {
			if got := texts(read(t, sub, thread.ReadOptions{})); len(got) != i+1 || got[len(got)-1] == "later" {
				t.Fatalf("%s after the group's rollback: %v", sub.ID(), got)
			}
		}
		st, err := w.State(ctx, 0)
		check(t, err, "state after rollback")
		if string(st["wf/n"]) != "1" {
			t.Fatalf("parent's state after rollback: %s", st["wf/n"])
		}

		// A group with one stale handle fails whole.
		stale, err := db.Thread(ctx, "wf.b")
		check(t, err, "open b")
		_, err = subs[1].Append(ctx, message.User("moves b"))
		check(t, err, "move b")
		before := w.Version()
		g = db.Group()
		_, err = g.Commit(ctx, w, thread.CommitOptions{State: map[string]json.RawMessage{"wf/n": json.RawMessage(`3`)}})
		check(t, err, "group: commit")
		check(t, g.Restore(ctx, subs[0], 1), "group: restore a")
		check(t, g.Restore(ctx, stale, 1), "group: restore stale b")
		wantErr(t, g.Apply(ctx), thread.ErrConflict, "a group with a stale handle")
		check(t, w.Refresh(ctx), "refresh")
		if w.Version() != before {
			t.Fatalf("parent moved to version %d by a failed group, was %d", w.Version(), before)
		}
		if n := len(read(t, subs[0], thread.ReadOptions{})); n != 1 {
			t.Fatalf("a restored by a failed group: %d messages", n)
		}

		// A group that cannot be built writes nothing.
		g = db.Group()
		_, err = g.Commit(ctx, w, thread.CommitOptions{State: map[string]json.RawMessage{"wf/n": json.RawMessage(`4`)}})
		check(t, err, "group: commit")
		wantErr(t, g.Restore(ctx, subs[0], 99), thread.ErrNotFound, "restore to a version that does not exist")
		wantErr(t, g.Apply(ctx), thread.ErrNotFound, "apply a group that failed")
		check(t, w.Refresh(ctx), "refresh")
		if w.Version() != before {
			t.Fatalf("parent moved by a group that failed to build")
		}
		g = db.Group()
		_, err = g.Commit(ctx, w, thread.CommitOptions{State: map[string]json.RawMessage{"wf/n": json.RawMessage(`5`)}})
		check(t, err, "group: commit")
		wantErr(t, g.Restore(ctx, w, 1), thread.ErrInvalid, "two moves of one thread")
		_, err = g.Create(ctx, thread.CreateOptions{ID: "orphan", Parent: "nobody"})
		wantErr(t, err, thread.ErrNotFound, "a child of no parent")

		// A fork of all three at the checkpoint's versions, then each side
		// moves on its own.
		check(t, w.Refresh(ctx), "refresh")
		for _, sub := range subs {
			check(t, sub.Refresh(ctx), "refresh")
		}
		g = db.Group()
		w2, err := g.Fork(ctx, w, thread.ForkOptions{ID: "wf2", Version: 2, State: map[string]json.RawMessage{"wf/forked": json.RawMessage(`true`)}})
		check(t, err, "group: fork parent")
		var subs2 []*thread.Thread
		for _, sub := range subs {
			f, err := g.Fork(ctx, sub, thread.ForkOptions{ID: "wf2." + sub.ID()[3:], Version: 2})
			check(t, err, "group: fork child")
			subs2 = append(subs2, f)
		}
		check(t, g.Apply(ctx), "apply the fork")
		st, err = w2.State(ctx, 0)
		check(t, err, "forked state")
		var at2 string
		for e, err := range w.History(ctx, thread.HistoryOptions{Before: 3, Limit: 1}) {
			check(t, err, "history")
			at2 = e.Commit
		}
		if from := w2.Record().ForkedFrom; string(st["wf/n"]) != "1" || string(st["wf/forked"]) != "true" || from.Thread != "wf" || from.Commit != at2 || w2.Record().Head == at2 {
			t.Fatalf("forked parent with a state patch: state %v, from %+v, head %s, fork point %s", st, from, w2.Record().Head, at2)
		}
		_, err = subs2[0].Append(ctx, message.User("only in the fork"))
		check(t, err, "append to a forked child")
		if got := texts(read(t, subs[0], thread.ReadOptions{})); slices.Contains(got, "only in the fork") {
			t.Fatalf("the source saw the fork's message: %v", got)
		}
		if got := texts(read(t, subs2[1], thread.ReadOptions{})); len(got) != 2 {
			t.Fatalf("forked b at version 2: %v", got)
		}

		// A checkpoint added before the group's commit names the commit;
		// a rollback and a commit on where it goes are one move; a thread
		// is in a group through one handle.
		g = db.Group()
		check(t, g.Checkpoint(ctx, w2, "named-first"), "group: checkpoint before the commit")
		c, err := g.Commit(ctx, w2, thread.CommitOptions{State: map[string]json.RawMessage{"wf/n": json.RawMessage(`6`)}})
		check(t, err, "group: commit after a checkpoint")
		check(t, g.Apply(ctx), "apply")
		other, err := db.Thread(ctx, "wf2")
		check(t, err, "open wf2")
		g2 := db.Group()
		check(t, g2.Checkpoint(ctx, w2, "x"), "group: checkpoint")
		wantErr(t, g2.Checkpoint(ctx, other, "y"), thread.ErrInvalid, "a second handle of a thread in the group")
		for cp, err := range w2.Checkpoints(ctx) {
			check(t, err, "checkpoints")
			if cp.Name == "named-first" && (cp.Commit != c.ID || cp.Version != w2.Version()) {
				t.Fatalf("a checkpoint added before the commit names %s at %d, want %s at %d", cp.Commit, cp.Version, c.ID, w2.Version())
			}
		}
		before = w2.Version()
		g = db.Group()
		check(t, g.Rollback(ctx, w2, "named-first"), "group: rollback")
		c2, err := g.Commit(ctx, w2, thread.CommitOptions{State: map[string]json.RawMessage{"wf/n": json.RawMessage(`7`)}})
		check(t, err, "group: commit after the rollback")
		check(t, g.Apply(ctx), "apply the rollback and its commit")
		g2 = db.Group()
		_, err = g2.Commit(ctx, w2, thread.CommitOptions{State: map[string]json.RawMessage{}})
		check(t, err, "group: commit")
		_, err = g2.Commit(ctx, w2, thread.CommitOptions{State: map[string]json.RawMessage{}})
		wantErr(t, err, thread.ErrInvalid, "a second commit")
		if w2.Version() != before+1 || c2.Parent != c.ID || w2.Record().Head != c2.ID {
			t.Fatalf("rollback and commit: version %d (was %d), parent %s (want %s)", w2.Version(), before, c2.Parent, c.ID)
		}
		for e, err := range w2.History(ctx, thread.HistoryOptions{Limit: 1}) {
			check(t, err, "history")
			if e.Op != thread.OpRollback || e.Commit != c2.ID {
				t.Fatalf("the move of a rollback and a commit: %+v", e)
			}
		}
		st, err = w2.State(ctx, 0)
		check(t, err, "state")
		if string(st["wf/n"]) != "7" {
			t.Fatalf("state after the rollback's commit: %s", st["wf/n"])
		}
		// A handle that moves while the group is built.
		g = db.Group()
		check(t, g.Checkpoint(ctx, w2, "while"), "group: checkpoint")
		_, err = w2.SetState(ctx, map[string]json.RawMessage{"wf/n": json.RawMessage(`8`)})
		check(t, err, "move the handle")
		_, err = g.Commit(ctx, w2, thread.CommitOptions{State: map[string]json.RawMessage{"wf/n": json.RawMessage(`9`)}})
		if err == nil {
			err = g.Apply(ctx)
		}
		wantErr(t, err, thread.ErrConflict, "a commit through a handle that moved")

		// A group deletes several threads at once.
		g = db.Group()
		for _, th := range subs2 {
			check(t, g.Delete(ctx, th), "group: delete")
		}
		check(t, g.Delete(ctx, w2), "group: delete")
		check(t, g.Apply(ctx), "apply the deletion")
		for _, id := range []string{"wf2", "wf2.a", "wf2.b"} {
			_, err := db.Thread(ctx, id)
			wantErr(t, err, thread.ErrNotFound, "a deleted thread")
		}
		if n := len(read(t, subs[1], thread.ReadOptions{})); n != 3 {
			t.Fatalf("b after its fork was deleted: %d messages", n)
		}
	}
}
