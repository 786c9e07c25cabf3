// The work items of package worklog as MCP tools: list_threads,
// create_thread, resolve_thread, session_start and session_close, with
// the seed's result shapes (each with its performance) as structured
// content. They live here, beside the thread tools, so that package
// worklog depends on no transport.
//
// The tools come in two modes, with the same names, inputs and results.
//
// Local: AddWorklogTools puts them on a server for one Log, the items of
// one project (a .gitmem directory, say); NewWorklog makes a server with
// only these tools, which `loom mcp --worklog` serves over stdio for a
// coding agent. A project given to create_thread, resolve_thread,
// session_start or session_close must be the Log's own; list_threads'
// project lists another project's items, those its last closed sessions
// carry. session_start makes its session the Log's current one, which the
// other tools use when they name no session_id.
//
// Server: AddWorklogToolsFrom puts them on a server that many callers
// share, such as `loom serve`'s /mcp (through Options.AddTools). Each
// call's Log comes from a WorklogSource, given the call's context (which
// carries its tenant) and the project the call names, typically a
// worklog.Logs:
//
//	logs := worklog.NewLogs(db, nil)
//	src := func(ctx context.Context, project string) (*worklog.Log, error) {
//		return logs.Log(tenantOf(ctx), project) // "" is worklog.DefaultProject
//	}
//	opts := &mcpserver.Options{AddTools: func(s *mcp.Server) { mcpserver.AddWorklogToolsFrom(s, src, logger) }}
//
// Every tool's project selects the Log, list_threads' too. A server's Logs
// are shared, so they have no current session: create_thread and
// resolve_thread record a session only when their session_id names one
// (session_start's), and session_close needs the session_id.

package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/worklog"
)

// instructions tell a connecting client what New's server is for.
const worklogInstructions = `loom keeps work threads: open items (unresolved, blocked, to follow up) that carry across an agent's sessions. ` +
	`Call session_start when a session begins (it returns the open items earlier sessions left), list_threads to see them, ` +
	`create_thread to record new open work, resolve_thread (by thread_id or text_match) when it is done, ` +
	`and session_close with the items still open when the session ends.`

// ListIn is the input of list_threads.
type ItemsListIn struct {
	Status          string `json:"status,omitzero" jsonschema:"the status listed: open (the default) or resolved"`
	IncludeResolved bool   `json:"include_resolved,omitzero" jsonschema:"list every item, open and resolved, whatever status says"`
	Project         string `json:"project,omitzero" jsonschema:"the project whose items are listed; empty means this server's default project (a server of one project lists another's from its last closed sessions)"`
}

// CreateIn is the input of create_thread.
type ItemsCreateIn struct {
	Text      string `json:"text" jsonschema:"what is open: not blank, at most 3000 characters"`
	Project   string `json:"project,omitzero" jsonschema:"the project; empty means this server's default project (a server of one project takes only its own)"`
	SessionID string `json:"session_id,omitzero" jsonschema:"the session that creates the item (its source_session), as session_start returned it; empty means the current session, if this server keeps one"`
}

// ResolveIn is the input of resolve_thread.
type ItemsResolveIn struct {
	ThreadID       string `json:"thread_id,omitzero" jsonschema:"the exact id of the item (t-a1b2c3d4), or #N for the Nth open item"`
	TextMatch      string `json:"text_match,omitzero" jsonschema:"a text the item's text contains, case ignored, used when thread_id is empty or names no item"`
	ResolutionNote string `json:"resolution_note,omitzero" jsonschema:"how it was resolved, at most 1000 characters; 'duplicate of t-…' resolves that item too"`
	Project        string `json:"project,omitzero" jsonschema:"the project; empty means this server's default project (a server of one project takes only its own)"`
	SessionID      string `json:"session_id,omitzero" jsonschema:"the session that resolves the item (its resolved_by_session), as session_start returned it; empty means the current session, if this server keeps one"`
}

