package thread_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// nested returns a JSON array nested depth deep.
func nested(depth int) json.RawMessage {
	return json.RawMessage(strings.Repeat("[", depth) + strings.Repeat("]", depth))
}

// nestedAny returns the Go value of nested(depth).
func nestedAny(depth int) any {
	var v any = []any{}
	for range depth - 1 {
		v = []any{v}
	}
	return v
}

// TestDeepJSONRefused checks that every JSON value a thread holds is
// bounded in depth (Limits.JSONDepth) at every entry, with ErrTooDeep,
// which wraps ErrInvalid, and that nothing is written; a value at the
// limit is accepted.
func TestDeepJSONRefused(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	limit := db.Limits().JSONDepth
	if limit != 128 {
		t.Fatalf("default JSONDepth %d, want 128", limit)
	}
	th, err := db.Create(ctx, thread.CreateOptions{})
	must(t, err)
	withMeta := func(depth int) message.Message {
		m := message.User("hi")
		// The metadata object is one level: its values get the rest.
		m.Metadata = map[string]any{"k": nestedAny(depth - 1)}
		return m
	}
	unknown := func(depth int) message.Message {
		return message.New(message.RoleAssistant, message.Unknown{Raw: []byte(`{"type":"tree","v":` + string(nested(depth-1)) + `}`)})
	}
	for name, write := range map[string]func(depth int) error{
		"create state": func(d int) error {
			_, err := db.Create(ctx, thread.CreateOptions{State: map[string]json.RawMessage{"k": nested(d)}})
			return err
		},
		"set state": func(d int) error {
			_, err := th.SetState(ctx, map[string]json.RawMessage{"k": nested(d)})
			return err
		},
		"message metadata": func(d int) error {
			_, err := th.Append(ctx, withMeta(d))
			return err
		},
		"unknown content": func(d int) error {
			_, err := th.Append(ctx, unknown(d))
			return err
		},
		"check commit": func(d int) error {
			return db.CheckCommit(thread.CommitOptions{Messages: []message.Message{withMeta(d)}, State: map[string]json.RawMessage{"k": nested(d)}})
		},
		"fork state": func(d int) error {
			_, err := th.Fork(ctx, thread.ForkOptions{State: map[string]json.RawMessage{"k": nested(d)}})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			v := th.Version()
			if err := write(limit); err != nil {
				t.Fatalf("at the limit of %d: %v", limit, err)
			}
			must(t, th.Refresh(ctx))
			v = th.Version()
			err := write(limit + 1)
			if !errors.Is(err, thread.ErrTooDeep) || !errors.Is(err, thread.ErrInvalid) {
				t.Fatalf("one level over the limit: %v, want ErrTooDeep and ErrInvalid", err)
			}
			must(t, th.Refresh(ctx))
			if th.Version() != v {
				t.Fatalf("a refused write moved the thread from version %d to %d", v, th.Version())
			}
		})
	}
	t.Run("load", func(t *testing.T) {
		for _, doc := range []string{
			`{"format":"loom.thread/v1","thread":{"id":"deep","kind":"local"},"messages":[],"state":{"k":` + string(nested(limit+1)) + `}}`,
			`{"format":"loom.thread/v1","thread":{"id":"deep","kind":"local"},"messages":[{"id":"m1","role":"user","contents":[],"metadata":{"k":` + string(nested(limit)) + `}}]}`,
		} {
			if _, err := db.Load(ctx, strings.NewReader(doc), thread.LoadOptions{}); !errors.Is(err, thread.ErrTooDeep) {
				t.Fatalf("load of a document with a value over the limit: %v, want ErrTooDeep", err)
			}
		}
	})
}

// TestSaveGrowsLinearlyWithDepth saves a thread whose state and message
// hold values nested thousands deep (with the limit raised to let them
// in): the document stays within a small multiple of what is stored, where
// indenting every level made it grow with the square of the depth.
func TestSaveGrowsLinearlyWithDepth(t *testing.T) {
	ctx := t.Context()
	const depth = 900
	db := thread.New(thread.NewMemoryStore(), &thread.Options{Limits: thread.Limits{JSONDepth: depth + 1}})
	th, err := db.Create(ctx, thread.CreateOptions{State: map[string]json.RawMessage{"k": nested(depth)}})
	must(t, err)
	m := message.User("deep")
	m.Metadata = map[string]any{"k": nestedAny(depth)}
	_, err = th.Append(ctx, m)
	must(t, err)
	stored := 2 * 2 * depth // the state and the metadata, two brackets a level
	for _, history := range []bool{false, true} {
		var doc bytes.Buffer
		must(t, th.Save(ctx, &doc, thread.SaveOptions{History: history}))
		if n := doc.Len(); n > 4*stored+4096 {
			t.Fatalf("history %v: a document of %d bytes for %d bytes of values", history, n, stored)
		}
		loaded, err := thread.New(thread.NewMemoryStore(), &thread.Options{Limits: thread.Limits{JSONDepth: depth + 1}}).
			Load(ctx, bytes.NewReader(doc.Bytes()), thread.LoadOptions{})
		must(t, err)
		var again bytes.Buffer
		must(t, loaded.Save(ctx, &again, thread.SaveOptions{History: history}))
		if !bytes.Equal(doc.Bytes(), again.Bytes()) {
			t.Fatalf("history %v: save → load → save differs", history)
		}
	}
}

// TestMetadataDepthCheckedInPlace checks that the depth of a message's
// metadata is checked on the values as they are, without encoding them:
// a commit with metadata allocates no more to check than one without.
func TestMetadataDepthCheckedInPlace(t *testing.T) {
	db := thread.New(thread.NewMemoryStore(), nil)
	plain := message.User("hi")
	meta := plain
	meta.Metadata = map[string]any{"run": "r1", "tags": []any{"a", "b"}, "usage": map[string]any{"in": json.Number("12"), "ok": true}}
	allocs := func(m message.Message) float64 {
		opts := thread.CommitOptions{Messages: []message.Message{m}}
		return testing.AllocsPerRun(100, func() {
			if err := db.CheckCommit(opts); err != nil {
				t.Fatal(err)
			}
		})
	}
	if a, b := allocs(plain), allocs(meta); b > a {
		t.Errorf("checking a message with metadata: %v allocations, without: %v", b, a)
	}
}
