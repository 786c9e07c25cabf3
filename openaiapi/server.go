package openaiapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/thread"
)

// Prefix is the path the API is served under: loom's own API keeps /v1.
const Prefix = "/openai/v1"

// Options configure a Server.
type Options struct {
	// DB keeps the conversations and responses; it is required. Each
	// request uses DB.WithTenant with the tenant its API key names
	// (auth.Tenant), or DB's own tenant when there is none.
	DB *thread.DB
	// Chat is the model that answers POST /responses; nil refuses them
	// with a 400 that says so.
	Chat agent.ChatClient
	// Model is the model the server reports when a request names none.
	Model string
	// Logger logs internal errors; nil means slog.Default().
	Logger *slog.Logger
}

// Server serves the OpenAI-compatible API under Prefix. It implements
// http.Handler and is safe for concurrent use. Mount it behind loom's
// middleware, wrapped in Errors:
//
//	mux.Handle(openaiapi.Prefix+"/", openaiapi.Errors(api.Protect(openaiapi.New(opts))))
type Server struct {
	db    *thread.DB
	chat  agent.ChatClient
	model string
	log   *slog.Logger
	mux   *http.ServeMux
	// saves orders the commits of responses on one thread (responses.go).
	saves threadLocks
}

// route is one entry of the route table: a ServeMux pattern, its handler,
// which returns its error for writeError to answer, and the query
// parameters it takes (any other is refused, as OpenAI refuses an unknown
// parameter).
type route struct {
	pattern string
	handle  func(s *Server, w http.ResponseWriter, r *http.Request) error
	query   []string
}

// repeatable are the query parameters that may be given more than once.
var repeatable = map[string]bool{"include": true, "include[]": true}

var routes = []route{
	{pattern: "POST /conversations", handle: (*Server).createConversation},
	{pattern: "GET /conversations/{conversation_id}", handle: (*Server).getConversation},
	{pattern: "POST /conversations/{conversation_id}", handle: (*Server).updateConversation},
	{pattern: "DELETE /conversations/{conversation_id}", handle: (*Server).deleteConversation},
	{pattern: "POST /conversations/{conversation_id}/items", handle: (*Server).createItems, query: []string{"include", "include[]"}},
	{pattern: "GET /conversations/{conversation_id}/items", handle: (*Server).listItems, query: []string{"after", "limit", "order", "include", "include[]"}},
	{pattern: "GET /conversations/{conversation_id}/items/{item_id}", handle: (*Server).getItem, query: []string{"include", "include[]"}},
	{pattern: "DELETE /conversations/{conversation_id}/items/{item_id}", handle: (*Server).deleteItem},
	{pattern: "POST /responses", handle: (*Server).createResponse},
	{pattern: "GET /responses/{response_id}", handle: (*Server).getResponse, query: []string{"include", "include[]", "stream", "starting_after", "include_obfuscation"}},
	{pattern: "DELETE /responses/{response_id}", handle: (*Server).deleteResponse},
	{pattern: "POST /responses/{response_id}/cancel", handle: (*Server).cancelResponse},
	{pattern: "GET /responses/{response_id}/input_items", handle: (*Server).listInputItems, query: []string{"after", "limit", "order", "include", "include[]"}},
	{pattern: "POST /responses/compact", handle: (*Server).compactResponses},
	{pattern: "POST /responses/input_tokens", handle: (*Server).countInputTokens},
}

// New returns a Server on opts.DB. It panics if opts.DB is nil.
func New(opts Options) *Server {
	if opts.DB == nil {
		panic("openaiapi: Options.DB is nil")
	}
	s := &Server{db: opts.DB, chat: opts.Chat, model: opts.Model, log: opts.Logger, mux: http.NewServeMux()}
	if s.log == nil {
		s.log = slog.Default()
	}
	for _, rt := range routes {
		method, path, _ := strings.Cut(rt.pattern, " ")
		s.mux.Handle(method+" "+Prefix+path, s.endpoint(rt))
	}
	return s
}

// ServeHTTP implements http.Handler. A request that matches no route gets
// OpenAI's answer to an unknown URL, in its error shape.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.writeError(w, r, &Error{Status: http.StatusNotFound, Type: typeInvalidRequest,
			Message: "Invalid URL (" + r.Method + " " + clip(r.URL.Path) + ")"})
		return
	}
	s.mux.ServeHTTP(w, r)
}

// endpoint adapts a route's handler: it checks the query and answers the
// handler's error in OpenAI's shape.
func (s *Server) endpoint(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := checkQuery(r.URL.RawQuery, rt.query)
		if err == nil {
			err = rt.handle(s, w, r)
		}
		if err != nil {
			s.writeError(w, r, err)
		}
	})
}

// checkQuery refuses a query that is not well formed or not UTF-8, a
// parameter that is not one of names, and one given twice that is not
// repeatable.
func checkQuery(raw string, names []string) error {
	if raw == "" {
		return nil
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return invalidParam("", "The query string is not a URL query: %v", err)
	}
	for k, vs := range q {
		if !slices.Contains(names, k) {
			return invalidParam(k, "Unknown parameter: '%s'.", clip(k))
		}
		if len(vs) > 1 && !repeatable[k] {
			return invalidParam(k, "Parameter '%s' was given %d times; it is taken once.", k, len(vs))
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return invalidParam(k, "Parameter '%s' is not UTF-8.", k)
			}
		}
	}
	return nil
}

// tenantDB is the DB of the request's tenant.
func (s *Server) tenantDB(r *http.Request) *thread.DB {
	if t, ok := auth.Tenant(r.Context()); ok {
		return s.db.WithTenant(t)
	}
	return s.db
}

// detached is the context of a write: it does not end when the client
// goes away, so that an accepted write finishes.
func detached(r *http.Request) context.Context { return context.WithoutCancel(r.Context()) }

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
