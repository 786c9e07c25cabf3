package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomthreads/loom/thread"
)

func init() {
	open := func(ctx context.Context, u *url.URL) (thread.Store, error) {
		return Open(ctx, u.String(), nil)
	}
	thread.Register("postgres", open)
	thread.Register("postgresql", open)
}

// Store is a thread.Store on a PostgreSQL database. It is safe for
// concurrent use, and any number of Stores, in one process or many, may
// share one database: every Apply is one transaction that locks the threads
// it changes.
type Store struct {
	pool     *pgxpool.Pool
	retries  int
	noNotify bool
	notifier *notifier

	// Watches: done ends them, when the Store is closed.
	done    context.Context
	cancel  context.CancelFunc
	mu      sync.Mutex
	closed  bool
	watches sync.WaitGroup
}

var _ thread.Store = (*Store)(nil)

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
	// Configure, when not nil, may change the pool's configuration (TLS,
	// tracing, connection hooks) after it was parsed from the DSN.
	Configure func(*pgxpool.Config)
}

// Open connects to the PostgreSQL database that dsn names, as a URL
// (postgres://user:password@host:port/dbname?sslmode=disable) or in the
// key=value form, and brings its schema to the latest version; opts may be
// nil. A database written by a newer loom is refused with ErrNewerSchema.
func Open(ctx context.Context, dsn string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message may quote the DSN, password and all.
		return nil, fmt.Errorf("postgres: bad dsn: %w", thread.ErrInvalid)
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	if o.Configure != nil {
		o.Configure(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open %s: %w", redact(cfg), err)
	}
	s := &Store{pool: pool, retries: o.Retries, noNotify: o.NoNotify}
	s.notifier = newNotifier(func(ctx context.Context) (*pgx.Conn, error) {
		return pgx.ConnectConfig(ctx, pool.Config().ConnConfig)
	})
	s.done, s.cancel = context.WithCancel(context.Background())
	if s.retries == 0 {
		s.retries = 8
	}
	if err := s.carrySessions(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("postgres: open %s: %w", redact(cfg), err)
	}
	return s, nil
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
)

// retryable reports whether err aborted a transaction that may simply run
// again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	return pe.Code == codeSerializationFailure || pe.Code == codeDeadlock
}

// mapError turns the server's errors into loom's: a unique violation is a
// conflict (a concurrent writer made the same commit, thread or
// checkpoint), and values the server cannot hold are invalid.
func mapError(what string, err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == codeUniqueViolation:
			return fmt.Errorf("%s: %s exists: %w", what, pe.ConstraintName, thread.ErrConflict)
		case pe.Code == codeSerializationFailure, pe.Code == codeDeadlock, pe.Code == codeLockNotAvailable:
			return fmt.Errorf("%s: %s: %w", what, pe.Message, thread.ErrConflict)
		case strings.HasPrefix(pe.Code, "22"), pe.Code == "54000": // data exception, program limit exceeded
			return fmt.Errorf("%s: %s: %w", what, pe.Message, thread.ErrInvalid)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}
