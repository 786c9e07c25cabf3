package httpapi

import "net/http"

// modelHint ends the 501 answers of the routes that need a model (runs,
// conversations): a newcomer learns how to get one.
const modelHint = "start loom serve with --provider scripted (a demo model, no key) or openai/responses/anthropic with a key in the environment"

// errNoModel is the 501 (code "unsupported") of a route that needs a
// model on a server that has none; what names the route's need ("runs
// need a model").
func errNoModel(what string) error {
	return errf(http.StatusNotImplemented, "unsupported", "%s, and this server has none: %s", what, modelHint)
}

// serverInfo is the body of GET /v1/server: what this server can do, so
// that a page shows only what works (no run panel without a model).
type serverInfo struct {
	Version string `json:"version"`
	// Runs: POST /v1/threads/{id}/runs has an agent (Options.Agent).
	Runs bool `json:"runs"`
	// Provider names the model provider (Options.Provider), "" for none.
	Provider string `json:"provider"`
	// Conversations: /v1/conversations has a chat model (Options.Chat).
	Conversations bool `json:"conversations"`
	// Items: /v1/items and /v1/sessions keep work items (Options.Worklog).
	Items bool `json:"items"`
}

// serverInfo: GET /v1/server
func (s *Server) serverInfo(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, serverInfo{Version: s.version, Runs: s.agent != nil, Provider: s.provider,
		Conversations: s.chat != nil, Items: s.worklog != nil})
	return nil
}
