package openaiapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/httpapi"
	"github.com/loomthreads/loom/internal/apierr"
	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/internal/oaiitem"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// The commit metadata of a response: its object without id and output
// (openai.response, over openai.response.1, .2… when longer than a value
// may be), and how many of the commit's messages are its input.
const (
	metaResponse = "openai.response"
	metaInputs   = "openai.inputs"
	// metaChunk is the most bytes of one metadata value loom writes (the
	// store takes 4096).
	metaChunk = 4000
	// metaChunks caps the chunks of a response's settings: with
	// openai.inputs and room to spare, well inside a commit's 64 entries.
	metaChunks = 60
)

// responseObject is a response as OpenAI's API shows it: the answer to
// POST /responses, GET /responses/{id}, and the response inside stream
// events.
type responseObject struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	CompletedAt        *int64            `json:"completed_at"`
	Status             string            `json:"status"`
	Background         bool              `json:"background"`
	Error              *responseError    `json:"error"`
	IncompleteDetails  *incompleteReason `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int64            `json:"max_output_tokens"`
	MaxToolCalls       *int64            `json:"max_tool_calls"`
	Model              string            `json:"model"`
	Output             []json.RawMessage `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Conversation       *conversationRef  `json:"conversation"`
	Reasoning          json.RawMessage   `json:"reasoning"`
	SafetyIdentifier   *string           `json:"safety_identifier"`
	PromptCacheKey     *string           `json:"prompt_cache_key"`
	ServiceTier        string            `json:"service_tier"`
	Store              bool              `json:"store"`
	Temperature        float64           `json:"temperature"`
	Text               json.RawMessage   `json:"text"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Tools              []json.RawMessage `json:"tools"`
	TopLogprobs        int               `json:"top_logprobs"`
	TopP               float64           `json:"top_p"`
	Truncation         string            `json:"truncation"`
	Usage              *responseUsage    `json:"usage"`
	User               *string           `json:"user"`
	Metadata           map[string]string `json:"metadata"`
}

type conversationRef struct {
	ID string `json:"id"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteReason struct {
	Reason string `json:"reason"`
}

type responseUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

func usageOf(u message.Usage) *responseUsage {
	out := &responseUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens}
	out.InputTokensDetails.CachedTokens = u.CachedInputTokens
	out.OutputTokensDetails.ReasoningTokens = u.ReasoningTokens
	if out.TotalTokens == 0 {
		out.TotalTokens = u.InputTokens + u.OutputTokens
	}
	return out
}

// A response id is its key — "resp_" and 26 id characters, the name of
// its checkpoint — then "_" and the id of the thread it is on, so that the
// id alone finds the response, through the caller's tenant.
const responseKeyLen = len("resp_") + 26

// parseResponseID splits a response id into its key and thread id.
func parseResponseID(id string) (key, threadID string, ok bool) {
	if len(id) <= responseKeyLen+1 || !strings.HasPrefix(id, "resp_") || id[responseKeyLen] != '_' {
		return "", "", false
	}
	key, threadID = id[:responseKeyLen], id[responseKeyLen+1:]
	if !ids.Valid(key) || !ids.Valid(threadID) {
		return "", "", false
	}
	return key, threadID, true
}

// target is where a response goes, and what the model is sent before its
// input.
type target struct {
	db       *thread.DB
	th       *thread.Thread // the thread to commit on or fork; nil: a new thread
	fork     bool           // fork th at forkAt into threadID
	forkAt   int64
	threadID string // the thread the response is on
	context  []message.Message
	// previousAt is the version of th at the previous response, if any.
	previousAt int64
}

