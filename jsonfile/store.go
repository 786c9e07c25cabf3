package jsonfile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loomthreads/loom/internal/flock"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

func init() {
	thread.Register("file", func(ctx context.Context, u *url.URL) (store.Store, error) {
		dir, opts, err := ParseURL(u)
		if err != nil {
			return nil, err
		}
		return Open(ctx, dir, opts)
	})
}

// SchemaVersion is the version of the directory layout this package writes.
// Open migrates older directories to it and refuses newer ones.
const SchemaVersion = 4

// DefaultLockTimeout is how long a write, an Open, or a read that finds an
// unfinished batch waits for the store's lock when Options.LockTimeout is
// zero.
const DefaultLockTimeout = 10 * time.Second

// ErrLockTimeout is returned (wrapped) by Apply, Open and the reads when
// the store's lock stayed taken for longer than Options.LockTimeout: another
// process, or a stopped one, holds it.
var ErrLockTimeout = errors.New("jsonfile: timed out waiting for the store's lock")

// Options configure a Store. A nil *Options means the defaults.
type Options struct {
	// NoSync skips every fsync. Writes stay atomic and survive a crash of
	// the process, but not a crash of the machine or a power cut: for tests,
	// benchmarks and scratch data. The default (false) syncs.
	NoSync bool
	// LockTimeout is how long a write, an Open, or a read that finds an
	// unfinished batch waits for the store's lock (held by the writer of
	// this or another process) before failing with ErrLockTimeout. Zero
	// means DefaultLockTimeout; a negative value waits as long as the
	// context allows. The context always ends the wait.
	LockTimeout time.Duration
	// Logger hears when the store becomes read-only for want of room on
	// its disk, and writable again; nil means slog.Default().
	Logger *slog.Logger
}

// Store is a store.Store that keeps each commit and each thread in its own
// JSON file under one directory. It is safe for concurrent use by many
// goroutines and many processes. See the package doc for the layout.
type Store struct {
	dir      string
	root     *os.Root
	opts     Options
	lockFile *os.File
	intent   *os.File      // intent.json, written in place under the lock
	changes  *os.File      // the change log that keeps indexes current (index.go)
	sem      chan struct{} // capacity 1: serializes writers in this process; the flock serializes processes
	wmu      sync.Mutex
	w        writer // the group writer (group.go), under wmu
	closed   atomic.Bool
	// pending is a committed batch that the disk kept from being finished
	// (see fulldisk.go); full is set while writes fail for want of room.
	pending atomic.Pointer[pending]
	full    atomic.Bool
	// foldCase is set when the directory's file system ignores case: ids
	// with upper-case letters are then refused, as "Th" and "th" would be
	// one file.
	foldCase bool
	// ix indexes threads by fork parent and by label, built on first use.
	ix index

	testHooks hooks
}

// hooks let tests make the disk fail or the process "die" at a chosen step.
type hooks struct {
	sync func(name string) error
	// afterIntent runs once the intent of a batch is durable, before any of
	// it is done; an error stops the batch there, as a crash would.
	afterIntent func() error
}

var _ store.Store = (*Store)(nil)

// ParseURL returns the directory and options that a file:// URL names:
// file:///abs/dir for an absolute path, file://rel/dir for one relative to
// the working directory. The query parameter nosync=true sets
// Options.NoSync.
func ParseURL(u *url.URL) (dir string, opts *Options, err error) {
	if u.Scheme != "file" {
		return "", nil, fmt.Errorf("jsonfile: url scheme %q, want file: %w", u.Scheme, thread.ErrInvalid)
	}
	if u.User != nil {
		return "", nil, fmt.Errorf("jsonfile: a file url has no user: %w", thread.ErrInvalid)
	}
	dir = u.Opaque
	if dir == "" {
		dir = u.Host + u.Path
	}
	if dir == "" {
		return "", nil, fmt.Errorf("jsonfile: url %q names no directory: %w", u.Redacted(), thread.ErrInvalid)
	}
	opts = new(Options)
	for k, v := range u.Query() {
		switch k {
		case "nosync":
			b, err := strconv.ParseBool(v[len(v)-1])
			if err != nil {
				return "", nil, fmt.Errorf("jsonfile: nosync=%q: %w", v[len(v)-1], thread.ErrInvalid)
			}
			opts.NoSync = b
		default:
			return "", nil, fmt.Errorf("jsonfile: unknown url parameter %q: %w", k, thread.ErrInvalid)
		}
	}
	return dir, opts, nil
}

