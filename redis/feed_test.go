package redis_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/redis"
	"github.com/loomthreads/loom/thread"
)

// feed collects what a DB's Watch hears.
type feed struct {
	ch chan thread.Change
}

func watch(t testing.TB, ctx context.Context, db *thread.DB) *feed {
	t.Helper()
	f := &feed{ch: make(chan thread.Change, 1024)}
	var returned sync.Mutex // held until Watch returns: fn must not run before
	returned.Lock()
	var early atomic.Bool
	err := db.Watch(ctx, func(c thread.Change) {
		if returned.TryLock() {
			returned.Unlock()
		} else {
			early.Store(true)
		}
		f.ch <- c
	})
	if err != nil {
		t.Fatal(err)
	}
	if early.Load() {
		t.Error("fn ran before Watch returned")
	}
	returned.Unlock()
	return f
}

// short is a change as the tests compare it.
type short struct {
	Kind    thread.ChangeKind
	Thread  string
	Version int64
	Name    string
}

func (s short) String() string {
	return fmt.Sprintf("%s %s v%d %s", s.Kind, s.Thread, s.Version, s.Name)
}

// expect reads len(want) changes and compares them with want.
func (f *feed) expect(t testing.TB, want ...short) []thread.Change {
	t.Helper()
	var got []thread.Change
	var gotShort []short
	timeout := time.After(10 * time.Second)
	for len(got) < len(want) {
		select {
		case c := <-f.ch:
			got = append(got, c)
			gotShort = append(gotShort, short{c.Kind, c.Thread, c.Version, c.Checkpoint})
		case <-timeout:
			t.Fatalf("heard %v, want %v", gotShort, want)
		}
	}
	if !slices.Equal(gotShort, want) {
		t.Fatalf("heard %v, want %v", gotShort, want)
	}
	return got
}

// quiet checks that nothing more arrives for a while.
func (f *feed) quiet(t testing.TB) {
	t.Helper()
	select {
	case c := <-f.ch:
		t.Fatalf("heard %+v, want nothing", c)
	case <-time.After(300 * time.Millisecond):
	}
}

