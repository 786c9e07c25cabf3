package worklog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/loomthreads/loom/internal/sessionrec"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// ThreadSessions is a SessionStore that keeps session records in threads
// of a thread.DB, as a Log kept in a DB keeps its items: one thread per
// project (its id is a hash of the project's name, its label
// "loom.worklog.sessions" the name), one appended commit per change of a
// session holding the session's whole record after the change (in several
// messages when its open threads are many). So every
// store keeps session records with no code of its own, they live in the
// DB's tenant's namespace (tenants never see one another's), and they
// have the history, export and copy of any thread.
//
// A change is an append conditional on the thread's version: two processes
// never lose one another's changes (the loser reads what changed and tries
// again). Readers cache the records of a project by head commit and read
// only the messages appended since. It is safe for concurrent use.
type ThreadSessions struct {
	db     *thread.DB
	closer io.Closer // the DB OpenSessions opened, closed by Close

	wmu sync.Mutex // this process's writes take turns
	mu  sync.Mutex
	byP map[string]*sessionSnap
}

var _ SessionStore = (*ThreadSessions)(nil)

// NewThreadSessions returns the session records of db's tenant, kept in
// db's threads.
func NewThreadSessions(db *thread.DB) *ThreadSessions {
	return &ThreadSessions{db: db, byP: make(map[string]*sessionSnap)}
}

// SessionsThreadID returns the id of the thread that keeps the session
// records of a project in a ThreadSessions' DB.
func SessionsThreadID(project string) string { return sessionrec.ThreadID(project) }

// DB returns the DB that keeps st's records.
func (st *ThreadSessions) DB() *thread.DB { return st.db }

// Close closes the DB that OpenSessions opened for st; a ThreadSessions
// made by NewThreadSessions leaves its DB to its owner.
func (st *ThreadSessions) Close() error {
	if st.closer == nil {
		return nil
	}
	return st.closer.Close()
}

// sessionSnap is the records of a project as of one head of its thread,
// without their open threads: those are read from the thread's tail for
// the sessions ClosedSessions returns (the newest, near the head), so that
// what a process keeps is small whatever the sessions carried.
type sessionSnap struct {
	recs    []sessionMeta // in order of first appearance
	at      map[string]int
	head    string // "" when there is no thread
	version int64  // the thread's version at head
	n       int64  // the messages folded
	last    string // the id of the last of them
}

// sessionMeta is a session's newest record, without its open threads, and
// where its messages are: pos, the thread's message index of the first,
// and msgs of them.
type sessionMeta struct {
	rec  sessionrec.Record
	pos  int64
	msgs int
}

func (s *sessionSnap) clone() *sessionSnap {
	c := *s
	c.recs = make([]sessionMeta, len(s.recs), len(s.recs)+1)
	copy(c.recs, s.recs)
	c.at = make(map[string]int, len(s.at)+1)
	for k, v := range s.at {
		c.at[k] = v
	}
	return &c
}

// put upserts the record of messages [pos, pos+msgs), keeping the
// position of the session's first record in the order.
func (s *sessionSnap) put(r sessionrec.Record, pos int64, msgs int) {
	r.OpenThreads = nil
	m := sessionMeta{rec: r, pos: pos, msgs: msgs}
	if i, ok := s.at[r.ID]; ok {
		s.recs[i] = m
		return
	}
	s.at[r.ID] = len(s.recs)
	s.recs = append(s.recs, m)
}

// fold folds the records msgs hold, the thread's messages from index base
// on, into s. A message that holds no record (appended by hand, say) is
// skipped, so it never makes the sessions unreadable.
func (s *sessionSnap) fold(msgs []message.Message, base int64, project string) {
	for k, m := range msgs {
		r, more, ok := sessionrec.Decode(m)
		if !ok || r.Project != project {
			continue
		}
		pos := base + int64(k)
		if i, seen := s.at[r.ID]; more && seen && s.recs[i].pos+int64(s.recs[i].msgs) == pos {
			s.recs[i].msgs++
			continue
		}
		s.put(r, pos, 1)
	}
}