// resolve finds where req's response goes and reads its context: the
// conversation's messages, or the line of the previous response, whose
// thread is continued where its head is that response and forked there
// otherwise; without either, a new thread.
func (s *Server) resolve(ctx context.Context, db *thread.DB, req *responseRequest) (*target, error) {
	tg := &target{db: db}
	switch {
	case req.conversation != "":
		th, err := db.Thread(ctx, req.conversation)
		if errors.Is(err, thread.ErrNotFound) {
			return nil, notFound("Conversation", req.conversation)
		}
		if err != nil {
			return nil, err
		}
		if th.Kind() == thread.KindService {
			return nil, invalidParam("conversation", "Conversation '%s' is a service-managed thread: its chat service keeps its messages, so loom reads it but does not write to it.", clip(req.conversation))
		}
		msgs, err := th.Messages(ctx, thread.ReadOptions{})
		if err != nil {
			return nil, err
		}
		tg.th, tg.threadID, tg.context = th, th.ID(), msgs
	case req.previous != "":
		th, cp, err := s.findResponse(ctx, db, req.previous)
		if err != nil {
			if e := (*Error)(nil); errors.As(err, &e) && e.Status == http.StatusNotFound {
				e.Param = "previous_response_id"
			}
			return nil, err
		}
		if th.Kind() == thread.KindService {
			return nil, invalidParam("previous_response_id", "Response '%s' is on a service-managed thread, which loom does not write to.", clip(req.previous))
		}
		msgs, err := th.Messages(ctx, thread.ReadOptions{Version: cp.Version})
		if err != nil {
			return nil, err
		}
		tg.th, tg.context, tg.previousAt = th, msgs, cp.Version
		if th.Record().Head == cp.Commit {
			tg.threadID = th.ID()
		} else {
			tg.fork, tg.forkAt, tg.threadID = true, cp.Version, thread.NewThreadID()
		}
	default:
		tg.threadID = thread.NewThreadID()
	}
	// An input item that reuses an id of its context would be refused by
	// the commit, after the model ran: refuse it now.
	// Item ids are message ids, and "<message id>.<k>" for the k-th item
	// of a message with several.
	seen := make(map[string]bool, len(tg.context))
	for _, m := range tg.context {
		seen[m.ID] = true
	}
	for _, it := range oaiitem.Items(tg.context) {
		seen[it.ID] = true
	}
	for i, m := range req.input {
		if seen[m.ID] {
			return nil, invalidParam(fmt.Sprintf("input[%d].id", i), "Invalid 'input[%d].id': an item with id '%s' is already in the conversation this response continues.", i, clip(m.ID))
		}
	}
	return tg, nil
}

// findResponse opens the thread of the response id through db and finds
// its checkpoint: an id of another tenant, a deleted response or thread
// is not found.
func (s *Server) findResponse(ctx context.Context, db *thread.DB, id string) (*thread.Thread, thread.Checkpoint, error) {
	key, threadID, ok := parseResponseID(id)
	if !ok {
		return nil, thread.Checkpoint{}, notFound("Response", id)
	}
	th, err := db.Thread(ctx, threadID)
	if errors.Is(err, thread.ErrNotFound) {
		return nil, thread.Checkpoint{}, notFound("Response", id)
	}
	if err != nil {
		return nil, thread.Checkpoint{}, err
	}
	cp, found, err := checkpointOf(ctx, th, key)
	if err != nil || found {
		return th, cp, err
	}
	// A streamed response that lost the race for its thread to another
	// continuation was committed on a fork of it, and keeps the id its
	// first event announced: look among the thread's forks.
	_, family, err := db.Family(ctx, threadID)
	if err != nil {
		return nil, thread.Checkpoint{}, err
	}
	for _, rec := range family {
		if rec.ForkedFrom.Thread != threadID || rec.ID == threadID {
			continue
		}
		fork, err := db.Thread(ctx, rec.ID)
		if errors.Is(err, thread.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, thread.Checkpoint{}, err
		}
		if cp, found, err := checkpointOf(ctx, fork, key); err != nil || found {
			return fork, cp, err
		}
	}
	return nil, thread.Checkpoint{}, notFound("Response", id)
}

// checkpointOf finds th's checkpoint name.
func checkpointOf(ctx context.Context, th *thread.Thread, name string) (thread.Checkpoint, bool, error) {
	for cp, err := range th.Checkpoints(ctx) {
		if err != nil {
			return thread.Checkpoint{}, false, err
		}
		if cp.Name == name {
			return cp, true, nil
		}
	}
	return thread.Checkpoint{}, false, nil
}

// loadResponse reads the stored response id: its object, and its commit.
func (s *Server) loadResponse(ctx context.Context, db *thread.DB, id string) (*responseObject, *thread.Commit, error) {
	th, cp, err := s.findResponse(ctx, db, id)
	if err != nil {
		return nil, nil, err
	}
	c, err := db.Store().Commit(ctx, cp.Commit)
	if err != nil {
		return nil, nil, fmt.Errorf("response %s of %s: %w", cp.Name, th.ID(), err)
	}
	obj, inputs, err := decodeResponseMeta(c.Metadata)
	if err != nil {
		// A checkpoint that merely looks like a response's (named so by
		// hand, on a commit that holds no response) names none.
		s.log.DebugContext(ctx, "openai api: a checkpoint named as a response holds none", "thread", th.ID(), "checkpoint", cp.Name, "err", err)
		return nil, nil, notFound("Response", id)
	}
	obj.ID = id
	obj.Output = itemsJSON(c.Messages[min(inputs, len(c.Messages)):])
	return obj, c, nil
}

