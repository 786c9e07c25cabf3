package worklog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Session is the record of one working session of an agent on a project:
// when it started, when it closed, and the items it carried when it
// closed. A session counts as closed when it has a close record
// (ClosedAt is set).
type Session struct {
	// ID names the session (a UUID, say): 1 to 128 ASCII letters, digits,
	// '.', '_', ':' or '-'.
	ID string `json:"id"`
	// Project is the project the session worked on.
	Project string `json:"project"`
	// StartedAt is when the session started, zero if it was never
	// recorded as started.
	StartedAt time.Time `json:"started_at,omitzero"`
	// ClosedAt is when the session closed, zero while it is open.
	ClosedAt time.Time `json:"closed_at,omitzero"`
	// OpenThreads are the items the session carried when it closed, each
	// as stored: an item object, or any older format Normalize reads.
	// Sessions closed here hold item objects.
	OpenThreads []json.RawMessage `json:"open_threads,omitzero"`
}

// Closed reports whether the session has a close record.
func (s Session) Closed() bool { return !s.ClosedAt.IsZero() }

// SessionStore keeps session records: the local file (FileSessions),
// memory (MemorySessions), or the threads of any thread store
// (ThreadSessions), which is how items travel between machines and
// containers. It is safe for concurrent use.
//
// A Log that is given no SessionStore uses a FileSessions in its
// directory. worklog/sessiontest checks that a store keeps this contract.
type SessionStore interface {
	// StartSession records that s started. A session with s.ID that is
	// recorded already is left as it is.
	StartSession(ctx context.Context, s Session) error
	// CloseSession records that s closed: its ClosedAt and OpenThreads
	// replace those of the session with s.ID, which is created (with
	// s.StartedAt) if it is not recorded. Closing a session again replaces
	// its close record.
	CloseSession(ctx context.Context, s Session) error
	// ClosedSessions returns the closed sessions of opts.Project closed at
	// or after opts.Since, newest close first, at most opts.Limit of them.
	ClosedSessions(ctx context.Context, opts ClosedOptions) ([]Session, error)
	// Session returns the record of session id of project, without its
	// open threads, or an error wrapping ErrNotFound when the project has
	// no session id recorded (started or closed). Log.SessionClose asks
	// it so that a session is closed only once it was started.
	Session(ctx context.Context, project, id string) (Session, error)
}

// errNoSession is the error of a Session lookup that found nothing.
func errNoSession(project, id string) error {
	return fmt.Errorf("worklog: session %s of project %q is not recorded: %w", shorten(id, 80), shorten(project, 80), ErrNotFound)
}

// ClosedOptions select the sessions ClosedSessions returns.
type ClosedOptions struct {
	// Project is the project whose sessions are returned.
	Project string
	// Since is the earliest close returned; zero means no bound.
	Since time.Time
	// Limit is the most sessions returned; zero or less means
	// DefaultMaxSessions.
	Limit int
}

// checkSession returns an ErrInvalid error for a session that a store
// must refuse.
//
// A store takes longer ids and project names than a Log does (up to
// maxStoredSessionID and maxStoredProject bytes): the records that a
// shared session table once kept prefixed with their tenant's name read
// back wherever they were carried.
func checkSession(s Session) error {
	if err := checkSessionIDLen(s.ID, maxStoredSessionID); err != nil {
		return err
	}
	if err := checkProjectLen(s.Project, maxStoredProject); err != nil {
		return err
	}
	for i, raw := range s.OpenThreads {
		if !json.Valid(raw) {
			return fmt.Errorf("worklog: session %s: open_threads[%d] is not JSON: %w", s.ID, i, ErrInvalid)
		}
	}
	return nil
}

// checkClose returns an ErrInvalid error for a close record that a store
// must refuse: a session checkSession refuses, or one without a close
// time.
func checkClose(s Session) error {
	if err := checkSession(s); err != nil {
		return err
	}
	if !s.Closed() {
		return fmt.Errorf("worklog: close of session %s without a close time: %w", s.ID, ErrInvalid)
	}
	return nil
}

// checkProject returns an ErrInvalid error for a project name that is
// empty, longer than 200 bytes, not UTF-8 or holds control characters.
func checkProject(p string) error { return checkProjectLen(p, maxProject) }

// The longest project name of a Log, and those a SessionStore takes.
const (
	maxProject         = 200
	maxStoredProject   = 2*maxProject + 1
	maxStoredSessionID = 2*maxSessionID + 1
)