// StartIn is the input of session_start.
type SessionStartIn struct {
	SessionID string `json:"session_id,omitzero" jsonschema:"the session's id; empty makes a new UUID"`
	Project   string `json:"project,omitzero" jsonschema:"the project; empty means this server's default project (a server of one project takes only its own)"`
}

// CloseIn is the input of session_close.
type SessionCloseIn struct {
	SessionID   string `json:"session_id,omitzero" jsonschema:"the session's id, as session_start returned it (an id it never gave is not_found); empty means the session session_start started, on a server of one project (a shared server needs it)"`
	Project     string `json:"project,omitzero" jsonschema:"the project; empty means this server's default project (a server of one project takes only its own)"`
	OpenThreads []any  `json:"open_threads,omitzero" jsonschema:"the items the session leaves open: texts or item objects"`
}

// Source returns the Log of a tool call on a server of many callers
// (AddToolsFrom): the Log of project, where "" means the default project,
// as the caller that ctx stands for sees it (its tenant, say). An error is
// the call's: worklog.ErrInvalid for a bad project name is an "invalid"
// tool error.
type WorklogSource func(ctx context.Context, project string) (*worklog.Log, error)

// NewWorklog returns an MCP server with only the work-item tools, on log.
// logger receives internal errors of tool calls and the SDK's warnings;
// nil means slog.Default(). version "" means "dev".
func NewWorklog(log *worklog.Log, logger *slog.Logger, version string) *mcp.Server {
	if logger == nil {
		logger = slog.Default()
	}
	if version == "" {
		version = "dev"
	}
	s := mcp.NewServer(&mcp.Implementation{Name: Name, Title: "loom work threads", Version: version}, &mcp.ServerOptions{
		Instructions: worklogInstructions,
		Logger:       slog.New(minLevel{logger.Handler(), slog.LevelWarn}),
	})
	AddWorklogTools(s, log, logger)
	return s
}

// AddWorklogTools adds the five work-item tools on log to s, in the local mode
// (see the doc of AddWorklogTools): one project, the Log's, and its current session.
// They follow mcpserver's conventions (AddTool):
// worklog.ErrInvalid and ErrAmbiguous are "invalid" tool errors,
// ErrNotFound "not_found". logger nil means slog.Default().
func AddWorklogTools(s *mcp.Server, log *worklog.Log, logger *slog.Logger) {
	addWorklog(s, worklogTools{src: func(_ context.Context, project string) (*worklog.Log, error) {
		if project != "" && project != log.Project() {
			return nil, fmt.Errorf("project %q: this server keeps the items of project %q: %w", project, log.Project(), worklog.ErrInvalid)
		}
		return log, nil
	}, local: log}, logger)
}

// AddWorklogToolsFrom adds the five work-item tools to s in the server mode (see
// the package doc): each call works on the Log src returns for its
// context and its project, with no current session. Errors are as
// AddWorklogTools says; logger nil means slog.Default().
func AddWorklogToolsFrom(s *mcp.Server, src WorklogSource, logger *slog.Logger) {
	addWorklog(s, worklogTools{src: src}, logger)
}

// worklogTools are the five tools of either mode.
type worklogTools struct {
	// src gives a call's Log. In the local mode it is the one Log, and
	// refuses another project.
	src WorklogSource
	// local is the Log of the local mode, nil in the server mode.
	local *worklog.Log
}

// log returns the Log of project for a call.
func (t worklogTools) log(ctx context.Context, project string) (*worklog.Log, error) {
	l, err := t.src(ctx, project)
	if err == nil && l == nil {
		err = errors.New("mcpserver: the source returned no Log")
	}
	return l, err
}

