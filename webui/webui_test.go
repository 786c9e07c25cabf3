package webui

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestHandler(t *testing.T) {
	h := Handler()
	index := body(t, get(t, h, "GET", "/"))
	m := regexp.MustCompile(`src="(/assets/[0-9a-f]{12}/js/app\.js)"`).FindStringSubmatch(index)
	if m == nil {
		t.Fatalf("index.html has no versioned app.js: %s", index)
	}
	appJS := m[1]
	assets := strings.TrimSuffix(appJS, "js/app.js")
	tests := []struct {
		name, method, path string
		status             int
		ctype, cache       string
		contains           string
	}{
		{"index", "GET", "/", 200, "text/html; charset=utf-8", "no-cache", `<main id="main"`},
		{"head", "HEAD", "/", 200, "text/html; charset=utf-8", "no-cache", ""},
		{"fallback", "GET", "/threads/x", 200, "text/html; charset=utf-8", "no-cache", `<main id="main"`},
		{"fallback index.html", "GET", "/index.html", 200, "text/html; charset=utf-8", "no-cache", `<main id="main"`},
		{"script", "GET", appJS, 200, "text/javascript; charset=utf-8", "public, max-age=31536000, immutable", "import"},
		{"module", "GET", assets + "js/thread.js", 200, "text/javascript; charset=utf-8", "public, max-age=31536000, immutable", "export async function threadPage"},
		{"style", "GET", assets + "app.css", 200, "text/css; charset=utf-8", "public, max-age=31536000, immutable", ":root"},
		{"icon", "GET", assets + "icon.svg", 200, "image/svg+xml", "public, max-age=31536000, immutable", "<svg"},
		{"old release", "GET", "/assets/000000000000/app.css", 200, "text/css; charset=utf-8", "no-cache", ":root"},
		{"missing asset", "GET", assets + "nope.js", 404, "", "", ""},
		{"asset dir", "GET", assets + "js", 404, "", "", ""},
		{"escape", "GET", assets + "../../webui.go", 404, "", "", ""},
		{"api", "GET", "/v1/threads", 404, "application/json", "no-store", `"not_found"`},
		{"api root", "GET", "/v1", 404, "application/json", "no-store", `"not_found"`},
		{"api post", "POST", "/v1/threads/x/messages", 404, "application/json", "no-store", `"not_found"`},
		{"mcp", "GET", "/mcp", 404, "application/json", "no-store", ""},
		{"healthz", "GET", "/healthz", 404, "application/json", "no-store", ""},
		{"metrics", "GET", "/metrics", 404, "application/json", "no-store", ""},
		{"post page", "POST", "/", 405, "", "", ""},
		{"v1-like page", "GET", "/v1x", 200, "text/html; charset=utf-8", "no-cache", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := get(t, h, tt.method, tt.path)
			b := body(t, res)
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tt.status, b)
			}
			if csp := res.Header.Get("Content-Security-Policy"); csp != CSP {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q", got)
			}
			if tt.ctype != "" && res.Header.Get("Content-Type") != tt.ctype {
				t.Errorf("Content-Type %q, want %q", res.Header.Get("Content-Type"), tt.ctype)
			}
			if tt.cache != "" && res.Header.Get("Cache-Control") != tt.cache {
				t.Errorf("Cache-Control %q, want %q", res.Header.Get("Cache-Control"), tt.cache)
			}
			if !strings.Contains(b, tt.contains) {
				t.Errorf("body lacks %q", tt.contains)
			}
			if tt.method == "HEAD" && b != "" {
				t.Errorf("HEAD has a body")
			}
		})
	}
}

// TestCSP checks that the policy allows nothing from elsewhere and no
// inline script, and that the page has none.
func TestCSP(t *testing.T) {
	for _, want := range []string{"default-src 'none'", "script-src 'self';", "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
		if !strings.Contains(CSP, want) {
			t.Errorf("CSP lacks %q", want)
		}
	}
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "http:", "https:", "*"} {
		if strings.Contains(CSP, bad) {
			t.Errorf("CSP has %q", bad)
		}
	}
	index := body(t, get(t, Handler(), "GET", "/"))
	if regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`).MatchString(index) || strings.Contains(index, " on") && regexp.MustCompile(`\son[a-z]+=`).MatchString(index) || strings.Contains(index, "style=") {
		t.Errorf("index.html has inline script, handlers or styles")
	}
	if strings.Contains(index, "http://") || strings.Contains(index, "https://") {
		t.Errorf("index.html refers to another origin")
	}
}

// TestAssetsSelfContained checks that no asset loads anything from another
// origin: the scripts import only relative modules.
func TestAssetsSelfContained(t *testing.T) {
	s := load()
	h := http.HandlerFunc(s.serve)
	imp := regexp.MustCompile(`(?m)^\s*import\s.*from\s+'([^']+)'`)
	mods, err := fs.Glob(s.files, "js/*.js")
	if err != nil || len(mods) == 0 {
		t.Fatalf("modules %v: %v", mods, err)
	}
	for _, name := range mods {
		res := get(t, h, "GET", assetPrefix+s.version+"/"+name)
		b := body(t, res)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", name, res.StatusCode)
		}
		for _, m := range imp.FindAllStringSubmatch(b, -1) {
			if !strings.HasPrefix(m[1], "./") {
				t.Errorf("%s imports %q", name, m[1])
			}
		}
		if strings.Contains(b, "innerHTML") || strings.Contains(b, "eval(") {
			t.Errorf("%s uses innerHTML or eval", name)
		}
	}
}
