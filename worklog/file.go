package worklog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loomthreads/loom/internal/flock"
)

// DefaultLockTimeout is how long a write waits for the file's lock when
// Options.LockTimeout is zero.
const DefaultLockTimeout = 10 * time.Second

// lockedFile is a JSON file written whole, atomically (a temporary file
// beside it, fsync, rename, fsync of the directory), by writers that hold
// an flock on a lock file beside it: one goroutine of this process at a
// time (sem), one process at a time (the flock). Readers take no lock:
// they see the old file or the new one, never a mix.
type lockedFile struct {
	path     string
	lockPath string
	timeout  time.Duration
	noSync   bool
	sem      chan struct{}
	// swept is set once the temporary files that killed writers left
	// have been removed; only a holder of the lock reads or sets it.
	swept bool

	// hooks let tests make the disk fail.
	hooks struct {
		sync   func(name string) error
		rename func(from, to string) error
	}
}

func newLockedFile(dir, name string, opts *Options) *lockedFile {
	f := &lockedFile{
		path:     filepath.Join(dir, name),
		lockPath: filepath.Join(dir, "."+name+".lock"),
		timeout:  DefaultLockTimeout,
		sem:      make(chan struct{}, 1),
	}
	if opts != nil {
		f.noSync = opts.NoSync
		if opts.LockTimeout != 0 {
			f.timeout = opts.LockTimeout
		}
	}
	return f
}

// lock takes the file's write lock and returns the function that releases
// it and the lock file, open. The wait ends with ctx or after the timeout
// (a negative timeout waits as long as ctx allows). The kernel releases
// the flock of a process that dies; a stopped one keeps it, hence the
// timeout.
func (f *lockedFile) lock(ctx context.Context) (func(), *os.File, error) {
	var deadline <-chan time.Time
	if f.timeout > 0 {
		t := time.NewTimer(f.timeout)
		defer t.Stop()
		deadline = t.C
	}
	fail := func(err error) error {
		if err == nil {
			err = fmt.Errorf("%w (%v)", ErrLockTimeout, f.timeout)
		}
		return fmt.Errorf("worklog: lock %s: %w", f.path, err)
	}
	select {
	case f.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, fail(ctx.Err())
	case <-deadline:
		return nil, nil, fail(nil)
	}
	lf, err := os.OpenFile(f.lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(f.lockPath), 0o755); err == nil {
			lf, err = os.OpenFile(f.lockPath, os.O_RDWR|os.O_CREATE, 0o644)
		}
	}
	if err != nil {
		<-f.sem
		return nil, nil, fail(err)
	}
	release := func() {
		flock.Unlock(lf)
		lf.Close()
		<-f.sem
	}
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 20*time.Millisecond) {
		ok, err := flock.TryLock(lf)
		if ok {
			return release, lf, nil
		}
		if err != nil {
			release()
			return nil, nil, fail(err)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			release()
			return nil, nil, fail(ctx.Err())
		case <-deadline:
			release()
			return nil, nil, fail(nil)
		}
	}
}

// read returns the file's content, nil if there is no file.
func (f *lockedFile) read() ([]byte, error) {
	data, _, err := f.readInto(nil)
	return data, err
}

// fileID identifies a version of a file (see fileIDOf). The zero fileID
// is a file that does not exist.
type fileID struct {
	exists   bool
	dev, ino uint64
	size     int64
	mtime    int64
}

// stat returns the fileID of the file, false if the system gives none.
func (f *lockedFile) stat() (fileID, bool) {
	fi, err := os.Stat(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileID{}, true
	}
	if err != nil {
		return fileID{}, false
	}
	return fileIDOf(fi)
}

// generation returns the number of writes made to the file under its
// lock, which the lock file holds (lf, if not nil, is the lock file,
// open; the lock is held). Every writer counts its write after it, so a
// reader that finds the same count and the same fileID as before knows
// that no writer that takes the lock has written since.
func (f *lockedFile) generation(lf *os.File) (uint64, error) {
	if lf == nil {
		var err error
		if lf, err = os.Open(f.lockPath); errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		} else if err != nil {
			return 0, fmt.Errorf("worklog: %w", err)
		}
		defer lf.Close()
	}
	var b [genLen]byte
	n, err := lf.ReadAt(b[:], 0)
	if err != nil && err != io.EOF {
		return 0, fmt.Errorf("worklog: %w", err)
	}
	g, _ := strconv.ParseUint(strings.TrimSpace(string(b[:n])), 10, 64)
	return g, nil
}

