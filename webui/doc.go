// Package webui is loom's web page: a single-page app, embedded in the
// binary, for browsing and working on the threads of a loom server.
//
// Handler serves it. The page is hand-written HTML, CSS and JavaScript
// modules (no build step, no framework, no third-party code) and loads
// nothing but its own files: a strict Content-Security-Policy forbids
// inline scripts and every other origin.
//
// The page talks only to the JSON API of the server that served it
// (package httpapi, under /v1/): it lists and searches threads (people's by
// default, loom's own on request), shows a thread's messages a page at a
// time in a window that keeps the DOM small however long the thread, its
// fork family as a graph, its history (any version can be viewed as it
// was), the diff of any two versions or of a thread and its fork, its
// checkpoints (create, roll back), forks it at any message, exports it, and
// runs the server's agent on it with the answer streamed. It drives live
// conversations (send, queue, abort, fork, compact; their messages in the
// same window) and workflows (input,
// checkpoint, restore, fork, any version; a stalled runner shown), and
// shows work items. It stays current by reading the server's
// change events (GET /v1/events and /v1/threads/{id}/events, Server-Sent
// Events read with fetch, so that the API key travels in a header).
//
// When the server answers 401 the page asks for an API key, keeps it in the
// browser's sessionStorage for the tab's session and sends it as
// "Authorization: Bearer KEY" on every request; never in a URL.
//
// Mount it beside the API, for every path the API does not serve:
//
//	mux.Handle("/v1/", api)
//	mux.Handle("/", webui.Handler())
//
// The routes are hash routes (#/threads/ID), so the server only ever serves
// index.html and its assets; Handler answers paths under /v1/ and the
// server's own endpoints (/mcp, /healthz, /metrics) with 404 rather than
// the page, so that it never shadows the API.
package webui
