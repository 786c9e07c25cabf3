package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/loomthreads/loom/langgraph"
)

// The routes of LangGraph's checkpointer (the langgraph tag of
// openapi.json), each one BaseCheckpointSaver method in one round trip.
// The handlers check what the wire carries — the thread names, a value's
// shape, the query — so that a bad request is a 400 that names its member;
// the rest of the names' rules (checkpoint ids, tasks, channels) and what
// the checkpoints mean are package langgraph's.

// Limits of the names a LangGraph client sends, in bytes of UTF-8.
const (
	lgMaxThreadID = 1024 // thread_id, target_thread_id
	lgMaxNS       = 1024 // checkpoint_ns
	lgMaxRunID    = 256  // a run id of runs/delete
)

// saver returns the Saver on the request's tenant.
func (s *Server) saver(r *http.Request) *langgraph.Saver { return langgraph.New(s.tenantDB(r)) }

// lgText refuses v, the member name of a request, when it is longer than
// max bytes, not UTF-8, holds a control character, or is empty and
// required.
func lgText(name, v string, max int, required bool) error {
	switch {
	case v == "" && required:
		return invalidf("%s: required, not empty", name)
	case len(v) > max:
		return invalidf("%s: %d bytes, over the limit of %d", name, len(v), max)
	case !utf8.ValidString(v):
		return invalidf("%s: not UTF-8", name)
	}
	for _, c := range v {
		if unicode.IsControl(c) {
			return invalidf("%s %q: holds a control character", name, clip(v))
		}
	}
	return nil
}

// lgConfig checks the thread and namespace of a config; package langgraph
// checks its checkpoint id.
func lgConfig(name string, c langgraph.Config) error {
	if err := lgText(name+".thread_id", c.ThreadID, lgMaxThreadID, true); err != nil {
		return err
	}
	return lgText(name+".checkpoint_ns", c.CheckpointNS, lgMaxNS, false)
}

// lgValue checks a value of channel: exactly one of blob and messages;
// messages only for the channel "messages", each a stored LangChain
// message ({"type", "data"}) whose data has an id; extends only in a put
// (extends), and shares and sum never, which are the server's.
func lgValue(name, channel string, v langgraph.Value, extends bool) error {
	switch {
	case v.Blob == nil && v.Messages == nil:
		return invalidf("%s: one of blob and messages is required", name)
	case v.Blob != nil && v.Messages != nil:
		return invalidf("%s: blob and messages both given, one is taken", name)
	case v.Shares != nil || v.Sum != nil:
		return invalidf("%s: shares and sum are in answers only", name)
	case v.Extends != nil && (v.Blob != nil || !extends):
		return invalidf("%s: extends is for the messages of a put only", name)
	case v.Blob != nil:
		return nil
	case channel != "messages":
		return invalidf("%s: messages are only for the channel \"messages\", not %q: send a blob", name, clip(channel))
	}
	for i, raw := range v.Messages {
		what := fmt.Sprintf("%s.messages[%d]", name, i)
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || m == nil {
			return invalidf("%s: expected a stored message, {\"type\", \"data\"}", what)
		}
		// In name order, so that the same body gets the same answer.
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if k != "type" && k != "data" {
				return invalidf("%s: unknown member %q: a stored message has type and data", what, clip(k))
			}
		}
		var typ, id string
		var data map[string]json.RawMessage
		switch {
		case json.Unmarshal(m["type"], &typ) != nil || typ == "":
			return invalidf("%s.type: required, a string, not empty", what)
		case json.Unmarshal(m["data"], &data) != nil || data == nil:
			return invalidf("%s.data: required, an object", what)
		case json.Unmarshal(data["id"], &id) != nil || id == "":
			return invalidf("%s.data.id: required, a string, not empty: a message without an id is sent as a blob", what)
		}
	}
	return nil
}

// lgVersions checks versions (channel_versions, new_versions): numbers or
// strings.
func lgVersions(name string, vs map[string]json.RawMessage) error {
	for _, ch := range slices.Sorted(maps.Keys(vs)) {
		v := bytes.TrimSpace(vs[ch])
		if len(v) == 0 || (v[0] != '"' && v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
			return invalidf("%s[%q]: a version is a number or a string", name, clip(ch))
		}
	}
	return nil
}