// genLen is the length of the lock file's content: the generation in 20
// decimal digits and a newline.
const genLen = 21

// setGeneration writes g to the lock file lf; the lock is held.
func (f *lockedFile) setGeneration(lf *os.File, g uint64) error {
	_, err := lf.WriteAt(fmt.Appendf(nil, "%020d\n", g), 0)
	return err
}

// readInto reads the file into buf (grown if needed) and returns it with
// the fileID of what it read; nil and the zero fileID if there is no
// file.
func (f *lockedFile) readInto(buf []byte) ([]byte, fileID, error) {
	file, err := os.Open(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fileID{}, nil
	}
	if err != nil {
		return nil, fileID{}, fmt.Errorf("worklog: %w", err)
	}
	defer file.Close()
	need := 512
	var id fileID
	if fi, err := file.Stat(); err == nil && fi.Size() < 1<<40 {
		need = int(fi.Size()) + 1 // + 1: the read that finds the end
		id, _ = fileIDOf(fi)
	}
	if cap(buf) < need {
		// Room to grow: the buffer is used again for the next reads.
		buf = make([]byte, 0, need+need/8+512)
	}
	buf = buf[:0]
	for {
		n, err := file.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			if int64(len(buf)) != id.size {
				id = fileID{} // changed while read: no identity
			}
			return buf, id, nil
		}
		if err != nil {
			return nil, fileID{}, fmt.Errorf("worklog: %w", err)
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}

// writers buffer the writes of lockedFile.write.
var writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 256<<10) }}

// write replaces the file's content with what fill writes, durably; the
// lock is held. The file keeps its permissions; a new one is 0644, like
// the seed's.
func (f *lockedFile) write(fill func(w *bufio.Writer) error) (err error) {
	dir, base := filepath.Split(f.path)
	if !f.swept {
		f.sweep(dir, base)
	}
	mode := fs.FileMode(0o644)
	fi, statErr := os.Stat(f.path)
	if statErr == nil {
		mode = fi.Mode().Perm()
	}
	tmp := filepath.Join(dir, "."+base+".tmp-"+strconv.FormatUint(rand.Uint64(), 36))
	t, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("worklog: write %s: %w", f.path, err)
	}
	defer func() {
		if err != nil {
			os.Remove(tmp)
			err = fmt.Errorf("worklog: write %s: %w", f.path, err)
		}
	}()
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(t)
	err = fill(bw)
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	writers.Put(bw)
	if err == nil && statErr == nil {
		err = t.Chmod(mode)
	}
	if err == nil {
		err = f.sync(t)
	}
	if cerr := t.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	rename := os.Rename
	if f.hooks.rename != nil {
		rename = f.hooks.rename
	}
	if err := rename(tmp, f.path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return f.sync(d)
}

func (f *lockedFile) sync(file *os.File) error {
	if f.hooks.sync != nil {
		if err := f.hooks.sync(file.Name()); err != nil {
			return err
		}
	}
	if f.noSync {
		return nil
	}
	return file.Sync()
}

// sweep removes the temporary files that writers killed halfway left;
// the lock is held, so no writer is using one.
func (f *lockedFile) sweep(dir, base string) {
	f.swept = true
	names, _ := filepath.Glob(filepath.Join(dir, "."+base+".tmp-*"))
	for _, n := range names {
		os.Remove(n)
	}
}

// entry is an item of threads.json. Entries do not change once made,
// except for enc and key, which only writers, holding the lock, compute
// and read.
type entry struct {
	it Item
	// orig and raw are the item as the file has it and its JSON, when
	// that JSON is kept: the item is written as raw (re-indented) while it
	// equals orig, and as raw with the changed fields rewritten in place
	// when it does not. raw is nil for an item written afresh.
	orig Item
	raw  []byte
	// enc is the element as written: two spaces and the indented object.
	enc []byte
	// key is NormalizeText(it.Text), "" until textKey computes it; lower
	// is strings.ToLower(it.Text), "" until lowerText computes it.
	key, lower string
	// ps is it.ProjectState().
	ps bool
	// clean is set when raw is the item's JSON as it is: it equals orig.
	clean bool
	// dup is set on a later copy of an item whose id an earlier entry of
	// the file has: lists and #N count the first copy only. (Resolve
	// resolves every copy; session_start drops the later ones.)
	dup bool
}

