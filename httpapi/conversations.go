package httpapi

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/loomthreads/loom/conversation"
	"github.com/loomthreads/loom/internal/apierr"
	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// The conversation routes: /v1/conversations/… drives live conversations
// (package conversation) for front ends in any language — commands by
// POST, events as Server-Sent Events. A conversation is live in the
// server process that opened it (on its first request here); its thread
// is in the store like any other.

// lives holds the live conversations of a server, by tenant and id.
type lives struct {
	mu     sync.Mutex
	m      map[string]*live
	closed bool
}

// live is one live conversation and the event streams that listen to it.
type live struct {
	conv   *conversation.Conversation
	mu     sync.Mutex
	subs   map[chan notice]struct{}
	closed bool
	used   time.Time // the last request for it; guarded by lives.mu
	// root is the live conversation whose sub-agent (at any depth) conv
	// is, nil for one this server opened: the root owns conv and closes
	// it, and conv's notices reach the root's Notify, which hands them on
	// by kids.
	root *live
	// kids are the live entries of the root's sub-agents that a request
	// asked for, by conversation id; guarded by mu.
	kids map[string]*live
}

// idle reports whether l can be closed: nobody listens, nothing runs.
func (l *live) idle() bool {
	l.mu.Lock()
	listened := len(l.subs) > 0
	l.mu.Unlock()
	return !listened && l.conv.Agent().Status().Kind != conversation.Streaming && l.conv.Mode().Kind == conversation.ModeNormal
}

// sweep closes the live conversations unused for longer than the server's
// idle time (their threads stay; a request opens them again). A sub-agent
// is only forgotten: its root closes it. Callers hold lives.mu.
func (s *Server) sweep(now time.Time) {
	for k, l := range s.lives.m {
		if now.Sub(l.used) <= s.convIdle || !l.idle() {
			continue
		}
		delete(s.lives.m, k)
		if l.root != nil {
			l.root.mu.Lock()
			delete(l.root.kids, l.conv.ID())
			l.root.mu.Unlock()
			continue
		}
		// Its sub-agents go with it.
		tenant, _ := thread.SplitKey(k)
		l.mu.Lock()
		for id := range l.kids {
			delete(s.lives.m, thread.Key(tenant, id))
		}
		l.kids = nil
		l.mu.Unlock()
		go l.conv.Close(context.Background())
	}
}

// notice is a conversation's notice with its state when it was told: an
// event says the mode and status that the change made, not those of the
// moment it is written (a compaction's control_flow mode lasts as long as
// a commit).
type notice struct {
	conversation.Notice
	status conversation.Status
	mode   conversation.Mode
}

// notify hands a notice to every listener without blocking. A listener
// too slow to keep up misses the oldest of what it has not read, never the
// newest; each event carries the whole state, so the newest is what counts.
func (l *live) notify(cn conversation.Notice) {
	l.mu.Lock()
	if l.conv != nil && cn.Conversation != l.conv.ID() {
		// A sub-agent's: its own entry tells its listeners, if a
		// request asked for it.
		kid := l.kids[cn.Conversation]
		l.mu.Unlock()
		if kid != nil {
			kid.notify(cn)
		}
		return
	}
	defer l.mu.Unlock()
	if len(l.subs) == 0 {
		return
	}
	n := notice{Notice: cn}
	if l.conv != nil {
		// On the conversation's event loop, which holds none of its locks.
		n.status, n.mode = l.conv.Agent().Status(), l.conv.Mode()
	} else {
		n.status = conversation.Status{Kind: conversation.Stopped, Reason: conversation.EndTurn}
		n.mode = conversation.Mode{Kind: conversation.ModeNormal}
	}
	for ch := range l.subs {
		select {
		case ch <- n:
		default:
			if n.Kind == "content" {
				continue
			}
			select {
			case <-ch:
			default:
			}
			select {
			case ch <- n:
			default:
			}
		}
	}
}

func (l *live) subscribe() (chan notice, func()) {
	ch := make(chan notice, 256)
	l.mu.Lock()
	if l.closed {
		close(ch)
	} else {
		l.subs[ch] = struct{}{}
	}
	l.mu.Unlock()
	return ch, func() {
		l.mu.Lock()
		delete(l.subs, ch) // a closed server took it out already
		l.mu.Unlock()
	}
}

