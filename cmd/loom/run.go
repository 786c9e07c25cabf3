package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/loomthreads/loom/examples/workflow/trip"
	"github.com/loomthreads/loom/thread"

	// The stores, so that --store takes any of their URLs.
	_ "github.com/loomthreads/loom/jsonfile"
	_ "github.com/loomthreads/loom/postgres"
	_ "github.com/loomthreads/loom/redis"
	_ "github.com/loomthreads/loom/sqlite"
)

// defaultStore is the store of every command when neither --store nor
// LOOM_STORE says otherwise.
const defaultStore = "sqlite://./loom.db"

// Command is one subcommand of loom. Its fields are its flags.
type Command interface {
	// Flags returns the command's pflag set, bound to the command's fields
	// (the global flags included). Its flags become the cobra command's;
	// a backquoted word of a flag's usage (`URL`) names its value in help.
	Flags() *pflag.FlagSet
	// Run runs with the positional arguments: cobra has parsed the flags
	// into the fields ("--" ends them, and they may follow arguments).
	Run(ctx context.Context, args []string) error
}

// spec describes a command for the command table: how it is called, what it
// does, and how to make one.
type spec struct {
	// Name is the command's name after "loom": "threads list", "export".
	Name string
	// Synopsis is what follows the name in the usage line.
	Synopsis string
	// Summary is one line for listings; Help more paragraphs for --help.
	Summary, Help string
	// Examples are whole command lines.
	Examples []string
	// Words are the values completion offers for positional arguments
	// (the cobra command's ValidArgs).
	Words []string
	// New makes the command on the shared base.
	New func(b base) Command
}

// groups are the names that hold subcommands.
var groups = map[string]string{
	"threads":   "read and change the threads of a store",
	"workflows": "read workflows, checkpoint, restore and fork them whole, sub-threads and all, and start and resume them by name",
	"items":     "list, create and resolve the work items an agent carries across sessions (--dir, default .gitmem)",
	"session":   "start and close the working sessions that carry the work items of --dir",
}

