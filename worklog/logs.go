package worklog

import (
	"container/list"
	"sync"
	"time"

	"github.com/loomthreads/loom/thread"
)

// DefaultMaxLogs is how many Logs a Logs keeps when its Options say
// nothing.
const DefaultMaxLogs = 1024

// Logs hands out the Logs of a server: one per tenant and project, their
// items and their session records in threads of a thread.DB (OpenDB,
// ThreadSessions), each tenant's in its own namespace of thread ids, so
// that nothing one tenant does reaches, reveals or blocks another's work
// log. It keeps the Logs it made, the most recently used MaxLogs of them,
// so that their items stay cached. It is safe for concurrent use.
//
// The Logs are shared by every caller of a tenant and project, so they
// have no current session: Create and Resolve record a session only when
// their options name one.
type Logs struct {
	db   *thread.DB
	opts Options
	max  int

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
// is scoped to its own). opts may be nil.
func NewLogs(db *thread.DB, opts *LogsOptions) *Logs {
	ls := &Logs{db: db, max: DefaultMaxLogs, lru: list.New(), logs: make(map[logKey]*list.Element)}
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
	// Each Log its own: its cache is of its project, and goes with it.
	o.Sessions = NewThreadSessions(ls.db.WithTenant(tenant))
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
