package worklog

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzNormalize checks that Normalize never panics, that what it returns
// is a valid item (an id it can keep, a text that is neither blank nor
// prefixed nor itself an item, a status), and that normalizing the item's
// own JSON gives it back.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{
		`"Fix the bug"`,
		`{"id":"t-05a7ecb6","text":"Phase 2","status":"open","created_at":"2026-02-09T18:12:01.097Z"}`,
		`"{\"id\":\"t-abc\",\"text\":\"x\",\"status\":\"open\"}"`,
		`"{\"id\":\"t-abc\",\"note\":\"x\",\"status\":\"resolved\",\"resolved_at\":\"2026-01-01T00:00:00Z\"}"`,
		`{"item":"legacy","context":"c"}`,
		`"{oops"`,
		`"t-abcd: prefixed"`,
		`{"id":"t-1","text":"{\"id\":\"t-12345678\",\"text\":\"inner\",\"status\":\"open\"}","status":"resolved"}`,
		`{"text":"t-abcd: {\"text\":\"t-1234: x\"}"}`,
		`null`, `[]`, `{"text":""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		n := 0
		norm := normalizer{opts: normOpt, newID: func() string { n++; return fmt.Sprintf("t-%08x", n) }}
		r, err := norm.value(raw, 0)
		if json.Valid(raw) {
			// The fast path for values decoded already agrees.
			m := 0
			fast := normalizer{opts: normOpt, newID: func() string { m++; return fmt.Sprintf("t-%08x", m) }, trusted: true}
			fr, ferr := fast.value(raw, 0)
			if (err == nil) != (ferr == nil) || err == nil && (!fr.it.equal(r.it) || fr.keep != r.keep || !fr.orig.equal(r.orig)) {
				t.Fatalf("trusted %+v, %v; untrusted %+v, %v", fr, ferr, r, err)
			}
		}
		if err != nil {
			return
		}
		it := r.it
		switch {
		case !validID(it.ID):
			t.Fatalf("id %q", it.ID)
		case strings.TrimSpace(it.Text) == "":
			t.Fatalf("blank text from %q", raw)
		case it.Status != StatusOpen && it.Status != StatusResolved:
			t.Fatalf("status %q", it.Status)
		case !utf8.ValidString(it.Text):
			t.Fatalf("text %q is not UTF-8", it.Text)
		}
		if rest, _ := stripPrefix(it.Text); rest != it.Text {
			t.Fatalf("text %q keeps an old id prefix", it.Text)
		}
		if fields, ok := itemJSON(it.Text); ok {
			if in, err := norm.object(fields, 0); err == nil {
				t.Fatalf("text %q is the item %+v", it.Text, in.it)
			}
		}
		b, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		again, err := norm.value(b, 0)
		if err != nil {
			t.Fatalf("the item's own JSON %s: %v", b, err)
		}
		if !again.it.equal(it) || !again.keep || !again.orig.equal(it) {
			t.Fatalf("normalizing %s again gives %+v, want %+v", b, again.it, it)
		}
	})
}
