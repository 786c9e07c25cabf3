package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomthreads/loom/internal/netstore"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

func init() {
	open := func(ctx context.Context, u *url.URL) (store.Store, error) {
		return Open(ctx, u.String(), nil)
	}
	thread.Register("postgres", open)
	thread.Register("postgresql", open)
}

// Store is a store.Store on a PostgreSQL database. It is safe for
// concurrent use, and any number of Stores, in one process or many, may
// share one database: every Apply is one transaction that locks the threads
// it changes.
type Store struct {
	pool     *pgxpool.Pool
	retries  int
	timeout  time.Duration // of each round trip; 0: none
	noNotify bool
	notifier *notifier
	// noIndex leaves the search index unwritten: for the benchmarks that
	// measure what the index costs, never set otherwise.
	noIndex bool
	folder  *folder

	// Watches: done ends them, when the Store is closed.
	done    context.Context
	cancel  context.CancelFunc
	mu      sync.Mutex
	closed  bool
	watches sync.WaitGroup
}

var _ store.Store = (*Store)(nil)

// Options configure a Store. A nil *Options means the defaults.
type Options struct {
	// MaxConns caps the connection pool; 0 keeps the DSN's pool_max_conns,
	// or pgxpool's default (the larger of 4 and the number of CPUs).
	MaxConns int32
	// Retries is how many times Apply runs a transaction again after the
	// server aborted it for a deadlock or a serialization failure (nothing
	// of it was applied); 0 means 8, a negative value never. When the
	// retries run out Apply returns thread.ErrConflict.
	Retries int
	// NoNotify stops the store from notifying the changes of its batches
	// (see Store.Watch). The notifications do not delay Apply: it queues
	// them, and a goroutine of the store sends what is queued, many
	// batches' in one transaction with synchronous_commit off, on a
	// connection of its own (one more than MaxConns, from the first
	// write). They still cost the work of encoding and sending them:
	// about 15% of the appends/s of many appends at once in
	// BenchmarkConcurrentAppend (in the batch's transaction, which
	// PostgreSQL would commit one at a time, they made it several times
	// slower). With it, Watch returns thread.ErrUnsupported, and the
	// listeners of other processes do not hear this one's changes: the
	// processes that share a database should all set it or none.
	NoNotify bool
	// ConnectTimeout bounds making a connection (dialing, TLS and the
	// startup handshake): 0 keeps the DSN's connect_timeout (URL:
	// ?connect_timeout=5s, or a number of seconds), or
	// DefaultConnectTimeout; negative waits as long as the call's context
	// allows.
	ConnectTimeout time.Duration
	// Timeout bounds each round trip to the server: every read (each page
	// of a listing or a walk is one), and each of the one to three round
	// trips of a write's transaction, its COMMIT included (which goes on
	// if the caller goes away, but not past Timeout). A server that does
	// not answer in time fails the call with thread.ErrUnavailable; the
	// connection is closed and the pool dials a new one for the next call.
	// A busy server is not one that does not answer: waiting for a
	// connection of the pool is not bounded by Timeout, and a write's
	// statement that waits for others' locks is ended by the server after
	// Timeout and runs again (see the package doc, Deadlines and outages).
	// 0 keeps the URL's ?timeout=10s, or DefaultTimeout; negative waits as
	// long as the call's context allows. A write that timed out may or
	// may not have been applied: its answer was lost.
	Timeout time.Duration
	// Configure, when not nil, may change the pool's configuration (TLS,
	// tracing, connection hooks) after it was parsed from the DSN.
	Configure func(*pgxpool.Config)
}

// The store's deadlines when neither Options nor the URL set them: a
// store that does not answer fails a call with thread.ErrUnavailable in
// seconds, not after the operating system's TCP timeouts (minutes). They
// are every networked store's (package redis too).
const (
	DefaultConnectTimeout = netstore.DefaultConnectTimeout
	DefaultTimeout        = netstore.DefaultTimeout
)