func newEntry(it Item) *entry { return &entry{it: it, ps: it.ProjectState()} }

// with returns the entry of it, a changed version of e's item with the
// same text.
func (e *entry) with(it Item) *entry {
	return &entry{it: it, orig: e.orig, raw: e.raw, key: e.key, lower: e.lower, ps: e.ps, dup: e.dup}
}

// textKey returns NormalizeText(e.it.Text), computing it once; the lock
// is held.
func (e *entry) textKey() string {
	if e.key == "" {
		e.key = NormalizeText(e.it.Text)
	}
	return e.key
}

// lowerText returns strings.ToLower(e.it.Text), computing it once; the
// lock is held.
func (e *entry) lowerText() string {
	if e.lower == "" {
		e.lower = strings.ToLower(e.it.Text)
	}
	return e.lower
}

// fileSum identifies a content of the file: its length and a 64-bit
// hash (maphash, with a seed of this process).
type fileSum struct {
	n int
	h uint64
}

var sumSeed = maphash.MakeSeed()

func sumOf(data []byte) fileSum { return fileSum{len(data), maphash.Bytes(sumSeed, data)} }

// version identifies a version of the file without reading it: the
// generation and the fileID. ok is false when there is none.
type version struct {
	gen uint64
	id  fileID
	ok  bool
}

// snapshot is threads.json parsed.
type snapshot struct {
	// ver is the version of the file the snapshot was read from or
	// written as: a read that finds it has nothing to parse.
	ver version
	// sum is the sum of that file's content, if known: a read that finds
	// another version with the same content has nothing to parse either.
	sum     fileSum
	sumOK   bool
	entries []*entry
	// nl is set if the file ends with a newline (the seed's does not).
	nl bool
	// dirty is set when the file must be written again for its items to
	// keep their ids: an element was normalized into an item that differs
	// from it (a fresh id, a filled-in created_at…) or was no item at all.
	dirty bool
	// lists caches the listings of the items (see listing); nil for a
	// snapshot that is not cached. Copies of a snapshot with the same
	// items share it.
	lists *listings
}

// parseThreads parses threads.json: an array of values in any format
// Normalize reads. Items without a created_at get now. The snapshot keeps
// no reference to data.
func parseThreads(data []byte, now time.Time) (*snapshot, error) {
	s := &snapshot{sum: sumOf(data), sumOK: true, nl: bytes.HasSuffix(data, []byte("\n")), lists: new(listings)}
	if len(bytes.TrimSpace(data)) == 0 {
		return s, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, fmt.Errorf("worklog: %s is not a JSON array: %w", ThreadsFile, err)
	}
	n := normalizer{opts: NormalizeOptions{Time: now}, trusted: true}
	var fresh []*entry
	taken := make(map[string]bool, len(raws))
	s.entries = make([]*entry, 0, len(raws))
	for _, raw := range raws {
		r, err := n.value(raw, 0)
		if err != nil {
			s.dirty = true
			continue
		}
		e := newEntry(r.it)
		if r.keep {
			e.orig, e.raw = r.orig, raw
			e.clean = r.it.equal(r.orig)
		}
		if !e.clean {
			s.dirty = true
		}
		if r.freshID {
			fresh = append(fresh, e)
		} else {
			e.dup = taken[e.it.ID]
			taken[e.it.ID] = true
		}
		s.entries = append(s.entries, e)
	}
	for _, e := range fresh {
		for taken[e.it.ID] {
			e.it.ID = NewID()
		}
		taken[e.it.ID] = true
	}
	return s, nil
}

// encode returns e.enc, computing it if needed.
func (e *entry) encode() []byte {
	if e.enc != nil {
		return e.enc
	}
	b := []byte("  ")
	switch {
	case e.raw == nil:
		b = appendItem(b, e.it, "  ")
	case e.clean:
		b = appendIndented(b, e.raw)
	default:
		b = appendIndented(b, rewrite(e.raw, e.orig, e.it))
	}
	e.enc = b
	return b
}

