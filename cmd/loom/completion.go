package main

import (
	"context"

	"github.com/spf13/pflag"
)

// CompletionCommand prints the shell completion script cobra makes for the
// command tree. The scripts ask loom itself (loom __complete …) what may
// follow, so they know every command and flag of the loom that runs.
type CompletionCommand struct {
	base
}

// Flags implements Command.
func (c *CompletionCommand) Flags() *pflag.FlagSet { return c.flagSet() }

// Run implements Command.
func (c *CompletionCommand) Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return c.usage("missing the shell: bash, zsh, fish or powershell")
	}
	pos, err := c.positional(args, 1, 1)
	if err != nil {
		return err
	}
	root := c.cmd.Root()
	switch pos[0] {
	case "bash":
		return root.GenBashCompletionV2(c.Stdout, true)
	case "zsh":
		return root.GenZshCompletion(c.Stdout)
	case "fish":
		return root.GenFishCompletion(c.Stdout, true)
	case "powershell":
		return root.GenPowerShellCompletionWithDesc(c.Stdout)
	}
	return c.usage("unknown shell %q: bash, zsh, fish or powershell", pos[0])
}
