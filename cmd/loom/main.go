// Command loom manages loom threads from the shell: it lists, reads, writes,
// forks, checkpoints, rolls back, exports and imports threads in any store,
// copies threads from one store to another, and benchmarks a store.
//
// Every command takes the global flags
//
//	--store URL   the store: sqlite://PATH (the default, sqlite://./loom.db,
//	              or $LOOM_STORE when set), postgres://…, redis://…,
//	              file://DIR, memory://
//	--tenant T    the tenant whose threads to see ("" by default)
//	--json        machine output: one JSON document, or JSON lines for streams
//	-h, --help    the command's usage, flags and examples
//
// anywhere on its command line (and before the command name). The commands:
//
//	loom threads list [--label k=v]... [--kind K] [--limit N]
//	loom threads show ID [--last N] [--version V]
//	loom threads create [--id ID] [--title T] [--label k=v]... [--kind K]
//	loom threads append ID [--role R] [--if-version V] (TEXT... | --file F)
//	loom threads fork ID [--at MSG] [--version V] [--id NEW] [--title T]
//	loom threads copy ID [--id NEW] [--title T]
//	loom threads history ID [--limit N]
//	loom threads checkpoint ID (NAME | --list | --delete NAME)
//	loom threads rollback ID (NAME | --version V)
//	loom threads reset ID
//	loom threads view ID [--model M] [--budget N] [--max-messages N] [--strategy S]...
//	loom threads retention ID [--ttl D] [--keep-last N] [--keep-for D] [--clear]
//	loom threads delete ID [--yes]
//	loom gc [--ttl D] [--keep-last N] [--keep-for D] [--dry-run]
//	loom chat [--thread ID] [--provider P] [--model M]
//	loom workflows list [--limit N]
//	loom workflows show ID [--version V | --checkpoint NAME] [--last N]
//	loom workflows history ID [--limit N]
//	loom workflows checkpoint ID (NAME | --list)
//	loom workflows restore ID (NAME | --version V)
//	loom workflows fork ID (NAME | --version V) [--id NEW] [--title T]
//	loom workflows start NAME [--input JSON] [--id ID] [--title T]
//	loom workflows input ID STEP JSON
//	loom workflows resume ID
//	loom export ID [--history] [-o FILE]
//	loom import [FILE|-] [--id NEW]
//	loom copy --from URL --to URL [--thread ID]... [--all-tenants]
//	loom bench [--duration D] [--writers N]
//	loom serve [--example-workflows], loom mcp   the HTTP and MCP servers
//	loom version
//	loom completion bash|zsh|fish|powershell
//	loom help [COMMAND]
//
// Output is for people (tables, sentences) unless --json asks for one JSON
// document; the listings (threads list, history, checkpoint --list) and copy's
// progress are JSON lines instead. export writes the portable document
// (docs/portable-document.md) either way. Errors go to stderr as
// "loom: <message>"; the exit code is 0 on success, 1 on an error and 2 on a
// usage error (a delete without --yes where no one can be asked is one).
//
// On a terminal, loom copy and loom import of a large document draw a
// progress bar on stdout, and a store that migrates its data as it opens
// draws one on stderr; with --json, or when the output is not a terminal,
// there are no bars and the output is plain.
//
// loom serve, loom mcp and loom chat send OpenTelemetry traces by OTLP over
// HTTP when the standard environment names an endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT).
//
// A mistyped command name gets suggestions (loom thread list: Did you mean
// "threads"?). Flags are spf13/pflag's: long ones with two dashes
// (--json, --store URL), shorthands with one (-o FILE, -h); they may follow
// positional arguments, and "--" ends them. The one-dash spellings of long
// flags that loom took when it parsed with package flag (-json, -store URL)
// still work in this release, with a deprecation note on stderr.
//
// Each command is a type in this package with Flags and Run(ctx, args); the
// command table (commands, in run.go) becomes a tree of spf13/cobra
// commands (cli.go), which parses the flags, dispatches, prints help and
// generates the completion scripts.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