// appendIndented appends the JSON object raw as an element of the top
// array of a file that JSON.stringify(x, null, 2) wrote.
func appendIndented(b, raw []byte) []byte {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "  ", "  "); err != nil {
		return append(b, raw...) // cannot happen: raw was decoded
	}
	return append(b, buf.Bytes()...)
}

// The fields of an item, in the order appendItem writes them.
var itemKeys = []string{"id", "text", "status", "created_at", "source_session", "resolved_at", "resolved_by_session", "resolution_note"}

// itemValue returns the JSON string value of an item's field, "" for an
// empty one.
func itemValue(it Item, key string) string {
	switch key {
	case "id":
		return it.ID
	case "text":
		return it.Text
	case "status":
		return string(it.Status)
	case "created_at":
		if !it.CreatedAt.IsZero() {
			return formatTime(it.CreatedAt)
		}
	case "source_session":
		return it.SourceSession
	case "resolved_at":
		if !it.ResolvedAt.IsZero() {
			return formatTime(it.ResolvedAt)
		}
	case "resolved_by_session":
		return it.ResolvedBySession
	case "resolution_note":
		return it.ResolutionNote
	}
	return ""
}

// rewrite returns the object raw, which encodes orig, changed to encode
// it: the fields that changed get their new value where they are (or go,
// if now empty), new fields are added at the end in the seed's order, and
// everything else — other fields, the order, the spelling of values that
// did not change — stays as it was, as the seed's code, which sets fields
// on the object it read, would leave it.
func rewrite(raw []byte, orig, it Item) []byte {
	fields, err := objectFields(raw)
	if err != nil {
		return appendItem(nil, it, "")
	}
	w := objWriter{b: []byte{'{'}}
	seen := map[string]bool{}
	for _, f := range fields {
		if !isItemKey(f.key) {
			w.raw(f.key, f.val)
			continue
		}
		seen[f.key] = true
		nv := itemValue(it, f.key)
		switch {
		case nv == itemValue(orig, f.key) && sameTime(f.key, orig, it):
			w.raw(f.key, f.val)
		case nv != "":
			w.str(f.key, nv)
		}
	}
	for _, k := range itemKeys {
		if v := itemValue(it, k); !seen[k] && v != "" {
			w.str(k, v)
		}
	}
	return w.end()
}

// sameTime reports whether the time field key, if it is one, is the same
// instant in a and b (a string comparison would miss a change of zone).
func sameTime(key string, a, b Item) bool {
	switch key {
	case "created_at":
		return a.CreatedAt.Equal(b.CreatedAt)
	case "resolved_at":
		return a.ResolvedAt.Equal(b.ResolvedAt)
	}
	return true
}

func isItemKey(k string) bool {
	for _, ik := range itemKeys {
		if k == ik {
			return true
		}
	}
	return false
}

// writeThreads writes threads.json for entries, as
// JSON.stringify(items, null, 2) writes it, with a newline at the end if
// nl.
func writeThreads(w io.Writer, entries []*entry, nl bool) error {
	var err error
	put := func(b []byte) {
		if err == nil {
			_, err = w.Write(b)
		}
	}
	if len(entries) == 0 {
		put(emptyArray)
	} else {
		put(arrayStart)
		for i, e := range entries {
			if i > 0 {
				put(comma)
			}
			put(e.encode())
		}
		put(arrayEnd)
	}
	if nl {
		put(newline)
	}
	return err
}

var (
	emptyArray = []byte("[]")
	arrayStart = []byte("[\n")
	comma      = []byte(",\n")
	arrayEnd   = []byte("\n]")
	newline    = []byte("\n")
)

// written returns the snapshot of the file, version ver, that
// writeThreads(entries, nl) wrote. Entries whose item is what the file
// now says are kept; the others are made again with the written JSON as
// their raw.
func written(ver version, entries []*entry, nl bool) *snapshot {
	s := &snapshot{ver: ver, nl: nl, entries: make([]*entry, len(entries)), lists: new(listings)}
	for i, e := range entries {
		if e.clean {
			s.entries[i] = e
			continue
		}
		enc := e.encode()
		s.entries[i] = &entry{it: e.it, orig: e.it, raw: enc[2:], enc: enc, key: e.key, lower: e.lower, ps: e.ps, clean: true, dup: e.dup}
	}
	return s
}