// commands is the command table: newRoot (cli.go) makes the cobra command
// tree of it, which dispatches, prints help and completes.
// A new command is one more entry here and a type in its own file.
var commands = []spec{
	{Name: "threads list", Synopsis: "[--label k=v]... [--kind K] [--limit N]",
		Summary: "list threads (id, title, kind, version, updated, labels)",
		Help:    "Lists the tenant's threads in id order (oldest first), filtered by labels and kind.\nWith --json, one JSON object per line.",
		Examples: []string{
			"loom threads list",
			"loom threads list --label app=support --kind local --limit 20",
			"loom threads list --json | jq -r .id",
		},
		New: func(b base) Command { return &ThreadsListCommand{base: b} }},
	{Name: "threads show", Synopsis: "ID [--last N] [--version V]",
		Summary: "show a thread's record, state and messages",
		Help:    "Shows the thread's record, its state and its messages, oldest first:\nall of them, the last N, or as they were at version V (time travel).",
		Examples: []string{
			"loom threads show th_01jq…",
			"loom threads show th_01jq… --last 10",
			"loom threads show th_01jq… --version 3 --json",
		},
		New: func(b base) Command { return &ThreadsShowCommand{base: b} }},
	{Name: "threads create", Synopsis: "[--id ID] [--title T] [--label k=v]... [--kind K]",
		Summary: "create an empty thread",
		Examples: []string{
			`loom threads create --title "support chat" --label app=support`,
			"loom threads create --id th_demo --kind local --json",
		},
		New: func(b base) Command { return &ThreadsCreateCommand{base: b} }},
	{Name: "threads append", Synopsis: "ID [--role R] [--if-version V] (TEXT... | --file F)",
		Summary: "append a message, or messages from a file",
		Help: "Appends one message whose text is the arguments joined by spaces (role user\n" +
			"by default), or the messages of a JSON array in the wire format\n" +
			"(docs/wire-format.md) from --file (- reads stdin), in one commit.\n" +
			"--if-version appends only if the thread is at that version.",
		Examples: []string{
			"loom threads append th_01jq… My order is late.",
			"loom threads append th_01jq… --role assistant Let me check.",
			"loom threads append th_01jq… --if-version 4 --file turn.json",
			`echo '[{"role":"user","contents":[{"type":"text","text":"hi"}]}]' | loom threads append th_01jq… --file -`,
		},
		New: func(b base) Command { return &ThreadsAppendCommand{base: b} }},
	{Name: "threads fork", Synopsis: "ID [--at MSG] [--version V] [--id NEW] [--title T] [--label k=v]...",
		Summary: "fork a thread at its head, a message or a version (copies nothing)",
		Examples: []string{
			"loom threads fork th_01jq…",
			`loom threads fork th_01jq… --at msg_01jq… --title "what if"`,
			"loom threads fork th_01jq… --version 3 --id th_alt",
		},
		New: func(b base) Command { return &ThreadsForkCommand{base: b} }},
	{Name: "threads copy", Synopsis: "ID [--id NEW] [--title T] [--label k=v]...",
		Summary: "copy a thread as an independent thread (not marked as a fork)",
		Examples: []string{
			"loom threads copy th_01jq… --title template",
		},
		New: func(b base) Command { return &ThreadsCopyCommand{base: b} }},
	{Name: "threads history", Synopsis: "ID [--limit N]",
		Summary: "list a thread's head moves, newest first",
		Examples: []string{
			"loom threads history th_01jq… --limit 10",
		},
		New: func(b base) Command { return &ThreadsHistoryCommand{base: b} }},
	{Name: "threads diff", Synopsis: "ID [--version N] [--to ID2] [--to-version M] [--limit N]",
		Summary: "show what differs between two versions of a thread, or a thread and its fork",
		Help: "Compares the thread at --version (default: now) with --to (default: the same thread)\n" +
			"at --to-version (default: now), as a unified diff: the messages both begin with are\n" +
			"counted, then each message only the first has (-), only the second has (+), or both\n" +
			"have (space; a message changed under its id shows - and +), then the state keys that\n" +
			"differ. Forks and versions share commits, so it reads only what differs.\n" +
			"With --json, the answer of GET /v1/threads/{id}/diff.",
		Examples: []string{
			"loom threads diff th_01jq… --to th_01jr…",
			"loom threads diff th_01jq… --version 3",
			"loom threads diff th_01jq… --to th_01jr… --to-version 2 --json",
		},
		New: func(b base) Command { return &ThreadsDiffCommand{base: b} }},
	{Name: "threads checkpoint", Synopsis: "ID (NAME | --list | --delete NAME)",
		Summary: "name the head so that rollback can return to it; list or delete checkpoints",
		Examples: []string{
			"loom threads checkpoint th_01jq… before-refund",
			"loom threads checkpoint th_01jq… --list",
			"loom threads checkpoint th_01jq… --delete before-refund",
		},
		New: func(b base) Command { return &ThreadsCheckpointCommand{base: b} }},
	{Name: "threads rollback", Synopsis: "ID (NAME | --version V)",
		Summary: "move the head back to a checkpoint or to where it was at a version",
		Help:    "Rolls back to a checkpoint, or restores the head of an earlier version.\nNothing is rewritten: the abandoned head stays in the history.",
		Examples: []string{
			"loom threads rollback th_01jq… before-refund",
			"loom threads rollback th_01jq… --version 3",
		},
		New: func(b base) Command { return &ThreadsRollbackCommand{base: b} }},
	{Name: "threads reset", Synopsis: "ID",
		Summary: "empty a thread (history keeps the old head)",
		Examples: []string{
			"loom threads reset th_01jq…",
		},
		New: func(b base) Command { return &ThreadsResetCommand{base: b} }},
	{Name: "threads retention", Synopsis: "ID [--ttl D] [--keep-last N] [--keep-for D] [--clear]",
		Summary: "show a thread's retention and expiry, or set its own",
		Help: "Without flags, shows how long the thread is kept (its own loom.ttl, loom.keep_last and\n" +
			"loom.keep_for labels, over the defaults this command is given) and when it expires.\n" +
			"--ttl, --keep-last and --keep-for set the thread's own (the others it has stay; 0 keeps\n" +
			"for ever, whatever the server's default); --clear drops them. loom gc applies them.",
		Examples: []string{
			"loom threads retention th_01jq…",
			"loom threads retention th_01jq… --ttl 720h --keep-last 100",
			"loom threads retention th_01jq… --clear",
		},
		New: func(b base) Command { return &ThreadsRetentionCommand{base: b} }},
	{Name: "threads view", Synopsis: "ID [--model M] [--budget N] [--max-messages N] [--strategy S]...",
		Summary: "show what a model would be sent: the thread within a token budget",
		Help: "Strategies, applied in order (then the oldest is dropped until it fits):\n" +
			"  drop_oldest              drop whole messages, oldest first\n" +
			"  sliding_window:N         keep the last N user turns\n" +
			"  elide_tool_results:N     stub the results of older tool messages, keeping the last N",
		Examples: []string{
			"loom threads view th_01jq… --model gpt-4o --budget 8000",
			"loom threads view th_01jq… --budget 4000 --strategy elide_tool_results:2 --strategy sliding_window:5",
		},
		New: func(b base) Command { return &ThreadsViewCommand{base: b} }},
	{Name: "threads delete", Synopsis: "ID [--yes]",
		Summary: "delete a thread, its history and checkpoints",
		Help:    "Asks for confirmation on a terminal; anywhere else it needs --yes.",
		Examples: []string{
			"loom threads delete th_01jq…",
			"loom threads delete th_01jq… --yes",
		},
		New: func(b base) Command { return &ThreadsDeleteCommand{base: b} }},
	{Name: "gc", Synopsis: "[--ttl D] [--keep-last N] [--keep-for D] [--dry-run]",
		Summary: "apply retention: delete expired threads, drop old versions, free what nothing reaches",
		Help: "Applies each thread's retention — its own loom.ttl, loom.keep_last and loom.keep_for\n" +
			"labels, each missing one taken from the flags — to every tenant's threads (or --tenant's):\n" +
			"a thread idle past its TTL is deleted, versions older than its history limits are\n" +
			"dropped (checkpoints and the current version stay), and every commit no thread,\n" +
			"version or checkpoint reaches any more is freed. Each thread is one atomic change,\n" +
			"checked against its version: safe while others write, and after a crash at any point.\n" +
			"loom serve runs the same in the background (--gc-every).",
		Examples: []string{
			"loom gc --ttl 720h --keep-last 100 --dry-run",
			"loom gc --keep-for 168h --json",
		},
		New: func(b base) Command { return &GCCommand{base: b} }},
	{Name: "search", Synopsis: "WORD... [--limit N] [--before CURSOR]",
		Summary: "find messages that hold every word, newest first",
		Help: "Searches the text of the tenant's messages (text, reasoning, tool calls and results):\n" +
			"whole words, in any case and order, in every version a thread still keeps. SQLite and\n" +
			"PostgreSQL answer from an index kept with the commits; the other stores are scanned.\n" +
			"VERSION is empty when the thread's head holds the message; else it is the newest\n" +
			"version that held it (read it with loom threads show ID --version V).\n" +
			"With --json, one hit per line with its cursor, for --before, and its version if any.",
		Examples: []string{
			"loom search refund policy",
			"loom search paris weather --limit 5 --json",
		},
		New: func(b base) Command { return &SearchCommand{base: b} }},
	{Name: "chat", Synopsis: "[--thread ID] [--provider P] [--model M] [--title T]",
		Summary: "talk to a model in a live conversation kept in the store: stream, abort, fork, compact",
		Help: "A live conversation (package conversation) on a thread of the store: the answer streams;\n" +
			"Ctrl-C aborts the turn (what the answer had said stays on screen, marked [aborted]; the\n" +
			"conversation keeps only its completed blocks), and twice on an idle prompt quits; /compact\n" +
			"(\"compacting…\", then the summary), /fork, /continue, /history (each version's op,\n" +
			"checkpoints and content), /checkpoint, /rollback, /threads, /switch and /help work on it.\n" +
			"--thread resumes a conversation (or starts one with that id) where it was left, after a\n" +
			"crash too: a turn that a crash or a kill cut short is asked of the model again (with\n" +
			"--stop-interrupted it waits, stopped/interrupted, for /continue). The scripted provider\n" +
			"(the default) needs no key; openai, responses and anthropic read their keys from the\n" +
			"environment as loom serve does. When stdin or stdout is not a terminal (a pipe, a file,\n" +
			"/dev/null) it reads a message or command a line and writes the conversation as it\n" +
			"streams, for scripts: the end of stdin ends it, and Ctrl-C aborts the turn and ends it.",
		Examples: []string{
			"loom chat",
			"loom chat --thread th_01jq…",
			"OPENAI_API_KEY=… loom chat --provider openai --model gpt-4o-mini",
			`printf 'hello\n/history\n' | loom chat --thread demo`,
			"loom chat --thread demo <questions.txt >transcript.txt",
		},
		New: func(b base) Command { return &ChatCommand{base: b} }},
	{Name: "workflows list", Synopsis: "[--limit N]",
		Summary: "list workflows (id, title, status, round, version, updated, sub-threads)",
		Help:    "Lists the tenant's workflows (threads of kind workflow, package workflow) in id order.\nWith --json, one JSON object per line.",
		Examples: []string{
			"loom workflows list",
			"loom workflows list --json | jq -r 'select(.status == \"waiting\") | .id'",
		},
		New: func(b base) Command { return &WorkflowsListCommand{base: b} }},
	{Name: "workflows show", Synopsis: "ID [--version V | --checkpoint NAME] [--last N]",
		Summary: "show a workflow's execution state: its steps, current and next, sub-threads",
		Help: "Shows every step attempt (interrupted ones too), the round in progress, the steps\n" +
			"waiting for input and the sub-threads, now or at a version or checkpoint (time\n" +
			"travel); --last N adds each sub-thread's newest N messages as the workflow\n" +
			"recorded it there. With --json, the whole state as one document.",
		Examples: []string{
			"loom workflows show wf_01jq…",
			"loom workflows show wf_01jq… --checkpoint researched --last 5",
			"loom workflows show wf_01jq… --version 7 --json",
		},
		New: func(b base) Command { return &WorkflowsShowCommand{base: b} }},
	{Name: "workflows history", Synopsis: "ID [--limit N]",
		Summary: "list a workflow's versions: each step's start and end, checkpoints, restores",
		Examples: []string{
			"loom workflows history wf_01jq… --limit 10",
		},
		New: func(b base) Command { return &WorkflowsHistoryCommand{base: b} }},
	{Name: "workflows checkpoint", Synopsis: "ID (NAME | --list)",
		Summary: "checkpoint a whole workflow (its state and every sub-thread), or list its checkpoints",
		Examples: []string{
			"loom workflows checkpoint wf_01jq… researched",
			"loom workflows checkpoint wf_01jq… --list",
		},
		New: func(b base) Command { return &WorkflowsCheckpointCommand{base: b} }},
	{Name: "workflows restore", Synopsis: "ID (NAME | --version V)",
		Summary: "move a workflow and every sub-thread back to a checkpoint or version, at once",
		Help:    "A new version: nothing is lost, and a later restore can go forward again. Refused\nwhile a program runs the workflow.",
		Examples: []string{
			"loom workflows restore wf_01jq… researched",
			"loom workflows restore wf_01jq… --version 7",
		},
		New: func(b base) Command { return &WorkflowsRestoreCommand{base: b} }},
	{Name: "workflows fork", Synopsis: "ID (NAME | --version V) [--id NEW] [--title T]",
		Summary: "fork a whole workflow at a checkpoint or version: every sub-thread forked, nothing copied",
		Examples: []string{
			"loom workflows fork wf_01jq… researched --id wf_what_if",
		},
		New: func(b base) Command { return &WorkflowsForkCommand{base: b} }},
	{Name: "workflows start", Synopsis: "NAME [--input JSON] [--id ID] [--title T]",
		Summary: "start a workflow by name (the examples': trip, trip-approval) and run it here",
		Help: "Makes a workflow of the one registered under NAME and runs it in this process until it\n" +
			"is done, waits for input or fails, printing each step's events as they come (JSON\n" +
			"lines with --json). Killed or interrupted, it goes on with loom workflows resume. The\n" +
			"names are the examples' (examples/workflow/trip); loom serve --example-workflows serves\n" +
			"them over HTTP and MCP, and a program serves its own with httpapi.Options.Workflows.",
		Examples: []string{
			"loom workflows start trip --input '{\"city\": \"Porto\"}' --id porto",
			"loom workflows start trip-approval --id weekend",
		},
		Words: []string{trip.Name, trip.ApprovalName},
		New:   func(b base) Command { return &WorkflowsStartCommand{base: b} }},
	{Name: "workflows input", Synopsis: "ID STEP JSON",
		Summary: "give a waiting step the input it asks for (loom workflows show says what)",
		Examples: []string{
			"loom workflows input weekend approve '{\"approved\": true}'",
		},
		New: func(b base) Command { return &WorkflowsInputCommand{base: b} }},
	{Name: "workflows edit", Synopsis: "ID --by NAME [--checkpoint C | --version N] [--input JSON] [--output STEP=JSON]… [--next STEPS | --end]",
		Summary: "edit a workflow's execution, recorded with who made it (LangGraph's update_state)",
		Help: "Sets the workflow's input, steps' outputs or the steps that run next, at its head or at a\n" +
			"checkpoint or version (moved back there in the same operation). A step that waits,\n" +
			"failed or has not ended ends with the output given and does not run (as_node); an ended\n" +
			"step's output is replaced. The next run goes on from the edit. Refused (busy) while a\n" +
			"runner holds the workflow.",
		Examples: []string{
			"loom workflows edit weekend --by ann --output 'approve={\"approved\": true}'",
			"loom workflows edit weekend --by ann --version 3 --next plan",
		},
		New: func(b base) Command { return &WorkflowsEditCommand{base: b} }},
	{Name: "workflows resume", Synopsis: "ID",
		Summary: "run a workflow started by name again, here, from where it stands",
		Help: "Runs the workflow on from its last committed step: after input was given, after its\n" +
			"runner was killed, after a step failed; a done one has nothing to run. Refused (busy)\n" +
			"while another runner holds it.",
		Examples: []string{
			"loom workflows resume weekend",
		},
		New: func(b base) Command { return &WorkflowsResumeCommand{base: b} }},
	{Name: "items list", Synopsis: "[--status open|resolved] [--all] [--dir DIR]",
		Summary: "list work items (id, status, created, text)",
		Help: "Lists the open work items of --dir (default .gitmem, as loom mcp --worklog uses),\n" +
			"oldest first: #N in items resolve is the Nth open one. --status resolved lists\n" +
			"the resolved ones, --all every item. --store is not used.",
		Examples: []string{
			"loom items list",
			"loom items list --all --dir ./.gitmem",
			"loom items list --json | jq -r '.threads[].id'",
		},
		New: func(b base) Command { return &ItemsListCommand{base: b} }},
	{Name: "items create", Synopsis: "[--dir DIR] TEXT...",
		Summary: "create an open work item (or find the open one with the same text)",
		Examples: []string{
			"loom items create Release notes still to write",
			"loom items create --dir ./.gitmem --json Flaky test in sqlite",
		},
		New: func(b base) Command { return &ItemsCreateCommand{base: b} }},
	{Name: "items resolve", Synopsis: "[--dir DIR] (ID | #N | --match TEXT) [--note NOTE]",
		Summary: "resolve a work item by id, by number or by text",
		Help: "Resolves the item with that id, the Nth open item (#N, as items list orders them),\n" +
			"or the one open item whose text contains --match. A match that names several\n" +
			"items lists them and exits with 1; nothing is changed then.",
		Examples: []string{
			"loom items resolve t-05a7ecb6 --note done",
			"loom items resolve '#1'",
			`loom items resolve --match "release notes" --note written`,
		},
		New: func(b base) Command { return &ItemsResolveCommand{base: b} }},
	{Name: "session start", Synopsis: "[--dir DIR] [--id SESSION]",
		Summary: "start a session: carry forward the open items of the last closed sessions",
		Help: "Merges the items the project's last closed sessions carry (at most 5, closed\n" +
			"within 14 days) into the items of --dir, and prints the open items and the\n" +
			"project state.",
		Examples: []string{
			"loom session start",
			"loom session start --id build-42 --json",
		},
		New: func(b base) Command { return &SessionStartCommand{base: b} }},
	{Name: "session close", Synopsis: "[--dir DIR] [--id SESSION] [--open TEXT]...",
		Summary: "close a session, recording the open items it leaves for the next one",
		Examples: []string{
			"loom session close --id build-42",
			`loom session close --open "Docs for --dir still to write"`,
		},
		New: func(b base) Command { return &SessionCloseCommand{base: b} }},
	{Name: "export", Synopsis: "ID [--history] [-o FILE]",
		Summary: "write a thread as a portable JSON document",
		Help:    "Writes the portable document (docs/portable-document.md) to stdout or FILE.\nWith --history it holds every commit, so time travel survives the move.",
		Examples: []string{
			"loom export th_01jq… > thread.json",
			"loom export th_01jq… --history -o thread.json",
		},
		New: func(b base) Command { return &ExportCommand{base: b} }},
	{Name: "import", Synopsis: "[FILE|-] [--id NEW]",
		Summary: "create a thread from a portable JSON document",
		Examples: []string{
			"loom import thread.json",
			"loom export th_a --store sqlite://a.db | loom import --store file://threads",
			"loom import thread.json --id th_second_copy",
		},
		New: func(b base) Command { return &ImportCommand{base: b} }},
	{Name: "copy", Synopsis: "--from URL --to URL [--thread ID]... [--all-tenants]",
		Summary: "copy threads with their whole history from one store to another",
		Help: "Copies threads, keeping every id, history entry and checkpoint. Threads the\n" +
			"destination has already are skipped, so an interrupted copy is resumed by\n" +
			"running it again. --from defaults to --store; --tenant picks the tenant copied.",
		Examples: []string{
			"loom copy --from sqlite://./loom.db --to postgres://localhost/loom",
			"loom copy --from sqlite://./loom.db --to file://backup --thread th_01jq…",
			"loom copy --from redis://localhost:6379/0 --to sqlite://all.db --all-tenants",
		},
		New: func(b base) Command { return &CopyCommand{base: b} }},
	{Name: "bench", Synopsis: "[--store URL] [--duration D] [--writers N]",
		Summary: "benchmark a store with the standard scenarios",
		Help: "Runs each scenario for --duration and prints its throughput and latency.\n" +
			"It writes only in a fresh tenant (bench-<random>, whatever --tenant says) and\n" +
			"deletes every thread it made when it ends, even when interrupted, so a\n" +
			"production store is left as it was (apart from the space a store may\n" +
			"keep after deletes). Setting up the 1,000-message thread is not timed.",
		Examples: []string{
			"loom bench --store memory://",
			"loom bench --store postgres://localhost/loom --duration 5s --writers 32",
		},
		New: func(b base) Command { return &BenchCommand{base: b} }},
	{Name: "serve", Synopsis: "[flags]",
		Summary: "serve the HTTP API (/v1), MCP (/mcp), /healthz and /metrics on one port",
		Help: "Without API keys (--keys FILE or $LOOM_API_KEYS, lines of tenant:key) it listens\n" +
			"on loopback only. SIGINT or SIGTERM stops it after the requests in flight finish\n" +
			"(at most --shutdown-timeout). Runs (POST /v1/threads/ID/runs) need --provider.\n\n" +
			"It also keeps each tenant's work items (/v1/items, /v1/sessions, and the tools\n" +
			"list_threads, create_thread, resolve_thread, session_start, session_close on /mcp,\n" +
			"each taking a project), and their session records, in the store's own threads, for\n" +
			"every store (sqlite, postgres, redis, file://DIR; memory:// keeps them until it\n" +
			"stops), each tenant's in its own namespace of thread ids. Session records that an\n" +
			"older loom kept beside the threads (a sessions table, Redis keys, DIR/worklog)\n" +
			"are carried into threads when the store is opened.\n\n" +
			"/metrics is Prometheus's text format. Traces go by OTLP over HTTP when the standard\n" +
			"environment names an endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or\n" +
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER and the\n" +
			"rest apply): a span for each request, run, model call, tool call and store\n" +
			"operation, continuing an incoming traceparent. Logs are JSON lines on stderr.\n\n" +
			"A PostgreSQL or Redis store that does not answer within its deadline (the store\n" +
			"URL's connect_timeout, default 5s, and timeout, default 10s) or is down answers\n" +
			"503 unavailable with Retry-After; a full disk 507 insufficient_storage. loom serve\n" +
			"starts on a full JSON-file store, read-only until space is freed. docs/reliability.md\n" +
			"has every deadline and status.",
		Examples: []string{
			"loom serve",
			"loom serve --store 'postgres://localhost/loom?connect_timeout=2s&timeout=5s'",
			"OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 loom serve",
			"loom serve --store postgres://localhost/loom --addr :8080 --keys ./keys",
			"loom serve --store redis://localhost:6379/0 --keys ./keys",
			"OPENAI_API_KEY=… loom serve --provider openai --model gpt-4o-mini",
		},
		New: func(b base) Command { return &ServeCommand{base: b} }},
	{Name: "mcp", Synopsis: "[flags]",
		Summary: "serve the thread tools over MCP on stdio (for agents that start loom themselves)",
		Help: "With --worklog it serves only the work-item tools instead (list_threads, create_thread,\n" +
			"resolve_thread, session_start, session_close) on the items of --dir (default .gitmem),\n" +
			"for coding agents that carry open work across sessions; --store is not used then.",
		Examples: []string{
			"loom mcp --store sqlite://./loom.db",
			"loom mcp --worklog",
			"loom mcp --worklog --dir ./.gitmem",
		},
		New: func(b base) Command { return &MCPCommand{base: b} }},
	{Name: "version", Synopsis: "",
		Summary: "print loom's version and the Go version it was built with",
		Examples: []string{
			"loom version",
			"loom version --json",
		},
		New: func(b base) Command { return &VersionCommand{base: b} }},
	{Name: "completion", Synopsis: "bash|zsh|fish|powershell",
		Summary: "print a shell completion script",
		Examples: []string{
			"source <(loom completion bash)",
			"loom completion zsh > \"${fpath[1]}/_loom\"",
			"loom completion fish > ~/.config/fish/completions/loom.fish",
			"loom completion powershell | Out-String | Invoke-Expression",
		},
		Words: []string{"bash", "zsh", "fish", "powershell"},
		New:   func(b base) Command { return &CompletionCommand{base: b} }},
	{Name: "help", Synopsis: "[COMMAND]",
		Summary: "show the help of loom or of a command",
		Examples: []string{
			"loom help threads append",
		},
		New: func(b base) Command { return &HelpCommand{base: b} }},
}

