package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/loomthreads/loom/thread"
)

// healthTimeout bounds the store check of /healthz.
const healthTimeout = 2 * time.Second

// healthz: GET /healthz answers 200 when the store answers a listing of one
// thread, 503 otherwise.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	var err error
	for _, e := range s.db.Threads(ctx, thread.ListOptions{Limit: 1}) {
		err = e
		break
	}
	if err != nil {
		s.log.WarnContext(ctx, "health check failed", "request_id", RequestID(ctx), "err", err)
		writeJSON(w, http.StatusServiceUnavailable, healthResponse{Status: "unavailable", Version: s.version})
		return nil
	}
	writeJSON(w, http.StatusOK, healthResponse{Status: "ok", Version: s.version})
	return nil
}
