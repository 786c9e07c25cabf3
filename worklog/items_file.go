package worklog

import (
	"bufio"
	"context"
	"os"
	"sync"
	"time"
)

// itemStore keeps a Log's items: the local file (fileItems) or a loom
// thread (threadItems).
type itemStore interface {
	// load returns the items for a read, and whether they were the ones
	// cached.
	load(ctx context.Context) (*snapshot, bool, error)
	// update changes the items: fn gets them as they are and returns the
	// new entries and whether they differ, which are then stored. fn may
	// be called more than once (a store that retries on a conflict), so
	// it must not keep what an earlier call did. It reports whether the
	// items were the ones cached.
	update(ctx context.Context, fn func(s *snapshot) ([]*entry, bool, error)) (bool, error)
}

// fileItems keeps the items in the seed's file, dir/threads.json.
type fileItems struct {
	f     *lockedFile
	clock func() time.Time // the Log's clock (Log.clock)

	mu   sync.Mutex
	snap *snapshot // the file as last read or written
}

// bufs are buffers to read the file into; the snapshots keep no
// reference to them.
var bufs sync.Pool

// read returns the file's snapshot: the cached one if the file has not
// changed, else a new one, cached unless dirty. lf is the lock file, if
// the lock is held. The file is read only if its version (see
// lockedFile.generation) is not the cached one, and parsed only if its
// content is not either.
func (l *fileItems) read(lf *os.File) (*snapshot, bool, error) {
	gen, err := l.f.generation(lf)
	if err != nil {
		return nil, false, err
	}
	l.mu.Lock()
	cached := l.snap
	l.mu.Unlock()
	if cached != nil && cached.ver.ok {
		if id, ok := l.f.stat(); ok && cached.ver == (version{gen, id, true}) {
			return cached, true, nil
		}
	}
	bp, _ := bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	data, id, err := l.f.readInto(*bp)
	if data != nil {
		*bp = data
	}
	defer bufs.Put(bp)
	if err != nil {
		return nil, false, err
	}
	ver := version{gen, id, id.exists || data == nil}
	sum := sumOf(data)
	if cached != nil && cached.sumOK && cached.sum == sum {
		s := *cached
		s.ver = ver
		l.cache(&s)
		return &s, true, nil
	}
	s, err := parseThreads(data, l.clock())
	if err != nil {
		return nil, false, err
	}
	s.ver = ver
	if !s.dirty {
		l.cache(s)
	}
	return s, false, nil
}

func (l *fileItems) cache(s *snapshot) {
	l.mu.Lock()
	l.snap = s
	l.mu.Unlock()
}

// load returns the file's items for a read. A file that needs writing
// again for its items to keep their ids (see snapshot.dirty) is written
// first, under the lock; if that fails (a read-only directory, a lock
// held too long) the read goes on with the items as parsed.
func (l *fileItems) load(ctx context.Context) (*snapshot, bool, error) {
	s, hit, err := l.read(nil)
	if err != nil || !s.dirty {
		return s, hit, err
	}
	if _, err := l.update(ctx, func(s *snapshot) ([]*entry, bool, error) { return s.entries, false, nil }); err != nil {
		return s, false, nil
	}
	l.mu.Lock()
	s = l.snap
	l.mu.Unlock()
	return s, false, nil
}

// update changes the file under its lock: fn gets the file as it is and
// returns the new entries and whether they differ; the file is written if
// they do (or if it must be, see snapshot.dirty). It reports whether the
// file was the one cached.
func (l *fileItems) update(ctx context.Context, fn func(s *snapshot) ([]*entry, bool, error)) (bool, error) {
	unlock, lf, err := l.f.lock(ctx)
	if err != nil {
		return false, err
	}
	defer unlock()
	s, hit, err := l.read(lf)
	if err != nil {
		return false, err
	}
	entries, changed, err := fn(s)
	if err != nil || !changed && !s.dirty {
		return hit, err
	}
	err = l.f.write(func(w *bufio.Writer) error { return writeThreads(w, entries, s.nl) })
	if err != nil {
		return hit, err
	}
	// Count the write, so that other readers know the file changed
	// without reading it; then this Log knows the version it wrote.
	var ver version
	if err := l.f.setGeneration(lf, s.ver.gen+1); err == nil {
		if id, ok := l.f.stat(); ok {
			ver = version{s.ver.gen + 1, id, true}
		}
	}
	l.cache(written(ver, entries, s.nl))
	return hit, nil
}