// lookup returns the command named name, or nil.
func lookup(name string) *spec {
	for i := range commands {
		if commands[i].Name == name {
			return &commands[i]
		}
	}
	return nil
}

// Env is what commands read and write besides their arguments.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Getenv reads an environment variable.
	Getenv func(string) string
	// IsTerminal reports whether a stream (Stdin, Stdout) is a terminal.
	IsTerminal func(stream any) bool
}

// run runs loom with args and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &Env{Stdin: stdin, Stdout: stdout, Stderr: stderr, Getenv: os.Getenv, IsTerminal: isTerminal}
	return e.Main(ctx, args)
}

// isTerminal reports whether s is a terminal: a file the terminal ioctl
// answers on, not merely a character device (/dev/null is one).
func isTerminal(s any) bool {
	f, ok := s.(*os.File)
	return ok && term.IsTerminal(f.Fd())
}

// Main runs the command args names and turns its error into an exit code:
// 0, 1 for an error, 2 for a usage error.
func (e *Env) Main(ctx context.Context, args []string) int {
	err := e.Run(ctx, args)
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(e.Stderr, "loom: %s\n", ue.msg)
		if ue.hint != "" {
			fmt.Fprintf(e.Stderr, "%s\n", ue.hint)
		}
		if s := lookup(ue.cmd); s != nil {
			fmt.Fprintf(e.Stderr, "usage: %s\n", usageLine(s))
			fmt.Fprintf(e.Stderr, "Run 'loom %s --help' for more.\n", s.Name)
		} else {
			fmt.Fprintf(e.Stderr, "Run 'loom help' for the commands.\n")
		}
		return 2
	default:
		fmt.Fprintf(e.Stderr, "loom: %s\n", describe(err))
		return 1
	}
}