// Open connects to the PostgreSQL database that dsn names, as a URL
// (postgres://user:password@host:port/dbname?sslmode=disable) or in the
// key=value form, and brings its schema to the latest version; opts may be
// nil. A database written by a newer loom is refused with ErrNewerSchema.
func Open(ctx context.Context, dsn string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	dsn, err := takeTimeouts(dsn, &o)
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message may quote the DSN, password and all.
		return nil, fmt.Errorf("postgres: bad dsn: %w", thread.ErrInvalid)
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	switch {
	case o.ConnectTimeout > 0:
		cfg.ConnConfig.ConnectTimeout = o.ConnectTimeout
	case o.ConnectTimeout < 0:
		cfg.ConnConfig.ConnectTimeout = 0
	case cfg.ConnConfig.ConnectTimeout == 0:
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Timeout > 0 && cfg.PingTimeout == 0 {
		cfg.PingTimeout = o.Timeout // the ping of an idle connection, in acquire
	}
	if o.Configure != nil {
		o.Configure(cfg)
	}
	// After Configure: the hooks it sets are wrapped, not replaced.
	boundCloses(cfg.ConnConfig, cmp.Or(cfg.ConnConfig.ConnectTimeout, max(o.Timeout, 0)))
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := &Store{pool: pool, retries: o.Retries, timeout: max(o.Timeout, 0), noNotify: o.NoNotify}
	// A server that does not answer fails Open in seconds too (the first
	// connection by ConnectTimeout, its ping by Timeout); the migration
	// after this may take as long as it needs.
	pc, err := s.acquire(ctx)
	if err == nil {
		pctx, cancel := s.bound(ctx)
		err = pc.Ping(pctx)
		cancel()
		pc.Release()
	}
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open %s: %w", redact(cfg), mapError(ctx, "ping", err))
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open %s: %w", redact(cfg), mapError(ctx, "migrate", err))
	}
	s.notifier = newNotifier(func(ctx context.Context) (*pgx.Conn, error) {
		return pgx.ConnectConfig(ctx, pool.Config().ConnConfig)
	})
	s.done, s.cancel = context.WithCancel(context.Background())
	if s.retries == 0 {
		s.retries = 8
	}
	s.startFolding()
	if err := s.carrySessions(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("postgres: open %s: %w", redact(cfg), err)
	}
	return s, nil
}

// boundCloses makes pgx give up on a connection it closes within limit.
// When a round trip fails, pgx closes its connection: it sends the server a
// cancel request on a connection of its own and waits for its answer, then
// drains the old connection, each for up to 15 s, and pgxpool keeps the
// closing connection's place in the pool until then. With the server out
// of reach, each connection that timed out so held its place for 15 s and
// the pool's other callers queued behind them: ten concurrent reads of a
// black-holed server failed after 17–19 s instead of the store's deadline.
//
// Every connection dialed starts with limit as its deadline, which the
// store's own connections clear as soon as they are dialed (pgx calls
// AfterNetConnect for them, not for a cancel request), and any deadline
// pgx sets later is cut to limit. pgx sets only two: now, when a call's
// context ends, and 15 s ahead, when it closes a connection.
func boundCloses(cfg *pgx.ConnConfig, limit time.Duration) {
	if limit <= 0 {
		return
	}
	dial, after := cfg.DialFunc, cfg.AfterNetConnect
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		// A cancel request's dial has pgx's 15 s, and a URL DSN's dialer
		// no timeout of its own: a server that drops SYNs would hold it.
		ctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		b := &boundedConn{Conn: c, limit: limit}
		if err := c.SetDeadline(time.Now().Add(limit)); err != nil {
			c.Close()
			return nil, err
		}
		return b, nil
	}
	cfg.AfterNetConnect = func(ctx context.Context, cc *pgconn.Config, c net.Conn) (net.Conn, error) {
		// pgx bounds the rest of the connect by ctx (connect_timeout).
		if err := c.SetDeadline(time.Time{}); err != nil {
			return nil, err
		}
		if after != nil {
			return after(ctx, cc, c)
		}
		return c, nil
	}
}

