package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/jsonfile"
	"github.com/loomthreads/loom/mcpserver"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
)

// worklogSessionsDir is the directory, in a file:// store's own, where
// serve kept the work items' session records before they lived in the
// store's threads.
const worklogSessionsDir = "worklog"

// importFileSessions carries, once, the session records that serve kept in
// DIR/worklog/sessions.json for a file://DIR store into the store's
// threads, where they live now (worklog.ImportFileSessions). Other stores
// migrate their old session tables themselves when they open.
func importFileSessions(ctx context.Context, store string, db *thread.DB, log *slog.Logger) error {
	u, err := url.Parse(store)
	if err != nil || u.Scheme != "file" {
		return nil
	}
	dir, _, err := jsonfile.ParseURL(u)
	if err != nil {
		return err
	}
	n, err := worklog.ImportFileSessions(ctx, filepath.Join(dir, worklogSessionsDir), db.WithTenant(""))
	if err != nil {
		return fmt.Errorf("carry the session records of %s into the store: %w", filepath.Join(dir, worklogSessionsDir), err)
	}
	if n > 0 {
		log.Info("carried the work items' session records into the store's threads", "sessions", n,
			"file", filepath.Join(dir, worklogSessionsDir, worklog.SessionsFile+worklog.ImportedSuffix))
	}
	return nil
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
	return func(s *mcp.Server) { mcpserver.AddWorklogToolsFrom(s, src, log) }
}