// usageError is a command line that does not make sense; it exits with 2.
type usageError struct {
	cmd, msg string
	// hint is a line for after the message: a suggestion.
	hint string
}

func (e *usageError) Error() string { return e.msg }

// describe says what went wrong in err for a person.
func describe(err error) string {
	if errors.Is(err, context.Canceled) {
		return "interrupted"
	}
	return err.Error()
}

// kindError is an error with a message of its own that matches a sentinel
// error (thread.ErrNotFound…) without repeating its text.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// errorOf returns an error that reads as the message and matches kind.
func errorOf(kind error, format string, args ...any) error {
	return &kindError{msg: fmt.Sprintf(format, args...), kind: kind}
}

// base is what every command shares: the environment, its name and the
// global flags. Commands embed it.
type base struct {
	*Env
	name string
	// cmd is the cobra command that runs the command (nil in tests that
	// make a command by hand).
	cmd *cobra.Command

	// Store is the store URL (--store).
	Store string
	// Tenant is the tenant (--tenant).
	Tenant string
	// JSON asks for machine output (--json).
	JSON bool
}

// globalFlags are the names of the flags every command has.
var globalFlags = []string{"store", "tenant", "json"}

// flagSet returns a flag set with the global flags, for the command to add
// its own.
func (b *base) flagSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet("loom "+b.name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	def := defaultStore
	if b.Getenv != nil {
		if v := b.Getenv("LOOM_STORE"); v != "" {
			def = v
		}
	}
	fs.StringVar(&b.Store, "store", def, "the store `URL`: sqlite://PATH, postgres://…, redis://…, file://DIR or memory://; $LOOM_STORE sets the default")
	fs.StringVar(&b.Tenant, "tenant", "", "the tenant `T` whose threads to use")
	fs.BoolVar(&b.JSON, "json", false, "machine output: one JSON document, or JSON lines for streams")
	return fs
}

