package webui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// CSP is the Content-Security-Policy of every response: the page's own
// scripts, styles and API only; images also from data: and blob: URLs (the
// images inside messages); no frames, no plugins, nothing from elsewhere.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// assetPrefix is where the assets are served: /assets/<version>/…, the
// version being a hash of all of them, so that they can be cached for good
// and a new release is fetched afresh.
const assetPrefix = "/assets/"

// site is the embedded app, read once.
type site struct {
	files   fs.FS
	version string
	index   []byte // index.html with the asset version filled in
}

func load() *site {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err)
	}
	h := sha256.New()
	err = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, p)
		h.Write([]byte(p))
		h.Write([]byte{0})
		h.Write(b)
		return err
	})
	if err != nil {
		panic(err)
	}
	s := &site{files: files, version: hex.EncodeToString(h.Sum(nil))[:12]}
	index, err := fs.ReadFile(files, "index.html")
	if err != nil {
		panic(err)
	}
	// Every module is preloaded at once: otherwise the browser finds the
	// imports of each only once it has it, a round trip per level.
	var preload bytes.Buffer
	mods, err := fs.Glob(files, "js/*.js")
	if err != nil {
		panic(err)
	}
	for _, m := range mods {
		fmt.Fprintf(&preload, "<link rel=\"modulepreload\" href=\"{{ASSETS}}/%s\">\n", m)
	}
	// Each page's styles are a file of css/, after app.css's common ones.
	sheets, err := fs.Glob(files, "css/*.css")
	if err != nil {
		panic(err)
	}
	for _, c := range sheets {
		fmt.Fprintf(&preload, "<link rel=\"stylesheet\" href=\"{{ASSETS}}/%s\">\n", c)
	}
	index = bytes.Replace(index, []byte("{{PRELOAD}}\n"), preload.Bytes(), 1)
	s.index = bytes.ReplaceAll(index, []byte("{{ASSETS}}"), []byte(assetPrefix+s.version))
	return s
}

// Handler returns the handler of the web page: index.html for "/" and for
// every other path that is neither an asset nor the API's, the assets under
// /assets/, and 404 for /v1/…, /mcp, /healthz and /metrics. It answers only
// GET and HEAD.
func Handler() http.Handler {
	s := load()
	return http.HandlerFunc(s.serve)
}

// apiPath reports whether p belongs to the server rather than to the page.
func apiPath(p string) bool {
	for _, prefix := range []string{"/v1", "/mcp", "/healthz", "/metrics"} {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			return true
		}
	}
	return false
}

func (s *site) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	p := r.URL.Path
	if apiPath(p) {
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":{"code":"not_found","message":"no such route"}}` + "\n"))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if rest, ok := strings.CutPrefix(p, assetPrefix); ok {
		s.asset(w, r, rest)
		return
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, "index.html", zeroTime, bytes.NewReader(s.index))
}

// asset serves rest, "<version>/<file>", from the embedded files.
func (s *site) asset(w http.ResponseWriter, r *http.Request, rest string) {
	version, name, ok := strings.Cut(rest, "/")
	name = path.Clean("/" + name)[1:]
	if !ok || name == "" || name == "index.html" {
		http.NotFound(w, r)
		return
	}
	b, err := fs.ReadFile(s.files, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	ct := mime.TypeByExtension(path.Ext(name))
	switch path.Ext(name) { // not left to the system's MIME tables
	case ".js":
		ct = "text/javascript; charset=utf-8"
	case ".css":
		ct = "text/css; charset=utf-8"
	case ".svg":
		ct = "image/svg+xml"
	case ".json", ".webmanifest":
		ct = "application/json"
	}
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	if version == s.version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		// A page of an older release asks for its assets: these are the
		// current ones, which it may not match, so they are not kept.
		h.Set("Cache-Control", "no-cache")
	}
	http.ServeContent(w, r, name, zeroTime, bytes.NewReader(b))
}

// zeroTime leaves Last-Modified out: embedded files have no time.
var zeroTime = time.Time{}