// conversation returns the live conversation id of the request's tenant,
// opening it on its thread if this server has not yet; with create, it
// makes one (ErrConflict if the id is taken).
func (s *Server) conversation(r *http.Request, id string, create bool, title string) (*live, error) {
	if id != "" && !ids.Valid(id) {
		return nil, invalidf("conversation id %q: 1 to %d letters, digits, '_', '-' or '.', not starting with '.' or '-'", clip(id), ids.MaxLen)
	}
	if s.chat == nil {
		return nil, errNoModel("conversations need a model")
	}
	db := s.tenantDB(r)
	key := thread.Key(db.Tenant(), id)
	s.lives.mu.Lock()
	if s.lives.closed {
		s.lives.mu.Unlock()
		return nil, errf(http.StatusServiceUnavailable, "unavailable", "the server is shutting down")
	}
	now := time.Now()
	s.sweep(now)
	if l, ok := s.lives.m[key]; ok && !create {
		l.used = now
		s.lives.mu.Unlock()
		return l, nil
	}
	s.lives.mu.Unlock()
	if !create {
		// A sub-agent that a live conversation runs is that one, not a
		// second conversation on the same thread.
		if l := s.subAgent(db.Tenant(), id, now); l != nil {
			return l, nil
		}
	}
	// Opened outside the lock: it reads the store (and may run again the
	// tools of a conversation that stopped in tool use).
	l := &live{subs: map[chan notice]struct{}{}}
	tenant := db.Tenant()
	notify := func(n conversation.Notice) {
		if n.Kind == "error" && n.Err != nil {
			// What failed, in full, for the operator; the client's event
			// says what the error table lets it.
			s.log.Warn("conversation error", "tenant", tenant, "conversation", n.Conversation, "err", n.Err)
		}
		l.notify(n)
	}
	opts := conversation.Options{Client: s.chat, Notify: notify, Title: title, ID: id, TracerProvider: s.tp}
	var conv *conversation.Conversation
	var err error
	// Conversations outlive the request that opened them.
	ctx := context.WithoutCancel(r.Context())
	if create {
		conv, err = conversation.New(ctx, db, opts)
	} else {
		conv, err = conversation.Open(ctx, db, id, opts)
	}
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.conv = conv
	l.mu.Unlock()
	key = thread.Key(db.Tenant(), conv.ID())
	s.lives.mu.Lock()
	defer s.lives.mu.Unlock()
	if other, ok := s.lives.m[key]; ok || s.lives.closed {
		// Another request opened it meanwhile, or the server closes.
		conv.Close(context.Background())
		if ok {
			return other, nil
		}
		return nil, errf(http.StatusServiceUnavailable, "unavailable", "the server is shutting down")
	}
	if s.lives.m == nil {
		s.lives.m = map[string]*live{}
	}
	l.used = time.Now()
	s.lives.m[key] = l
	return l, nil
}

// subAgent returns the live entry of the sub-agent id of one of the
// tenant's live conversations (at any depth), making it if no request
// asked for it yet; nil when no live conversation runs it.
func (s *Server) subAgent(tenant, id string, now time.Time) *live {
	s.lives.mu.Lock()
	var roots []*live
	for k, l := range s.lives.m {
		if t, _ := thread.SplitKey(k); t == tenant && l.root == nil {
			roots = append(roots, l)
		}
	}
	s.lives.mu.Unlock()
	for _, root := range roots {
		// Children waits on each conversation's event loop: not under
		// lives.mu.
		kid := findChild(root.conv, id)
		if kid == nil {
			continue
		}
		s.lives.mu.Lock()
		defer s.lives.mu.Unlock()
		key := thread.Key(tenant, id)
		if l, ok := s.lives.m[key]; ok {
			l.used = now
			return l
		}
		if s.lives.closed || s.lives.m[thread.Key(tenant, root.conv.ID())] != root {
			return nil // the root was closed meanwhile
		}
		l := &live{conv: kid, root: root, subs: map[chan notice]struct{}{}, used: now}
		root.mu.Lock()
		if root.kids == nil {
			root.kids = map[string]*live{}
		}
		root.kids[id] = l
		root.mu.Unlock()
		s.lives.m[key] = l
		return l
	}
	return nil
}

// findChild returns c's sub-agent id, at any depth, or nil.
func findChild(c *conversation.Conversation, id string) *conversation.Conversation {
	for _, k := range c.Children() {
		if k.ID() == id {
			return k
		}
		if f := findChild(k, id); f != nil {
			return f
		}
	}
	return nil
}

// Close suspends the server's live conversations (a turn in flight is not
// aborted: the next server that opens the conversation asks the model
// again) and ends their event streams; call it when the server shuts down.
// Requests for conversations after it are refused (503).
func (s *Server) Close() error {
	s.lives.mu.Lock()
	if !s.lives.closed {
		close(s.closing)
	}
	s.lives.closed = true
	all := s.lives.m
	s.lives.m = nil
	s.lives.mu.Unlock()
	for _, l := range all {
		if l.root == nil {
			l.conv.Suspend(context.Background()) // and its sub-agents
		}
		l.mu.Lock()
		l.closed = true
		for ch := range l.subs {
			close(ch)
		}
		l.subs = map[chan notice]struct{}{}
		l.mu.Unlock()
	}
	return nil
}