func testWatch(t *testing.T, url string, opts func() *redis.Options) {
	ctx := t.Context()
	// Two stores on one server, as two loom processes would have.
	a, b := open(t, url, opts()), open(t, url, opts())
	dbA, dbB := thread.New(a, nil), thread.New(b, nil)
	f := watch(t, ctx, dbA)

	th, err := dbB.Create(ctx, thread.CreateOptions{ID: "t1", Messages: []message.Message{message.User("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	got := f.expect(t, short{thread.ChangeCreate, "t1", 1, ""})
	if got[0].Head != th.Record().Head || got[0].Op != thread.OpCreate || got[0].Time.IsZero() {
		t.Fatalf("create heard as %+v; record %+v", got[0], th.Record())
	}
	for i := range 5 {
		if _, err := th.Append(ctx, message.User(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := th.Checkpoint(ctx, "cp"); err != nil {
		t.Fatal(err)
	}
	if err := th.DeleteCheckpoint(ctx, "cp"); err != nil {
		t.Fatal(err)
	}
	want := []short{}
	for v := int64(2); v <= 6; v++ {
		want = append(want, short{thread.ChangeMove, "t1", v, ""})
	}
	want = append(want, short{thread.ChangeCheckpoint, "t1", 0, "cp"}, short{thread.ChangeCheckpoint, "t1", 0, "cp"})
	got = f.expect(t, want...)
	if got[4].Head != th.Record().Head || got[4].Op != thread.OpAppend {
		t.Fatalf("last append heard as %+v; record %+v", got[4], th.Record())
	}
	if err := th.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	f.expect(t, short{thread.ChangeDelete, "t1", 0, ""})

	// A tenant's DB hears its own threads only, under their ids; the
	// default tenant's DB does not hear the tenant's.
	acme := watch(t, ctx, dbA.WithTenant("acme"))
	if _, err := dbB.WithTenant("other").Create(ctx, thread.CreateOptions{ID: "t2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := dbB.WithTenant("acme").Create(ctx, thread.CreateOptions{ID: "t2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := dbB.Create(ctx, thread.CreateOptions{ID: "t3"}); err != nil {
		t.Fatal(err)
	}
	acme.expect(t, short{thread.ChangeCreate, "t2", 1, ""})
	f.expect(t, short{thread.ChangeCreate, "t3", 1, ""})
	acme.quiet(t)
	f.quiet(t)

	// A killed connection: the client subscribes again, and the DB hears
	// a gap before the changes flow again.
	if n, err := b.Client().ClientKillByFilter(ctx, "TYPE", "pubsub").Result(); err != nil || n == 0 {
		t.Fatalf("client kill: %d, %v", n, err)
	}
	f.expect(t, short{thread.ChangeGap, "", 0, ""})
	acme.expect(t, short{thread.ChangeGap, "", 0, ""})
	if _, err := dbB.Create(ctx, thread.CreateOptions{ID: "t4"}); err != nil {
		t.Fatal(err)
	}
	f.expect(t, short{thread.ChangeCreate, "t4", 1, ""})
	acme.quiet(t)
}

func TestWatch(t *testing.T) {
	t.Run("Single", func(t *testing.T) {
		testWatch(t, testserver.Redis(t), func() *redis.Options { return nil })
	})
	t.Run("ClusterMode", func(t *testing.T) {
		testWatch(t, testserver.Redis(t)+"?prefix=cw", func() *redis.Options { return &redis.Options{Cluster: true} })
	})
}

// TestWatchEnds checks that nothing is heard once the context of Watch
// ends, or the store is closed, and that no goroutine is left behind.
func TestWatchEnds(t *testing.T) {
	url := testserver.Redis(t)
	b := open(t, url, nil)
	db := thread.New(b, nil)
	before := runtime.NumGoroutine()

	a, err := redis.Open(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	heard := make(chan []thread.Change, 16)
	if err := a.Watch(ctx, func(c []thread.Change) { heard <- c }); err != nil {
		t.Fatal(err)
	}
	closed := make(chan []thread.Change, 16)
	if err := a.Watch(t.Context(), func(c []thread.Change) { closed <- c }); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Create(t.Context(), thread.CreateOptions{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []chan []thread.Change{heard, closed} {
		select {
		case c := <-ch:
			if len(c) != 1 || c[0].Kind != thread.ChangeCreate || c[0].Thread != "x" {
				t.Fatalf("heard %+v", c)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("heard nothing")
		}
	}
	cancel()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Watch(t.Context(), func([]thread.Change) {}); err == nil {
		t.Fatal("Watch on a closed store")
	}
	// A watch on the other store, still open, hears "y": by then the
	// ended watches would have heard it too.
	ctrlCtx, ctrlCancel := context.WithCancel(t.Context())
	ctrl := make(chan []thread.Change, 16)
	if err := b.Watch(ctrlCtx, func(c []thread.Change) { ctrl <- c }); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Create(t.Context(), thread.CreateOptions{ID: "y"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctrl:
	case <-time.After(10 * time.Second):
		t.Fatal("the open watch heard nothing")
	}
	ctrlCancel()
	select {
	case c := <-heard:
		t.Fatalf("heard %+v after the context ended", c)
	case c := <-closed:
		t.Fatalf("heard %+v after the store closed", c)
	default:
	}
	if !testwait.Within(10*time.Second, func() bool { return runtime.NumGoroutine() <= before }) {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines, %d before the watches:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
	}
}

// TestWatchWithoutChannelACL checks that a user whom Redis does not let
// publish still writes: the notice is lost, not the batch.
func TestWatchWithoutChannelACL(t *testing.T) {
	url := testserver.Redis(t)
	admin := open(t, url, nil)
	ctx := t.Context()
	user := fmt.Sprintf("nopub%d", time.Now().UnixNano())
	if err := admin.Client().Do(ctx, "ACL", "SETUSER", user, "on", ">pw", "~*", "resetchannels", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Client().Do(context.Background(), "ACL", "DELUSER", user) })
	s := open(t, strings.Replace(url, "redis://", "redis://"+user+":pw@", 1), nil)
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "quiet", Messages: []message.Message{message.User("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.Append(ctx, message.User("again")); err != nil {
		t.Fatal(err)
	}
	if r, err := thread.New(admin, nil).Thread(ctx, "quiet"); err != nil || r.Version() != 2 {
		t.Fatalf("thread written without a notice: %v", err)
	}
	if err := s.Watch(ctx, func([]thread.Change) {}); err == nil {
		t.Fatal("Watch without the right to subscribe")
	}
}
