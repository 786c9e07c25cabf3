package worklog

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	loomids "github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/thread"
)

// DefaultMaxLogs is how many Logs a Logs keeps when its Options say
// nothing.
const DefaultMaxLogs = 1024

// Logs hands out the Logs of a server: one per tenant and project, their
// items in threads of a thread.DB (OpenDB) and their session records in
// one SessionStore that all tenants share, each tenant's sessions and
// projects apart (their ids and project names are stored prefixed with
// the tenant). It keeps the Logs it made, the most recently used
// MaxLogs of them, so that their items stay cached. It is safe for
// concurrent use.
//
// The Logs are shared by every caller of a tenant and project, so they
// have no current session: Create and Resolve record a session only when
// their options name one.
type Logs struct {
	db       *thread.DB
	sessions SessionStore
	opts     Options
	max      int

	mu   sync.Mutex
	lru  *list.List // of *logEntry, most recently used first
	logs map[logKey]*list.Element
}

type logKey struct{ tenant, project string }

type logEntry struct {
	key logKey
	log *Log
}

// LogsOptions configure a Logs.
type LogsOptions struct {
	// MaxLogs is how many Logs are kept; zero means DefaultMaxLogs.
	MaxLogs int
	// Now is the clock of the Logs (Options.Now).
	Now func() time.Time
}

// NewLogs returns the Logs of db (whose tenant does not matter: each Log
// is scoped to its own) and sessions. opts may be nil.
func NewLogs(db *thread.DB, sessions SessionStore, opts *LogsOptions) *Logs {
	ls := &Logs{db: db, sessions: sessions, max: DefaultMaxLogs, lru: list.New(), logs: make(map[logKey]*list.Element)}
	if opts != nil {
		if opts.MaxLogs > 0 {
			ls.max = opts.MaxLogs
		}
		ls.opts.Now = opts.Now
	}
	return ls
}

// Log returns the Log of a tenant's project; project "" means
// DefaultProject. A bad project name is ErrInvalid.
func (ls *Logs) Log(tenant, project string) (*Log, error) {
	if project == "" {
		project = DefaultProject
	}
	if err := checkProject(project); err != nil {
		return nil, err
	}
	k := logKey{tenant, project}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if el, ok := ls.logs[k]; ok {
		ls.lru.MoveToFront(el)
		return el.Value.(*logEntry).log, nil
	}
	o := ls.opts
	o.Project = project
	o.Sessions = TenantSessions(ls.sessions, tenant)
	l, err := OpenDB(ls.db.WithTenant(tenant), &o)
	if err != nil {
		return nil, err
	}
	l.shared = true
	ls.logs[k] = ls.lru.PushFront(&logEntry{k, l})
	for ls.lru.Len() > ls.max {
		old := ls.lru.Back()
		ls.lru.Remove(old)
		delete(ls.logs, old.Value.(*logEntry).key)
	}
	return l, nil
}

// TenantSessions returns st as one tenant sees it: the ids and projects
// of its sessions are stored as "tenant:id" and "tenant/project", so that
// tenants sharing a store never see or replace one another's sessions.
// Tenants follow the thread id rules (no ':' or '/'), so the prefixes are
// unambiguous. The tenant "" keeps its sessions as they are, but refuses
// session ids that start with a tenant's name and ':' (another tenant's
// form) and never sees a session stored as another tenant's.
func TenantSessions(st SessionStore, tenant string) SessionStore {
	if tenant == "" {
		return defaultSessions{st}
	}
	return tenantSessions{st, tenant}
}

// otherTenant returns the tenant whose form ("tenant:id") a session id of
// the tenant "" has, if any.
func otherTenant(id string) (string, bool) {
	i := strings.IndexByte(id, ':')
	if i <= 0 || !loomids.Valid(id[:i]) {
		return "", false
	}
	return id[:i], true
}

// defaultSessions is a store as the tenant "" sees it.
type defaultSessions struct{ st SessionStore }

func (d defaultSessions) check(s Session) error {
	if t, ok := otherTenant(s.ID); ok {
		return fmt.Errorf("worklog: session id %q: %q is the form of the sessions of tenant %q: %w", shorten(s.ID, 140), t+":…", t, ErrInvalid)
	}
	return nil
}

func (d defaultSessions) StartSession(ctx context.Context, s Session) error {
	if err := d.check(s); err != nil {
		return err
	}
	return d.st.StartSession(ctx, s)
}

func (d defaultSessions) CloseSession(ctx context.Context, s Session) error {
	if err := d.check(s); err != nil {
		return err
	}
	return d.st.CloseSession(ctx, s)
}

func (d defaultSessions) ClosedSessions(ctx context.Context, opts ClosedOptions) ([]Session, error) {
	ss, err := d.st.ClosedSessions(ctx, opts)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(ss, func(s Session) bool {
		t, ok := otherTenant(s.ID)
		return ok && strings.HasPrefix(s.Project, t+"/") // another tenant's
	}), nil
}

type tenantSessions struct {
	st     SessionStore
	tenant string
}

func (t tenantSessions) in(s Session) (Session, error) {
	// Check the names as the tenant gave them, with a Log's limits: the
	// store's are longer, for the prefixes.
	if err := checkSessionID(s.ID); err != nil {
		return s, err
	}
	if err := checkProject(s.Project); err != nil {
		return s, err
	}
	s.ID = t.tenant + ":" + s.ID
	s.Project = t.tenant + "/" + s.Project
	return s, nil
}

func (t tenantSessions) StartSession(ctx context.Context, s Session) error {
	s, err := t.in(s)
	if err != nil {
		return err
	}
	return t.st.StartSession(ctx, s)
}

func (t tenantSessions) CloseSession(ctx context.Context, s Session) error {
	s, err := t.in(s)
	if err != nil {
		return err
	}
	return t.st.CloseSession(ctx, s)
}

func (t tenantSessions) ClosedSessions(ctx context.Context, opts ClosedOptions) ([]Session, error) {
	if err := checkProject(opts.Project); err != nil {
		return nil, err
	}
	opts.Project = t.tenant + "/" + opts.Project
	ss, err := t.st.ClosedSessions(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := ss[:0]
	for _, s := range ss {
		id, ok := strings.CutPrefix(s.ID, t.tenant+":")
		p, ok2 := strings.CutPrefix(s.Project, t.tenant+"/")
		if !ok || !ok2 {
			continue // not the tenant's: never returned
		}
		s.ID, s.Project = id, p
		out = append(out, s)
	}
	return out, nil
}