type conversationJSON struct {
	ID       string              `json:"id"`
	Status   conversation.Status `json:"status"`
	Mode     conversation.Mode   `json:"mode"`
	Partial  string              `json:"partial,omitzero"`
	Messages []message.Message   `json:"messages,omitzero"`
	Fork     string              `json:"fork,omitzero"`
}

func conversationOf(c *conversation.Conversation, withMessages bool) conversationJSON {
	a := c.Agent()
	out := conversationJSON{ID: c.ID(), Status: a.Status(), Mode: c.Mode(), Partial: a.Partial()}
	if withMessages {
		out.Messages = orEmpty(a.Messages())
	}
	return out
}

type createConversationRequest struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

type conversationCommand struct {
	// Command is send, abort, fork, compact or continue.
	Command string `json:"command"`
	// Text is the message to send, or the prompt of a fork or compact.
	Text string `json:"text"`
	// Queued holds a message sent while a turn runs until it ends.
	Queued bool `json:"queued"`
}

// createConversation: POST /v1/conversations {id, title}
func (s *Server) createConversation(w http.ResponseWriter, r *http.Request) error {
	var req createConversationRequest
	if err := decode(r, &req, true); err != nil {
		return err
	}
	l, err := s.conversation(r, req.ID, true, req.Title)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/conversations/"+l.conv.ID())
	writeJSON(w, http.StatusCreated, conversationOf(l.conv, true))
	return nil
}

// getConversation: GET /v1/conversations/{id}
func (s *Server) getConversation(w http.ResponseWriter, r *http.Request) error {
	l, err := s.conversation(r, r.PathValue("id"), false, "")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, conversationOf(l.conv, true))
	return nil
}

// conversationCommand: POST /v1/conversations/{id}/commands {command, text, queued}
func (s *Server) conversationCommand(w http.ResponseWriter, r *http.Request) error {
	var req conversationCommand
	if err := decode(r, &req, false); err != nil {
		return err
	}
	switch req.Command {
	case "send", "abort", "fork", "compact", "continue":
	default:
		return invalidf("command %q: send, abort, fork, compact or continue", clip(req.Command))
	}
	if req.Command == "send" && req.Text == "" {
		return invalidf("send: text is required")
	}
	l, err := s.conversation(r, r.PathValue("id"), false, "")
	if err != nil {
		return err
	}
	c := l.conv
	var fork string
	switch req.Command {
	case "send":
		// The turn the message begins is a child of this request's span.
		err = c.Send(write(r), message.User(req.Text), req.Queued)
	case "abort":
		c.Abort(context.Background())
	case "compact":
		err = c.Compact(write(r), req.Text)
	case "continue":
		err = c.Continue(write(r))
	case "fork":
		var f *conversation.Conversation
		if f, err = c.Fork(write(r), req.Text); err == nil {
			fork = f.ID()
			f.Close(context.Background()) // live again on its first request
		}
	}
	if err != nil {
		return err // a command the state forbids is a conflict (409)
	}
	out := conversationOf(c, false)
	out.Fork = fork
	writeJSON(w, http.StatusOK, out)
	return nil
}

type conversationEvent struct {
	Status  conversation.Status `json:"status"`
	Mode    conversation.Mode   `json:"mode"`
	Partial string              `json:"partial,omitzero"`
	Thread  string              `json:"thread,omitzero"`
	Error   string              `json:"error,omitzero"`
}

// eventError is the text of an error event: what the error table tells a
// client of err (the store's or a provider's own text is logged, not
// sent).
func eventError(err error) string {
	_, code, msg := apierr.Classify(err, false)
	if code == apierr.Internal && errors.Is(err, conversation.ErrNotSaved) {
		msg = "not saved: the store failed"
	}
	return "the conversation failed: " + msg
}

// conversationEvents: GET /v1/conversations/{id}/events — the
// conversation's changes as Server-Sent Events: first its state, then an
// event per change (content, stopped, error, mode, compacted, forked,
// spawned, yielded), until the client goes.
func (s *Server) conversationEvents(w http.ResponseWriter, r *http.Request) error {
	l, err := s.conversation(r, r.PathValue("id"), false, "")
	if err != nil {
		return err
	}
	ch, unsubscribe := l.subscribe()
	defer unsubscribe()
	sse := &sseWriter{w: w, rc: http.NewResponseController(w)}
	defer sse.heartbeat(s.heartbeat)()
	state := func(n notice) conversationEvent {
		ev := conversationEvent{Status: n.status, Mode: n.mode, Partial: n.Partial, Thread: n.Thread}
		if n.Err != nil {
			ev.Error = eventError(n.Err)
		}
		return ev
	}
	a := l.conv.Agent()
	first := conversationEvent{Status: a.Status(), Mode: l.conv.Mode(), Partial: a.Partial()}
	if err := sse.event("state", first); err != nil {
		return nil
	}
	for {
		select {
		case <-r.Context().Done():
			return nil
		case n, ok := <-ch:
			if !ok {
				return nil // the server closes
			}
			if err := sse.event(n.Kind, state(n)); err != nil {
				return nil // the client is gone
			}
		}
	}
}

