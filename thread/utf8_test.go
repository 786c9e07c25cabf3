package thread_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// bad is a string that is not UTF-8.
const bad = "ok \xff\xfe"

// TestInvalidUTF8Refused checks that every string a thread keeps — each
// string of a message, titles, labels, checkpoint names, state keys and
// values, commit metadata — is refused with ErrInvalid when it is not
// UTF-8 (encoding/json would write it as U+FFFD: not what was given), and
// that nothing is written.
func TestInvalidUTF8Refused(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "t", Kind: thread.KindLocal})
	must(t, err)
	_, err = th.Append(ctx, message.User("hi"))
	must(t, err)
	with := func(f func(*message.Message)) message.Message {
		m := message.User("x")
		f(&m)
		return m
	}
	messages := map[string]message.Message{
		"text":                message.User(bad),
		"author name":         with(func(m *message.Message) { m.AuthorName = bad }),
		"function name":       message.ToolCall("call_1", bad, "{}"),
		"function call id":    message.ToolCall(bad, "f", "{}"),
		"function arguments":  message.ToolCall("call_1", "f", `{"a":"`+bad+`"}`),
		"function result":     message.ToolResult("call_1", bad),
		"function result id":  message.ToolResult(bad, "r"),
		"reasoning":           message.New(message.RoleAssistant, message.Reasoning{Text: bad}),
		"reasoning protected": message.New(message.RoleAssistant, message.Reasoning{Protected: bad}),
		"error":               message.New(message.RoleAssistant, message.Error{Message: bad}),
		"error code":          message.New(message.RoleAssistant, message.Error{Code: bad, Message: "m"}),
		"data media type":     message.New(message.RoleUser, message.Data{MediaType: bad, URI: "https://x"}),
		"data uri":            message.New(message.RoleUser, message.Data{URI: bad}),
		"data name":           message.New(message.RoleUser, message.Data{URI: "https://x", Name: bad}),
		"unknown content":     message.New(message.RoleUser, message.Unknown{Raw: []byte(`{"type":"x","v":"` + bad + `"}`)}),
		"unknown lone escape": message.New(message.RoleUser, message.Unknown{Raw: []byte(`{"type":"x","v":"\udc00"}`)}),
		"metadata value":      with(func(m *message.Message) { m.Metadata = map[string]any{"k": bad} }),
		"metadata key":        with(func(m *message.Message) { m.Metadata = map[string]any{bad: "v"} }),
		"metadata nested":     with(func(m *message.Message) { m.Metadata = map[string]any{"k": []any{map[string]any{"k": bad}}} }),
		"id (not an id)":      with(func(m *message.Message) { m.ID = bad }),
		"role (not a role)":   with(func(m *message.Message) { m.Role = message.Role(bad) }),
	}
	invalid := func(t *testing.T, what string, err error) {
		t.Helper()
		if !errors.Is(err, thread.ErrInvalid) {
			t.Fatalf("%s: %v, want ErrInvalid", what, err)
		}
	}
	for name, m := range messages {
		t.Run("message "+name, func(t *testing.T) {
			_, err := th.Append(ctx, m)
			invalid(t, "append", err)
			_, err = db.Create(ctx, thread.CreateOptions{Messages: []message.Message{m}})
			invalid(t, "create", err)
			invalid(t, "check commit", db.CheckCommit(thread.CommitOptions{Messages: []message.Message{m}}))
		})
	}
	others := map[string]func() error{
		"title":        func() error { _, err := db.Create(ctx, thread.CreateOptions{Title: bad}); return err },
		"update title": func() error { s := bad; return th.Update(ctx, thread.UpdateOptions{Title: &s}) },
		"label": func() error {
			_, err := db.Create(ctx, thread.CreateOptions{Labels: map[string]string{"k": bad}})
			return err
		},
		"update label":    func() error { return th.Update(ctx, thread.UpdateOptions{Labels: map[string]string{"k": bad}}) },
		"fork title":      func() error { _, err := th.Fork(ctx, thread.ForkOptions{Title: bad}); return err },
		"checkpoint name": func() error { _, err := th.Checkpoint(ctx, bad); return err },
		"state key": func() error {
			_, err := th.SetState(ctx, map[string]json.RawMessage{bad: json.RawMessage(`1`)})
			return err
		},
		"state value": func() error {
			_, err := th.SetState(ctx, map[string]json.RawMessage{"k": json.RawMessage(`"` + bad + `"`)})
			return err
		},
		"state lone escape": func() error {
			_, err := th.SetState(ctx, map[string]json.RawMessage{"k": json.RawMessage(`"\ud800"`)})
			return err
		},
		"commit metadata key": func() error {
			_, err := th.Commit(ctx, thread.CommitOptions{Messages: []message.Message{message.User("x")}, Metadata: map[string]string{bad: "v"}})
			return err
		},
		"commit metadata value": func() error {
			_, err := th.Commit(ctx, thread.CommitOptions{Messages: []message.Message{message.User("x")}, Metadata: map[string]string{"k": bad}})
			return err
		},
		"document": func() error {
			doc := `{"format":"loom.thread/v1","thread":{"id":"d","kind":"local"},"messages":[{"id":"m","role":"user","contents":[{"type":"text","text":"` + bad + `"}]}]}`
			_, err := db.Load(ctx, strings.NewReader(doc), thread.LoadOptions{})
			return err
		},
		"document lone escape": func() error {
			doc := `{"format":"loom.thread/v1","thread":{"id":"d","kind":"local","title":"\udc00"},"messages":[]}`
			_, err := db.Load(ctx, strings.NewReader(doc), thread.LoadOptions{})
			return err
		},
	}
	for name, f := range others {
		t.Run(name, func(t *testing.T) { invalid(t, name, f()) })
	}
	must(t, th.Refresh(ctx))
	if th.Version() != 2 || th.Title() != "" {
		t.Fatalf("refused writes moved the thread to version %d, title %q", th.Version(), th.Title())
	}
	n := 0
	for _, err := range db.Threads(ctx, thread.ListOptions{}) {
		must(t, err)
		n++
	}
	if n != 1 {
		t.Fatalf("%d threads after refused creates and loads, want 1", n)
	}
}
