package main

import (
	"context"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/pflag"

	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/mcpserver"
)

// MCPCommand serves the thread tools over MCP on stdin and stdout, for an
// agent that starts loom as its MCP server; with --worklog it serves only
// the work-item tools (mcpserver.NewWorklog) on the items of --dir instead.
// Logs go to stderr: stdout is the protocol's.
type MCPCommand struct {
	base

	// Worklog serves the work-item tools instead of the thread tools
	// (--worklog), on the items of --dir and the sessions of --sessions.
	Worklog bool
	worklogDir
}

// Flags implements Command.
func (c *MCPCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.BoolVar(&c.Worklog, "worklog", false, "serve only the work-item tools, on the items of --dir")
	c.worklogDir.add(fs)
	return fs
}

// Run implements Command.
func (c *MCPCommand) Run(ctx context.Context, args []string) error {
	if _, err := c.positional(args, 0, 0); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(c.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if c.Worklog {
		return c.serveWorklog(ctx, log)
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	tp, stopTracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	ctx = auth.WithTenant(ctx, c.Tenant)
	return mcpserver.Serve(ctx, db.WithTracerProvider(tp), &mcpserver.Options{Logger: log, Version: moduleVersion(), TracerProvider: tp}, c.transport())
}

// serveWorklog serves the work-item tools on the items of c.Dir until ctx
// ends or the client closes its end.
func (c *MCPCommand) serveWorklog(ctx context.Context, log *slog.Logger) error {
	wl, err := c.openLog(ctx, c.Store, c.Tenant)
	defer c.closeLog()
	if err != nil {
		return err
	}
	s := mcpserver.NewWorklog(wl, log, moduleVersion())
	ss, err := s.Connect(ctx, c.transport(), nil)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case <-ctx.Done():
		ss.Close()
		<-done
		return nil
	case err := <-done:
		return err
	}
}

// transport is the command's stdin and stdout as an MCP transport, whose
// messages are checked before they are decoded (mcpserver.IOTransport:
// text that is not UTF-8 is refused, not stored as U+FFFD). It closes
// neither: the command's streams belong to the caller.
func (c *MCPCommand) transport() mcp.Transport {
	return mcpserver.IOTransport(c.Stdin, c.Stdout)
}
