package thread

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestWriteIndentedIsIndentWithAFloor checks writeIndented against
// json.Indent: the same bytes where the JSON is no deeper than the levels
// indented, and the JSON compact below them.
func TestWriteIndentedIsIndentWithAFloor(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var build func(d int) any
	build = func(d int) any {
		switch k := r.IntN(5); {
		case k == 0 || d == 0:
			return strings.Repeat("a\"\\<é", r.IntN(3)) + "]}[{,:"
		case k == 1:
			return r.IntN(100)
		case k == 2:
			a := make([]any, r.IntN(3))
			for i := range a {
				a[i] = build(d - 1)
			}
			return a
		default:
			m := map[string]any{}
			for range r.IntN(3) {
				m[fmt.Sprint("k", r.IntN(9), "\"")] = build(d - 1)
			}
			return m
		}
	}
	for range 500 {
		src, err := json.Marshal(build(6))
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := json.Indent(&want, src, "", "  "); err != nil {
			t.Fatal(err)
		}
		want.WriteByte('\n')
		for _, levels := range []int{6, 10, 0, 2} {
			var got bytes.Buffer
			w := bufio.NewWriter(&got)
			writeIndented(w, src, levels)
			w.Flush()
			if levels >= 6 && got.String() != want.String() {
				t.Fatalf("levels %d:\n%s\nwant:\n%s", levels, got.String(), want.String())
			}
			var back, compact bytes.Buffer
			if err := json.Compact(&back, got.Bytes()); err != nil {
				t.Fatalf("levels %d: not JSON: %v\n%s", levels, err, got.String())
			}
			json.Compact(&compact, src)
			if back.String() != compact.String() {
				t.Fatalf("levels %d: changed the JSON:\n%s\nfrom\n%s", levels, back.String(), compact.String())
			}
			if levels == 0 && got.String() != compact.String()+"\n" {
				t.Fatalf("levels 0 is not compact: %s", got.String())
			}
		}
	}
}
