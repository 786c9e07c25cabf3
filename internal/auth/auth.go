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
// key and with a key that is not known.
var (
	ErrNoKey  = errors.New("no API key")
	ErrBadKey = errors.New("unknown API key")
)

// Keys maps API keys to tenants. The zero Keys has no keys: Enabled is
// false, and callers then serve loopback only, with every request in the
// tenant "".
type Keys struct {
	// by SHA-256 of the key, so that lookups compare fixed-size digests in
	// constant time and a memory dump holds no key.
	tenants map[[32]byte]string
}

// Enabled reports whether any key is configured.
func (k *Keys) Enabled() bool { return k != nil && len(k.tenants) > 0 }

// Add binds key to tenant. Keys are at least 16 bytes; tenants follow the
// id rules (or are "" for the default tenant).
func (k *Keys) Add(key, tenant string) error {
	if len(key) < 16 || strings.ContainsAny(key, " \t\r\n") {
		return fmt.Errorf("API key for tenant %q: at least 16 bytes without spaces", tenant)
	}
	if tenant != "" && !ids.Valid(tenant) {
		return fmt.Errorf("tenant %q: letters, digits, '_', '-' and '.'", tenant)
	}
	if k.tenants == nil {
		k.tenants = make(map[[32]byte]string)
	}
	k.tenants[sha256.Sum256([]byte(key))] = tenant
	return nil
}

// Parse reads keys, one "tenant:key" (or a bare key, for tenant "") per
// line; blank lines and lines starting with '#' are skipped.
func Parse(r io.Reader) (*Keys, error) {
	k := new(Keys)
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		tenant, key, found := strings.Cut(line, ":")
		if !found {
			tenant, key = "", line
		}
		if err := k.Add(strings.TrimSpace(key), strings.TrimSpace(tenant)); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
	}
	return k, sc.Err()
}

// Load reads keys from the file at path (see Parse) and from list, the
// value of an environment variable such as $LOOM_API_KEYS, which holds the
// same lines separated by commas or newlines. Both may be empty. The caller
// reads the environment, so that a command's injected environment is the
// one that counts.
func Load(path, list string) (*Keys, error) {
	k := new(Keys)
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if k, err = Parse(f); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if list != "" {
		fromEnv, err := Parse(strings.NewReader(strings.ReplaceAll(list, ",", "\n")))
		if err != nil {
			return nil, fmt.Errorf("keys from the environment: %w", err)
		}
		for h, t := range fromEnv.tenants {
			if k.tenants == nil {
				k.tenants = make(map[[32]byte]string)
			}
			k.tenants[h] = t
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
	for h, t := range k.tenants {
		if subtle.ConstantTimeCompare(h[:], sum[:]) == 1 {
			found, tenant = 1, t
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