// read returns the records of project at its thread's head, and a handle on
// the thread (nil when there is none yet).
func (st *ThreadSessions) read(ctx context.Context, project string) (*sessionSnap, *thread.Thread, error) {
	id := sessionrec.ThreadID(project)
	th, err := st.db.Thread(ctx, id)
	if errors.Is(err, thread.ErrNotFound) {
		return &sessionSnap{at: map[string]int{}}, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("worklog: sessions of %s: %w", project, err)
	}
	if th.Record().Labels[sessionrec.LabelProject] == "" {
		return nil, nil, fmt.Errorf("worklog: thread %s does not hold session records: %w", id, ErrInvalid)
	}
	head := th.Record().Head
	st.mu.Lock()
	c := st.byP[project]
	st.mu.Unlock()
	if c != nil && c.head == head {
		return c, th, nil
	}
	n, err := th.Len(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("worklog: sessions of %s: %w", project, err)
	}
	var (
		msgs []message.Message
		base int64
	)
	if c != nil && c.n > 0 && n > c.n {
		msgs, err = th.Messages(ctx, thread.ReadOptions{Last: int(n - c.n + 1)})
		if err != nil {
			return nil, nil, fmt.Errorf("worklog: sessions of %s: %w", project, err)
		}
		if len(msgs) > 0 && msgs[0].ID == c.last {
			msgs, base = msgs[1:], c.n
		} else {
			c = nil // rolled back or rewritten: read it all
		}
	} else {
		c = nil
	}
	if c == nil {
		c = &sessionSnap{at: map[string]int{}}
		if msgs, err = th.Messages(ctx, thread.ReadOptions{}); err != nil {
			return nil, nil, fmt.Errorf("worklog: sessions of %s: %w", project, err)
		}
	}
	s := c.clone()
	s.fold(msgs, base, project)
	s.head, s.n, s.version = head, n, th.Version()
	if len(msgs) > 0 {
		s.last = msgs[len(msgs)-1].ID
	}
	st.mu.Lock()
	st.byP[project] = s
	st.mu.Unlock()
	return s, th, nil
}

// change records what fn makes of the session's current record (nil when
// there is none); fn returns false when nothing is to be written.
func (st *ThreadSessions) change(ctx context.Context, project, sid string, fn func(old *sessionrec.Record) (sessionrec.Record, bool)) error {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	for try := 0; ; try++ {
		s, th, err := st.read(ctx, project)
		if err != nil {
			return err
		}
		var old *sessionrec.Record // without its open threads
		if i, ok := s.at[sid]; ok {
			old = &s.recs[i].rec
		}
		rec, write := fn(old)
		if !write {
			return nil
		}
		msgs, err := sessionrec.Messages(rec, min(maxEventBytes, st.db.Limits().MessageBytes/2))
		if err != nil {
			return fmt.Errorf("worklog: session %s: %w", sid, err)
		}
		// The ids are made here so that the cache knows the last one;
		// new by construction, they need no look among the thread's
		// (FreshIDs).
		for i := range msgs {
			msgs[i].ID = message.NewID()
		}
		var c *thread.Commit
		if th == nil {
			th, err = st.db.Create(ctx, thread.CreateOptions{ID: sessionrec.ThreadID(project), Kind: thread.KindLocal,
				Title: "sessions: " + cut(project, 200), Labels: map[string]string{sessionrec.LabelProject: cut(project, st.db.Limits().LabelBytes), thread.LabelOwner: Owner},
				Messages: msgs})
			if err == nil {
				c = &thread.Commit{ID: th.Record().Head, Depth: int64(len(msgs))}
			}
		} else {
			c, err = th.Commit(ctx, thread.CommitOptions{Messages: msgs, IfVersion: th.Version(), FreshIDs: true})
		}
		// Another writer's change, or a thread deleted under this write:
		// read again and try again.
		if (errors.Is(err, thread.ErrConflict) || errors.Is(err, thread.ErrNotFound)) && try < maxConflicts && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return fmt.Errorf("worklog: session %s: %w", sid, err)
		}
		ns := s.clone()
		ns.put(rec, c.Depth-int64(len(msgs)), len(msgs))
		ns.head, ns.n, ns.last, ns.version = c.ID, c.Depth, msgs[len(msgs)-1].ID, th.Version()
		st.mu.Lock()
		st.byP[project] = ns
		st.mu.Unlock()
		return nil
	}
}

// StartSession implements SessionStore.
func (st *ThreadSessions) StartSession(ctx context.Context, s Session) error {
	if err := checkSession(s); err != nil {
		return err
	}
	return st.change(ctx, s.Project, s.ID, func(old *sessionrec.Record) (sessionrec.Record, bool) {
		if old != nil {
			return sessionrec.Record{}, false
		}
		return sessionrec.Record{ID: s.ID, Project: s.Project, StartedAt: s.StartedAt}, true
	})
}

// CloseSession implements SessionStore.
func (st *ThreadSessions) CloseSession(ctx context.Context, s Session) error {
	if err := checkClose(s); err != nil {
		return err
	}
	return st.change(ctx, s.Project, s.ID, func(old *sessionrec.Record) (sessionrec.Record, bool) {
		r := sessionrec.Record{ID: s.ID, Project: s.Project, StartedAt: s.StartedAt, ClosedAt: s.ClosedAt, OpenThreads: cloneRaws(s.OpenThreads)}
		if old != nil && !old.StartedAt.IsZero() {
			r.StartedAt = old.StartedAt
		}
		return r, true
	})
}

