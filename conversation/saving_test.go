package conversation

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// breakable is a store whose writes fail while broken is set, with a text
// that names internals (which a client must never be told).
type breakable struct {
	store.Store
	broken atomic.Bool
}

var errDiskOnFire = errors.New("write /var/lib/loom/secret.db: disk on fire")

func (b *breakable) Apply(ctx context.Context, batch *store.Batch) error {
	if b.broken.Load() {
		return errDiskOnFire
	}
	return b.Store.Apply(ctx, batch)
}

// savedTexts reads the conversation's thread afresh, from the store.
func savedTexts(t *testing.T, db *thread.DB, id string) []string {
	t.Helper()
	th, err := db.Thread(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := load(t.Context(), th)
	if err != nil {
		t.Fatal(err)
	}
	return texts(msgs)
}

// A message the thread cannot hold is refused before it is accepted: Send
// returns ErrInvalid, and the conversation — its thread, its agent, its
// status — is as it was; the next message is saved as any other.
func TestSendOverTheMessageLimitIsRefused(t *testing.T) {
	db := memDB(t)
	client := scripted.New(scripted.Text("one"), scripted.Text("two"))
	c, err := New(t.Context(), db, Options{Client: client, ID: "cv1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if err := c.Send(context.Background(), message.User("first"), false); err != nil {
		t.Fatal(err)
	}
	idle(t, c)
	v, msgs := c.Thread().Version(), c.Agent().Messages()

	huge := strings.Repeat("x", db.Limits().MessageBytes+100_000)
	for _, send := range []func() error{
		func() error { return c.Send(context.Background(), message.User(huge), false) },
		func() error { return c.Send(context.Background(), message.User(huge), true) },
		func() error { return c.Compact(context.Background(), huge) },
		func() error { _, err := c.Fork(context.Background(), huge); return err },
	} {
		if err := send(); !errors.Is(err, thread.ErrInvalid) {
			t.Fatalf("a message of %d bytes: %v, want ErrInvalid", len(huge), err)
		}
		if c.Thread().Version() != v || !slices.EqualFunc(c.Agent().Messages(), msgs, func(a, b message.Message) bool { return a.Text() == b.Text() }) ||
			c.Agent().Status() != (Status{Kind: Stopped, Reason: EndTurn}) {
			t.Fatalf("a refused message changed the conversation: version %d→%d, %q, %s", v, c.Thread().Version(), texts(c.Agent().Messages()), c.Agent().Status())
		}
	}
	if n := len(client.Requests()); n != 1 {
		t.Fatalf("the model was asked %d times, want once", n)
	}
	if err := c.Send(context.Background(), message.User("second"), false); err != nil {
		t.Fatal(err)
	}
	idle(t, c)
	want := []string{"user: first", "assistant: one", "user: second", "assistant: two"}
	if got := savedTexts(t, db, "cv1"); !slices.Equal(got, want) {
		t.Fatalf("saved %q, want %q", got, want)
	}
}

// A commit that fails — here the store's — is an error event and an error
// status, never a quiet end_turn, and the conversation recovers: what it
// shows is what its thread holds, and later messages are saved.
func TestFailedCommitIsAnError(t *testing.T) {
	store := &breakable{Store: thread.NewMemoryStore()}
	db := thread.New(store, nil)
	g := newGated()
	g.add(textScript("one"))
	g.add(textScript("lost ", "answer"))
	g.add(textScript("three"))
	rec := &recorder{}
	c, err := New(t.Context(), db, Options{Client: g, ID: "cv1", Notify: rec.notify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())

	// The user's message cannot be saved: Send fails, and nothing is sent.
	store.broken.Store(true)
	if err := c.Send(context.Background(), message.User("unsaved"), false); !errors.Is(err, errDiskOnFire) {
		t.Fatalf("send on a broken store: %v", err)
	}
	if st := c.Agent().Status(); st.Kind != Errored || strings.Contains(st.Err, "secret") {
		t.Fatalf("after a failed send the status is %s", st)
	}
	if !slices.Contains(rec.kinds(), "error") {
		t.Fatalf("no error notice: %v", rec.kinds())
	}
	if n := len(c.Agent().Messages()); n != 0 {
		t.Fatalf("the agent holds %q, the thread nothing", texts(c.Agent().Messages()))
	}
	store.broken.Store(false)
	if err := c.Send(context.Background(), message.User("saved"), false); err != nil {
		t.Fatal(err)
	}
	g.release(2)
	idle(t, c)

	// The answer cannot be saved: its stop is an error, and the answer,
	// which the thread does not hold, is not shown as if it were.
	if err := c.Send(context.Background(), message.User("its answer is lost"), false); err != nil {
		t.Fatal(err)
	}
	g.release(1)
	eventually(t, "the first part streams", func() bool { return c.Agent().Partial() != "" })
	store.broken.Store(true)
	n := len(rec.kinds())
	g.release(2)
	idle(t, c)
	if st := c.Agent().Status(); st.Kind != Errored {
		t.Fatalf("after a failed stop the status is %s, want error", st)
	}
	if !slices.Contains(rec.kinds()[n:], "error") {
		t.Fatalf("no error notice: %v", rec.kinds()[n:])
	}
	store.broken.Store(false)
	if err := c.Send(context.Background(), message.User("third"), false); err != nil {
		t.Fatal(err)
	}
	g.release(2)
	idle(t, c)
	want := []string{"user: saved", "assistant: one", "user: its answer is lost", "user: third", "assistant: three"}
	if got := savedTexts(t, db, "cv1"); !slices.Equal(got, want) {
		t.Fatalf("saved %q, want %q", got, want)
	}
	if got := texts(c.Agent().Messages()); !slices.Equal(got, want) {
		t.Fatalf("shows %q, the thread holds %q", got, want)
	}
	if st := c.Agent().Status(); st != (Status{Kind: Stopped, Reason: EndTurn}) {
		t.Fatalf("status %s after a saved turn", st)
	}
}
