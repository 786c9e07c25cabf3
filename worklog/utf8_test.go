package worklog

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestInvalidUTF8IsRefused: text that is not UTF-8 — raw bytes, or a \u
// escape of a lone surrogate, at any level of the JSON an item may be
// written in — is ErrInvalid wherever a caller gives a work item, rather
// than stored with U+FFFD in its place; and nothing is written.
func TestInvalidUTF8IsRefused(t *testing.T) {
	clk := newClock()
	l := newLog(t, clk)
	ctx := t.Context()
	started(t, l, "s1")
	for _, tc := range []struct {
		name string
		raw  string
	}{
		{"a plain string of bytes", "\"caf\xe9\""},
		{"a plain string with a lone surrogate", `"caf\udc00"`},
		{"a plain string with a high surrogate alone", `"caf\ud800 x"`},
		{"an item's text", "{\"text\":\"caf\xe9\",\"status\":\"open\"}"},
		{"an item's text, escaped", `{"text":"caf\udfff","status":"open"}`},
		{"an item's note", `{"text":"ok","status":"resolved","resolution_note":"\udc00"}`},
		{"an item's source session", "{\"text\":\"ok\",\"source_session\":\"s\xff\"}"},
		{"a JSON string of an item", `"{\"id\":\"t-0000abcd\",\"text\":\"caf\\udc00\",\"status\":\"open\"}"`},
		{"an item whose text is an item", `{"text":"{\"text\":\"caf\\ud800\"}"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := l.SessionClose(ctx, CloseOptions{SessionID: "s1", OpenThreads: []json.RawMessage{json.RawMessage(tc.raw)}})
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("SessionClose: %v, want ErrInvalid", err)
			}
			if _, err := Normalize(json.RawMessage(tc.raw), NormalizeOptions{}); !errors.Is(err, ErrInvalid) {
				t.Errorf("Normalize: %v, want ErrInvalid", err)
			}
		})
	}
	for _, text := range []string{"caf\xe9", `{"text":"caf\udc00","status":"open"}`} {
		if _, err := l.Create(ctx, CreateOptions{Text: text}); !errors.Is(err, ErrInvalid) {
			t.Errorf("Create(%q): %v, want ErrInvalid", text, err)
		}
	}
	if _, err := l.Create(ctx, CreateOptions{Text: "ok", Session: "s\xff"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Create with a session id not UTF-8: %v, want ErrInvalid", err)
	}
	if _, err := l.Resolve(ctx, ResolveOptions{TextMatch: "x", Note: "caf\xe9"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Resolve with a note not UTF-8: %v, want ErrInvalid", err)
	}
	if items := listAll(t, l); len(items) != 0 {
		t.Errorf("items were stored: %+v", items)
	}
	// U+FFFD itself, sent as such, is text like any other.
	it := mustCreate(t, l, "caf\uFFFD")
	if it.Text != "caf\uFFFD" {
		t.Errorf("text %q", it.Text)
	}
}
