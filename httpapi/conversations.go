package httpapi

import (
	"context"
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
	subs   map[chan conversation.Notice]struct{}
	closed bool
	used   time.Time // the last request for it; guarded by lives.mu
}

// idle reports whether l can be closed: nobody listens, nothing runs.
func (l *live) idle() bool {
	l.mu.Lock()
	listened := len(l.subs) > 0
	l.mu.Unlock()
	return !listened && l.conv.Agent().Status().Kind != conversation.Streaming && l.conv.Mode().Kind == conversation.ModeNormal
}

// sweep closes the live conversations unused for longer than the server's
// idle time (their threads stay; a request opens them again). Callers hold
// lives.mu.
func (s *Server) sweep(now time.Time) {
	for k, l := range s.lives.m {
		if now.Sub(l.used) > s.convIdle && l.idle() {
			delete(s.lives.m, k)
			go l.conv.Close()
		}
	}
}

// notify hands a notice to every listener without blocking. A listener
// too slow to keep up misses the oldest of what it has not read, never the
// newest; each event carries the whole state, so the newest is what counts.
func (l *live) notify(n conversation.Notice) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conv != nil && n.Conversation != l.conv.ID() {
		return // a sub-agent's
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

func (l *live) subscribe() (chan conversation.Notice, func()) {
	ch := make(chan conversation.Notice, 256)
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
	// Opened outside the lock: it reads the store (and may run again the
	// tools of a conversation that stopped in tool use).
	l := &live{subs: map[chan conversation.Notice]struct{}{}}
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
		conv.Close()
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
		l.conv.Suspend()
		l.mu.Lock()
		l.closed = true
		for ch := range l.subs {
			close(ch)
		}
		l.subs = map[chan conversation.Notice]struct{}{}
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
		err = c.SendMessageContext(r.Context(), message.User(req.Text), req.Queued)
	case "abort":
		c.Abort()
	case "compact":
		err = c.Compact(req.Text)
	case "continue":
		err = c.Continue()
	case "fork":
		var f *conversation.Conversation
		if f, err = c.Fork(req.Text); err == nil {
			fork = f.ID()
			f.Close() // live again on its first request
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
	state := func(n conversation.Notice) conversationEvent {
		a := l.conv.Agent()
		ev := conversationEvent{Status: a.Status(), Mode: l.conv.Mode(), Partial: n.Partial, Thread: n.Thread}
		if n.Kind == "" {
			ev.Partial = a.Partial()
		}
		if n.Err != nil {
			ev.Error = eventError(n.Err)
		}
		return ev
	}
	if err := sse.event("state", state(conversation.Notice{})); err != nil {
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
