package thread_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// TestServiceThreadsHoldOnlyAMirror checks DESIGN §2, "service-managed or
// local, never both", in package thread, where every face inherits it: a
// service thread is not created with messages, takes no plain appends, and
// is not loaded with messages under a new id; the messages it holds come
// from commits that say they mirror the service's conversation
// (CommitOptions.Mirror), which no other kind of thread takes.
func TestServiceThreadsHoldOnlyAMirror(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	invalid := func(t *testing.T, what string, err error) {
		t.Helper()
		if !errors.Is(err, thread.ErrInvalid) {
			t.Fatalf("%s: %v, want ErrInvalid", what, err)
		}
	}
	hi := []message.Message{message.User("hi")}

	_, err := db.Create(ctx, thread.CreateOptions{ID: "both", Kind: thread.KindService, Messages: hi})
	invalid(t, "create a service thread with messages", err)
	if _, err := db.Thread(ctx, "both"); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("a refused create left a thread: %v", err)
	}
	g := db.Group()
	_, err = g.Create(ctx, thread.CreateOptions{Kind: thread.KindService, Messages: hi})
	invalid(t, "create one in a group", err)

	svc, err := db.Create(ctx, thread.CreateOptions{ID: "svc", Kind: thread.KindService,
		State: map[string]json.RawMessage{"service/conversation": json.RawMessage(`{"id":"conv_1"}`)}})
	must(t, err)
	_, err = svc.Append(ctx, hi...)
	invalid(t, "append to a service thread", err)
	_, err = svc.Commit(ctx, thread.CommitOptions{Messages: hi, IfVersion: svc.Version()})
	invalid(t, "commit to a service thread", err)
	g = db.Group()
	_, err = g.Commit(ctx, svc, thread.CommitOptions{Messages: hi})
	invalid(t, "commit to a service thread in a group", err)
	if n, _ := svc.Len(ctx); n != 0 || svc.Version() != 1 {
		t.Fatalf("refused appends left %d messages at version %d", n, svc.Version())
	}

	// The mirror: what the service was sent and answered.
	_, err = svc.Commit(ctx, thread.CommitOptions{Messages: hi, Mirror: true})
	must(t, err)
	g = db.Group()
	_, err = g.Commit(ctx, svc, thread.CommitOptions{Messages: []message.Message{message.Assistant("hello")}, Mirror: true})
	must(t, err)
	must(t, g.Apply(ctx))
	if n, _ := svc.Len(ctx); n != 2 {
		t.Fatalf("the mirror holds %d messages, want 2", n)
	}
	// A fork of a service thread shares its mirror, as rollback does.
	if _, err := svc.Fork(ctx, thread.ForkOptions{}); err != nil {
		t.Fatalf("fork of a service thread: %v", err)
	}

	// An undetermined thread becomes service-managed with a mirror commit
	// only; a mirror commit on a thread of another kind is a mistake.
	und, err := db.Create(ctx, thread.CreateOptions{})
	must(t, err)
	_, err = und.Commit(ctx, thread.CommitOptions{Messages: hi, Kind: thread.KindService})
	invalid(t, "determine as service with plain messages", err)
	_, err = und.Commit(ctx, thread.CommitOptions{Messages: hi, Mirror: true})
	invalid(t, "a mirror commit on an undetermined thread", err)
	_, err = und.Commit(ctx, thread.CommitOptions{Messages: hi, Kind: thread.KindService, Mirror: true})
	must(t, err)
	local, err := db.Create(ctx, thread.CreateOptions{Kind: thread.KindLocal})
	must(t, err)
	_, err = local.Commit(ctx, thread.CommitOptions{Messages: hi, Mirror: true})
	invalid(t, "a mirror commit on a local thread", err)

	// Load: a service thread's document that holds messages loads only
	// as a restore (LoadOptions.Restore), under its own id: the document's
	// id is the client's to write, so it proves nothing.
	for _, history := range []bool{false, true} {
		var doc bytes.Buffer
		must(t, svc.Save(ctx, &doc, thread.SaveOptions{History: history}))
		_, err = db.Load(ctx, bytes.NewReader(doc.Bytes()), thread.LoadOptions{ID: "svc-copy"})
		invalid(t, "load a service thread with messages under a new id", err)
		_, err = db.Load(ctx, bytes.NewReader(doc.Bytes()), thread.LoadOptions{ID: "svc-copy", Restore: true})
		invalid(t, "restore a service thread with messages under a new id", err)
		other := thread.New(thread.NewMemoryStore(), nil)
		_, err = other.Load(ctx, bytes.NewReader(doc.Bytes()), thread.LoadOptions{})
		invalid(t, "load a service thread with messages, not as a restore", err)
		if _, err := other.Load(ctx, bytes.NewReader(doc.Bytes()), thread.LoadOptions{Restore: true}); err != nil {
			t.Fatalf("history %v: restore of a service thread under its own id: %v", history, err)
		}
	}
	// A hand-made document: a local thread's messages, said to be of a
	// service thread, under the id its maker wants.
	var forged bytes.Buffer
	must(t, local.Save(ctx, &forged, thread.SaveOptions{}))
	_, err = local.Append(ctx, hi...)
	must(t, err)
	forged.Reset()
	must(t, local.Save(ctx, &forged, thread.SaveOptions{}))
	var raw map[string]any
	must(t, json.Unmarshal(forged.Bytes(), &raw))
	raw["thread"].(map[string]any)["kind"] = string(thread.KindService)
	raw["thread"].(map[string]any)["id"] = "wanted"
	data, err := json.Marshal(raw)
	must(t, err)
	_, err = db.Load(ctx, bytes.NewReader(data), thread.LoadOptions{})
	invalid(t, "load a forged service thread with messages", err)
	if _, err := db.Thread(ctx, "wanted"); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("a refused load left a thread: %v", err)
	}
	empty, err := db.Create(ctx, thread.CreateOptions{Kind: thread.KindService})
	must(t, err)
	var doc bytes.Buffer
	must(t, empty.Save(ctx, &doc, thread.SaveOptions{}))
	if _, err := db.Load(ctx, bytes.NewReader(doc.Bytes()), thread.LoadOptions{ID: "empty-copy"}); err != nil {
		t.Fatalf("load an empty service thread under a new id: %v", err)
	}
}
