package httpapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/tokens"
)

// Listing and paging limits.
const (
	defaultLimit = 50
	maxLimit     = 1000
)

// printable reports whether s is UTF-8 without control characters, of at
// most limit bytes.
func printable(s string, limit int) bool {
	if len(s) > limit || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// tenantDB returns the DB scoped to the request's tenant: every thread the
// request touches goes through it, so other tenants' threads are not found.
func (s *Server) tenantDB(r *http.Request) *thread.DB {
	t := tenant(r)
	if db, ok := s.tenants.Load(t); ok {
		return db.(*thread.DB)
	}
	// A DB is a handle on the store, holding no data: one per tenant (the
	// tenants of the API keys) serves every request of that tenant.
	db, _ := s.tenants.LoadOrStore(t, s.db.WithTenant(t))
	return db.(*thread.DB)
}

// threadID returns the path's {id}, checked.
func threadID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if !ids.Valid(id) {
		return "", invalidf("thread id %q: 1 to %d letters, digits, '_', '-' or '.', not starting with '.' or '-'", clip(id), ids.MaxLen)
	}
	return id, nil
}

// thread returns a handle on the thread named by the path's {id}.
func (s *Server) thread(r *http.Request) (*thread.Thread, error) {
	id, err := threadID(r)
	if err != nil {
		return nil, err
	}
	defer s.metrics.StoreOpSince("get", time.Now())
	return s.tenantDB(r).Thread(r.Context(), id)
}

// threadAt is thread, failing with ErrConflict (412) unless the handle is
// at the version the request's If-Match names (want and cond, from ifMatch).
func (s *Server) threadAt(r *http.Request, want etagValue, cond bool) (*thread.Thread, error) {
	th, err := s.thread(r)
	if err != nil {
		return nil, err
	}
	if err := checkVersion(th, want, cond); err != nil {
		return nil, err
	}
	return th, nil
}

// write returns the context for a write: it does not end when the client
// goes away, so that an accepted write finishes.
func write(r *http.Request) context.Context { return context.WithoutCancel(r.Context()) }

func threadLocation(id string) string { return "/v1/threads/" + url.PathEscape(id) }

// answerThread answers with a thread's record and its version as ETag.
func answerThread(w http.ResponseWriter, status int, th *thread.Thread) {
	rec := th.Record()
	setETag(w, rec, rec.Version)
	if status == http.StatusCreated {
		w.Header().Set("Location", threadLocation(rec.ID))
	}
	writeJSON(w, status, recordJSON(rec, th.DB().DefaultRetention()))
}

// checkVersion returns ErrConflict (412 with If-Match) when the request's
// If-Match does not name th's version.
func checkVersion(th *thread.Thread, want etagValue, ok bool) error {
	if !ok {
		return nil
	}
	rec := th.Record()
	if !want.matches(rec, rec.Version) {
		if want.version == rec.Version {
			return errRecreated(rec.ID)
		}
		return fmt.Errorf("thread %s is at version %d, not %d: %w", rec.ID, rec.Version, want.version, thread.ErrConflict)
	}
	return nil
}

// errRecreated is the conflict of an If-Match whose ETag names an earlier
// thread of the same id.
func errRecreated(id string) error {
	return fmt.Errorf("thread %s is not the thread of that ETag: it was deleted and created again: %w", id, thread.ErrConflict)
}

// intParam reads a non-negative integer query parameter, def when absent.
func intParam(q url.Values, name string, def int64) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, invalidf("query parameter %s=%q: a non-negative integer", name, clip(v))
	}
	return n, nil
}

// limitParam reads a page size: default 50, at most 1000 (larger values
// are taken as 1000), at least 1.
func limitParam(q url.Values) (int, error) {
	n, err := intParam(q, "limit", defaultLimit)
	if err != nil {
		return 0, err
	}
	if n < 1 {
		return 0, invalidf("query parameter limit=%d: at least 1", n)
	}
	return int(min(n, maxLimit)), nil
}

