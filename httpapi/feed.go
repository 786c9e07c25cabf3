package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

type searchHitJSON struct {
	Thread  string          `json:"thread"`
	Commit  string          `json:"commit"`
	Index   int             `json:"index"`
	Message message.Message `json:"message"`
	Snippet string          `json:"snippet"`
	Time    time.Time       `json:"time"`
	// Version, when not 0, is the newest version of the thread that held
	// the message, which its head no longer does (a rollback, a restore):
	// the thread is to be read at that version to see it
	// (thread.SearchHit.Version).
	Version int64 `json:"version,omitzero"`
}

type searchResponse struct {
	Hits []searchHitJSON `json:"hits"`
	Next string          `json:"next,omitzero"`
}

// search: GET /v1/search?q=&limit=&before=
func (s *Server) search(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := limitParam(q)
	if err != nil {
		return err
	}
	text := q.Get("q")
	if len(text) > 1024 {
		return invalidf("query parameter q: at most 1024 bytes")
	}
	before := q.Get("before")
	if len(before) > 256 {
		return invalidf("query parameter before=%q: not a cursor this server gave", clip(before))
	}
	s.metrics.StoreOp("search")
	hits, err := s.tenantDB(r).Search(r.Context(), thread.SearchQuery{Text: text, Limit: limit, Before: before, Versions: true})
	if err != nil {
		return err
	}
	resp := searchResponse{Hits: make([]searchHitJSON, 0, len(hits))}
	for _, h := range hits {
		resp.Hits = append(resp.Hits, searchHitJSON{Thread: h.Thread, Commit: h.Commit, Index: h.Index,
			Message: h.Message, Snippet: h.Snippet, Time: h.Time, Version: h.Version})
	}
	if len(hits) == limit && limit > 0 {
		resp.Next = hits[len(hits)-1].Cursor
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

type familyResponse struct {
	Root    string       `json:"root"`
	Threads []threadJSON `json:"threads"`
}

// family: GET /v1/threads/{id}/family
func (s *Server) family(w http.ResponseWriter, r *http.Request) error {
	id, err := threadID(r)
	if err != nil {
		return err
	}
	s.metrics.StoreOp("list")
	root, fam, err := s.tenantDB(r).Family(r.Context(), id)
	if err != nil {
		return err
	}
	resp := familyResponse{Root: root, Threads: make([]threadJSON, 0, len(fam))}
	for _, rec := range fam {
		resp.Threads = append(resp.Threads, recordJSON(rec, s.tenantDB(r).DefaultRetention()))
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// feedReplay caps the changes a resumed feed replays; past it the client
// is sent a gap and reads again.
const feedReplay = 1000

// feedBuffer is how far a feed's client may fall behind the store before
// it is sent a gap instead.
const feedBuffer = 64

// maxFeeds caps the change feeds one tenant may hold open on a server.
const maxFeeds = 64

// resumeSlack is how far before a tenant feed's Last-Event-ID its replay
// starts: a change's time is stamped by its writer before it commits, so
// one that commits late may carry a time before changes already sent.
// Clients tell repeats by (thread, version).
const resumeSlack = 5 * time.Second

// feed is one client's subscription: the changes DB.Watch hears, queued
// for the handler, and a gap owed in place of what overflowed.
type feed struct {
	ch   chan thread.Change
	mu   sync.Mutex
	owed bool
	gap  chan struct{} // has a value while a gap is owed
}

// takeGap reports whether a gap is owed, and clears it.
func (f *feed) takeGap() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	owed := f.owed
	f.owed = false
	return owed
}

// subscribe listens to db's changes that match, for a handler; release
// gives back the tenant's feed slot.
func (s *Server) subscribe(ctx context.Context, r *http.Request, db *thread.DB, match func(thread.Change) bool) (*feed, func(), error) {
	release, err := s.feedSlot(r)
	if err != nil {
		return nil, nil, err
	}
	f := &feed{ch: make(chan thread.Change, feedBuffer), gap: make(chan struct{}, 1)}
	err = db.Watch(ctx, func(c thread.Change) {
		if c.Kind != thread.ChangeGap && !match(c) {
			return
		}
		if c.Kind != thread.ChangeGap {
			select {
			case f.ch <- c:
				return
			default:
			}
		}
		// A gap, or no room: the client reads everything again, so what
		// it owes is one gap, whatever else it misses.
		f.mu.Lock()
		f.owed = true
		f.mu.Unlock()
		select {
		case f.gap <- struct{}{}:
		default:
		}
	})
	if err != nil {
		release()
		return nil, nil, err
	}
	return f, release, nil
}

// feedSlot takes one of the feeds the request's tenant may hold open
// (change feeds and workflow event streams), or answers 429; release
// gives it back.
func (s *Server) feedSlot(r *http.Request) (release func(), err error) {
	t := tenant(r)
	s.feeds.mu.Lock()
	if s.feeds.n[t] >= maxFeeds {
		s.feeds.mu.Unlock()
		return nil, errf(http.StatusTooManyRequests, "too_many_feeds", "this tenant has %d change feeds open, the most a server serves it", maxFeeds)
	}
	s.feeds.n[t]++
	s.feeds.mu.Unlock()
	return func() {
		s.feeds.mu.Lock()
		if s.feeds.n[t]--; s.feeds.n[t] == 0 {
			delete(s.feeds.n, t)
		}
		s.feeds.mu.Unlock()
	}, nil
}

// sendChange writes c as an SSE event with id.
func sendChange(sse *sseWriter, id string, c thread.Change) error {
	if c.Kind == thread.ChangeGap {
		return sse.eventID("gap", id, thread.Change{Kind: thread.ChangeGap})
	}
	return sse.eventID("change", id, c)
}

// threadEvents: GET /v1/threads/{id}/events — the thread's changes as
// Server-Sent Events. Each create or move has its version as its event
// id; a client that reconnects with Last-Event-ID: N gets the moves after
// version N from the history first.
func (s *Server) threadEvents(w http.ResponseWriter, r *http.Request) error {
	id, err := threadID(r)
	if err != nil {
		return err
	}
	var last int64
	if h := r.Header.Get("Last-Event-ID"); h != "" {
		if last, err = strconv.ParseInt(h, 10, 64); err != nil || last < 0 {
			return invalidf("Last-Event-ID %q: a version this feed sent", clip(h))
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	f, release, err := s.subscribe(ctx, r, s.tenantDB(r), func(c thread.Change) bool { return c.Thread == id })
	if err != nil {
		return err
	}
	defer release()
	// Opened once listening: what the thread is now is what the history
	// below ends at, and a move made in between is in both, which the
	// version check below sends once.
	th, err := s.thread(r)
	if err != nil {
		return err
	}
	var replay []thread.Change
	gap := false
	if now := th.Version(); last > now {
		// An id this thread never reached: another thread of the same
		// id, deleted since. The client reads it again from here.
		gap, last = true, now
	} else if last > 0 {
		for e, err := range th.History(r.Context(), thread.HistoryOptions{Limit: feedReplay + 1}) {
			if err != nil {
				return err
			}
			if e.Version <= last {
				break
			}
			replay = append(replay, historyChange(id, e))
		}
		if len(replay) > feedReplay {
			replay, gap = nil, true
		}
		slices.Reverse(replay)
	}
	sse := &sseWriter{w: w, rc: http.NewResponseController(w)}
	if err := sse.open(); err != nil {
		return nil
	}
	defer sse.heartbeat(s.heartbeat)()
	sent := last
	if gap {
		if sendChange(sse, strconv.FormatInt(last, 10), thread.Change{Kind: thread.ChangeGap}) != nil {
			return nil
		}
	}
	for _, c := range replay {
		if sendChange(sse, strconv.FormatInt(c.Version, 10), c) != nil {
			return nil
		}
		sent = c.Version
	}
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-s.closing:
			return nil
		case <-f.gap:
			if !f.takeGap() {
				continue
			}
			if sendChange(sse, eventID(sent), thread.Change{Kind: thread.ChangeGap}) != nil {
				return nil
			}
			// A delete may be among what was missed: a feed of a thread
			// that is gone ends.
			if err := th.Refresh(r.Context()); errors.Is(err, thread.ErrNotFound) {
				sendChange(sse, "", thread.Change{Kind: thread.ChangeDelete, Thread: id, Time: time.Now().UTC()})
				return nil
			}
		case c := <-f.ch:
			if (c.Kind == thread.ChangeCreate || c.Kind == thread.ChangeMove) && c.Version <= sent {
				continue // sent from the history already
			}
			if c.Version > sent {
				sent = c.Version
			}
			if sendChange(sse, eventID(sent), c) != nil || c.Kind == thread.ChangeDelete {
				return nil
			}
		}
	}
}

func eventID(v int64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatInt(v, 10)
}

// events: GET /v1/events — the changes of every thread of the caller's
// tenant as Server-Sent Events. Event ids are times (Unix microseconds);
// a client that reconnects with Last-Event-ID gets the creates and moves
// made since a few seconds before then from the threads' histories first
// (resumeSlack: some may repeat; a delete or a checkpoint made while it
// was away is not replayed).
func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	var since time.Time
	if h := r.Header.Get("Last-Event-ID"); h != "" {
		us, err := strconv.ParseInt(h, 10, 64)
		if err != nil || us < 0 {
			return invalidf("Last-Event-ID %q: an id this feed sent", clip(h))
		}
		since = time.UnixMicro(us).UTC()
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	db := s.tenantDB(r)
	f, release, err := s.subscribe(ctx, r, db, func(thread.Change) bool { return true })
	if err != nil {
		return err
	}
	defer release()
	var replay []thread.Change
	gap := false
	if !since.IsZero() {
		if replay, gap, err = changesSince(r.Context(), db, since.Add(-resumeSlack)); err != nil {
			return err
		}
	}
	sse := &sseWriter{w: w, rc: http.NewResponseController(w)}
	if err := sse.open(); err != nil {
		return nil
	}
	defer sse.heartbeat(s.heartbeat)()
	at := func(c thread.Change) string {
		if c.Time.IsZero() {
			return ""
		}
		return strconv.FormatInt(c.Time.UnixMicro(), 10)
	}
	if gap && sendChange(sse, "", thread.Change{Kind: thread.ChangeGap}) != nil {
		return nil
	}
	sent := map[string]int64{} // thread → version sent, against double sends
	for _, c := range replay {
		if sendChange(sse, at(c), c) != nil {
			return nil
		}
		sent[c.Thread] = c.Version
	}
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-s.closing:
			return nil
		case <-f.gap:
			if f.takeGap() && sendChange(sse, "", thread.Change{Kind: thread.ChangeGap}) != nil {
				return nil
			}
		case c := <-f.ch:
			moved := c.Kind == thread.ChangeCreate || c.Kind == thread.ChangeMove
			if v, ok := sent[c.Thread]; ok && moved {
				if c.Version <= v {
					continue // sent from the history already
				}
				delete(sent, c.Thread) // past the replay: no more repeats
			}
			if sendChange(sse, at(c), c) != nil {
				return nil
			}
		}
	}
}

// historyChange is the change a history entry of thread id records.
func historyChange(id string, e thread.HistoryEntry) thread.Change {
	kind := thread.ChangeMove
	if e.Version == 1 {
		kind = thread.ChangeCreate
	}
	return thread.Change{Kind: kind, Thread: id, Version: e.Version, Head: e.Commit, Op: e.Op, Time: e.Time}
}

// changesSince reads the creates and moves of db's threads made at or
// after since, oldest first, or reports a gap when there are more than a
// feed replays.
func changesSince(ctx context.Context, db *thread.DB, since time.Time) ([]thread.Change, bool, error) {
	var out []thread.Change
	for th, err := range db.Threads(ctx, thread.ListOptions{}) {
		if err != nil {
			return nil, false, err
		}
		rec := th.Record()
		if rec.UpdatedAt.Before(since) {
			continue
		}
		var mine []thread.Change
		for e, err := range th.History(ctx, thread.HistoryOptions{Limit: feedReplay + 1}) {
			if err != nil {
				return nil, false, err
			}
			if e.Time.Before(since) {
				break
			}
			mine = append(mine, historyChange(rec.ID, e))
		}
		if out = append(out, mine...); len(out) > feedReplay {
			return nil, true, nil
		}
	}
	slices.SortStableFunc(out, func(a, b thread.Change) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		return int(a.Version - b.Version)
	})
	return out, false, nil
}

// open starts the stream at once, so that a client knows it listens
// before the first change.
func (s *sseWriter) open() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.startLocked()
	_ = s.rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
	if _, err := io.WriteString(s.w, ": listening\n\n"); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sseWriter) startLocked() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

// eventID writes an event with an id ("" for none).
func (s *sseWriter) eventID(name, id string, v any) error {
	data, err := json.Marshal(v) // one line: json.Marshal writes no newline
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.startLocked()
	_ = s.rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
	if id != "" {
		_, err = fmt.Fprintf(s.w, "id: %s\nevent: %s\ndata: %s\n\n", id, name, data)
	} else {
		_, err = fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, data)
	}
	if err != nil {
		return err
	}
	return s.rc.Flush()
}