// boundedConn is a connection none of whose deadlines is further than
// limit from when it is set.
type boundedConn struct {
	net.Conn
	limit time.Duration
}

func (c *boundedConn) cut(t time.Time) time.Time {
	if far := time.Now().Add(c.limit); !t.IsZero() && t.After(far) {
		return far
	}
	return t
}

func (c *boundedConn) SetDeadline(t time.Time) error     { return c.Conn.SetDeadline(c.cut(t)) }
func (c *boundedConn) SetReadDeadline(t time.Time) error { return c.Conn.SetReadDeadline(c.cut(t)) }
func (c *boundedConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.cut(t))
}

// takeTimeouts takes the store's deadlines out of a URL DSN's query
// (connect_timeout and timeout, as Go durations or whole seconds) into the
// zero fields of o, and returns the DSN left for pgx. A key=value DSN is
// left as it is: pgx reads its connect_timeout (seconds).
func takeTimeouts(dsn string, o *Options) (string, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn, nil // pgx says what is wrong with it
	}
	q := u.Query()
	if !q.Has("connect_timeout") && !q.Has("timeout") {
		return dsn, nil
	}
	if err := netstore.TakeTimeouts(q, &o.ConnectTimeout, &o.Timeout); err != nil {
		return "", fmt.Errorf("postgres: dsn: %v: %w", err, thread.ErrInvalid)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// acquire takes a connection of the pool. Waiting for one is bounded by
// ctx, the caller's, and not by the store's Timeout: a pool whose
// connections are all busy is a busy server, not one that does not answer.
// One that does not answer still fails the wait in time: the connections
// in use give up by their round trips' deadlines, a new one by
// ConnectTimeout, and an idle one is pinged within Timeout (PingTimeout).
func (s *Store) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	return s.pool.Acquire(ctx)
}

// queueLockTimeout queues, at the start of a write's transaction, how long
// its statements may take waiting for what other writers hold: each
// statement, its waits included, up to the store's Timeout
// (statement_timeout), and each wait for a lock up to half of it
// (lock_timeout), for this transaction only. The server then ends the
// statement, with SQLSTATE 57014 or 55P03, and answers: the transaction
// runs again (retry), and the connection is kept. A busy thread is a
// conflict, not an outage. It reports whether it queued a statement, whose
// result the caller skips.
func (s *Store) queueLockTimeout(q *pgx.Batch) bool {
	if s.timeout <= 0 {
		return false
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%dms", max(d.Milliseconds(), 1)) }
	q.Queue(`SELECT set_config('lock_timeout', $1, true), set_config('statement_timeout', $2, true)`, ms(s.timeout/2), ms(s.timeout))
	return true
}

// lockWait is the lock_timeout that queueLockTimeout sets, for
// loom_append to set itself: nil when the store has no Timeout.
func (s *Store) lockWait() *string {
	if s.timeout <= 0 {
		return nil
	}
	ms := fmt.Sprintf("%dms", max((s.timeout/2).Milliseconds(), 1))
	return &ms
}

// errNoAnswer is the cause of a call's context that the store's Timeout
// ended.
var errNoAnswer = errors.New("postgres: no answer within the store's timeout")

// bound returns ctx bounded by the store's Timeout, for one round trip or
// one page of a read.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, s.timeout, errNoAnswer)
}

// boundWrite returns ctx bounded for the round trips of a write's
// transaction: the server may take the store's Timeout for a statement
// waiting for locks (queueLockTimeout), and then has Timeout to answer.
func (s *Store) boundWrite(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, 2*s.timeout, errNoAnswer)
}

