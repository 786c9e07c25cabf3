package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go
)

func init() {
	thread.Register("sqlite", func(ctx context.Context, u *url.URL) (store.Store, error) {
		path, opts, err := parseURL(u)
		if err != nil {
			return nil, err
		}
		return Open(ctx, path, opts)
	})
}

// Synchronous says when a write is acknowledged: SQLite's synchronous
// setting for a database in WAL mode.
type Synchronous string

// The synchronous settings Open accepts.
const (
	// SyncNormal acknowledges a write once it is in the write-ahead log,
	// before an fsync: it survives a crash of the process (kill -9) but the
	// last writes may be lost if the machine loses power. The default.
	SyncNormal Synchronous = "normal"
	// SyncFull fsyncs the write-ahead log before acknowledging: a write
	// survives power loss too, at the cost of one fsync per write.
	SyncFull Synchronous = "full"
)

// Options tune a Store. The zero value (or a nil *Options) means the
// defaults.
type Options struct {
	// Synchronous is the durability of an acknowledged write; "" means
	// SyncNormal.
	Synchronous Synchronous
	// BusyTimeout is how long a write waits for the write lock while
	// another process holds it before it fails; 0 means 10 seconds.
	BusyTimeout time.Duration
	// CacheBytes caps the memory of the cache of decoded commits (commits
	// never change, and decoding their messages is most of a read's cost);
	// 0 means 32 MiB, a negative value turns the cache off.
	CacheBytes int64
}

func (o *Options) withDefaults() (Options, error) {
	var out Options
	if o != nil {
		out = *o
	}
	switch Synchronous(strings.ToLower(string(out.Synchronous))) {
	case "", SyncNormal:
		out.Synchronous = SyncNormal
	case SyncFull:
		out.Synchronous = SyncFull
	default:
		return out, fmt.Errorf("sqlite: synchronous %q: want normal or full: %w", out.Synchronous, thread.ErrInvalid)
	}
	if out.BusyTimeout < 0 {
		return out, fmt.Errorf("sqlite: negative busy timeout %v: %w", out.BusyTimeout, thread.ErrInvalid)
	}
	if out.BusyTimeout == 0 {
		out.BusyTimeout = 10 * time.Second
	}
	if out.CacheBytes == 0 {
		out.CacheBytes = 32 << 20
	}
	return out, nil
}

// Store is a store.Store in one SQLite database file, in WAL mode: writes
// are serialized by SQLite's write lock (across processes too) and readers
// never wait for them. It is safe for concurrent use, and several processes
// may open the same file.
type Store struct {
	path  string
	w     *sql.DB      // one connection: every write is a BEGIN IMMEDIATE transaction on it
	r     *sql.DB      // read-only connections, as many as are in use
	st    stmts        // reads
	wc    writeConn    // writes
	group group        // batches waiting for the writer (group.go)
	cache *commitCache // nil when off
	// folder folds pending commits into the search index (fold.go); nil
	// when the schema has no index.
	folder *folder
	// ckpt checkpoints the write-ahead log (checkpoint.go).
	ckpt *checkpointer
}

var _ store.Store = (*Store)(nil)

// Open opens the database at path, creating it if it does not exist, and
// brings its schema up to date. path may also be a sqlite:// URL, whose
// query options override opts (see the package doc). A nil opts means the
// defaults. A database written by a newer version of this package is
// refused with ErrNewerSchema.
func Open(ctx context.Context, path string, opts *Options) (*Store, error) {
	path, opts, err := splitPath(path, opts)
	if err != nil {
		return nil, err
	}
	return open(ctx, path, opts, migrations)
}

// splitPath returns the file path and options of path, which may be a
// sqlite:// URL whose query options override opts.
func splitPath(path string, opts *Options) (string, *Options, error) {
	if !strings.HasPrefix(path, "sqlite:") {
		return path, opts, nil
	}
	u, err := url.Parse(path)
	if err != nil {
		return "", nil, fmt.Errorf("sqlite: url: %v: %w", err, thread.ErrInvalid)
	}
	return parseURLOver(u, opts)
}

// open opens the database with openDB and prepares the store's statements.
func open(ctx context.Context, path string, opts *Options, migs []migration) (*Store, error) {
	s, err := openDB(ctx, path, opts, migs)
	if err != nil {
		return nil, err
	}
	if err := s.st.prepare(ctx, s.r); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: %s: %w", path, err)
	}
	if err := s.wc.prepare(ctx, s.w); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: %s: %w", path, err)
	}
	if err := s.carrySessions(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: %s: %w", path, err)
	}
	if len(migs) >= 3 {
		s.startFolding()
	}
	return s, nil
}

