package jsonstr

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestAppend checks that Append escapes strings as encoding/json does.
func TestAppend(t *testing.T) {
	cases := []string{"", "plain", `q"b\`, "<a&b>", "\u2028\u2029", "\x00\x1f\x7f", "\xff\xfe", "é€😀", "a\tb\nc\r"}
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "\"", "\\", "<", "\x01", "\xe2\x80\xa8", "\xe2\x80", "é", "\xff", "😀"}
	for range 2000 {
		s := ""
		for range r.IntN(12) {
			s += alphabet[r.IntN(len(alphabet))]
		}
		cases = append(cases, s)
	}
	for _, s := range cases {
		want, _ := json.Marshal(s)
		if got := Append(nil, s); string(got) != string(want) {
			t.Errorf("Append(%q) = %s, want %s", s, got, want)
		}
	}
}