// positional checks that there are between min and max positional
// arguments (max < 0: no limit); cobra has parsed the flags already.
func (b *base) positional(pos []string, min, max int) ([]string, error) {
	switch {
	case len(pos) < min && min == 1 && max == 1:
		return nil, b.usage("missing the thread ID")
	case len(pos) < min:
		return nil, b.usage("missing arguments")
	case max >= 0 && len(pos) > max:
		return nil, b.usage("unexpected argument %q", pos[max])
	}
	return pos, nil
}

// usage returns a usage error of the command.
func (b *base) usage(format string, args ...any) error {
	return &usageError{cmd: b.name, msg: fmt.Sprintf(format, args...)}
}

// open opens the store with the tenant.
func (b *base) open(ctx context.Context) (*thread.DB, error) {
	return b.openURL(ctx, b.Store, b.Tenant)
}

// openURL opens the store rawURL scoped to tenant, as openDB does, and
// draws the progress of a migration on stderr if it is a terminal
// (migrationBar).
func (b *base) openURL(ctx context.Context, rawURL, tenant string) (*thread.DB, error) {
	mctx, end := b.migrationBar(ctx, rawURL)
	db, err := openDB(mctx, rawURL, tenant)
	end()
	return db, err
}

// openDB opens the store rawURL scoped to tenant.
func openDB(ctx context.Context, rawURL, tenant string) (*thread.DB, error) {
	db, err := thread.Open(ctx, rawURL, &thread.Options{Tenant: tenant})
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", redact(rawURL), err)
	}
	return db, nil
}