func addWorklog(s *mcp.Server, t worklogTools, logger *slog.Logger) {
	// Their names are seed 004's, which clients know; the titles and the
	// "Work items:" that begins each description tell them from the
	// thread tools (thread_*), whose threads are conversations.
	startDesc := "Work items: start a session: returns the open work items the last closed sessions (5, within 14 days) carry, merged with the local ones, and the project state."
	closeDesc := "Work items: close the session, recording the work items it leaves open (open_threads) for the next session_start."
	if t.local == nil {
		startDesc = "Work items: start a session: returns the project's open work items, merged with those the last closed sessions (5, within 14 days) carry, the project state, and the session_id the other tools take."
		closeDesc = "Work items: close the session session_id (session_start's; an id it never gave is not_found), recording the work items it leaves open (open_threads) for the next session_start."
	}
	AddTool(s, &mcp.Tool{Name: "list_threads", Title: "Work items: list",
		Description: "Work items: list the work items (open threads of work carried across sessions, not conversations: see thread_list for those), oldest first: open ones by default."},
		logger, t.list)
	AddTool(s, &mcp.Tool{Name: "create_thread", Title: "Work items: create",
		Description: "Work items: record a new open work item; an open one with the same text is returned instead (deduplicated). Not a conversation thread: see thread_create for those."},
		logger, t.create)
	AddTool(s, &mcp.Tool{Name: "resolve_thread", Title: "Work items: resolve",
		Description: "Work items: resolve a work item, by thread_id or by text_match, with an optional resolution_note."},
		logger, t.resolve)
	AddTool(s, &mcp.Tool{Name: "session_start", Title: "Work items: start a session", Description: startDesc}, logger, t.start)
	AddTool(s, &mcp.Tool{Name: "session_close", Title: "Work items: close the session", Description: closeDesc}, logger, t.close)
}

func (t worklogTools) list(ctx context.Context, in ItemsListIn) (worklog.ListResult, error) {
	// Locally, project lists another project's items from its sessions;
	// on a server it selects the Log.
	project, other := in.Project, ""
	if t.local != nil {
		project, other = "", in.Project
	}
	l, err := t.log(ctx, project)
	if err != nil {
		return worklog.ListResult{}, err
	}
	r, err := l.List(ctx, worklog.ListOptions{Status: worklog.Status(in.Status), IncludeResolved: in.IncludeResolved, Project: other})
	return deref(r, err)
}

func (t worklogTools) create(ctx context.Context, in ItemsCreateIn) (worklog.CreateResult, error) {
	l, err := t.log(ctx, in.Project)
	if err != nil {
		return worklog.CreateResult{}, err
	}
	r, err := l.Create(ctx, worklog.CreateOptions{Text: in.Text, Session: in.SessionID})
	return deref(r, err)
}

func (t worklogTools) resolve(ctx context.Context, in ItemsResolveIn) (worklog.ResolveResult, error) {
	if in.ThreadID == "" && in.TextMatch == "" {
		return worklog.ResolveResult{}, fmt.Errorf("give thread_id or text_match: %w", worklog.ErrInvalid)
	}
	l, err := t.log(ctx, in.Project)
	if err != nil {
		return worklog.ResolveResult{}, err
	}
	r, err := l.Resolve(ctx, worklog.ResolveOptions{ID: in.ThreadID, TextMatch: in.TextMatch, Note: in.ResolutionNote, Session: in.SessionID})
	return deref(r, err)
}

func (t worklogTools) start(ctx context.Context, in SessionStartIn) (worklog.StartResult, error) {
	l, err := t.log(ctx, in.Project)
	if err != nil {
		return worklog.StartResult{}, err
	}
	r, err := l.SessionStart(ctx, worklog.StartOptions{SessionID: in.SessionID})
	return deref(r, err)
}

func (t worklogTools) close(ctx context.Context, in SessionCloseIn) (worklog.CloseResult, error) {
	if t.local == nil && in.SessionID == "" {
		// A shared Log's current session would be anyone's.
		return worklog.CloseResult{}, fmt.Errorf("session_id is required: give the id session_start returned: %w", worklog.ErrInvalid)
	}
	l, err := t.log(ctx, in.Project)
	if err != nil {
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
	r, err := l.SessionClose(ctx, worklog.CloseOptions{SessionID: in.SessionID, OpenThreads: open})
	return deref(r, err)
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