func checkProjectLen(p string, max int) error {
	if p == "" || len(p) > max {
		return fmt.Errorf("worklog: project name %q: want 1 to %d bytes: %w", shorten(p, 80), max, ErrInvalid)
	}
	if err := checkLen("project name", p, max); err != nil {
		return err
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("worklog: project name %q holds a control character: %w", shorten(p, 80), ErrInvalid)
		}
	}
	return nil
}

// MaxFileSessions is how many sessions a FileSessions keeps: when it holds
// more, the ones that started (or closed) longest ago go. The remote
// stores keep every session.
const MaxFileSessions = 200

// FileSessions is the local SessionStore: the sessions of a directory's
// projects as a JSON array in sessions.json, beside threads.json, written
// atomically under a lock like it. The seed keeps session records only in
// its remote database; this file is loom's, so that session_start has
// closed sessions to aggregate on a machine without one.
type FileSessions struct {
	f *lockedFile
}

var _ SessionStore = (*FileSessions)(nil)

// NewFileSessions returns the FileSessions of directory dir (the file is
// dir/sessions.json). Only opts.LockTimeout and opts.NoSync are used; nil
// means the defaults.
func NewFileSessions(dir string, opts *Options) *FileSessions {
	return &FileSessions{f: newLockedFile(dir, SessionsFile, opts)}
}

// load reads and decodes the file.
func (st *FileSessions) load() ([]Session, error) {
	data, err := st.f.read()
	if err != nil || len(bytes.TrimSpace(data)) == 0 {
		return nil, err
	}
	var out []Session
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("worklog: %s: %w", SessionsFile, err)
	}
	return out, nil
}

// update changes the file's sessions with fn under the lock.
func (st *FileSessions) update(ctx context.Context, fn func([]Session) []Session) error {
	unlock, _, err := st.f.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	ss, err := st.load()
	if err != nil {
		return err
	}
	ss = fn(ss)
	if len(ss) > MaxFileSessions {
		last := func(s Session) time.Time {
			if s.ClosedAt.After(s.StartedAt) {
				return s.ClosedAt
			}
			return s.StartedAt
		}
		slices.SortStableFunc(ss, func(a, b Session) int { return last(b).Compare(last(a)) })
		ss = ss[:MaxFileSessions]
	}
	return st.f.write(func(w *bufio.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(ss)
	})
}

// StartSession implements SessionStore.
func (st *FileSessions) StartSession(ctx context.Context, s Session) error {
	if err := checkSession(s); err != nil {
		return err
	}
	s.ClosedAt, s.OpenThreads = time.Time{}, nil
	return st.update(ctx, func(ss []Session) []Session {
		for _, o := range ss {
			if o.ID == s.ID {
				return ss
			}
		}
		return append(ss, s)
	})
}

// CloseSession implements SessionStore.
func (st *FileSessions) CloseSession(ctx context.Context, s Session) error {
	if err := checkClose(s); err != nil {
		return err
	}
	return st.update(ctx, func(ss []Session) []Session {
		for i, o := range ss {
			if o.ID == s.ID {
				ss[i].ClosedAt, ss[i].OpenThreads = s.ClosedAt, s.OpenThreads
				if ss[i].StartedAt.IsZero() {
					ss[i].StartedAt = s.StartedAt
				}
				return ss
			}
		}
		return append(ss, s)
	})
}

// ClosedSessions implements SessionStore.
func (st *FileSessions) ClosedSessions(ctx context.Context, opts ClosedOptions) ([]Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ss, err := st.load()
	if err != nil {
		return nil, err
	}
	var out []Session
	for _, s := range ss {
		if s.Project == opts.Project && s.Closed() && !s.ClosedAt.Before(opts.Since) {
			out = append(out, s)
		}
	}
	return newestClosed(out, opts.Limit), nil
}

// Session implements SessionStore.
func (st *FileSessions) Session(ctx context.Context, project, id string) (Session, error) {
	if err := ctx.Err(); err != nil {
		return Session{}, err
	}
	ss, err := st.load()
	if err != nil {
		return Session{}, err
	}
	for _, s := range ss {
		if s.ID == id && s.Project == project {
			s.OpenThreads = nil
			return s, nil
		}
	}
	return Session{}, errNoSession(project, id)
}

// newestClosed sorts sessions by close, newest first, keeping the order
// of equal closes, and keeps the first limit (<= 0: DefaultMaxSessions).
func newestClosed(out []Session, limit int) []Session {
	slices.SortStableFunc(out, func(a, b Session) int { return b.ClosedAt.Compare(a.ClosedAt) })
	if limit <= 0 {
		limit = DefaultMaxSessions
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}