const (
	// convScan caps the threads one page of GET /v1/conversations reads:
	// a store of many threads and few conversations answers a short page
	// (with a cursor) rather than read them all.
	convScan = 1000
)

// conversationItem is a conversation in the list.
type conversationItem struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	UpdatedAt time.Time `json:"updated_at"`
	Version   int64     `json:"version"`
	// Parent is the conversation whose sub-agent this is.
	Parent string `json:"parent,omitzero"`
	// ForkedFrom is the thread this one's was forked from (a sub-agent's
	// link to its parent's is not a fork).
	ForkedFrom string `json:"forked_from,omitzero"`
	// Live tells that the conversation is open in this server process;
	// Status and Mode are then its agent's status and its mode.
	Live   bool                 `json:"live"`
	Status *conversation.Status `json:"status,omitzero"`
	Mode   *conversation.Mode   `json:"mode,omitzero"`
}

type conversationsResponse struct {
	Conversations []conversationItem `json:"conversations"`
	NextCursor    string             `json:"next_cursor,omitzero"`
}

// liveByID returns the tenant's live conversations, sub-agents included,
// by id.
func (s *Server) liveByID(tenant string) map[string]*conversation.Conversation {
	s.lives.mu.Lock()
	var roots []*conversation.Conversation
	out := map[string]*conversation.Conversation{}
	for k, l := range s.lives.m {
		if t, id := thread.SplitKey(k); t == tenant {
			out[id] = l.conv
			if l.root == nil {
				roots = append(roots, l.conv)
			}
		}
	}
	s.lives.mu.Unlock()
	var walk func(c *conversation.Conversation)
	walk = func(c *conversation.Conversation) {
		for _, k := range c.Children() { // on c's event loop: not under lives.mu
			out[k.ID()] = k
			walk(k)
		}
	}
	for _, c := range roots {
		walk(c)
	}
	return out
}

// listConversations: GET /v1/conversations?limit=&cursor= — the tenant's
// conversations (threads that package conversation made, sub-agents
// included), newest first, with the status and mode of those live here.
// A page reads at most convScan threads: it may hold fewer than limit
// conversations and still have a next_cursor.
func (s *Server) listConversations(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := limitParam(q)
	if err != nil {
		return err
	}
	opts := thread.ListOptions{Kind: thread.KindLocal, Desc: true, Limit: convScan + 1}
	if c := q.Get("cursor"); c != "" {
		after, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil || !ids.Valid(string(after)) {
			return invalidf("query parameter cursor=%q: not a cursor this server gave", clip(c))
		}
		opts.After = string(after)
	}
	db := s.tenantDB(r)
	live := s.liveByID(db.Tenant())
	resp := conversationsResponse{Conversations: []conversationItem{}}
	cursor := func(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }
	s.metrics.StoreOp("list")
	scanned, last := 0, ""
	for th, err := range db.Threads(r.Context(), opts) {
		if err != nil {
			return err
		}
		if scanned == convScan {
			resp.NextCursor = cursor(last) // more threads, not read
			break
		}
		scanned++
		rec := th.Record()
		last = rec.ID
		st, err := th.State(r.Context(), 0)
		if errors.Is(err, thread.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return err
		}
		if !conversation.IsConversation(st) {
			continue
		}
		if len(resp.Conversations) == limit {
			resp.NextCursor = cursor(resp.Conversations[limit-1].ID)
			break
		}
		it := conversationItem{ID: rec.ID, Title: rec.Title, UpdatedAt: rec.UpdatedAt, Version: rec.Version,
			Parent: rec.Labels[conversation.LabelParent], ForkedFrom: rec.ForkedFrom.Thread}
		if it.ForkedFrom == it.Parent {
			it.ForkedFrom = "" // a sub-agent's thread is linked to its parent's, not forked
		}
		if c := live[rec.ID]; c != nil {
			status, mode := c.Agent().Status(), c.Mode()
			it.Live, it.Status, it.Mode = true, &status, &mode
		}
		resp.Conversations = append(resp.Conversations, it)
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}
