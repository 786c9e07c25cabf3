package httpapi

import (
	"net/http"
	"time"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/thread"
)

// diff: GET /v1/threads/{id}/diff?version=&to=&to_version=&limit=
//
// It answers thread.Diff as it is: the two points, the shared messages'
// count, the entries after them side by side and the state's changes.
// Every parameter is checked here, before the store is read; the thread
// package checks the limit's range, so that the rule lives once.
func (s *Server) diff(w http.ResponseWriter, r *http.Request) error {
	id, err := threadID(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	query := thread.DiffQuery{Thread: id, To: q.Get("to")}
	if query.To != "" && !ids.Valid(query.To) {
		return invalidf("query parameter to=%q: a thread id", clip(query.To))
	}
	// A version of 0, like none, is the thread's current version, as in
	// GET /v1/threads/{id}/messages.
	if query.Version, err = intParam(q, "version", 0); err != nil {
		return err
	}
	if query.ToVersion, err = intParam(q, "to_version", 0); err != nil {
		return err
	}
	limit, err := intParam(q, "limit", thread.DefaultDiffLimit)
	if err != nil {
		return err
	}
	if limit < 1 || limit > thread.MaxDiffLimit {
		return invalidf("query parameter limit=%d: 1 to %d", limit, thread.MaxDiffLimit)
	}
	query.Limit = int(limit)
	defer s.metrics.StoreOpSince("diff", time.Now())
	d, err := s.tenantDB(r).Diff(r.Context(), query)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}