// Open opens the store in directory dir, creating it if needed, migrating
// it if an older version of this package wrote it, and finishing a batch
// that a crashed process left half done. A directory written by a newer
// version is refused. opts may be nil for the defaults.
func Open(ctx context.Context, dir string, opts *Options) (*Store, error) {
	return openWith(ctx, dir, opts, hooks{})
}

// openWith is Open with failures injected from the start.
func openWith(ctx context.Context, dir string, opts *Options, h hooks) (*Store, error) {
	s := &Store{dir: dir, sem: make(chan struct{}, 1), testHooks: h}
	if opts != nil {
		s.opts = *opts
	}
	if err := s.open(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) open(ctx context.Context) error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("jsonfile: %w", err)
	}
	root, err := os.OpenRoot(s.dir)
	if err != nil {
		return fmt.Errorf("jsonfile: %w", err)
	}
	s.root = root
	s.lockFile, err = root.OpenFile(".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("jsonfile: lock file: %w", err)
	}
	s.intent, err = root.OpenFile("intent.json", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("jsonfile: intent file: %w", err)
	}
	s.changes, err = root.OpenFile("changes", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("jsonfile: change log: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.unlock()
	m, err := s.readMeta()
	if err != nil {
		return fmt.Errorf("jsonfile %s: %w", s.dir, err)
	}
	// A batch that a crashed process committed is finished before any
	// migration looks at the files: the intents of every schema so far
	// are read alike. One that the disk keeps from being finished is read
	// through, read-only, if no migration is due.
	if err := s.recover(); err != nil {
		if s.pending.Load() == nil || m.Schema < SchemaVersion {
			return fmt.Errorf("jsonfile %s: %w", s.dir, err)
		}
		s.logger().Warn("jsonfile: a committed batch cannot be finished: the store is read-only until it can", "dir", s.dir, "err", err)
		s.foldCase = s.ignoresCase()
		return nil
	}
	if err := s.migrate(ctx, m); err != nil {
		return fmt.Errorf("jsonfile %s: %w", s.dir, err)
	}
	s.removeTemps()
	s.foldCase = s.ignoresCase()
	// A log without an epoch (the disk refused it) is begun by the first
	// batch that logs; meanwhile indexes are built anew at each use.
	_ = s.initChanges()
	return nil
}

// removeTemps removes the temporary files that a process killed while
// writing left behind, in every directory the store writes to. Only a
// writer holding the lock makes them, and the lock is held, with no intent
// pending: every one there now is garbage.
func (s *Store) removeTemps() {
	dirs := []string{".", "threads", "commits", "refs"}
	if d, err := s.root.Open("history"); err == nil {
		names, _ := d.Readdirnames(-1)
		d.Close()
		for _, n := range names {
			if strings.HasPrefix(n, ".tmp-") {
				s.root.RemoveAll("history/" + n)
			} else {
				dirs = append(dirs, "history/"+n)
			}
		}
	}
	for _, dir := range dirs {
		d, err := s.root.Open(dir)
		if err != nil {
			continue
		}
		names, _ := d.Readdirnames(-1)
		d.Close()
		for _, n := range names {
			if strings.HasPrefix(n, ".tmp-") {
				s.root.Remove(dir + "/" + n)
			}
		}
	}
}

// ignoresCase reports whether the store's directory is on a file system
// that ignores the case of names (as macOS's and Windows's do by default):
// it makes a file and looks for it under its upper-case name. The lock is
// held, so no other Open removes the probe as a leftover meanwhile.
func (s *Store) ignoresCase() bool {
	name := ".tmp-case-" + strconv.FormatUint(rand.Uint64(), 36) + "-x"
	f, err := s.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false
	}
	f.Close()
	defer s.root.Remove(name)
	_, err = s.root.Lstat(strings.ToUpper(name))
	return err == nil
}

// Dir returns the directory of the store.
func (s *Store) Dir() string { return s.dir }

// Close releases the store's files. A batch that another goroutine is
// applying finishes first.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.sem <- struct{}{}
	defer func() { <-s.sem }()
	var errs []error
	if s.lockFile != nil {
		errs = append(errs, s.lockFile.Close())
	}
	if s.intent != nil {
		errs = append(errs, s.intent.Close())
	}
	if s.changes != nil {
		errs = append(errs, s.changes.Close())
	}
	if s.root != nil {
		errs = append(errs, s.root.Close())
	}
	return errors.Join(errs...)
}

