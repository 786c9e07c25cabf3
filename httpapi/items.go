package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
)

// The work items of package worklog: /v1/items and /v1/sessions, thin
// layers on worklog.Log's tools (list_threads, create_thread,
// resolve_thread, session_start, session_close) that answer with their
// results. Every route takes the query parameter project, whose Log it
// uses ("" is worklog.DefaultProject); each tenant's projects are its own.

// The request bodies of the work-item routes. Unknown members are refused;
// see decode.

type itemCreateRequest struct {
	Text      string `json:"text"`
	SessionID string `json:"session_id"`
}

type itemResolveRequest struct {
	ThreadID       string `json:"thread_id"`
	TextMatch      string `json:"text_match"`
	ResolutionNote string `json:"resolution_note"`
	SessionID      string `json:"session_id"`
}

type sessionStartRequest struct {
	SessionID string `json:"session_id"`
}

type sessionCloseRequest struct {
	// OpenThreads are texts or item objects, in any format
	// worklog.Normalize reads.
	OpenThreads []json.RawMessage `json:"open_threads"`
}

// itemResponse is the body of GET /v1/items/{id}.
type itemResponse struct {
	Thread worklog.Item `json:"thread"`
}

// workLog returns the Log of the request's tenant and of its query
// parameter project; 501 when the server keeps no work items.
func (s *Server) workLog(r *http.Request) (*worklog.Log, error) {
	if s.worklog == nil {
		return nil, fmt.Errorf("work items need a work log, and this server has none: %w", thread.ErrUnsupported)
	}
	return s.worklog.Log(tenant(r), r.URL.Query().Get("project"))
}

// maxItemID and maxSessionID are the longest item and session ids
// package worklog keeps.
const (
	maxItemID    = 64
	maxSessionID = 128
)

// itemID returns the path's {id}, an item's id, checked as a thread id is
// and at most 64 bytes long: the ids worklog makes ("t-" and 8 hex digits)
// and keeps, save those that start with '.' or '-'.
func itemID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if len(id) > maxItemID || !ids.Valid(id) {
		return "", invalidf("item id %q: 1 to %d letters, digits, '_', '-' or '.', not starting with '.' or '-'", clip(id), maxItemID)
	}
	return id, nil
}

// checkSessionID checks a session id that is, or will be, part of a path
// (/v1/sessions/{id}/close): worklog's form, 1 to 128 letters, digits,
// '.', '_', ':' or '-', and not starting with '.' or '-'.
func checkSessionID(id string) error {
	ok := id != "" && len(id) <= maxSessionID && id[0] != '.' && id[0] != '-'
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-'
	}
	if !ok {
		return invalidf("session id %q: 1 to %d letters, digits, '.', '_', ':' or '-', not starting with '.' or '-'", clip(id), maxSessionID)
	}
	return nil
}

// itemLocation is the URL of an item of the request's project.
func itemLocation(r *http.Request, id string) string {
	loc := "/v1/items/" + url.PathEscape(id)
	if p := r.URL.Query().Get("project"); p != "" {
		loc += "?project=" + url.QueryEscape(p)
	}
	return loc
}

// listItems: GET /v1/items?status=open|resolved&include_resolved=true&project=
func (s *Server) listItems(w http.ResponseWriter, r *http.Request) error {
	l, err := s.workLog(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	opts := worklog.ListOptions{Status: worklog.Status(q.Get("status"))}
	if v := q.Get("include_resolved"); v != "" {
		if opts.IncludeResolved, err = strconv.ParseBool(v); err != nil {
			return invalidf("query parameter include_resolved=%q: true or false", clip(v))
		}
	}
	// opts.Project stays "": on the server, project selects the Log.
	s.metrics.StoreOp("item_list")
	res, err := l.List(r.Context(), opts)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// maxSessionsListed caps a page of GET /v1/sessions.
const maxSessionsListed = 100

type sessionsResponse struct {
	Sessions []worklog.Session `json:"sessions"`
}

// listSessions: GET /v1/sessions?project=&limit= — the closed sessions,
// newest first, with the items each carried.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	l, err := s.workLog(r)
	if err != nil {
		return err
	}
	n, err := intParam(r.URL.Query(), "limit", 20)
	if err != nil {
		return err
	}
	if n < 1 || n > maxSessionsListed {
		return invalidf("query parameter limit=%d: 1 to %d", n, maxSessionsListed)
	}
	s.metrics.StoreOp("session_list")
	ss, err := l.ClosedSessions(r.Context(), int(n))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sessionsResponse{Sessions: orEmpty(ss)})
	return nil
}

// getItem: GET /v1/items/{id}?project=
func (s *Server) getItem(w http.ResponseWriter, r *http.Request) error {
	id, err := itemID(r)
	if err != nil {
		return err
	}
	l, err := s.workLog(r)
	if err != nil {
		return err
	}
	s.metrics.StoreOp("item_list")
	// Item, not List: an item that records project state is listed
	// apart, but it is an item of the project all the same.
	it, err := l.Item(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, itemResponse{Thread: it})
	return nil
}

// createItem: POST /v1/items {text, session_id}
func (s *Server) createItem(w http.ResponseWriter, r *http.Request) error {
	l, err := s.workLog(r)
	if err != nil {
		return err
	}
	var req itemCreateRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	s.metrics.StoreOp("item_create")
	res, err := l.Create(write(r), worklog.CreateOptions{Text: req.Text, Session: req.SessionID})
	if err != nil {
		return err
	}
	if res.Deduplicated {
		writeJSON(w, http.StatusOK, res)
		return nil
	}
	w.Header().Set("Location", itemLocation(r, res.Thread.ID))
	writeJSON(w, http.StatusCreated, res)
	return nil
}

// resolveItem: POST /v1/items/resolve {thread_id | text_match, resolution_note, session_id}
func (s *Server) resolveItem(w http.ResponseWriter, r *http.Request) error {
	l, err := s.workLog(r)
	if err != nil {
		return err
	}
	var req itemResolveRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if strings.TrimSpace(req.ThreadID) == "" && strings.TrimSpace(req.TextMatch) == "" {
		return fmt.Errorf("give thread_id or text_match: %w", worklog.ErrInvalid)
	}
	s.metrics.StoreOp("item_resolve")
	// An *worklog.AmbiguousError is answered with its candidates
	// (writeError).
	res, err := l.Resolve(write(r), worklog.ResolveOptions{ID: req.ThreadID, TextMatch: req.TextMatch,
		Note: req.ResolutionNote, Session: req.SessionID})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// startSession: POST /v1/sessions {session_id}
func (s *Server) startSession(w http.ResponseWriter, r *http.Request) error {
	l, err := s.workLog(r)
	if err != nil {
		return err
	}
	var req sessionStartRequest
	if err := decode(r, &req, true); err != nil {
		return err
	}
	if req.SessionID != "" {
		// The id must do for the path that closes the session.
		if err := checkSessionID(req.SessionID); err != nil {
			return err
		}
	}
	s.metrics.StoreOp("session_start")
	res, err := l.SessionStart(write(r), worklog.StartOptions{SessionID: req.SessionID})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, res)
	return nil
}

// closeSession: POST /v1/sessions/{id}/close {open_threads}
func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := checkSessionID(id); err != nil {
		return err
	}
	l, err := s.workLog(r)
	if err != nil {
		return err
	}
	var req sessionCloseRequest
	if err := decode(r, &req, true); err != nil {
		return err
	}
	s.metrics.StoreOp("session_close")
	res, err := l.SessionClose(write(r), worklog.CloseOptions{SessionID: id, OpenThreads: req.OpenThreads})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
