package worklog

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sync"
)

// OpenSessionsFunc opens a SessionStore from its URL. Backends register one
// per scheme with RegisterSessions.
type OpenSessionsFunc func(ctx context.Context, u *url.URL) (SessionStore, error)

var (
	sessionsMu       sync.RWMutex
	sessionsRegistry = map[string]OpenSessionsFunc{
		"file":   openFileSessions,
		"memory": openMemorySessions,
	}
)

// RegisterSessions makes a SessionStore backend available to OpenSessions
// under a URL scheme, as thread.Register does for thread stores. It is
// meant to be called from a backend package's init; registering a scheme
// twice panics.
func RegisterSessions(scheme string, open func(ctx context.Context, u *url.URL) (SessionStore, error)) {
	sessionsMu.Lock()
	defer sessionsMu.Unlock()
	if _, dup := sessionsRegistry[scheme]; dup {
		panic("worklog: RegisterSessions called twice for scheme " + scheme)
	}
	sessionsRegistry[scheme] = open
}

// SessionSchemes returns the URL schemes OpenSessions knows, sorted.
func SessionSchemes() []string {
	sessionsMu.RLock()
	defer sessionsMu.RUnlock()
	out := make([]string, 0, len(sessionsRegistry))
	for s := range sessionsRegistry {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// OpenSessions opens the SessionStore that rawURL names: file://DIR is the
// FileSessions of DIR, memory:// a new MemorySessions; sqlite://PATH,
// postgres://… and redis://… are the sessions of packages sqlite, postgres
// and redis, whose package must be imported (for its init) for its scheme
// to be known. A bad URL or an unknown
// scheme is an ErrInvalid error.
func OpenSessions(ctx context.Context, rawURL string) (SessionStore, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("worklog: sessions url: %v: %w", err, ErrInvalid)
	}
	sessionsMu.RLock()
	open := sessionsRegistry[u.Scheme]
	sessionsMu.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("worklog: sessions url %q: no session store for scheme %q (known: %v; is its package imported?): %w",
			u.Redacted(), u.Scheme, SessionSchemes(), ErrInvalid)
	}
	return open(ctx, u)
}

// openFileSessions opens file://DIR (or file:DIR, a relative directory).
func openFileSessions(_ context.Context, u *url.URL) (SessionStore, error) {
	dir := u.Host + u.Path
	if u.Opaque != "" {
		p, err := url.PathUnescape(u.Opaque)
		if err != nil {
			return nil, fmt.Errorf("worklog: sessions url: %v: %w", err, ErrInvalid)
		}
		dir = p
	}
	if dir == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("worklog: sessions url %q: want file://DIR: %w", u.Redacted(), ErrInvalid)
	}
	return NewFileSessions(dir, nil), nil
}

// CheckSession returns an ErrInvalid error for a session that a
// SessionStore must refuse: a malformed id, a bad project name or an
// open_threads value that is not JSON. Stores outside this package use it
// to keep the contract of FileSessions.
func CheckSession(s Session) error { return checkSession(s) }

// openMemorySessions opens "memory://": a new, empty MemorySessions.
func openMemorySessions(_ context.Context, u *url.URL) (SessionStore, error) {
	if u.Host != "" || (u.Path != "" && u.Path != "/") || u.Opaque != "" || u.RawQuery != "" {
		return nil, fmt.Errorf("worklog: sessions url %q: want memory://: %w", u.Redacted(), ErrInvalid)
	}
	return NewMemorySessions(), nil
}