// openDB opens the database's write and read pools and brings its schema up
// to date, without preparing any statement.
func openDB(ctx context.Context, path string, opts *Options, migs []migration) (*Store, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if path == "" || strings.ContainsRune(path, 0) {
		return nil, fmt.Errorf("sqlite: path %q: %w", path, thread.ErrInvalid)
	}
	if path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("sqlite: path %q: give a file path (memory:// is the in-memory store): %w", path, thread.ErrInvalid)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: path %q: %w", path, err)
	}
	// A new database is readable by its owner only (SQLite would make it
	// 0644): it holds conversations. The log and shared-memory files that
	// SQLite makes beside it take the same permissions.
	if f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	}
	// A file: URI, so that '?' or '#' in the path are data, not syntax.
	name := (&url.URL{Scheme: "file", Path: abs}).String()
	common := url.Values{}
	common.Set("_busy_timeout", strconv.FormatInt(o.BusyTimeout.Milliseconds(), 10))
	common.Set("_journal_mode", "WAL")
	common.Set("_synchronous", string(o.Synchronous))

	wq := url.Values{}
	for k, v := range common {
		wq[k] = v
	}
	wq.Set("_txlock", "immediate")
	// A new file frees the pages of what retention drops (see vacuum.go);
	// a file made before keeps them for its later writes.
	wq.Add("_pragma", "auto_vacuum(incremental)")
	writePragmas(wq) // no checkpoints in a write's COMMIT: the checkpointer's
	w, err := sql.Open(writeDriver, name+"?"+wq.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	s := &Store{path: abs, w: w, cache: newCommitCache(o.CacheBytes)}
	if err := migrate(ctx, w, migs); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: %s: %w", path, err)
	}

	rq := url.Values{}
	for k, v := range common {
		rq[k] = v
	}
	rq.Set("_query_only", "1")
	r, err := sql.Open("sqlite", name+"?"+rq.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// No cap on readers: an iterator holds a connection while its caller
	// may read again inside the loop, and a cap could deadlock that.
	r.SetMaxIdleConns(8)
	s.r = r
	if err := s.startCheckpointing(name, o.Synchronous); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return s, nil
}

// writeDriver is the database/sql driver of the write pool: modernc's.
// Tests swap in one that fails BEGIN, COMMIT or a statement on demand
// (faults_test.go), for the time of an Open.
var writeDriver = "sqlite"

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close closes the database. Operations after Close fail.
func (s *Store) Close() error {
	s.stopFolding()
	var errs []error
	errs = append(errs, s.stopCheckpointing(), s.st.close(), s.wc.close(s.w))
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	errs = append(errs, s.w.Close())
	return errors.Join(errs...)
}

// parseURL turns sqlite://PATH?options into a path and options.
func parseURL(u *url.URL) (string, *Options, error) { return parseURLOver(u, nil) }

func parseURLOver(u *url.URL, base *Options) (string, *Options, error) {
	if u.Scheme != "sqlite" {
		return "", nil, fmt.Errorf("sqlite: url scheme %q: %w", u.Scheme, thread.ErrInvalid)
	}
	var path string
	switch {
	case u.Opaque != "": // sqlite:relative/path.db
		p, err := url.PathUnescape(u.Opaque)
		if err != nil {
			return "", nil, fmt.Errorf("sqlite: url path: %v: %w", err, thread.ErrInvalid)
		}
		path = p
	default: // sqlite:///abs/path.db or sqlite://relative/path.db
		path = u.Host + u.Path
	}
	if path == "" {
		return "", nil, fmt.Errorf("sqlite: url %q names no file: %w", u.Redacted(), thread.ErrInvalid)
	}
	if u.User != nil || u.Fragment != "" {
		return "", nil, fmt.Errorf("sqlite: url %q: no user or fragment expected: %w", u.Redacted(), thread.ErrInvalid)
	}
	var o Options
	if base != nil {
		o = *base
	}
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		switch k {
		case "synchronous", "sync":
			o.Synchronous = Synchronous(strings.ToLower(v))
		case "busy_timeout":
			d, err := time.ParseDuration(v)
			if err != nil {
				// A bare number is milliseconds, as in SQLite's pragma.
				ms, err2 := strconv.ParseInt(v, 10, 64)
				if err2 != nil {
					return "", nil, fmt.Errorf("sqlite: busy_timeout %q: a duration such as 5s: %w", v, thread.ErrInvalid)
				}
				d = time.Duration(ms) * time.Millisecond
			}
			o.BusyTimeout = d
		case "cache_bytes":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return "", nil, fmt.Errorf("sqlite: cache_bytes %q: a number of bytes: %w", v, thread.ErrInvalid)
			}
			o.CacheBytes = n
		default:
			return "", nil, fmt.Errorf("sqlite: unknown url option %q (known: synchronous, busy_timeout, cache_bytes): %w", k, thread.ErrInvalid)
		}
	}
	if _, err := o.withDefaults(); err != nil {
		return "", nil, err
	}
	return path, &o, nil
}