// listThreads: GET /v1/threads?label=k:v&kind=&order=&internal=&limit=&cursor=
func (s *Server) listThreads(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	opts := thread.ListOptions{}
	// No thread has a label value longer than the DB's limit.
	maxLabelValue := s.db.Limits().LabelBytes
	for _, l := range q["label"] {
		k, v, ok := strings.Cut(l, ":")
		if !ok || !ids.Valid(k) || !printable(v, maxLabelValue) {
			return invalidf("query parameter label=%q: key:value, the key 1 to %d letters, digits, '_', '-' or '.', the value printable and at most %d bytes",
				clip(l), ids.MaxLen, maxLabelValue)
		}
		if opts.Labels == nil {
			opts.Labels = map[string]string{}
		}
		opts.Labels[k] = v
	}
	if k := thread.Kind(q.Get("kind")); k != "" {
		if k != thread.KindUndetermined && k != thread.KindLocal && k != thread.KindService && k != thread.KindWorkflow {
			return invalidf("query parameter kind=%q: undetermined, local, service or workflow", clip(string(k)))
		}
		opts.Kind = k
	}
	limit, err := limitParam(q)
	if err != nil {
		return err
	}
	switch q.Get("order") {
	case "", "id":
	case "newest":
		// loom's ids are time-ordered: descending ids are newest first.
		opts.Desc = true
	case "updated":
		opts.Order = thread.OrderUpdated
	default:
		return invalidf("query parameter order=%q: id, newest or updated", clip(q.Get("order")))
	}
	// loom's own threads (work logs, sessions, workflows' sub-threads)
	// are not people's: left out unless asked for.
	switch q.Get("internal") {
	case "", "exclude":
		opts.Internal = thread.InternalExclude
	case "include":
		opts.Internal = thread.InternalInclude
	case "only":
		opts.Internal = thread.InternalOnly
	default:
		return invalidf("query parameter internal=%q: exclude, include or only", clip(q.Get("internal")))
	}
	if c := q.Get("cursor"); c != "" {
		if opts.After, opts.AfterUpdated, err = decodeCursor(c, opts.Order); err != nil {
			return err
		}
	}
	opts.Limit = limit + 1
	s.metrics.StoreOp("list")
	resp := listResponse{Threads: []threadJSON{}}
	var last thread.Record
	for th, err := range s.tenantDB(r).Threads(r.Context(), opts) {
		if err != nil {
			return err
		}
		if len(resp.Threads) == limit {
			resp.NextCursor = encodeCursor(&last, opts.Order)
			break
		}
		last = th.Record()
		resp.Threads = append(resp.Threads, recordJSON(last, th.DB().DefaultRetention()))
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// encodeCursor is the cursor after r: its id, and with order=updated its
// update time in microseconds before it ("micros:id"; ids have no ':').
func encodeCursor(r *thread.Record, order thread.Order) string {
	c := r.ID
	if order == thread.OrderUpdated {
		c = strconv.FormatInt(r.UpdatedAt.UnixMicro(), 10) + ":" + r.ID
	}
	return base64.RawURLEncoding.EncodeToString([]byte(c))
}

// decodeCursor reads a cursor encodeCursor made for the same order.
func decodeCursor(c string, order thread.Order) (after string, updated time.Time, err error) {
	bad := invalidf("query parameter cursor=%q: not a cursor this server gave for this order", clip(c))
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", time.Time{}, bad
	}
	after = string(b)
	if order == thread.OrderUpdated {
		micros, id, ok := strings.Cut(after, ":")
		n, err := strconv.ParseInt(micros, 10, 64)
		if !ok || err != nil {
			return "", time.Time{}, bad
		}
		after, updated = id, time.UnixMicro(n).UTC()
	}
	if !ids.Valid(after) {
		return "", time.Time{}, bad
	}
	return after, updated, nil
}

// createThread: POST /v1/threads
func (s *Server) createThread(w http.ResponseWriter, r *http.Request) error {
	var req createRequest
	if err := decode(r, &req, true); err != nil {
		return err
	}
	if req.Kind == thread.KindWorkflow {
		// A thread of kind workflow that its runner did not make has no
		// execution state: every workflow route would fail on it.
		return invalidf("kind workflow: a workflow's thread is made by its runner, not by this route")
	}
	opStart := time.Now()
	th, err := s.tenantDB(r).Create(write(r), thread.CreateOptions{ID: req.ID, Kind: req.Kind, Title: req.Title,
		Labels: req.Labels, Messages: []message.Message(req.Messages), State: req.State})
	s.metrics.StoreOpSince("create", opStart)
	if err != nil {
		return err
	}
	answerThread(w, http.StatusCreated, th)
	return nil
}

// getThread: GET /v1/threads/{id}
func (s *Server) getThread(w http.ResponseWriter, r *http.Request) error {
	th, err := s.thread(r)
	if err != nil {
		return err
	}
	if rec := th.Record(); notModified(r, rec, rec.Version) {
		setETag(w, rec, rec.Version)
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	answerThread(w, http.StatusOK, th)
	return nil
}

// patchThread: PATCH /v1/threads/{id} {title, labels}
func (s *Server) patchThread(w http.ResponseWriter, r *http.Request) error {
	want, cond, err := ifMatch(r)
	if err != nil {
		return err
	}
	var req patchRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	th, err := s.thread(r)
	if err != nil {
		return err
	}
	if req.Title == nil && req.Labels == nil {
		// Nothing to change: no write, no new version.
		if err := checkVersion(th, want, cond); err != nil {
			return err
		}
		answerThread(w, http.StatusOK, th)
		return nil
	}
	ctx := write(r)
	// Without If-Match a change of title or labels does not depend on what
	// else changed: it is retried on the new version a few times.
	for attempt := 0; ; attempt++ {
		if err := checkVersion(th, want, cond); err != nil {
			return err
		}
		s.metrics.StoreOp("update")
		err := th.Update(ctx, thread.UpdateOptions{Title: req.Title, Labels: req.Labels})
		if err == nil {
			break
		}
		if cond || attempt >= 3 || !errors.Is(err, thread.ErrConflict) {
			return err
		}
		s.metrics.Conflict()
		if err := th.Refresh(ctx); err != nil {
			return err
		}
	}
	answerThread(w, http.StatusOK, th)
	return nil
}

// deleteThread: DELETE /v1/threads/{id}
func (s *Server) deleteThread(w http.ResponseWriter, r *http.Request) error {
	want, cond, err := ifMatch(r)
	if err != nil {
		return err
	}
	if !cond {
		// DB.Delete reads the record itself (and hides other tenants'
		// threads): no handle to read first.
		id, err := threadID(r)
		if err != nil {
			return err
		}
		s.metrics.StoreOp("delete")
		if err := s.tenantDB(r).Delete(write(r), id); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	th, err := s.threadAt(r, want, cond)
	if err != nil {
		return err
	}
	s.metrics.StoreOp("delete")
	// Conditional on the version: the handle's delete is a CAS.
	if err := th.Delete(write(r)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// defaultMessages is how many messages GET /v1/threads/{id}/messages
// answers without a limit: the newest of a long thread, not all of it.
const defaultMessages = 100

// getMessages: GET /v1/threads/{id}/messages?limit=&version=&before=
// answers the newest limit messages (defaultMessages when absent; an
// explicit 0 is all of them), and next_before when older ones exist.
func (s *Server) getMessages(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	last, err := intParam(q, "limit", defaultMessages)
	if err != nil {
		return err
	}
	version, err := intParam(q, "version", 0)
	if err != nil {
		return err
	}
	before := q.Get("before")
	if before != "" && !ids.Valid(before) {
		return invalidf("before %q: a message id", clip(before))
	}
	th, err := s.thread(r)
	if err != nil {
		return err
	}
	if version == 0 {
		version = th.Version()
	}
	if version > th.Version() {
		return fmt.Errorf("thread %s has no version %d: %w", th.ID(), version, thread.ErrNotFound)
	}
	rec := th.Record()
	setETag(w, rec, version)
	if notModified(r, rec, version) {
		// A version's messages never change.
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	// One message more than asked tells whether older ones exist.
	read := 0
	if last > 0 {
		read = int(min(last, 1<<30)) + 1
	}
	opStart := time.Now()
	msgs, err := th.Messages(r.Context(), thread.ReadOptions{Version: version, Last: read, Before: before})
	s.metrics.StoreOpSince("messages", opStart)
	if err != nil {
		w.Header().Del("ETag")
		return err
	}
	resp := messagesResponse{Version: version}
	if read > 0 && len(msgs) == read {
		msgs = msgs[1:]
		resp.NextBefore = msgs[0].ID
	}
	resp.Messages = orEmpty(msgs)
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// appendMessages: POST /v1/threads/{id}/messages {messages}
func (s *Server) appendMessages(w http.ResponseWriter, r *http.Request) error {
	want, cond, err := ifMatch(r)
	if err != nil {
		return err
	}
	var req appendRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if len(req.Messages) == 0 {
		return invalidf("messages: at least one message")
	}
	opts := thread.CommitOptions{Messages: []message.Message(req.Messages)}
	if !cond {
		// No If-Match: one trip to the store, which reads the thread's
		// record and head under its lock as it writes (DB.Append).
		id, err := threadID(r)
		if err != nil {
			return err
		}
		opStart := time.Now()
		c, rec, err := s.tenantDB(r).Append(write(r), id, opts)
		s.metrics.StoreOpSince("append", opStart)
		if err != nil {
			return err
		}
		setETag(w, rec, rec.Version)
		writeJSON(w, http.StatusCreated, commitResponse{Version: rec.Version, Commit: c.ID, Messages: orEmpty(c.Messages)})
		return nil
	}
	th, err := s.thread(r)
	if err != nil {
		return err
	}
	{
		if want.version < 1 {
			return fmt.Errorf("thread %s has no version %d: %w", th.ID(), want.version, thread.ErrConflict)
		}
		if want.created != 0 && want.created != th.Record().CreatedAt.UnixMicro() {
			return errRecreated(th.ID())
		}
		opts.IfVersion = want.version
	}
	opStart := time.Now()
	c, err := th.Commit(write(r), opts)
	s.metrics.StoreOpSince("append", opStart)
	if err != nil {
		return err
	}
	rec := th.Record()
	setETag(w, rec, rec.Version)
	writeJSON(w, http.StatusCreated, commitResponse{Version: rec.Version, Commit: c.ID, Messages: orEmpty(c.Messages)})
	return nil
}

// view: POST /v1/threads/{id}/view
func (s *Server) view(w http.ResponseWriter, r *http.Request) error {
	var req viewRequest
	if err := decode(r, &req, true); err != nil {
		return err
	}
	opts := thread.ViewOptions{Version: req.Version, Model: req.Model, Budget: req.Budget, MaxMessages: req.MaxMessages,
		Pinned: req.Pinned, Instructions: []message.Message(req.Instructions)}
	if req.Version < 0 || req.Budget < 0 || req.MaxMessages < 0 {
		return invalidf("version, budget and max_messages: not negative")
	}
	if req.Encoding != "" {
		enc, ok := tokens.EncodingByName(req.Encoding)
		if !ok {
			return invalidf("encoding %q: o200k_base or cl100k_base", clip(req.Encoding))
		}
		opts.Encoding = enc
	}
	summarizes := false
	for i, raw := range req.Strategies {
		st, err := s.strategy(raw, fmt.Sprintf("strategies[%d]", i))
		if err != nil {
			return err
		}
		_, sum := st.(thread.Summarize)
		summarizes = summarizes || sum
		opts.Strategies = append(opts.Strategies, st)
	}
	th, err := s.thread(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if summarizes {
		// A summary is committed once it is paid for.
		ctx = write(r)
	}
	opStart := time.Now()
	v, err := th.View(ctx, opts)
	s.metrics.StoreOpSince("view", opStart)
	if err != nil {
		return err
	}
	version := req.Version
	if version == 0 {
		version = th.Version()
	}
	writeJSON(w, http.StatusOK, viewResponse{Version: version, Messages: orEmpty(v.Messages), Tokens: v.Tokens,
		Dropped: orEmpty(v.Dropped), Elided: orEmpty(v.Elided), Compacted: v.Compacted})
	return nil
}

// strategy decodes one view strategy, which errors call name: a type and
// that type's parameters.
func (s *Server) strategy(raw []byte, name string) (thread.Strategy, error) {
	var sr strategyRequest
	if err := decodeValue(raw, &sr, false, name); err != nil {
		return nil, err
	}
	only := func(allowed *int, name string) error {
		for _, p := range []struct {
			v    *int
			name string
		}{{sr.Turns, "turns"}, {sr.KeepLast, "keep_last"}, {sr.Keep, "keep"}} {
			if p.v != nil && p.v != allowed {
				return invalidf("%s: strategy %s takes no %s", name, sr.Type, p.name)
			}
			if p.v != nil && *p.v < 0 {
				return invalidf("%s: strategy %s: %s is negative", name, sr.Type, p.name)
			}
		}
		if allowed == nil && name != "" {
			return invalidf("%s: strategy %s needs %s", name, sr.Type, name)
		}
		return nil
	}
	val := func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	}
	switch sr.Type {
	case "drop_oldest":
		return thread.DropOldest{}, only(nil, "")
	case "sliding_window":
		if err := only(sr.Turns, "turns"); err != nil {
			return nil, err
		}
		if *sr.Turns < 1 {
			return nil, invalidf("%s: strategy sliding_window: turns must be at least 1", name)
		}
		return thread.SlidingWindow{Turns: *sr.Turns}, nil
	case "elide_tool_results":
		if err := only(sr.KeepLast, ""); err != nil {
			return nil, err
		}
		return thread.ElideToolResults{KeepLast: val(sr.KeepLast)}, nil
	case "summarize":
		if err := only(sr.Keep, ""); err != nil {
			return nil, err
		}
		if s.agent == nil {
			return nil, errNoModel("strategy summarize needs a model")
		}
		return thread.Summarize{Summarizer: agent.Summarizer{Client: s.agent.Client()}, Keep: val(sr.Keep)}, nil
	}
	return nil, invalidf("%s: type %q: drop_oldest, sliding_window, elide_tool_results or summarize", name, clip(sr.Type))
}

// fork: POST /v1/threads/{id}/fork
func (s *Server) fork(w http.ResponseWriter, r *http.Request) error {
	var req forkRequest
	if err := decode(r, &req, true); err != nil {
		return err
	}
	if req.Version < 0 {
		return invalidf("version: not negative")
	}
	th, err := s.thread(r)
	if err != nil {
		return err
	}
	opStart := time.Now()
	// The new thread is made through the same tenant's DB: it belongs to
	// the caller, and an id taken by any thread is a conflict.
	f, err := th.Fork(write(r), thread.ForkOptions{At: req.At, Version: req.Version, ID: req.ID, Title: req.Title, Labels: req.Labels})
	s.metrics.StoreOpSince("fork", opStart)
	if err != nil {
		return err
	}
	answerThread(w, http.StatusCreated, f)
	return nil
}

// copyThread: POST /v1/threads/{id}/copy
func (s *Server) copyThread(w http.ResponseWriter, r *http.Request) error {
	var req copyRequest
	if err := decode(r, &req, true); err != nil {
		return err
	}
	if req.Version < 0 {
		return invalidf("version: not negative")
	}
	th, err := s.thread(r)
	if err != nil {
		return err
	}
	opStart := time.Now()
	c, err := th.Copy(write(r), thread.ForkOptions{Version: req.Version, ID: req.ID, Title: req.Title, Labels: req.Labels})
	s.metrics.StoreOpSince("copy", opStart)
	if err != nil {
		return err
	}
	answerThread(w, http.StatusCreated, c)
	return nil
}

// history: GET /v1/threads/{id}/history?limit=&before=
func (s *Server) history(w http.ResponseWriter, r *http.Request) error {
	return historyPage(w, r, func() (historyFunc, error) {
		th, err := s.thread(r)
		if err != nil {
			return nil, err
		}
		s.metrics.StoreOp("history")
		return th.History, nil
	})
}

// historyFunc is Thread.History or Workflow.History.
type historyFunc = func(context.Context, thread.HistoryOptions) iter.Seq2[thread.HistoryEntry, error]

// historyPage checks r's query (limit, before), then opens what it names
// and answers with a page of its history.
func historyPage(w http.ResponseWriter, r *http.Request, open func() (historyFunc, error)) error {
	q := r.URL.Query()
	limit, err := limitParam(q)
	if err != nil {
		return err
	}
	before, err := intParam(q, "before", 0)
	if err != nil {
		return err
	}
	history, err := open()
	if err != nil {
		return err
	}
	resp := historyResponse{Entries: []historyEntryJSON{}}
	for e, err := range history(r.Context(), thread.HistoryOptions{Before: before, Limit: limit}) {
		if err != nil {
			return err
		}
		resp.Entries = append(resp.Entries, historyEntryJSON{Version: e.Version, Commit: e.Commit, Op: e.Op, Time: e.Time})
	}
	if n := len(resp.Entries); n == limit && resp.Entries[n-1].Version > 1 {
		resp.NextBefore = resp.Entries[n-1].Version
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func checkpointOf(cp thread.Checkpoint) checkpointJSON {
	return checkpointJSON{Name: cp.Name, Commit: cp.Commit, Version: cp.Version, CreatedAt: cp.CreatedAt}
}

// listCheckpoints: GET /v1/threads/{id}/checkpoints
func (s *Server) listCheckpoints(w http.ResponseWriter, r *http.Request) error {
	th, err := s.thread(r)
	if err != nil {
		return err
	}
	s.metrics.StoreOp("checkpoints")
	return writeCheckpoints(w, th.Checkpoints(r.Context()))
}

// writeCheckpoints answers with the checkpoints of cps, of a thread or a
// workflow.
func writeCheckpoints(w http.ResponseWriter, cps iter.Seq2[thread.Checkpoint, error]) error {
	resp := checkpointsResponse{Checkpoints: []checkpointJSON{}}
	for cp, err := range cps {
		if err != nil {
			return err
		}
		resp.Checkpoints = append(resp.Checkpoints, checkpointOf(cp))
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// createCheckpoint: POST /v1/threads/{id}/checkpoints {name}
func (s *Server) createCheckpoint(w http.ResponseWriter, r *http.Request) error {
	want, cond, err := ifMatch(r)
	if err != nil {
		return err
	}
	var req checkpointRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	// The checkpoint names the head of the handle's version: with
	// If-Match, the version the client saw.
	th, err := s.threadAt(r, want, cond)
	if err != nil {
		return err
	}
	opStart := time.Now()
	cp, err := th.Checkpoint(write(r), req.Name)
	s.metrics.StoreOpSince("checkpoint", opStart)
	if err != nil {
		return err
	}
	w.Header().Set("Location", threadLocation(th.ID())+"/checkpoints/"+url.PathEscape(cp.Name))
	writeJSON(w, http.StatusCreated, checkpointOf(cp))
	return nil
}

// deleteCheckpoint: DELETE /v1/threads/{id}/checkpoints/{name}
func (s *Server) deleteCheckpoint(w http.ResponseWriter, r *http.Request) error {
	th, err := s.thread(r)
	if err != nil {
		return err
	}
	s.metrics.StoreOp("delete_checkpoint")
	if err := th.DeleteCheckpoint(write(r), r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// rollback: POST /v1/threads/{id}/rollback {checkpoint} or {version}
func (s *Server) rollback(w http.ResponseWriter, r *http.Request) error {
	want, cond, err := ifMatch(r)
	if err != nil {
		return err
	}
	var req rollbackRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if (req.Checkpoint == "") == (req.Version == 0) || req.Version < 0 {
		return invalidf("rollback: either checkpoint (a name) or version (at least 1)")
	}
	th, err := s.threadAt(r, want, cond)
	if err != nil {
		return err
	}
	ctx := write(r)
	if req.Checkpoint != "" {
		s.metrics.StoreOp("rollback")
		err = th.Rollback(ctx, req.Checkpoint)
	} else {
		s.metrics.StoreOp("restore")
		err = th.Restore(ctx, req.Version)
	}
	if err != nil {
		return err
	}
	answerThread(w, http.StatusOK, th)
	return nil
}

// reset: POST /v1/threads/{id}/reset
func (s *Server) reset(w http.ResponseWriter, r *http.Request) error {
	want, cond, err := ifMatch(r)
	if err != nil {
		return err
	}
	var req struct{}
	if err := decode(r, &req, true); err != nil {
		return err
	}
	th, err := s.threadAt(r, want, cond)
	if err != nil {
		return err
	}
	s.metrics.StoreOp("reset")
	if err := th.Reset(write(r)); err != nil {
		return err
	}
	answerThread(w, http.StatusOK, th)
	return nil
}

// export: GET /v1/threads/{id}/export?history=true
func (s *Server) export(w http.ResponseWriter, r *http.Request) error {
	history := false
	if v := r.URL.Query().Get("history"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return invalidf("query parameter history=%q: true or false", clip(v))
		}
		history = b
	}
	th, err := s.thread(r)
	if err != nil {
		return err
	}
	s.metrics.StoreOp("save")
	lw := &lazyWriter{w: w, start: func(h http.Header) {
		h.Set("Content-Type", "application/json")
		h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", th.ID()+".json"))
		h.Set("ETag", etag(th.Record(), th.Version()))
	}}
	if err := th.Save(r.Context(), lw, thread.SaveOptions{History: history}); err != nil {
		if !lw.started {
			return err
		}
		// Part of the document is sent: the client sees a cut JSON
		// document, and the log has why.
		s.reportError(r, err)
	}
	return nil
}

// lazyWriter sends the headers start sets with the first byte, so that an
// error before it can still be answered with an error status.
type lazyWriter struct {
	w       http.ResponseWriter
	start   func(http.Header)
	started bool
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	if !l.started {
		l.started = true
		l.start(l.w.Header())
		l.w.WriteHeader(http.StatusOK)
	}
	return l.w.Write(p)
}

// importThread: POST /v1/threads/import?id=
func (s *Server) importThread(w http.ResponseWriter, r *http.Request) error {
	id := r.URL.Query().Get("id")
	if id != "" && !ids.Valid(id) {
		return invalidf("query parameter id=%q: 1 to %d letters, digits, '_', '-' or '.'", clip(id), ids.MaxLen)
	}
	s.metrics.StoreOp("load")
	// The thread is created in the caller's tenant; an id that any thread
	// has is a conflict.
	th, err := s.tenantDB(r).Load(write(r), r.Body, thread.LoadOptions{ID: id})
	if err != nil {
		return err
	}
	answerThread(w, http.StatusCreated, th)
	return nil
}
