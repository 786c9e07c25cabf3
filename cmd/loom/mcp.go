package main

import (
	"context"
	"flag"
	"io"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/mcpserver"
)

// MCPCommand serves the thread tools over MCP on stdin and stdout, for an
// agent that starts loom as its MCP server. Logs go to stderr: stdout is
// the protocol's.
type MCPCommand struct {
	base
}

// Flags implements Command.
func (c *MCPCommand) Flags() *flag.FlagSet { return c.flagSet() }

// Run implements Command.
func (c *MCPCommand) Run(ctx context.Context, args []string) error {
	if _, err := c.parse(c.Flags(), args, 0, 0); err != nil {
		return err
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	log := slog.New(slog.NewTextHandler(c.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx = auth.WithTenant(ctx, c.Tenant)
	return mcpserver.Serve(ctx, db, &mcpserver.Options{Logger: log, Version: moduleVersion()}, &mcp.IOTransport{Reader: nopCloser{c.Stdin}, Writer: nopWriteCloser{c.Stdout}})
}

// The stdio transport closes its ends when the session ends; the command's
// streams belong to the caller.
type nopCloser struct{ io.Reader }

func (nopCloser) Close() error { return nil }

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