// openThread opens the store and the thread id in it. The caller closes db.
func (b *base) openThread(ctx context.Context, id string) (*thread.DB, *thread.Thread, error) {
	db, err := b.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	th, err := getThread(ctx, db, id, b.Store)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, th, nil
}

// getThread reads the thread id, with a clear error when it is not there.
func getThread(ctx context.Context, db *thread.DB, id, store string) (*thread.Thread, error) {
	th, err := db.Thread(ctx, id)
	if errors.Is(err, thread.ErrNotFound) {
		return nil, errorOf(thread.ErrNotFound, "thread %q not found in %s", id, storeName(store, db.Tenant()))
	}
	return th, err
}

// storeName names the store rawURL, and the tenant when not "", for
// errors: "sqlite://a.db (tenant "acme")", without a password.
func storeName(rawURL, tenant string) string {
	if tenant == "" {
		return redact(rawURL)
	}
	return fmt.Sprintf("%s (tenant %q)", redact(rawURL), tenant)
}

// redact returns a store URL without its password.
func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.User == nil {
		return rawURL // url.URL would write memory:// as memory:
	}
	if _, has := u.User.Password(); !has {
		return rawURL
	}
	return u.Redacted()
}

// usageLine is "loom NAME SYNOPSIS".
func usageLine(s *spec) string {
	return strings.TrimSpace("loom " + s.Name + " " + s.Synopsis)
}

