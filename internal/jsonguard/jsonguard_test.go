package jsonguard

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name   string
		data   string
		depth  int
		reason error
		offset int
	}{
		{name: "plain", data: `{"a":[1,"x",{"b":null}]}`, depth: 3},
		{name: "empty", data: ``},
		{name: "utf-8 text", data: `{"t":"héllo 世界 😀"}`},
		{name: "surrogate pair", data: `"\ud83d\ude00"`},
		{name: "surrogate pair upper", data: `"\uD83D\uDE00"`},
		{name: "escaped quote then bracket", data: `"\"[[[[" `, depth: 1},
		{name: "escaped backslash", data: `["\\", "["]`, depth: 1},
		{name: "brackets in strings", data: `{"a":"[[[[{{{{"}`, depth: 1},
		{name: "at the limit", data: deep(64), depth: 64},
		{name: "over the limit", data: deep(65), depth: 64, reason: ErrDepth, offset: 64},
		{name: "no limit", data: deep(10000)},
		{name: "bad byte", data: "{\"t\":\"a\xffb\"}", reason: ErrUTF8, offset: 7},
		{name: "truncated rune", data: "\"\xe4\xb8\"", reason: ErrUTF8, offset: 1},
		{name: "lone low surrogate", data: `"ab\udc00"`, reason: ErrUTF8, offset: 3},
		{name: "lone high surrogate", data: `"\ud800x"`, reason: ErrUTF8, offset: 1},
		{name: "high then non-surrogate", data: `"\ud800\u0041"`, reason: ErrUTF8, offset: 1},
		{name: "high at end", data: `"\ud800`, reason: ErrUTF8, offset: 1},
		{name: "unterminated string", data: `"abc`},
		{name: "bad escape left to the decoder", data: `"\uzzzz"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check([]byte(tt.data), tt.depth)
			if tt.reason == nil {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, tt.reason) {
				t.Fatalf("Check = %v, want %v", err, tt.reason)
			}
			if e.Offset != tt.offset {
				t.Fatalf("offset = %d, want %d (%v)", e.Offset, tt.offset, err)
			}
		})
	}
}

// FuzzCheck holds Check to what it promises: whatever it accepts and
// encoding/json decodes has no U+FFFD that the input did not spell, and
// its depth is within the limit.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`"a"`, `{"a":[1,2]}`, `"\ud83d\ude00"`, `"\udc00"`, "\"\xff\"", `[[[]]]`, `"\ufffd"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 4
		err := Check(data, limit)
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		if err != nil {
			if errors.Is(err, ErrDepth) && depthOf(v) <= limit {
				t.Fatalf("Check refused depth %d with limit %d: %v", depthOf(v), limit, err)
			}
			return
		}
		if d := depthOf(v); d > limit {
			t.Fatalf("Check accepted depth %d over %d", d, limit)
		}
		spelled := bytes.Contains(data, []byte("\uFFFD")) || bytes.Contains(bytes.ToLower(data), []byte(`\ufffd`))
		if !spelled && strings.Contains(dump(v), "\uFFFD") {
			t.Fatalf("Check accepted %q, which decodes to U+FFFD", data)
		}
	})
}

func depthOf(v any) int {
	switch v := v.(type) {
	case []any:
		d := 0
		for _, e := range v {
			d = max(d, depthOf(e))
		}
		return d + 1
	case map[string]any:
		d := 0
		for _, e := range v {
			d = max(d, depthOf(e))
		}
		return d + 1
	}
	return 0
}

func dump(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			b.WriteString(v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				b.WriteString(k)
				walk(e)
			}
		}
	}
	walk(v)
	return b.String()
}

func BenchmarkCheck(b *testing.B) {
	msg := []byte(`{"role":"user","contents":[{"type":"text","text":"` + strings.Repeat("hello, loom ", 80) + `"}]}`)
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if err := Check(msg, 64); err != nil {
			b.Fatal(err)
		}
	}
}