// responseMeta is the commit metadata of a response: obj without its id
// and output, in chunks that fit a metadata value, and the number of
// input messages.
func responseMeta(obj *responseObject, inputs int) (map[string]string, error) {
	st := *obj
	st.ID, st.Output = "", nil
	data, err := json.Marshal(&st)
	if err != nil {
		return nil, err
	}
	s := string(data)
	meta := map[string]string{metaInputs: strconv.Itoa(inputs)}
	for n := 0; s != ""; n++ {
		if n == metaChunks {
			return nil, invalidParam("", "The response's settings (instructions, tools, metadata) take %d bytes, over the %d loom can keep with a response.", len(data), metaChunks*metaChunk)
		}
		cut := min(len(s), metaChunk)
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut--
		}
		key := metaResponse
		if n > 0 {
			key += "." + strconv.Itoa(n)
		}
		meta[key] = s[:cut]
		s = s[cut:]
	}
	return meta, nil
}

// decodeResponseMeta reads what responseMeta wrote.
func decodeResponseMeta(meta map[string]string) (*responseObject, int, error) {
	first, ok := meta[metaResponse]
	if !ok {
		return nil, 0, errors.New("no response metadata")
	}
	var b strings.Builder
	b.WriteString(first)
	for n := 1; ; n++ {
		part, ok := meta[metaResponse+"."+strconv.Itoa(n)]
		if !ok {
			break
		}
		b.WriteString(part)
	}
	var obj responseObject
	if err := json.Unmarshal([]byte(b.String()), &obj); err != nil {
		return nil, 0, fmt.Errorf("response metadata: %w", err)
	}
	inputs, err := strconv.Atoi(meta[metaInputs])
	if err != nil || inputs < 0 {
		return nil, 0, fmt.Errorf("response metadata: inputs %q", meta[metaInputs])
	}
	return &obj, inputs, nil
}

// itemsJSON is the items of msgs, as a response's output or input shows
// them.
func itemsJSON(msgs []message.Message) []json.RawMessage {
	out := []json.RawMessage{}
	for _, it := range oaiitem.Items(msgs) {
		out = append(out, it.JSON)
	}
	return out
}

// readBody reads a request body as decode does.
func readBody(r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, err
		}
		return nil, invalidParam("", "The request body could not be read.")
	}
	return data, nil
}

// errNoModel answers POST /responses on a server without a model.
var errNoModel = &Error{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: "model_not_found",
	Message: "This loom server has no model: start it with --provider (scripted for a demo)."}

// pending is a response being made: the request, where it goes, its
// object so far.
type pending struct {
	req *responseRequest
	tg  *target
	key string
	obj *responseObject
	// announced says that obj's id was sent (a stream's first event):
	// it names the response for good.
	announced bool
}

func (s *Server) createResponse(w http.ResponseWriter, r *http.Request) error {
	data, err := readBody(r)
	if err != nil {
		return err
	}
	req, err := parseResponseRequest(data, s.model)
	if err != nil {
		return err
	}
	if s.chat == nil {
		return errNoModel
	}
	ctx := r.Context()
	db := s.tenantDB(r)
	tg, err := s.resolve(ctx, db, req)
	if err != nil {
		return err
	}
	p := &pending{req: req, tg: tg, key: ids.New("resp_")}
	obj := req.settings
	obj.ID = p.key + "_" + tg.threadID
	obj.CreatedAt = time.Now().Unix()
	obj.Status = "in_progress"
	obj.Output = []json.RawMessage{}
	p.obj = &obj
	// What the commit would refuse of the input and the settings is
	// refused before the model runs.
	meta, err := responseMeta(p.asSaved(), len(req.input))
	if err != nil {
		return err
	}
	if err := db.CheckCommit(thread.CommitOptions{Messages: req.input, Metadata: meta}); err != nil {
		return invalidParam("input", "Invalid 'input': %v.", err)
	}
	msgs := oaiitem.Coalesce(append(append([]message.Message(nil), tg.context...), req.input...))
	opts := req.chat
	if req.stream {
		return s.streamResponse(w, r, p, msgs, &opts)
	}
	resp, err := s.chat.Response(ctx, msgs, &opts)
	if err == nil && resp == nil {
		err = errors.New("the model returned no response")
	}
	if err != nil {
		return s.modelError(r, err)
	}
	output := splitOutput(resp.Messages)
	p.complete(resp, output)
	if err := s.save(ctx, p, output); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p.obj)
	return nil
}

