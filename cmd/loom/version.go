package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/pflag"
)

// VersionCommand prints loom's version.
type VersionCommand struct {
	base

	// buildInfo reads the build information; nil means debug.ReadBuildInfo.
	buildInfo func() (*debug.BuildInfo, bool)
}

// Flags implements Command.
func (c *VersionCommand) Flags() *pflag.FlagSet { return c.flagSet() }

// versionJSON is the --json output of version.
type versionJSON struct {
	Module     string `json:"module"`
	Version    string `json:"version"`
	Go         string `json:"go"`
	Platform   string `json:"platform"`
	Revision   string `json:"revision,omitzero"`
	CommitTime string `json:"commit_time,omitzero"`
	Modified   bool   `json:"modified,omitzero"`
}

// Run implements Command.
func (c *VersionCommand) Run(ctx context.Context, args []string) error {
	if _, err := c.positional(args, 0, 0); err != nil {
		return err
	}
	read := c.buildInfo
	if read == nil {
		read = debug.ReadBuildInfo
	}
	v := versionJSON{Module: "github.com/loomthreads/loom", Version: "(unknown)", Go: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := read(); ok {
		if bi.Main.Path != "" {
			v.Module = bi.Main.Path
		}
		if bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			v.Go = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.time":
				v.CommitTime = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if c.JSON {
		return writeJSON(c.Stdout, v)
	}
	fmt.Fprintf(c.Stdout, "loom %s (%s)\n%s %s\n", v.Version, v.Module, v.Go, v.Platform)
	if v.Revision != "" {
		dirty := ""
		if v.Modified {
			dirty = ", modified"
		}
		fmt.Fprintf(c.Stdout, "commit %s (%s%s)\n", v.Revision, v.CommitTime, dirty)
	}
	return nil
}

// moduleVersion is loom's version as the servers report it.
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
