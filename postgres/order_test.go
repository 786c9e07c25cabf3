package postgres

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/thread"
)

func move(id string, v int64) thread.Change {
	return thread.Change{Kind: thread.ChangeMove, Thread: id, Version: v}
}

// TestSequencer: batches come out in each thread's version order, held
// until the versions before them come or watchHold passes (then after a
// gap); overtaken ones are dropped.
func TestSequencer(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var q sequencer
	var got []brief
	take := func(bs [][]thread.Change) {
		for _, b := range bs {
			got = append(got, briefs(b)...)
		}
	}
	check := func(what string, want ...brief) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %+v, want %+v", what, got, want)
		}
		got = nil
	}
	gap := brief{kind: thread.ChangeGap}

	take(q.push([]thread.Change{{Kind: thread.ChangeCreate, Thread: "a", Version: 1}}, t0))
	take(q.push([]thread.Change{move("a", 2)}, t0))
	check("in order", brief{thread.ChangeCreate, "a", 1}, brief{thread.ChangeMove, "a", 2})

	// v4 before v3: held, and another thread's batch is not.
	take(q.push([]thread.Change{move("a", 4)}, t0))
	take(q.push([]thread.Change{move("b", 7)}, t0))
	check("a's v4 held", brief{thread.ChangeMove, "b", 7})
	if d, ok := q.deadline(); !ok || !d.Equal(t0.Add(watchHold)) {
		t.Fatalf("deadline %v, %v", d, ok)
	}
	// A checkpoint of a behind the held batch waits too.
	take(q.push([]thread.Change{{Kind: thread.ChangeCheckpoint, Thread: "a", Checkpoint: "cp"}}, t0))
	check("behind the held batch")
	take(q.push([]thread.Change{move("a", 3)}, t0))
	check("v3 frees v4", brief{thread.ChangeMove, "a", 3}, brief{thread.ChangeMove, "a", 4}, brief{thread.ChangeCheckpoint, "a", 0})
	if _, ok := q.deadline(); ok {
		t.Fatal("still holding")
	}
	// Overtaken: dropped, the rest of its batch kept.
	take(q.push([]thread.Change{move("a", 4), move("b", 8)}, t0))
	take(q.push([]thread.Change{move("a", 3)}, t0))
	check("overtaken", brief{thread.ChangeMove, "b", 8})

	// A batch of two moves of one thread is in order.
	take(q.push([]thread.Change{move("a", 5), move("a", 6)}, t0))
	check("two moves", brief{thread.ChangeMove, "a", 5}, brief{thread.ChangeMove, "a", 6})

	// v9 and v8 while v7 never comes: at the deadline of the first heard,
	// a gap, then both, in order.
	take(q.push([]thread.Change{move("a", 9)}, t0))
	take(q.push([]thread.Change{move("a", 8)}, t0.Add(time.Millisecond)))
	check("v7 missing")
	take(q.expire(t0.Add(watchHold - time.Nanosecond)))
	check("before the deadline")
	take(q.expire(t0.Add(watchHold)))
	check("at the deadline", gap, brief{thread.ChangeMove, "a", 8}, brief{thread.ChangeMove, "a", 9})
	take(q.push([]thread.Change{move("a", 10)}, t0))
	check("a moves on", brief{thread.ChangeMove, "a", 10})

	// Held behind a batch that also waits for another thread: skipping
	// frees nothing, and the first is delivered as it is, overtaking v12;
	// then b skips.
	take(q.push([]thread.Change{move("a", 13)}, t0))
	take(q.push([]thread.Change{move("a", 12), move("b", 10)}, t0))
	check("two holes")
	take(q.expire(t0.Add(watchHold)))
	check("at the deadline", gap, brief{thread.ChangeMove, "a", 13}, brief{thread.ChangeMove, "b", 10})

	// A deleted thread is forgotten: one created again starts over.
	take(q.push([]thread.Change{{Kind: thread.ChangeDelete, Thread: "a"}}, t0))
	take(q.push([]thread.Change{{Kind: thread.ChangeCreate, Thread: "a", Version: 1}}, t0))
	check("created again", brief{thread.ChangeDelete, "a", 0}, brief{thread.ChangeCreate, "a", 1})

	// A thread not heard of lately: its first move is delivered.
	take(q.push([]thread.Change{move("new", 40)}, t0))
	check("unknown", brief{thread.ChangeMove, "new", 40})
	later := t0.Add(3 * watchForget)
	q.set("x", 1, later) // rotates twice: "new" is forgotten
	q.set("y", 1, later.Add(watchForget))
	if _, ok := q.version("new"); ok {
		t.Fatal("a thread not heard of in 2×watchForget is remembered")
	}
}

// TestWatchOutOfOrder sends notifications as two writers of one thread
// could: the second's first. The listener hears them in version order; a
// version that never comes is a gap once watchHold has passed.
func TestWatchOutOfOrder(t *testing.T) {
	dsn := testserver.Postgres(t)
	s := open(t, dsn, nil)
	ctx := t.Context()
	var h heard
	if err := s.Watch(ctx, func(cs []thread.Change) { h.add(cs...) }); err != nil {
		t.Fatal(err)
	}
	send := func(cs ...thread.Change) {
		t.Helper()
		b, _ := json.Marshal(note{Changes: cs})
		if _, err := s.pool.Exec(ctx, `SELECT pg_notify('loom_changes', $1)`, string(b)); err != nil {
			t.Fatal(err)
		}
	}
	send(thread.Change{Kind: thread.ChangeCreate, Thread: "o", Version: 1})
	send(move("o", 3))
	send(move("o", 2))
	send(move("o", 5))
	start := time.Now()
	got := h.wait(t, 5, "out of order")
	if waited := time.Since(start); waited < watchHold/2 {
		t.Errorf("the gap came after %v, before watchHold", waited)
	}
	want := []brief{{thread.ChangeCreate, "o", 1}, {thread.ChangeMove, "o", 2}, {thread.ChangeMove, "o", 3},
		{kind: thread.ChangeGap}, {thread.ChangeMove, "o", 5}}
	if b := briefs(got); !slices.Equal(b, want) {
		t.Fatalf("heard %+v, want %+v", b, want)
	}
}

// TestWatchRacingWriters: many writers append to one thread at once (the
// losers of a race queue for its row, AppendAt): the listener hears every
// version, once, in order, and no gap.
func TestWatchRacingWriters(t *testing.T) {
	holdLong(t)
	dsn := testserver.Postgres(t)
	a, b := open(t, dsn, &Options{MaxConns: 8}), open(t, dsn, &Options{MaxConns: 8})
	ctx := t.Context()
	var h heard
	if err := a.Watch(ctx, func(cs []thread.Change) { h.add(cs...) }); err != nil {
		t.Fatal(err)
	}
	const writers, each = 16, 15
	dbs := writingDBs(a, b)
	if _, err := dbs[0].Create(ctx, thread.CreateOptions{ID: "hot"}); err != nil {
		t.Fatal(err)
	}
	appendAtOnce(t, dbs, writers, each, func(int) string { return "hot" })
	got := h.wait(t, 1+writers*each, "racing writers")
	for i, c := range got {
		want := brief{thread.ChangeMove, "hot", int64(i + 1)}
		if i == 0 {
			want.kind = thread.ChangeCreate
		}
		if b := briefs([]thread.Change{c}); b[0] != want {
			t.Fatalf("change %d: %+v, want %+v", i, b[0], want)
		}
	}
}
