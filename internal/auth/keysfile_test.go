package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseRefusesMalformedLines: every line of a keys file binds one key to
// one named tenant, and a line that does not is refused with its number, so
// that `loom serve` does not start with a key that maps to the default
// tenant by accident or a key that another line takes away.
func TestParseRefusesMalformedLines(t *testing.T) {
	const good = "acme:key-acme-0123456789\n"
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty tenant", good + ":key-empty-0123456789\n", "line 2: "},
		{"blank tenant", good + "  : key-blank-0123456789\n", "line 2: "},
		{"no colon", "# keys\n" + good + "key-bare-0123456789\n", "line 3: "},
		{"empty key", good + "globex:\n", "line 2: "},
		{"short key", good + "globex:short\n", "line 2: "},
		{"key with a space", good + "globex:key with space 0123456789\n", "line 2: "},
		{"tenant not an id", good + "../x:key-0123456789abcdef\n", "line 2: "},
		{"tenant with a slash", good + "a/b:key-0123456789abcdef\n", "line 2: "},
		{"tenant too long", good + strings.Repeat("t", 200) + ":key-0123456789abcdef\n", "line 2: "},
		{"same key, two tenants", good + "\nglobex:key-acme-0123456789\n", "line 3: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := Parse(strings.NewReader(tc.in))
			if err == nil {
				t.Fatalf("accepted: %v", k.tenants)
			}
			if !errors.Is(err, ErrInvalidKeys) {
				t.Errorf("error %v is not ErrInvalidKeys", err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %q does not start with %q", err, tc.want)
			}
		})
	}
}

// TestParseNamesTheEarlierLineOfADuplicateKey: a key given to two tenants
// says which line had it first, and holds no key in its text.
func TestParseNamesTheEarlierLineOfADuplicateKey(t *testing.T) {
	_, err := Parse(strings.NewReader("acme:key-acme-0123456789\nglobex:key-globex-0123456789\nother:key-acme-0123456789\n"))
	if err == nil || !strings.Contains(err.Error(), "line 3: ") || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("error %v, want line 3 naming line 1", err)
	}
	if strings.Contains(err.Error(), "key-acme") {
		t.Errorf("error %q shows the key", err)
	}
}

// TestParseAcceptsTheSameBindingTwice: a line repeated (the same key for
// the same tenant) locks nobody out, so it is not an error.
func TestParseAcceptsTheSameBindingTwice(t *testing.T) {
	if _, err := Parse(strings.NewReader("acme:key-acme-0123456789\nacme:key-acme-0123456789\n")); err != nil {
		t.Fatal(err)
	}
}

// TestLoadRefusesAKeyTheFileAndTheEnvironmentGiveTwoTenants: the file and
// $LOOM_API_KEYS are one set of keys; a key bound to one tenant in each is
// refused rather than one silently winning.
func TestLoadRefusesAKeyTheFileAndTheEnvironmentGiveTwoTenants(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte("acme:key-acme-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path, "b:key-b-0123456789abcdef,globex:key-acme-0123456789")
	if err == nil || !errors.Is(err, ErrInvalidKeys) || !strings.Contains(err.Error(), "entry 2") {
		t.Fatalf("error %v, want entry 2 of the environment refused", err)
	}
	_, err = Load("", "acme:key-a-0123456789abcdef,:key-b-0123456789abcdef")
	if err == nil || !strings.Contains(err.Error(), "entry 2") {
		t.Fatalf("error %v, want entry 2 of the environment refused", err)
	}
	if _, err := Load(path, "acme:key-acme-0123456789"); err != nil {
		t.Fatalf("the same binding in both: %v", err)
	}
}

// TestAddBindsTheDefaultTenantForGoCallers: a Go caller may give the
// default tenant a key on purpose; it is still one key for one tenant.
func TestAddBindsTheDefaultTenantForGoCallers(t *testing.T) {
	var k Keys
	if err := k.Add("key-default-0123456789", ""); err != nil {
		t.Fatal(err)
	}
	if err := k.Add("key-default-0123456789", "acme"); !errors.Is(err, ErrInvalidKeys) {
		t.Fatalf("the default tenant's key given to acme: %v", err)
	}
}

// TestParseErrorsHoldNoKey: a line with its key where the tenant goes —
// "KEY:" with the tenant forgotten, "key:tenant" swapped, a key that is no
// id — is refused with its number and what is wrong, and the error (which
// `loom serve` prints, and logs may keep) holds nothing of the key.
func TestParseErrorsHoldNoKey(t *testing.T) {
	const secret = "s3cretKey0123456789abcdef"
	for _, tc := range []struct{ name, in string }{
		{"key and no tenant", "acme:key-acme-0123456789\n" + secret + ":\n"},
		{"key and tenant swapped", "acme:key-acme-0123456789\n" + secret + ":globex\n"},
		{"key that is no id, swapped", "acme:key-acme-0123456789\n" + secret + "/+=:globex\n"},
		{"a short key after a key", "acme:key-acme-0123456789\n" + secret + ":short\n"},
		{"the key given twice, once swapped", secret + ":key-acme-0123456789\nacme:key-acme-0123456789\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.in))
			if err == nil || !errors.Is(err, ErrInvalidKeys) || !strings.HasPrefix(err.Error(), "line 2: ") {
				t.Fatalf("error %v, want line 2 refused", err)
			}
			for _, part := range []string{secret, secret[:8], secret[len(secret)-8:]} {
				if strings.Contains(err.Error(), part) {
					t.Errorf("error %q holds the key", err)
					break
				}
			}
		})
	}
}
