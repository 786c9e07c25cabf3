// Package mcpserver serves loom's threads as Model Context Protocol tools,
// for agents and chat applications that speak MCP: over streamable HTTP at
// /mcp of `loom serve` (Handler), and over stdin and stdout for `loom mcp`
// (ServeStdio).
//
// The tools map one to one onto package thread:
//
//	thread_list        DB.Threads: labels, kind, limit, cursor, desc
//	thread_get         DB.Thread, Len, Checkpoints, Messages: id, messages (the newest N), version
//	thread_create      DB.Create: id, title, labels, messages
//	thread_append      Thread.Commit: id, messages, if_version
//	thread_view        Thread.View: id, version, model, encoding, budget, max_messages,
//	                   instructions, pinned, strategies (drop_oldest, sliding_window, elide_tool_results)
//	thread_fork        Thread.Fork: id, at, version, title, labels, new_id
//	thread_checkpoint  Thread.Checkpoint: id, name
//	thread_rollback    Thread.Rollback or Restore: id, checkpoint or version
//	thread_history     Thread.History: id, limit, before
//
// and so do the tools of package workflow's workflows, whose steps run in
// the programs that declare them:
//
//	workflow_list        List: limit, cursor
//	workflow_get         Execution, Checkpoints, At: id, version, messages (each sub-thread's newest N)
//	workflow_history     Workflow.History: id, limit, before
//	workflow_checkpoint  Workflow.Checkpoint: id, name
//	workflow_restore     Workflow.Restore: id, checkpoint or version
//	workflow_edit        Workflow.Update: id, by, checkpoint or version, input, outputs, next
//
// The work items of package worklog are tools here too (list_threads,
// create_thread, resolve_thread, session_start, session_close): see
// AddWorklogTools, AddWorklogToolsFrom and NewWorklog.
//
// Messages are written as {"role": "user", "text": "…"} or in loom's wire
// format (docs/wire-format.md), and returned in the wire format. A result
// carries its data as structured content, and as text: a short summary for
// models to read (one line per message), then the same data as JSON.
//
// Errors are tool errors (results with IsError set) whose text starts with a
// code: "not_found: thread \"th_x\"", invalid, conflict (an if_version that
// is no longer current, a name or id taken), unsupported, canceled, or
// internal, whose detail goes to the log and never to the client.
// Arguments that do not fit a tool's schema are invalid tool errors too,
// which a model can read and correct. What is no well-formed request is a
// JSON-RPC error object, over HTTP (Handler, JSONRPCErrors) and stdio
// (IOTransport) alike: -32700 for JSON that is not JSON, not UTF-8 or
// nested too deeply, checked before the SDK decodes it (where a byte that
// is not UTF-8 would become U+FFFD), -32600 for no JSON-RPC request,
// -32601 for an unknown method, -32602 for params off the request's schema.
//
// Every call is scoped to a tenant: the one internal/auth put in the
// context, else the DB's own. Over HTTP the command wraps Handler in the
// same auth middleware as the HTTP API, and since Handler serves each
// request as a session of its own, with the request's context, a tool call
// sees exactly the tenant of its request's API key, in that tenant's own
// namespace of thread ids; a tenant never sees
// another's threads.
//
// The smallest use:
//
//	db, _ := thread.Open(ctx, "memory://", nil)
//	mux.Handle("/mcp", mcpserver.JSONRPCErrors(keys.Middleware(mcpserver.Handler(db, nil), deny)))
//
// Other packages add their tools to the same server with AddTool, which
// gives them the same schemas, error codes and summaries, from
// Options.AddTools so that Handler and ServeStdio serve them too:
//
//	opts := &mcpserver.Options{AddTools: func(s *mcp.Server) {
//		mcpserver.AddTool(s, &mcp.Tool{Name: "items_list", Description: "…"}, logger, listItems)
//	}}
package mcpserver
