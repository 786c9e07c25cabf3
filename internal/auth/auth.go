// Package auth binds API keys to tenants for loom's server faces (the HTTP
// API and the MCP endpoint share it): a request carries a key, the key names
// a tenant, and everything the request does is scoped to that tenant.
package auth

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/loomthreads/loom/internal/ids"
)

// ErrNoKey and ErrBadKey are returned by Keys.Tenant for a request without a
// key and with a key that is not known. ErrInvalidKeys is returned by Add,
// Parse and Load for a binding that is not one key (16 bytes or more) to
// one named tenant, or a key bound to two tenants.
var (
	ErrNoKey       = errors.New("no API key")
	ErrBadKey      = errors.New("unknown API key")
	ErrInvalidKeys = errors.New("invalid API keys")
)

// Keys maps API keys to tenants. The zero Keys has no keys: Enabled is
// false, and callers then serve loopback only, with every request in the
// tenant "".
type Keys struct {
	// by SHA-256 of the key, so that lookups compare fixed-size digests in
	// constant time and a memory dump holds no key.
	tenants map[[32]byte]binding
}

// binding is the tenant a key names and where it was given ("line 3"),
// for an error that names both lines of a key given twice.
type binding struct {
	tenant, where string
}

// Enabled reports whether any key is configured.
func (k *Keys) Enabled() bool { return k != nil && len(k.tenants) > 0 }

// Add binds key to tenant. Keys are at least 16 bytes without spaces;
// tenants follow the id rules (internal/ids), or are "" for the default
// tenant, which only a Go caller can name (Parse refuses a line without a
// tenant: in a file it is a slip more often than a choice). A key bound
// to another tenant already is refused, as the later binding would lock
// the first tenant out. Every refusal wraps ErrInvalidKeys.
func (k *Keys) Add(key, tenant string) error { return k.add(key, tenant, "") }

func (k *Keys) add(key, tenant, where string) error {
	// No error quotes the tenant: in a line written "KEY:" or "key:tenant"
	// it is the key, and the error is printed and may be logged. The line's
	// number says where, and the error what is wrong.
	switch {
	case tenant != "" && !ids.Valid(tenant):
		return fmt.Errorf("the tenant is not an id: 1 to %d letters, digits, '_', '-' and '.', not starting with '.' or '-': %w", ids.MaxLen, ErrInvalidKeys)
	case key == "":
		return fmt.Errorf("no key after the tenant (tenant:key): %w", ErrInvalidKeys)
	case len(key) < 16 || strings.ContainsAny(key, " \t\r\n"):
		return fmt.Errorf("the key is not one: at least 16 bytes without spaces (tenant:key): %w", ErrInvalidKeys)
	}
	sum := sha256.Sum256([]byte(key))
	if b, ok := k.tenants[sum]; ok && b.tenant != tenant {
		first := "already"
		if b.where != "" {
			first = "on " + b.where
		}
		return fmt.Errorf("the key is another tenant's %s: a key names one tenant: %w", first, ErrInvalidKeys)
	}
	if k.tenants == nil {
		k.tenants = make(map[[32]byte]binding)
	}
	k.tenants[sum] = binding{tenant, where}
	return nil
}

// Parse reads keys, one "tenant:key" per line; blank lines and lines
// starting with '#' are skipped. A line without a tenant, or that is not
// one (see Add), is refused with its number, wrapping ErrInvalidKeys.
func Parse(r io.Reader) (*Keys, error) {
	k := new(Keys)
	if err := k.parse(r, "line", ""); err != nil {
		return nil, err
	}
	return k, nil
}

// parse adds the lines of r, naming each "<unit> n" (of source) in errors.
func (k *Keys) parse(r io.Reader, unit, source string) error {
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		where := fmt.Sprintf("%s %d", unit, n)
		tenant, key, found := strings.Cut(line, ":")
		if !found {
			return fmt.Errorf("%s: want tenant:key, and the line has no ':': %w", where, ErrInvalidKeys)
		}
		tenant = strings.TrimSpace(tenant)
		if tenant == "" {
			return fmt.Errorf("%s: no tenant before the key: each key names one tenant (tenant:key): %w", where, ErrInvalidKeys)
		}
		if err := k.add(strings.TrimSpace(key), tenant, where+source); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	return sc.Err()
}

// Load reads keys from the file at path (see Parse) and from list, the
// value of an environment variable such as $LOOM_API_KEYS, which holds the
// same lines separated by commas or newlines. Both may be empty; together
// they are one set of keys, so a key that one gives one tenant and the
// other another is refused. The caller reads the environment, so that a
// command's injected environment is the one that counts.
func Load(path, list string) (*Keys, error) {
	k := new(Keys)
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := k.parse(f, "line", " of "+path); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if list != "" {
		if err := k.parse(strings.NewReader(strings.ReplaceAll(list, ",", "\n")), "entry", " of the environment"); err != nil {
			return nil, fmt.Errorf("keys from the environment: %w", err)
		}
	}
	return k, nil
}

// Tenant returns the tenant of the request's key, taken from
// "Authorization: Bearer KEY" or "X-API-Key: KEY".
func (k *Keys) Tenant(r *http.Request) (string, error) {
	key := r.Header.Get("X-API-Key")
	if h := r.Header.Get("Authorization"); key == "" && len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		key = strings.TrimSpace(h[7:])
	}
	if key == "" {
		return "", ErrNoKey
	}
	sum := sha256.Sum256([]byte(key))
	found, tenant := 0, ""
	for h, b := range k.tenants {
		if subtle.ConstantTimeCompare(h[:], sum[:]) == 1 {
			found, tenant = 1, b.tenant
		}
	}
	if found == 0 {
		return "", ErrBadKey
	}
	return tenant, nil
}

type tenantKey struct{}

// WithTenant returns ctx carrying tenant.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// Tenant returns the tenant ctx carries and whether it carries one.
func Tenant(ctx context.Context) (string, bool) {
	t, ok := ctx.Value(tenantKey{}).(string)
	return t, ok
}

// Middleware authenticates each request when keys are enabled, answering
// 401 through deny otherwise, and puts the tenant in the request's context
// ("" without keys).
func (k *Keys) Middleware(next http.Handler, deny func(w http.ResponseWriter, r *http.Request, err error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := ""
		if k.Enabled() {
			t, err := k.Tenant(r)
			if err != nil {
				deny(w, r, err)
				return
			}
			tenant = t
		}
		next.ServeHTTP(w, r.WithContext(WithTenant(r.Context(), tenant)))
	})
}
