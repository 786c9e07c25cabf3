package auth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParseAndTenant(t *testing.T) {
	k, err := Parse(strings.NewReader("# keys\nacme:key-acme-0123456789\n\nglobex : key-globex-0123456789\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		header, value, tenant string
		err                   error
	}{
		{"Authorization", "Bearer key-acme-0123456789", "acme", nil},
		{"Authorization", "bearer key-globex-0123456789", "globex", nil},
		{"X-API-Key", "key-unknown-0123456789", "", ErrBadKey},
		{"Authorization", "Basic abc", "", ErrNoKey},
		{"", "", "", ErrNoKey},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if tc.header != "" {
			r.Header.Set(tc.header, tc.value)
		}
		tenant, err := k.Tenant(r)
		if tenant != tc.tenant || !errors.Is(err, tc.err) {
			t.Errorf("%s %q: tenant %q err %v, want %q %v", tc.header, tc.value, tenant, err, tc.tenant, tc.err)
		}
	}
}

func TestParseRefusesWeakKeysAndBadTenants(t *testing.T) {
	for _, in := range []string{"acme:short", "../x:key-0123456789abcdef", "acme:key with space 0123456789"} {
		if _, err := Parse(strings.NewReader(in)); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestLoadFromEnvironment(t *testing.T) {
	k, err := Load("", "a:key-a-0123456789abcdef,b:key-b-0123456789abcdef")
	if err != nil || !k.Enabled() {
		t.Fatalf("%v %v", k, err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-API-Key", "key-b-0123456789abcdef")
	if tenant, err := k.Tenant(r); tenant != "b" || err != nil {
		t.Fatalf("%q %v", tenant, err)
	}
	var none Keys
	if none.Enabled() {
		t.Fatal("zero Keys enabled")
	}
}

func TestMiddleware(t *testing.T) {
	k, _ := Parse(strings.NewReader("acme:key-acme-0123456789"))
	h := k.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant, ok := Tenant(r.Context())
		if !ok {
			t.Error("no tenant in context")
		}
		w.Write([]byte(tenant))
	}), func(w http.ResponseWriter, r *http.Request, err error) { http.Error(w, err.Error(), 401) })
	r := httptest.NewRequest("GET", "/", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 401 {
		t.Fatalf("no key: %d", w.Code)
	}
	r.Header.Set("Authorization", "Bearer key-acme-0123456789")
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 200 || w.Body.String() != "acme" {
		t.Fatalf("%d %q", w.Code, w.Body.String())
	}
}
