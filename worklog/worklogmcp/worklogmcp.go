// Package worklogmcp serves the work items of package worklog as MCP tools:
// list_threads, create_thread, resolve_thread, session_start and
// session_close, with the seed's result shapes (each with its performance)
// as structured content. It is a package of its own so that package
// worklog does not depend on the MCP SDK.
//
// AddTools puts the tools on any server, such as loom's (through
// mcpserver.Options.AddTools); New makes a server with only these tools,
// which `loom mcp --worklog` serves over stdio for coding agents.
package worklogmcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/mcpserver"
	"github.com/loomthreads/loom/worklog"
)

// instructions tell a connecting client what New's server is for.
const instructions = `loom keeps work threads: open items (unresolved, blocked, to follow up) that carry across an agent's sessions. ` +
	`Call session_start when a session begins (it returns the open items earlier sessions left), list_threads to see them, ` +
	`create_thread to record new open work, resolve_thread (by thread_id or text_match) when it is done, ` +
	`and session_close with the items still open when the session ends.`

// ListIn is the input of list_threads.
type ListIn struct {
	Status          string `json:"status,omitzero" jsonschema:"the status listed: open (the default) or resolved"`
	IncludeResolved bool   `json:"include_resolved,omitzero" jsonschema:"list every item, open and resolved, whatever status says"`
	Project         string `json:"project,omitzero" jsonschema:"another project whose items its last closed sessions carry; empty means this project's"`
}

// CreateIn is the input of create_thread.
type CreateIn struct {
	Text string `json:"text" jsonschema:"what is open: not blank, at most 3000 characters"`
}

// ResolveIn is the input of resolve_thread.
type ResolveIn struct {
	ThreadID       string `json:"thread_id,omitzero" jsonschema:"the exact id of the item (t-a1b2c3d4), or #N for the Nth open item"`
	TextMatch      string `json:"text_match,omitzero" jsonschema:"a text the item's text contains, case ignored, used when thread_id is empty or names no item"`
	ResolutionNote string `json:"resolution_note,omitzero" jsonschema:"how it was resolved, at most 1000 characters; 'duplicate of t-…' resolves that item too"`
}

// StartIn is the input of session_start.
type StartIn struct {
	SessionID string `json:"session_id,omitzero" jsonschema:"the session's id; empty makes a new UUID"`
	Project   string `json:"project,omitzero" jsonschema:"the project; empty or this server's project"`
}

// CloseIn is the input of session_close.
type CloseIn struct {
	SessionID   string `json:"session_id,omitzero" jsonschema:"the session's id; empty means the session session_start started"`
	Project     string `json:"project,omitzero" jsonschema:"the project; empty or this server's project"`
	OpenThreads []any  `json:"open_threads,omitzero" jsonschema:"the items the session leaves open: texts or item objects"`
}

// New returns an MCP server with only the work-item tools, on log.
// logger receives internal errors of tool calls and the SDK's warnings;
// nil means slog.Default(). version "" means "dev".
func New(log *worklog.Log, logger *slog.Logger, version string) *mcp.Server {
	if logger == nil {
		logger = slog.Default()
	}
	if version == "" {
		version = "dev"
	}
	s := mcp.NewServer(&mcp.Implementation{Name: mcpserver.Name, Title: "loom work threads", Version: version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       slog.New(minLevel{logger.Handler(), slog.LevelWarn}),
	})
	AddTools(s, log, logger)
	return s
}

// AddTools adds the five work-item tools on log to s, with mcpserver's
// conventions (mcpserver.AddTool): worklog.ErrInvalid and ErrAmbiguous are
// "invalid" tool errors, ErrNotFound "not_found". logger nil means
// slog.Default().
func AddTools(s *mcp.Server, log *worklog.Log, logger *slog.Logger) {
	mcpserver.AddTool(s, &mcp.Tool{Name: "list_threads",
		Description: "List the work threads (open items carried across sessions), oldest first: open ones by default."},
		logger, func(ctx context.Context, in ListIn) (worklog.ListResult, error) {
			r, err := log.List(ctx, worklog.ListOptions{Status: worklog.Status(in.Status), IncludeResolved: in.IncludeResolved, Project: in.Project})
			return deref(r, err)
		})
	mcpserver.AddTool(s, &mcp.Tool{Name: "create_thread",
		Description: "Record a new open work thread; an open one with the same text is returned instead (deduplicated)."},
		logger, func(ctx context.Context, in CreateIn) (worklog.CreateResult, error) {
			r, err := log.Create(ctx, worklog.CreateOptions{Text: in.Text})
			return deref(r, err)
		})
	mcpserver.AddTool(s, &mcp.Tool{Name: "resolve_thread",
		Description: "Resolve a work thread, by thread_id or by text_match, with an optional resolution_note."},
		logger, func(ctx context.Context, in ResolveIn) (worklog.ResolveResult, error) {
			if in.ThreadID == "" && in.TextMatch == "" {
				return worklog.ResolveResult{}, fmt.Errorf("give thread_id or text_match: %w", worklog.ErrInvalid)
			}
			r, err := log.Resolve(ctx, worklog.ResolveOptions{ID: in.ThreadID, TextMatch: in.TextMatch, Note: in.ResolutionNote})
			return deref(r, err)
		})
	mcpserver.AddTool(s, &mcp.Tool{Name: "session_start",
		Description: "Start a session: returns the open threads the last closed sessions (5, within 14 days) carry, merged with the local ones, and the project state."},
		logger, func(ctx context.Context, in StartIn) (worklog.StartResult, error) {
			if err := checkProject(log, in.Project); err != nil {
				return worklog.StartResult{}, err
			}
			r, err := log.SessionStart(ctx, worklog.StartOptions{SessionID: in.SessionID})
			return deref(r, err)
		})
	mcpserver.AddTool(s, &mcp.Tool{Name: "session_close",
		Description: "Close the session, recording the threads it leaves open (open_threads) for the next session_start."},
		logger, func(ctx context.Context, in CloseIn) (worklog.CloseResult, error) {
			if err := checkProject(log, in.Project); err != nil {
				return worklog.CloseResult{}, err
			}
			var open []json.RawMessage
			for _, v := range in.OpenThreads {
				b, err := json.Marshal(v)
				if err != nil {
					return worklog.CloseResult{}, fmt.Errorf("open_threads: %v: %w", err, worklog.ErrInvalid)
				}
				open = append(open, b)
			}
			r, err := log.SessionClose(ctx, worklog.CloseOptions{SessionID: in.SessionID, OpenThreads: open})
			return deref(r, err)
		})
}

// checkProject refuses a project other than the Log's: its sessions are
// recorded under the Log's.
func checkProject(log *worklog.Log, project string) error {
	if project != "" && project != log.Project() {
		return fmt.Errorf("project %q: this server keeps the items of project %q: %w", project, log.Project(), worklog.ErrInvalid)
	}
	return nil
}

// deref returns *r, so that the tool's output schema is an object's.
func deref[T any](r *T, err error) (T, error) {
	if err != nil || r == nil {
		var zero T
		if err == nil {
			err = fmt.Errorf("no result")
		}
		return zero, err
	}
	return *r, nil
}

// minLevel is a slog.Handler that drops records below a level: the SDK
// logs every session at Info.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(attrs), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
