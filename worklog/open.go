package worklog

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/loomthreads/loom/thread"
)

// OpenSessions opens the SessionStore that rawURL names: file://DIR is
// the FileSessions of DIR (the seed's sessions.json), memory:// a new
// MemorySessions, and any other URL a thread store (thread.Open; its
// package must be imported for its scheme to be known) whose threads keep
// the records of the default tenant (a ThreadSessions, closed with the
// store by its Close). A bad URL is an ErrInvalid error.
func OpenSessions(ctx context.Context, rawURL string) (SessionStore, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("worklog: sessions url: %v: %w", err, ErrInvalid)
	}
	switch u.Scheme {
	case "file":
		return openFileSessions(ctx, u)
	case "memory":
		return openMemorySessions(ctx, u)
	}
	db, err := thread.Open(ctx, rawURL, nil)
	if err != nil {
		// A URL no store takes is the caller's mistake, like a bad one.
		if errors.Is(err, thread.ErrInvalid) || errors.Is(err, thread.ErrUnsupported) {
			err = invalidError{err}
		}
		return nil, fmt.Errorf("worklog: sessions url (file://DIR, memory:// or a thread store's): %w", err)
	}
	st := NewThreadSessions(db)
	st.closer = db
	return st, nil
}

// invalidError makes a thread.ErrInvalid error (a bad store URL) match
// ErrInvalid as well, as the callers of OpenSessions expect.
type invalidError struct{ err error }

func (e invalidError) Error() string   { return e.err.Error() }
func (e invalidError) Unwrap() []error { return []error{e.err, ErrInvalid} }

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

// openMemorySessions opens "memory://": a new, empty MemorySessions.
func openMemorySessions(_ context.Context, u *url.URL) (SessionStore, error) {
	if u.Host != "" || (u.Path != "" && u.Path != "/") || u.Opaque != "" || u.RawQuery != "" {
		return nil, fmt.Errorf("worklog: sessions url %q: want memory://: %w", u.Redacted(), ErrInvalid)
	}
	return NewMemorySessions(), nil
}