var errClosed = errors.New("jsonfile: store closed")

// lock takes the store's write lock: the semaphore for this process's
// goroutines, then the flock for other processes. The kernel releases the
// flock if the process dies; a process that is stopped (SIGSTOP, a
// debugger, a hung disk) keeps it, so the wait ends with ctx or after
// Options.LockTimeout.
func (s *Store) lock(ctx context.Context) error {
	timeout := s.opts.LockTimeout
	if timeout == 0 {
		timeout = DefaultLockTimeout
	}
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	fail := func(err error) error {
		if err == nil {
			err = fmt.Errorf("%w (%v)", ErrLockTimeout, timeout)
		}
		return fmt.Errorf("jsonfile %s: lock: %w", s.dir, err)
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return fail(ctx.Err())
	case <-deadline:
		return fail(nil)
	}
	if s.closed.Load() {
		<-s.sem
		return errClosed
	}
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		ok, err := flock.TryLock(s.lockFile)
		if ok {
			return nil
		}
		if err != nil {
			<-s.sem
			return fail(err)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			<-s.sem
			return fail(ctx.Err())
		case <-deadline:
			<-s.sem
			return fail(nil)
		}
	}
}

func (s *Store) unlock() {
	flock.Unlock(s.lockFile)
	<-s.sem
}

// migrations[i] brings a directory from schema i to schema i+1; ctx is
// Open's, for store.ReportMigration.
var migrations = []func(ctx context.Context, s *Store) error{
	0: func(_ context.Context, s *Store) error {
		for _, d := range []string{"commits", "refs", "threads", "history"} {
			if err := s.root.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		}
		return s.syncDir(".")
	},
	// Schema 1 wrote a batch's commit files under their own names before
	// its intent, so a batch that failed there left commit files that
	// nothing references and that read as stored. Schema 2 writes them
	// under temporary names and renames them in the intent; this removes
	// the leftovers of schema 1: commit files without a refs file.
	1: func(_ context.Context, s *Store) error {
		d, err := s.root.Open("commits")
		if err != nil {
			return err
		}
		names, err := d.Readdirnames(-1)
		d.Close()
		if err != nil {
			return err
		}
		for _, n := range names {
			id, ok := strings.CutSuffix(n, ".json")
			if !ok || strings.HasPrefix(n, ".") {
				continue
			}
			if _, err := s.root.Lstat(refsPath(id)); errors.Is(err, fs.ErrNotExist) {
				if err := s.root.Remove("commits/" + n); err != nil {
					return err
				}
			}
		}
		return s.syncDir("commits")
	},
	// Schema 3 gives each tenant its own namespace of thread ids: a thread
	// of a tenant other than the default is kept under its key tenant/id,
	// in threads/tenant~id.json with its history in history/tenant~id.
	2: migrateTenantKeys,
	// Schema 4 lets a thread's history start above version 1 (retention
	// prunes it; threadFile.First): nothing to move, but a version that
	// reads every history from version 1 must not open such a directory.
	3: func(context.Context, *Store) error { return nil },
}

// readMeta reads loom.json and refuses a directory that is not a store's or
// that a newer version wrote; the lock is held.
func (s *Store) readMeta() (metaFile, error) {
	var m metaFile
	b, err := s.root.ReadFile("loom.json")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		m = metaFile{Format: formatName}
	case err != nil:
		return m, err
	default:
		if err := json.Unmarshal(b, &m); err != nil || m.Format != formatName {
			return m, fmt.Errorf("loom.json is not a loom jsonfile store's: %w", thread.ErrInvalid)
		}
	}
	if m.Schema > SchemaVersion {
		return m, fmt.Errorf("written with schema version %d, newer than %d that this version of loom knows: upgrade loom to open it: %w",
			m.Schema, SchemaVersion, thread.ErrUnsupported)
	}
	return m, nil
}

// migrate runs the migrations from m's schema to SchemaVersion; the lock
// is held.
func (s *Store) migrate(ctx context.Context, m metaFile) error {
	for m.Schema < SchemaVersion {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := migrations[m.Schema](ctx, s); err != nil {
			return fmt.Errorf("migrate to schema %d: %w", m.Schema+1, err)
		}
		m.Schema++
		b, err := encode(m)
		if err != nil {
			return err
		}
		if err := s.writeFile("loom.json", b); err != nil {
			return err
		}
		if err := s.syncDir("."); err != nil {
			return err
		}
	}
	return nil
}
