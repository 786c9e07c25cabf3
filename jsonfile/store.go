package jsonfile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/loomthreads/loom/thread"
)

func init() {
	thread.Register("file", func(ctx context.Context, u *url.URL) (thread.Store, error) {
		dir, opts, err := ParseURL(u)
		if err != nil {
			return nil, err
		}
		return Open(ctx, dir, opts)
	})
}

// SchemaVersion is the version of the directory layout this package writes.
// Open migrates older directories to it and refuses newer ones.
const SchemaVersion = 1

// Options configure a Store. A nil *Options means the defaults.
type Options struct {
	// NoSync skips every fsync. Writes stay atomic and survive a crash of
	// the process, but not a crash of the machine or a power cut: for tests,
	// benchmarks and scratch data. The default (false) syncs.
	NoSync bool
}

// Store is a thread.Store that keeps each commit and each thread in its own
// JSON file under one directory. It is safe for concurrent use by many
// goroutines and many processes. See the package doc for the layout.
type Store struct {
	dir      string
	root     *os.Root
	opts     Options
	lockFile *os.File
	intent   *os.File   // intent.json, written in place under the lock
	mu       sync.Mutex // serializes writers in this process; the flock serializes processes
	closed   atomic.Bool

	testHooks hooks
}

// hooks let tests make the disk fail or the process "die" at a chosen step.
type hooks struct {
	sync func(name string) error
	// afterIntent runs once the intent of a batch is durable, before any of
	// it is done; an error stops the batch there, as a crash would.
	afterIntent func() error
}

var _ thread.Store = (*Store)(nil)

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
	s := &Store{dir: dir}
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
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("jsonfile: %w", err)
	}
	root, err := os.OpenRoot(s.dir)
	if err != nil {
		return fmt.Errorf("jsonfile: %w", err)
	}
	s.root = root
	s.lockFile, err = root.OpenFile(".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("jsonfile: lock file: %w", err)
	}
	s.intent, err = root.OpenFile("intent.json", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("jsonfile: intent file: %w", err)
	}
	if err := s.lock(); err != nil {
		return err
	}
	defer s.unlock()
	if err := s.migrate(ctx); err != nil {
		return fmt.Errorf("jsonfile %s: %w", s.dir, err)
	}
	if err := s.recover(); err != nil {
		return fmt.Errorf("jsonfile %s: %w", s.dir, err)
	}
	s.removeTemps()
	return nil
}

// removeTemps removes the temporary files that a process killed while
// writing left behind. Only a writer holding the lock makes them, and the
// lock is held: every one there now is garbage.
func (s *Store) removeTemps() {
	for _, dir := range []string{"threads", "commits", "refs"} {
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

// Dir returns the directory of the store.
func (s *Store) Dir() string { return s.dir }

// Close releases the store's files. A batch that another goroutine is
// applying finishes first.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.lockFile != nil {
		errs = append(errs, s.lockFile.Close())
	}
	if s.intent != nil {
		errs = append(errs, s.intent.Close())
	}
	if s.root != nil {
		errs = append(errs, s.root.Close())
	}
	return errors.Join(errs...)
}

var errClosed = errors.New("jsonfile: store closed")

// lock takes the store's write lock: the mutex for this process's
// goroutines, then the flock for other processes. The kernel releases the
// flock if the process dies.
func (s *Store) lock() error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return errClosed
	}
	if err := flock(s.lockFile, true); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("jsonfile: lock: %w", err)
	}
	return nil
}

func (s *Store) unlock() {
	flock(s.lockFile, false)
	s.mu.Unlock()
}

// migrations[i] brings a directory from schema i to schema i+1.
var migrations = []func(s *Store) error{
	0: func(s *Store) error {
		for _, d := range []string{"commits", "refs", "threads", "history"} {
			if err := s.root.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		}
		return s.syncDir(".")
	},
}

// migrate reads loom.json and runs the migrations from its schema to
// SchemaVersion; the lock is held.
func (s *Store) migrate(ctx context.Context) error {
	var m metaFile
	b, err := s.root.ReadFile("loom.json")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		m = metaFile{Format: formatName}
	case err != nil:
		return err
	default:
		if err := json.Unmarshal(b, &m); err != nil || m.Format != formatName {
			return fmt.Errorf("loom.json is not a loom jsonfile store's: %w", thread.ErrInvalid)
		}
	}
	if m.Schema > SchemaVersion {
		return fmt.Errorf("written with schema version %d, newer than %d that this version of loom knows: upgrade loom to open it: %w",
			m.Schema, SchemaVersion, thread.ErrUnsupported)
	}
	for m.Schema < SchemaVersion {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := migrations[m.Schema](s); err != nil {
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
