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

func TestKey(t *testing.T) {
	for _, c := range []struct{ tenant, id, key string }{
		{"", "th_1", "th_1"},
		{"acme", "th_1", "acme/th_1"},
		{"a.b-c", "x", "a.b-c/x"},
	} {
		if got := Key(c.tenant, c.id); got != c.key {
			t.Errorf("Key(%q, %q) = %q, want %q", c.tenant, c.id, got, c.key)
		}
		if tenant, id := SplitKey(c.key); tenant != c.tenant || id != c.id {
			t.Errorf("SplitKey(%q) = %q, %q", c.key, tenant, id)
		}
		if !ValidKey(c.key) {
			t.Errorf("ValidKey(%q) = false", c.key)
		}
	}
	for _, bad := range []string{"", "/x", "x/", "a/b/c", "../x", "a/../b", "a b/x", "x/.", "a//b", strings.Repeat("x", MaxLen+1) + "/y", "a/" + strings.Repeat("x", MaxLen+1)} {
		if ValidKey(bad) {
			t.Errorf("ValidKey(%q) = true", bad)
		}
	}
}

// FuzzKey: every key ValidKey accepts has one reading — Key of its parts
// gives it back, and its parts are valid ids (the tenant "" aside) — so a
// key of one tenant never names another's, and no id can hold a key.
func FuzzKey(f *testing.F) {
	for _, s := range []string{"acme/th_1", "th_1", "/x", "a/b/c", "../x"} {
		f.Add(s, "acme", "th_1")
	}
	f.Fuzz(func(t *testing.T, s, tenant, id string) {
		if ValidKey(s) {
			tn, i := SplitKey(s)
			if Key(tn, i) != s || !Valid(i) || tn != "" && !Valid(tn) || len(s) > MaxKeyLen {
				t.Fatalf("ValidKey(%q) but it splits into %q, %q", s, tn, i)
			}
			if Valid(s) != (tn == "") {
				t.Fatalf("%q is a valid id and a tenant's key", s)
			}
		}
		if (tenant == "" || Valid(tenant)) && Valid(id) {
			k := Key(tenant, id)
			if !ValidKey(k) {
				t.Fatalf("Key(%q, %q) = %q is not ValidKey", tenant, id, k)
			}
			if tn, i := SplitKey(k); tn != tenant || i != id {
				t.Fatalf("SplitKey(Key(%q, %q)) = %q, %q", tenant, id, tn, i)
			}
		}
	})
}