// asSaved is p's object as large as it can be once the model has
// answered (the longest status, usage and times), so that settings that
// pass the check before the model runs are sure to fit when saved.
func (p *pending) asSaved() *responseObject {
	obj := *p.obj
	most := int64(math.MaxInt64)
	obj.Status, obj.IncompleteDetails, obj.CompletedAt = "incomplete", &incompleteReason{Reason: "max_output_tokens"}, &most
	obj.Usage = &responseUsage{InputTokens: most, OutputTokens: most, TotalTokens: most}
	obj.Usage.InputTokensDetails.CachedTokens, obj.Usage.OutputTokensDetails.ReasoningTokens = most, most
	return &obj
}

// splitOutput splits a model's messages into one message per item, with
// fresh ids.
func splitOutput(msgs []message.Message) []message.Message {
	var out []message.Message
	for _, m := range msgs {
		out = append(out, oaiitem.Split(m)...)
	}
	return out
}

// complete fills in p's object from the model's response and its output
// messages.
func (p *pending) complete(resp *agent.ChatResponse, output []message.Message) {
	obj := p.obj
	obj.Output = itemsJSON(output)
	obj.Status = "completed"
	switch resp.FinishReason {
	case agent.FinishLength:
		obj.Status, obj.IncompleteDetails = "incomplete", &incompleteReason{Reason: "max_output_tokens"}
	case agent.FinishContentFilter:
		obj.Status, obj.IncompleteDetails = "incomplete", &incompleteReason{Reason: "content_filter"}
	}
	obj.Usage = usageOf(resp.Usage)
	done := time.Now().Unix()
	obj.CompletedAt = &done
}

// modelError is the answer to a model's failure: a provider's error as
// loom's error table has it (its own message may echo the request, and is
// not sent), a plain error as a 502 whose text is logged.
func (s *Server) modelError(r *http.Request, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var pe *agent.ProviderError
	if errors.As(err, &pe) {
		status, code, msg := apierr.Classify(err, false)
		return &Error{Status: status, Type: typeOf(status), Code: code, Message: msg}
	}
	id := httpapi.RequestID(r.Context())
	s.log.WarnContext(r.Context(), "openai api: the model failed", "request_id", id, "err", err)
	return &Error{Status: http.StatusBadGateway, Type: typeServer, Code: "model_error",
		Message: "The model failed to answer (request id " + id + "); nothing was stored."}
}

// save writes p: one commit of its input and output messages, with the
// response's metadata, and — when stored — the checkpoint that names it,
// on the thread p's target says, in one atomic group. A conversation's
// commit is an append: it goes on whatever the head has become, tried
// again after a short pause while other writers move the thread. A
// previous response's is a compare-and-swap that forks at the response
// when it loses. The saves of this server on one thread take turns, so
// that they do not race one another. With store false nothing is
// written, unless a conversation is continued: its items are appended (as
// OpenAI adds them), with no checkpoint. The commit is finished even if
// the client has gone.
func (s *Server) save(ctx context.Context, p *pending, output []message.Message) error {
	ctx = context.WithoutCancel(ctx)
	tg := p.tg
	if !p.req.store && p.req.conversation == "" {
		return nil
	}
	msgs := make([]message.Message, 0, len(p.req.input)+len(output))
	msgs = append(append(msgs, p.req.input...), output...)
	if tg.th != nil {
		defer s.saves.lock(tg.th.ID())()
		if p.req.conversation != "" {
			// The saves that came first have moved it.
			if err := tg.th.Refresh(ctx); err != nil {
				return err
			}
		}
	}
	for attempt := 0; ; attempt++ {
		meta, err := responseMeta(p.obj, len(p.req.input))
		if err != nil {
			return err
		}
		opts := thread.CommitOptions{Messages: msgs, Metadata: meta}
		if !p.req.store {
			if len(msgs) == 0 {
				return nil // no input, and a model that said nothing
			}
			_, err := tg.th.Commit(ctx, opts)
			return err
		}
		g := tg.db.Group()
		th := tg.th
		switch {
		case th == nil:
			th, err = g.Create(ctx, thread.CreateOptions{ID: tg.threadID, Kind: thread.KindLocal, Title: titleOf(p.req.input),
				Labels: map[string]string{"openai": "responses"}})
		case tg.fork:
			th, err = g.Fork(ctx, th, thread.ForkOptions{ID: tg.threadID, Version: tg.forkAt})
		}
		if err == nil {
			_, err = g.Commit(ctx, th, opts)
		}
		if err == nil {
			err = g.Checkpoint(ctx, th, p.key)
		}
		if err == nil {
			err = g.Apply(ctx)
		}
		if err == nil || !errors.Is(err, thread.ErrConflict) || errors.Is(err, thread.ErrDuplicateID) {
			return err
		}
		switch {
		case p.req.conversation != "" && attempt < maxMoves:
			// Appends commute: the response goes after what came in
			// meanwhile.
			pause := time.Duration(1<<min(attempt, 6)) * time.Millisecond
			time.Sleep(pause/2 + rand.N(pause))
			if err := tg.th.Refresh(ctx); err != nil {
				return err
			}
		case p.req.previous != "" && !tg.fork:
			// The previous response is no longer the head: branch there.
			// A stream keeps the id its first event announced (found
			// then among the thread's forks); an answer not yet sent
			// names the fork.
			tg.fork, tg.forkAt, tg.threadID = true, tg.previousAt, thread.NewThreadID()
			if !p.announced {
				p.obj.ID = p.key + "_" + tg.threadID
			}
		default:
			return errKeptMoving
		}
	}
}