// committing returns the context of a transaction's last round trip, its
// COMMIT: what was decided is written even if the caller goes away (a
// cancel then would leave it not knowing whether it stuck), but not for
// longer than boundWrite allows.
func (s *Store) committing(ctx context.Context) (context.Context, context.CancelFunc) {
	return s.boundWrite(context.WithoutCancel(ctx))
}

// redact names the database without the password.
func redact(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}

// Close ends the Store's watches (closing their connections), closes the
// connection pool, waiting for the connections in use to be given back,
// and then sends the notifications still queued (see Watch), waiting for
// them (about 10 s at most, if the database does not answer).
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.watches.Wait()
	s.stopFolding()
	s.pool.Close() // the writers queue their notes before they give back their connection
	s.notifier.close()
	return nil
}

// maxKey is the longest id, tenant or checkpoint name a store keeps: the
// B-tree indexes on them hold entries of at most about 2.7 KB.
const maxKey = 1024

// validText reports whether s can be a PostgreSQL text value: UTF-8 without
// NUL.
func validText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// validKey reports whether s can be an indexed text value.
func validKey(s string) bool { return len(s) <= maxKey && validText(s) }

// The SQLSTATE codes the store maps to loom's errors.
const (
	codeUniqueViolation      = "23505"
	codeSerializationFailure = "40001"
	codeDeadlock             = "40P01"
	codeLockNotAvailable     = "55P03"
	codeQueryCanceled        = "57014"
	codeDiskFull             = "53100"
	codeTooManyConnections   = "53300"
	codeAdminShutdown        = "57P01"
	codeCrashShutdown        = "57P02"
	codeCannotConnectNow     = "57P03"
)

// retryable reports whether err aborted a transaction that may simply run
// again: a deadlock, a serialization failure, or a wait for locks past
// the store's Timeout (queueLockTimeout).
func retryable(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	return pe.Code == codeSerializationFailure || pe.Code == codeDeadlock || pe.Code == codeLockNotAvailable || pe.Code == codeQueryCanceled
}

// mapError turns the server's errors into loom's: a unique violation is a
// conflict (a concurrent writer made the same commit, thread or
// checkpoint), values the server cannot hold are invalid, a full disk is
// thread.ErrStorageFull, and a server that cannot be reached, is shutting
// down or did not answer by the store's deadline is thread.ErrUnavailable.
// ctx is the caller's: when it ended, its own cancel or deadline is the
// cause, and the error is left as it is.
func mapError(ctx context.Context, what string, err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == codeUniqueViolation:
			return fmt.Errorf("%s: %s exists: %w", what, pe.ConstraintName, thread.ErrConflict)
		case pe.Code == codeSerializationFailure, pe.Code == codeDeadlock, pe.Code == codeLockNotAvailable, pe.Code == codeQueryCanceled:
			return fmt.Errorf("%s: %s: %w", what, pe.Message, thread.ErrConflict)
		case strings.HasPrefix(pe.Code, "22"), pe.Code == "54000": // data exception, program limit exceeded
			return fmt.Errorf("%s: %s: %w", what, pe.Message, thread.ErrInvalid)
		case pe.Code == codeDiskFull:
			return fmt.Errorf("%s: %w", what, store.StorageFull("PostgreSQL's disk is full", err))
		case strings.HasPrefix(pe.Code, "08"), pe.Code == codeTooManyConnections,
			pe.Code == codeAdminShutdown, pe.Code == codeCrashShutdown, pe.Code == codeCannotConnectNow:
			return fmt.Errorf("%s: %w", what, store.Unavailable("PostgreSQL is not accepting connections", err))
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	var ce *pgconn.ConnectError
	if m := netstore.Outage(ctx, "PostgreSQL", err, pgconn.Timeout(err), errors.As(err, &ce) || errors.Is(err, pgconn.ErrConnClosed)); m != nil {
		return fmt.Errorf("%s: %w", what, m)
	}
	return fmt.Errorf("%s: %w", what, err)
}