// lgPut: POST /v1/langgraph/checkpoints
func (s *Server) lgPut(w http.ResponseWriter, r *http.Request) error {
	var req langgraph.PutRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if err := lgConfig("config", req.Config); err != nil {
		return err
	}
	if raw, ok := req.Checkpoint["channel_versions"]; ok {
		var vs map[string]json.RawMessage
		if err := json.Unmarshal(raw, &vs); err != nil {
			return invalidf("checkpoint.channel_versions: expected an object")
		}
		if err := lgVersions("checkpoint.channel_versions", vs); err != nil {
			return err
		}
	}
	if err := lgVersions("new_versions", req.NewVersions); err != nil {
		return err
	}
	for _, ch := range slices.Sorted(maps.Keys(req.ChannelValues)) {
		if err := lgValue(fmt.Sprintf("channel_values[%q]", clip(ch)), ch, req.ChannelValues[ch], true); err != nil {
			return err
		}
	}
	defer s.metrics.StoreOpSince("langgraph_put", time.Now())
	resp, err := s.saver(r).Put(write(r), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// lgPutWrites: POST /v1/langgraph/writes
func (s *Server) lgPutWrites(w http.ResponseWriter, r *http.Request) error {
	var req langgraph.WritesRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if err := lgConfig("config", req.Config); err != nil {
		return err
	}
	if req.Writes == nil {
		return invalidf("writes: required, an array")
	}
	for i, wr := range req.Writes {
		if err := lgValue(fmt.Sprintf("writes[%d].value", i), wr.Channel, wr.Value, false); err != nil {
			return err
		}
	}
	defer s.metrics.StoreOpSince("langgraph_put_writes", time.Now())
	if err := s.saver(r).PutWrites(write(r), req); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// lgGet: GET /v1/langgraph/checkpoint?thread_id=&checkpoint_ns=&checkpoint_id=&messages_n=&messages_h=
func (s *Server) lgGet(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if !q.Has("thread_id") {
		return invalidf("query parameter thread_id: required")
	}
	cfg := langgraph.Config{ThreadID: q.Get("thread_id"), CheckpointNS: q.Get("checkpoint_ns"), CheckpointID: q.Get("checkpoint_id")}
	if q.Has("checkpoint_id") && cfg.CheckpointID == "" {
		return invalidf("query parameter checkpoint_id: empty; leave it out for the latest")
	}
	if err := lgText("query parameter thread_id", cfg.ThreadID, lgMaxThreadID, true); err != nil {
		return err
	}
	if err := lgText("query parameter checkpoint_ns", cfg.CheckpointNS, lgMaxNS, false); err != nil {
		return err
	}
	known, err := lgKnown(q.Has("messages_n"), q.Get("messages_n"), q.Has("messages_h"), q.Get("messages_h"))
	if err != nil {
		return err
	}
	defer s.metrics.StoreOpSince("langgraph_get", time.Now())
	tup, err := s.saver(r).Get(r.Context(), cfg, known)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, lgTuple(*tup))
	return nil
}

// lgKnown reads the list of messages a GET says the client holds: its
// count n and chain sum h, both or neither. The empty list's sum is "";
// any other's is 32 hex digits.
func lgKnown(hasN bool, n string, hasH bool, h string) (*langgraph.MessagesSum, error) {
	if !hasN && !hasH {
		return nil, nil
	}
	if hasN != hasH {
		return nil, invalidf("query parameters messages_n and messages_h: both or neither")
	}
	count, err := strconv.Atoi(n)
	if err != nil || count < 0 {
		return nil, invalidf("query parameter messages_n %q: a count, 0 or more", clip(n))
	}
	if count == 0 && h != "" || count > 0 && !isHexSum(h) {
		return nil, invalidf("query parameter messages_h %q: the chain sum of the list, 32 hex digits (\"\" for none)", clip(h))
	}
	return &langgraph.MessagesSum{N: count, H: h}, nil
}

func isHexSum(h string) bool {
	if len(h) != 32 {
		return false
	}
	for _, c := range []byte(h) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// lgTuple is t with [] and {} for its nil members, as the document has
// them: a client reads pending_writes as a list, never null.
func lgTuple(t langgraph.Tuple) langgraph.Tuple {
	t.PendingWrites = orEmpty(t.PendingWrites)
	if t.Metadata == nil {
		t.Metadata = map[string]json.RawMessage{}
	}
	if t.Checkpoint == nil {
		t.Checkpoint = map[string]json.RawMessage{}
	}
	return t
}

// lgList: POST /v1/langgraph/checkpoints/search
func (s *Server) lgList(w http.ResponseWriter, r *http.Request) error {
	var req langgraph.ListRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if err := lgText("thread_id", req.ThreadID, lgMaxThreadID, false); err != nil {
		return err
	}
	if req.CheckpointNS != nil {
		if err := lgText("checkpoint_ns", *req.CheckpointNS, lgMaxNS, false); err != nil {
			return err
		}
	}
	if req.Limit < 0 {
		return invalidf("limit: not negative (0 or absent: no limit)")
	}
	defer s.metrics.StoreOpSince("langgraph_list", time.Now())
	tuples, err := s.saver(r).List(r.Context(), req)
	if err != nil {
		return err
	}
	for i := range tuples {
		tuples[i] = lgTuple(tuples[i])
	}
	writeJSON(w, http.StatusOK, langgraph.ListResponse{Checkpoints: orEmpty(tuples)})
	return nil
}

// lgPathThread returns the path's {thread_id}, unescaped and checked.
func lgPathThread(r *http.Request) (string, error) {
	id := r.PathValue("thread_id")
	return id, lgText("thread_id", id, lgMaxThreadID, true)
}

// lgDeleteThread: DELETE /v1/langgraph/threads/{thread_id}
func (s *Server) lgDeleteThread(w http.ResponseWriter, r *http.Request) error {
	id, err := lgPathThread(r)
	if err != nil {
		return err
	}
	defer s.metrics.StoreOpSince("langgraph_delete", time.Now())
	if err := s.saver(r).DeleteThread(write(r), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// lgCopyThread: POST /v1/langgraph/threads/{thread_id}/copy
func (s *Server) lgCopyThread(w http.ResponseWriter, r *http.Request) error {
	id, err := lgPathThread(r)
	if err != nil {
		return err
	}
	var req langgraph.CopyRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if err := lgText("target_thread_id", req.TargetThreadID, lgMaxThreadID, true); err != nil {
		return err
	}
	defer s.metrics.StoreOpSince("langgraph_copy", time.Now())
	if err := s.saver(r).CopyThread(write(r), id, req.TargetThreadID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// lgPrune: POST /v1/langgraph/prune
func (s *Server) lgPrune(w http.ResponseWriter, r *http.Request) error {
	var req langgraph.PruneRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if req.ThreadIDs == nil {
		return invalidf("thread_ids: required, an array")
	}
	for i, id := range req.ThreadIDs {
		if err := lgText(fmt.Sprintf("thread_ids[%d]", i), id, lgMaxThreadID, true); err != nil {
			return err
		}
	}
	switch req.Strategy {
	case "":
		req.Strategy = langgraph.KeepLatest
	case langgraph.KeepLatest, langgraph.DeleteAll:
	default:
		return invalidf("strategy %q: %s or %s", clip(req.Strategy), langgraph.KeepLatest, langgraph.DeleteAll)
	}
	defer s.metrics.StoreOpSince("langgraph_prune", time.Now())
	if err := s.saver(r).Prune(write(r), req.ThreadIDs, req.Strategy); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// lgDeleteRuns: POST /v1/langgraph/runs/delete
func (s *Server) lgDeleteRuns(w http.ResponseWriter, r *http.Request) error {
	var req langgraph.DeleteRunsRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if req.RunIDs == nil {
		return invalidf("run_ids: required, an array")
	}
	for i, id := range req.RunIDs {
		if err := lgText(fmt.Sprintf("run_ids[%d]", i), id, lgMaxRunID, true); err != nil {
			return err
		}
	}
	defer s.metrics.StoreOpSince("langgraph_delete_runs", time.Now())
	if err := s.saver(r).DeleteForRuns(write(r), req.RunIDs); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// lgDeltaHistory: POST /v1/langgraph/delta-history
func (s *Server) lgDeltaHistory(w http.ResponseWriter, r *http.Request) error {
	var req langgraph.DeltaRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if err := lgConfig("config", req.Config); err != nil {
		return err
	}
	if req.Channels == nil {
		return invalidf("channels: required, an array")
	}
	defer s.metrics.StoreOpSince("langgraph_delta_history", time.Now())
	resp, err := s.saver(r).DeltaHistory(r.Context(), req)
	if err != nil {
		return err
	}
	if resp.Channels == nil {
		resp.Channels = map[string]langgraph.DeltaHistory{}
	}
	for ch, h := range resp.Channels {
		h.Writes = orEmpty(h.Writes)
		resp.Channels[ch] = h
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}