// errKeptMoving answers a save that other writers kept beating.
var errKeptMoving = &Error{Status: http.StatusConflict, Type: typeInvalidRequest, Code: "conflict",
	Message: "The conversation kept changing while the response was saved; nothing was stored. Try again."}

// threadLocks are locks by thread id, each kept while someone holds or
// waits for it.
type threadLocks struct {
	mu sync.Mutex
	m  map[string]*threadLock
}

type threadLock struct {
	sync.Mutex
	users int
}

// lock takes the lock of id and returns its release.
func (l *threadLocks) lock(id string) (unlock func()) {
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[string]*threadLock)
	}
	tl := l.m[id]
	if tl == nil {
		tl = &threadLock{}
		l.m[id] = tl
	}
	tl.users++
	l.mu.Unlock()
	tl.Lock()
	return func() {
		tl.Unlock()
		l.mu.Lock()
		if tl.users--; tl.users == 0 {
			delete(l.m, id)
		}
		l.mu.Unlock()
	}
}

func (s *Server) getResponse(w http.ResponseWriter, r *http.Request) error {
	if v := r.URL.Query().Get("stream"); v != "" && v != "false" {
		return unsupported("stream", "streaming a stored response again: GET it without stream")
	}
	if err := checkInclude(r); err != nil {
		return err
	}
	obj, _, err := s.loadResponse(r.Context(), s.tenantDB(r), r.PathValue("response_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, obj)
	return nil
}

func (s *Server) deleteResponse(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("response_id")
	th, cp, err := s.findResponse(r.Context(), s.tenantDB(r), id)
	if err != nil {
		return err
	}
	if err := th.DeleteCheckpoint(context.WithoutCancel(r.Context()), cp.Name); err != nil {
		if errors.Is(err, thread.ErrNotFound) {
			return notFound("Response", id)
		}
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response.deleted", "deleted": true})
	return nil
}

// compactResponses and countInputTokens answer the Responses API's
// endpoints loom does not have with a 400 that says so, not as an unknown
// URL: an SDK calls them (the Agents SDK's compaction session compacts).
func (s *Server) compactResponses(w http.ResponseWriter, r *http.Request) error {
	return unsupported("", "compacting responses: a loom conversation keeps its whole history, and a client that wants it shorter forks it or rolls it back")
}

func (s *Server) countInputTokens(w http.ResponseWriter, r *http.Request) error {
	return unsupported("", "counting input tokens: the usage of each response says what its input took")
}

func (s *Server) cancelResponse(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("response_id")
	if _, _, err := s.findResponse(r.Context(), s.tenantDB(r), id); err != nil {
		return err
	}
	return &Error{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: "unsupported_parameter",
		Message: "loom does not support background responses, so there is nothing to cancel: only a response created with background=true can be cancelled."}
}

// listInputItems: GET /responses/{response_id}/input_items, a list of
// the response's input items as the conversation items' lists are paged.
func (s *Server) listInputItems(w http.ResponseWriter, r *http.Request) error {
	p, err := parseList(r)
	if err != nil {
		return err
	}
	_, c, err := s.loadResponse(r.Context(), s.tenantDB(r), r.PathValue("response_id"))
	if err != nil {
		return err
	}
	_, inputs, err := decodeResponseMeta(c.Metadata)
	if err != nil {
		return err
	}
	items := oaiitem.Items(c.Messages[:min(inputs, len(c.Messages))])
	if !p.asc {
		slices.Reverse(items)
	}
	start := 0
	if p.after != "" {
		start = slices.IndexFunc(items, func(it oaiitem.Item) bool { return it.ID == p.after }) + 1
		if start == 0 {
			return afterNotFound(p.after)
		}
	}
	end := min(start+p.limit, len(items))
	writeItemList(w, items[start:end], end < len(items))
	return nil
}
