package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/jsonfile"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
	"github.com/loomthreads/loom/worklog/worklogmcp"
)

// worklogSessionsDir is the directory, in a file:// store's own, where
// serve keeps the work items' session records by default.
const worklogSessionsDir = "worklog"

// sessionsURL returns where serve keeps the session records of the work
// items when --sessions says nothing, from the store's URL: the store's own
// database for sqlite://, postgres:// and redis:// (their packages keep the
// sessions beside the threads: a sessions table, or keys under the store's
// prefix), DIR/worklog for file://DIR, and memory for memory:// and every
// other store, where volatile reports that the records will not survive a
// restart.
func sessionsURL(store string) (sessions string, volatile bool, err error) {
	u, err := url.Parse(store)
	if err != nil {
		return "", false, fmt.Errorf("store url: %v: %w", err, thread.ErrInvalid)
	}
	switch u.Scheme {
	case "sqlite", "postgres", "postgresql", "redis", "rediss":
		return store, false, nil
	case "memory":
		return "memory://", false, nil
	case "file":
		dir, _, err := jsonfile.ParseURL(u)
		if err != nil {
			return "", false, err
		}
		p := filepath.ToSlash(filepath.Join(dir, worklogSessionsDir))
		// file:rel/dir for a relative directory, file:///abs/dir for an
		// absolute one (file://rel would make rel a host).
		return (&url.URL{Scheme: "file", Path: p, OmitHost: !filepath.IsAbs(p)}).String(), false, nil
	}
	return "memory://", true, nil
}

// openSessions opens the session store of serve's work items: rawURL
// (--sessions) when given, else the one sessionsURL derives from store,
// with a warning on log when it keeps the records in memory only.
// closeSessions closes it.
func openSessions(ctx context.Context, rawURL, store string, log *slog.Logger) (st worklog.SessionStore, closeSessions func() error, err error) {
	if rawURL == "" {
		var volatile bool
		if rawURL, volatile, err = sessionsURL(store); err != nil {
			return nil, nil, err
		}
		if volatile {
			log.Warn("the work items' session records are kept in memory: they will not survive a restart, nor be shared with other servers; give --sessions sqlite://PATH, postgres://… or redis://… to keep them",
				"store", redact(store))
		}
	}
	st, err = worklog.OpenSessions(ctx, rawURL)
	if err != nil {
		return nil, nil, fmt.Errorf("open sessions %s: %w", redact(rawURL), err)
	}
	closeSessions = func() error { return nil }
	if c, ok := st.(io.Closer); ok {
		closeSessions = c.Close
	}
	return st, closeSessions, nil
}

// worklogTools returns mcpserver's Options.AddTools for the work-item
// tools on wl: each call works on the Logs of the tenant its request's API
// key names (auth.Tenant), else of db's tenant, as the thread tools do.
func worklogTools(db *thread.DB, wl *worklog.Logs, log *slog.Logger) func(*mcp.Server) {
	src := func(ctx context.Context, project string) (*worklog.Log, error) {
		tenant, ok := auth.Tenant(ctx)
		if !ok {
			tenant = db.Tenant()
		}
		return wl.Log(tenant, project)
	}
	return func(s *mcp.Server) { worklogmcp.AddToolsFrom(s, src, log) }
}