// ClosedSessions implements SessionStore. It reads the open threads of
// the sessions it returns from the thread's tail, back to the oldest of
// them: the cost of what they carry and of the records after them.
func (st *ThreadSessions) ClosedSessions(ctx context.Context, opts ClosedOptions) ([]Session, error) {
	if err := checkProjectLen(opts.Project, maxStoredProject); err != nil {
		return nil, err
	}
	s, th, err := st.read(ctx, opts.Project)
	if err != nil {
		return nil, err
	}
	var out []Session
	for _, m := range s.recs {
		r := m.rec
		if !r.ClosedAt.IsZero() && !r.ClosedAt.Before(opts.Since) {
			out = append(out, Session{ID: r.ID, Project: r.Project, StartedAt: r.StartedAt, ClosedAt: r.ClosedAt})
		}
	}
	out = newestClosed(out, opts.Limit)
	if len(out) == 0 {
		return out, nil
	}
	metas := make([]sessionMeta, len(out))
	from := s.n
	for k := range out {
		metas[k] = s.recs[s.at[out[k].ID]]
		from = min(from, metas[k].pos)
	}
	tail, err := th.Messages(ctx, thread.ReadOptions{Version: s.version, Last: int(s.n - from)})
	if err != nil {
		return nil, fmt.Errorf("worklog: sessions of %s: %w", opts.Project, err)
	}
	for k, m := range metas {
		lo := m.pos - (s.n - int64(len(tail)))
		if lo < 0 || lo+int64(m.msgs) > int64(len(tail)) {
			return nil, fmt.Errorf("worklog: sessions of %s: the records moved while they were read: %w", opts.Project, thread.ErrConflict)
		}
		for _, msg := range tail[lo : lo+int64(m.msgs)] {
			if r, _, ok := sessionrec.Decode(msg); ok && r.ID == m.rec.ID {
				out[k].OpenThreads = append(out[k].OpenThreads, r.OpenThreads...)
			}
		}
	}
	return out, nil
}

// Session implements SessionStore: a read of the records' cached
// snapshot, brought up to the thread's head.
func (st *ThreadSessions) Session(ctx context.Context, project, id string) (Session, error) {
	if err := checkProjectLen(project, maxStoredProject); err != nil {
		return Session{}, err
	}
	s, _, err := st.read(ctx, project)
	if err != nil {
		return Session{}, err
	}
	i, ok := s.at[id]
	if !ok {
		return Session{}, errNoSession(project, id)
	}
	r := s.recs[i].rec
	return Session{ID: r.ID, Project: r.Project, StartedAt: r.StartedAt, ClosedAt: r.ClosedAt}, nil
}

// ImportedSuffix is added to the name of a sessions file that
// ImportFileSessions has carried into threads.
const ImportedSuffix = ".imported"

// ImportFileSessions carries the session records of dir/sessions.json (a
// FileSessions, as `loom serve` kept them for a file:// store before
// session records lived in threads) into db's threads, each in the
// namespace of its tenant (the file held other tenants' records as
// "tenant:id" in project "tenant/project"), then renames the file with
// ImportedSuffix so that it is carried once. It returns how many records
// it carried; no file is 0 and no error. Running it again after a crash
// before the rename carries the same records again, which changes nothing
// they say.
func ImportFileSessions(ctx context.Context, dir string, db *thread.DB) (int, error) {
	path := filepath.Join(dir, SessionsFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return 0, nil // nothing to carry; no lock file made either
	}
	fs := NewFileSessions(dir, nil)
	unlock, _, err := fs.f.lock(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	ss, err := fs.load()
	if err != nil {
		return 0, err
	}
	stores := map[string]*ThreadSessions{}
	for _, s := range ss {
		tenant, id, project := sessionrec.SplitLegacy(s.ID, s.Project)
		st := stores[tenant]
		if st == nil {
			st = NewThreadSessions(db.WithTenant(tenant))
			stores[tenant] = st
		}
		s.ID, s.Project = id, project
		if s.Closed() {
			err = st.CloseSession(ctx, s)
		} else {
			err = st.StartSession(ctx, s)
		}
		if err != nil {
			return 0, fmt.Errorf("worklog: import session %s: %w", s.ID, err)
		}
	}
	if err := os.Rename(path, path+ImportedSuffix); err != nil {
		return 0, fmt.Errorf("worklog: import sessions: %w", err)
	}
	return len(ss), nil
}
