package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
)

// The servers' commands are not wired yet. Each is replaced by a type of
// the same name in its own file (serve.go, mcp.go), and this file deleted;
// the command table already lists them.

// errNotWired is what a command that is not wired yet returns.
var errNotWired = errors.New("not yet wired")

// ServeCommand will serve the HTTP API, MCP and the web UI.
type ServeCommand struct {
	base
}

// Flags implements Command.
func (c *ServeCommand) Flags() *flag.FlagSet { return c.flagSet() }

// Run implements Command.
func (c *ServeCommand) Run(ctx context.Context, args []string) error {
	if _, err := c.parse(c.Flags(), args, 0, 0); err != nil {
		return err
	}
	return fmt.Errorf("serve: %w", errNotWired)
}