// printHelp writes the command's help: usage, description, flags, examples.
func (b *base) printHelp(w io.Writer, fs *pflag.FlagSet) {
	s := lookup(b.name)
	if s == nil {
		return
	}
	fmt.Fprintf(w, "Usage: %s\n\n%s.\n", usageLine(s), capitalize(s.Summary))
	if s.Help != "" {
		fmt.Fprintf(w, "\n%s\n", s.Help)
	}
	var own, global []*pflag.Flag
	fs.VisitAll(func(f *pflag.Flag) {
		if slices.Contains(globalFlags, f.Name) {
			global = append(global, f)
		} else {
			own = append(own, f)
		}
	})
	if len(own) > 0 {
		fmt.Fprintf(w, "\nFlags:\n")
		printFlags(w, own)
	}
	fmt.Fprintf(w, "\nGlobal flags:\n")
	printFlags(w, global)
	if len(s.Examples) > 0 {
		fmt.Fprintf(w, "\nExamples:\n")
		for _, ex := range s.Examples {
			fmt.Fprintf(w, "  %s\n", ex)
		}
	}
}

// printFlags lists flags as "-s, --name VALUE  usage (default …)", VALUE
// the name valueName kept, else the backquoted word of the usage.
func printFlags(w io.Writer, flags []*pflag.Flag) {
	type row struct{ left, right string }
	var rows []row
	width := 0
	for _, f := range flags {
		name, usage := pflag.UnquoteUsage(f)
		if v, ok := f.Annotations[valueNameKey]; ok {
			name = v[0]
		}
		left := dashed(f.Name)
		if f.Shorthand != "" {
			left = "-" + f.Shorthand + ", " + left
		}
		if name != "" {
			left += " " + name
		}
		if d := f.DefValue; d != "" && d != "0" && d != "false" && d != "[]" && d != "0s" {
			usage += fmt.Sprintf(" (default %s)", d)
		}
		rows = append(rows, row{left, usage})
		width = max(width, len(left))
	}
	for _, r := range rows {
		fmt.Fprintf(w, "  %-*s  %s\n", width, r.left, r.right)
	}
}

