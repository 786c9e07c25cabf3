// Package httpapi is loom's JSON API over HTTP: threads (create, list,
// read, append, views, fork, copy, history, checkpoints, rollback, reset,
// export and import), agent runs, streamed as Server-Sent Events, and work
// items, under /v1/; /healthz and /metrics (Prometheus) beside them.
// openapi.json, served at /v1/openapi.json, describes every route. A
// streamed run that waits on its model sends a comment line (": ping")
// every 15 s (Options.Heartbeat), so that proxies keep the connection.
//
// The smallest use:
//
//	db, _ := thread.Open(ctx, "sqlite://./loom.db", nil)
//	srv := httpapi.New(httpapi.Options{DB: db, Version: "v1.2.3"})
//	http.ListenAndServe("127.0.0.1:8080", srv)
//
// Every request is scoped to a tenant: with Options.Keys, the tenant of the
// request's API key ("Authorization: Bearer KEY" or "X-API-Key"); without
// keys, the tenant "" (serve such a server on loopback only). Each tenant has
// its own namespace of thread ids (thread.Key): a request sees, forks,
// copies, exports and runs only its tenant's threads, another tenant's
// thread is not found, and an id another tenant uses is free — nothing a
// request sends can reveal, take or block another tenant's id.
//
// Messages are in loom's wire format (docs/wire-format.md); an export is the
// portable document (docs/portable-document.md). Errors have one shape,
//
//	{"error": {"code": "not_found", "message": "thread \"th_1\": not found"}}
//
// mapped from package thread's and package agent's errors by one table
// (404 not_found, 409 conflict, 412 precondition_failed, 400 invalid, …);
// the message of a 500 never holds the error's text, which is logged with the
// request's id (the X-Request-Id of every response). A thread's version is
// its ETag; If-Match on a write makes it conditional on that version.
//
// Work items are package worklog's (Options.Worklog; without it these routes
// answer 501): GET /v1/items (?status=open|resolved, ?include_resolved=true)
// lists them, GET /v1/items/{id} reads one, POST /v1/items creates one (201,
// or 200 when an open item has the same text), POST /v1/items/resolve
// resolves one by thread_id (an id or #N) or text_match, POST /v1/sessions
// starts a session with the items that earlier sessions carry, and POST
// /v1/sessions/{id}/close closes it with the items it leaves open. Each
// answers with worklog's result (ListResult, CreateResult, …), and each
// takes the query parameter project (default "default"): a tenant's
// projects keep their items and sessions apart. A text that matches several
// items is a 409 (code ambiguous) whose error lists them in "candidates".
//
// Server.Protect puts the same middleware (request ids, logging, metrics,
// CORS, the body limit and authentication) in front of other handlers, such
// as the MCP endpoint.
package httpapi
