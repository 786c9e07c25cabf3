package ids

import (
	"strings"
	"testing"
)

func TestNewIsValidUniqueAndOrdered(t *testing.T) {
	seen := make(map[string]bool)
	prev := ""
	for range 10000 {
		id := New("m_")
		if !Valid(id) {
			t.Fatalf("New made invalid id %q", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
		// The time part (prefix + 10 chars) never goes backwards.
		if prev != "" && id[:12] < prev[:12] {
			t.Fatalf("id %q sorts before earlier %q", id, prev)
		}
		prev = id
	}
}

func TestValid(t *testing.T) {
	good := []string{"a", "th_01", "A.b-c_d", strings.Repeat("x", MaxLen)}
	bad := []string{"", ".", "..", "../../etc", "a/b", `a\b`, "-x", ".hidden", "a b", "{tag}", "é", "a\x00", strings.Repeat("x", MaxLen+1), "a:b"}
	for _, s := range good {
		if !Valid(s) {
			t.Errorf("Valid(%q) = false, want true", s)
		}
	}
	for _, s := range bad {
		if Valid(s) {
			t.Errorf("Valid(%q) = true, want false", s)
		}
	}
}

func FuzzValid(f *testing.F) {
	f.Add("../x")
	f.Fuzz(func(t *testing.T, s string) {
		if !Valid(s) {
			return
		}
		if strings.ContainsAny(s, "/\\{}: \x00") || s == "." || s == ".." {
			t.Fatalf("Valid accepted hostile %q", s)
		}
	})
}