// printTopHelp lists every command.
func (e *Env) printTopHelp(w io.Writer) {
	fmt.Fprintf(w, "loom keeps the threads of AI agents: durable, cheap to fork, checkpoint and roll back.\n\n")
	fmt.Fprintf(w, "Usage: loom COMMAND [ARGS] [--store URL] [--tenant T] [--json]\n\nCommands:\n")
	width := 0
	for _, s := range commands {
		width = max(width, len(s.Name))
	}
	for _, s := range commands {
		fmt.Fprintf(w, "  %-*s  %s\n", width, s.Name, s.Summary)
	}
	fmt.Fprintf(w, "\nThe store is --store, else $LOOM_STORE, else %s.\n", defaultStore)
	fmt.Fprintf(w, "Run 'loom COMMAND --help' for a command's flags and examples.\n")
}

// printGroupHelp lists the commands of a group.
func (e *Env) printGroupHelp(w io.Writer, group string) {
	fmt.Fprintf(w, "Usage: loom %s COMMAND [ARGS]\n\nloom %s: %s.\n\nCommands:\n", group, group, groups[group])
	for _, s := range commands {
		if sub, ok := strings.CutPrefix(s.Name, group+" "); ok {
			fmt.Fprintf(w, "  %-12s  %s\n", sub, s.Summary)
		}
	}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// HelpCommand prints the help of loom or of a command.
type HelpCommand struct {
	base
}

// Flags implements Command.
func (c *HelpCommand) Flags() *pflag.FlagSet { return c.flagSet() }

// Run implements Command.
func (c *HelpCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.positional(args, 0, 2)
	if err != nil {
		return err
	}
	found, rest, err := c.cmd.Root().Find(pos)
	if err != nil {
		return c.usage("unknown command %q", strings.Join(pos, " "))
	}
	if len(rest) > 0 {
		err := unknownCommand(found, rest)
		err.cmd = c.name
		return err
	}
	return found.Help()
}
