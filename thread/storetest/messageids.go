package storetest

import (
	"errors"
	"sync"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// withID returns m with the id id.
func withID(m message.Message, id string) message.Message {
	m.ID = id
	return m
}

// messageIDsOncePerThread checks that a thread holds a message id once:
// appending a message whose id the thread holds already — in a later
// commit, on a fork that shares it, in a group, or by many writers at once
// — is ErrConflict and changes nothing, while another thread, or the same
// thread after a reset or a rollback to before the message, takes it.
func messageIDsOncePerThread(t T, s store.Store, o *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "ids", Kind: thread.KindLocal})
	check(t, err, "create")
	_, err = th.Append(ctx, withID(message.User("first"), "m1"), message.User("no id"))
	check(t, err, "append m1")
	_, err = th.Checkpoint(ctx, "before-m2")
	check(t, err, "checkpoint")
	_, err = th.Append(ctx, withID(message.User("second"), "m2"))
	check(t, err, "append m2")
	v := th.Version()

	for _, id := range []string{"m1", "m2"} {
		_, err = th.Append(ctx, withID(message.User("again"), id))
		wantErr(t, err, thread.ErrDuplicateID, "append "+id+" again")
		_, err = th.Commit(ctx, thread.CommitOptions{Messages: []message.Message{message.User("new"), withID(message.User("again"), id)}, IfVersion: v})
		wantErr(t, err, thread.ErrConflict, "commit "+id+" again with IfVersion")
		g := db.Group()
		_, err = g.Commit(ctx, th, thread.CommitOptions{Messages: []message.Message{withID(message.User("again"), id)}})
		wantErr(t, err, thread.ErrConflict, "commit "+id+" again in a group")
	}
	check(t, th.Refresh(ctx), "refresh")
	if th.Version() != v {
		t.Fatalf("refused appends moved the thread from version %d to %d", v, th.Version())
	}
	wantTexts(t, read(t, th, thread.ReadOptions{}), []string{"first", "no id", "second"}, "after refused appends")

	// Another DB on the store (another process) appends an id: this one,
	// which remembers the ids of the line it wrote, sees it all the same.
	other2, err := thread.New(s, nil).Thread(ctx, "ids")
	check(t, err, "open ids through another DB")
	_, err = other2.Append(ctx, withID(message.User("third"), "m3"))
	check(t, err, "append m3 through another DB")
	_, err = th.Append(ctx, withID(message.User("again"), "m3"))
	wantErr(t, err, thread.ErrDuplicateID, "append m3, appended through another DB")
	check(t, th.Refresh(ctx), "refresh")
	wantTexts(t, read(t, th, thread.ReadOptions{}), []string{"first", "no id", "second", "third"}, "after another DB's append")

	// A fork shares the messages, and with them their ids.
	fork, err := th.Fork(ctx, thread.ForkOptions{ID: "ids-fork"})
	check(t, err, "fork")
	_, err = fork.Append(ctx, withID(message.User("again"), "m1"))
	wantErr(t, err, thread.ErrConflict, "append m1 to a fork")

	// Another thread, or this one back before m2, may take the id.
	other, err := db.Create(ctx, thread.CreateOptions{ID: "ids-other"})
	check(t, err, "create other")
	_, err = other.Append(ctx, withID(message.User("elsewhere"), "m2"))
	check(t, err, "append m2 to another thread")
	check(t, th.Rollback(ctx, "before-m2"), "rollback")
	_, err = th.Append(ctx, withID(message.User("second, again"), "m2"))
	check(t, err, "append m2 after a rollback to before it")
	check(t, th.Reset(ctx), "reset")
	_, err = th.Append(ctx, withID(message.User("first, again"), "m1"))
	check(t, err, "append m1 after a reset")

	// Writers racing to append one id: exactly one wins. Each writer is a
	// DB of its own, as another process is, with its own memory of ids:
	// the race is settled by the store.
	race, err := db.Create(ctx, thread.CreateOptions{ID: "ids-race", Messages: []message.Message{withID(message.User("seed"), "seed")}})
	check(t, err, "create race")
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		won      int
		failures []error
	)
	for range min(o.Writers, 8) {
		wg.Go(func() {
			h, err := thread.New(s, nil).Thread(ctx, "ids-race")
			if err == nil {
				_, err = h.Append(ctx, withID(message.User("once"), "same"))
			}
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				won++
			} else if !errors.Is(err, thread.ErrConflict) {
				failures = append(failures, err)
			}
		})
	}
	wg.Wait()
	if won != 1 || len(failures) > 0 {
		t.Fatalf("%d writers appended one id, other errors %v; want one", won, failures)
	}
	check(t, race.Refresh(ctx), "refresh race")
	wantTexts(t, read(t, race, thread.ReadOptions{}), []string{"seed", "once"}, "after the race")
}
