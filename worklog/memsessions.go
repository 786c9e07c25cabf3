package worklog

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"
)

// MemorySessions is a SessionStore in memory, for tests and for a server
// whose threads are in memory too ("memory://" in OpenSessions). It keeps
// every session until the process ends.
type MemorySessions struct {
	mu       sync.Mutex
	sessions []Session
	at       map[string]int
}

var _ SessionStore = (*MemorySessions)(nil)

// NewMemorySessions returns an empty MemorySessions.
func NewMemorySessions() *MemorySessions { return &MemorySessions{at: make(map[string]int)} }

// StartSession implements SessionStore.
func (st *MemorySessions) StartSession(ctx context.Context, s Session) error {
	if err := checkSession(s); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.at[s.ID]; ok {
		return nil
	}
	s.ClosedAt, s.OpenThreads = time.Time{}, nil
	st.at[s.ID] = len(st.sessions)
	st.sessions = append(st.sessions, s)
	return nil
}

// CloseSession implements SessionStore.
func (st *MemorySessions) CloseSession(ctx context.Context, s Session) error {
	if err := checkClose(s); err != nil {
		return err
	}
	s.OpenThreads = cloneRaws(s.OpenThreads)
	st.mu.Lock()
	defer st.mu.Unlock()
	if i, ok := st.at[s.ID]; ok {
		o := &st.sessions[i]
		o.ClosedAt, o.OpenThreads = s.ClosedAt, s.OpenThreads
		if o.StartedAt.IsZero() {
			o.StartedAt = s.StartedAt
		}
		return nil
	}
	st.at[s.ID] = len(st.sessions)
	st.sessions = append(st.sessions, s)
	return nil
}

// ClosedSessions implements SessionStore.
func (st *MemorySessions) ClosedSessions(ctx context.Context, opts ClosedOptions) ([]Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st.mu.Lock()
	var out []Session
	for _, s := range st.sessions {
		if s.Project == opts.Project && s.Closed() && !s.ClosedAt.Before(opts.Since) {
			s.OpenThreads = cloneRaws(s.OpenThreads)
			out = append(out, s)
		}
	}
	st.mu.Unlock()
	return newestClosed(out, opts.Limit), nil
}

// Session implements SessionStore.
func (st *MemorySessions) Session(ctx context.Context, project, id string) (Session, error) {
	if err := ctx.Err(); err != nil {
		return Session{}, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if i, ok := st.at[id]; ok && st.sessions[i].Project == project {
		s := st.sessions[i]
		s.OpenThreads = nil
		return s, nil
	}
	return Session{}, errNoSession(project, id)
}

func cloneRaws(raws []json.RawMessage) []json.RawMessage {
	if raws == nil {
		return nil
	}
	out := make([]json.RawMessage, len(raws))
	for i, r := range raws {
		out[i] = slices.Clone(r)
	}
	return out
}
