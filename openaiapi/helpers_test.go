package openaiapi_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/loomthreads/loom/httpapi"
	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/openaiapi"
	"github.com/loomthreads/loom/thread"

	_ "github.com/loomthreads/loom/sqlite"
)

// Keys of the tests' two tenants.
const (
	keyA = "key-for-tenant-a-0123456789"
	keyB = "key-for-tenant-b-0123456789"
)

// env is a loom server as loom serve mounts it — loom's API at /v1, the
// OpenAI-compatible one at /openai/v1 behind the same middleware — on
// httptest, with openai-go clients for tenants a and b.
type env struct {
	db      *thread.DB // the store, unscoped
	url     string     // the server's base URL
	a, b    openai.Client
	tenantA *thread.DB
}

// newEnv serves db (a fresh memory store when nil) with keys for tenants
// a and b.
func newEnv(tb testing.TB, db *thread.DB) *env {
	tb.Helper()
	return newEnvWith(tb, httpapi.Options{DB: db})
}

// newEnvWith is newEnv with loom's API options (DB, MaxBodyBytes…); Keys
// and Logger are the test's.
func newEnvWith(tb testing.TB, opts httpapi.Options) *env {
	tb.Helper()
	db := opts.DB
	if db == nil {
		db = thread.New(thread.NewMemoryStore(), nil)
	}
	keys := new(auth.Keys)
	if err := keys.Add(keyA, "a"); err != nil {
		tb.Fatal(err)
	}
	if err := keys.Add(keyB, "b"); err != nil {
		tb.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	opts.DB, opts.Keys, opts.Logger = db, keys, log
	api := httpapi.New(opts)
	mux := http.NewServeMux()
	mux.Handle("/", api)
	mux.Handle(openaiapi.Prefix+"/", openaiapi.Errors(api.Protect(openaiapi.New(openaiapi.Options{DB: db, Logger: log}))))
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	return &env{db: db, url: srv.URL, a: client(srv.URL, keyA), b: client(srv.URL, keyB), tenantA: db.WithTenant("a")}
}

// client is an openai-go client of loom at base with key, which does not
// retry: a test sees the first answer.
func client(base, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+openaiapi.Prefix+"/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// sqliteDB opens a SQLite store in a temporary directory.
func sqliteDB(tb testing.TB) *thread.DB {
	tb.Helper()
	db, err := thread.Open(tb.Context(), "sqlite://"+tb.TempDir()+"/loom.db", nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// onStores runs f on a memory store and on SQLite.
func onStores(t *testing.T, f func(t *testing.T, e *env)) {
	t.Run("memory", func(t *testing.T) { f(t, newEnv(t, nil)) })
	t.Run("sqlite", func(t *testing.T) { f(t, newEnv(t, sqliteDB(t))) })
}

// threadOf is the thread a response id names: the id is "resp_", 26 id
// characters, "_" and the thread's id.
func threadOf(responseID string) string { return responseID[len("resp_")+27:] }
