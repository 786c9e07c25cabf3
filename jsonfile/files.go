package jsonfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// The on-disk forms of the store's files. Every file is JSON, indented, with
// HTML characters left as they are, and ends with a newline.

// commitFile is commits/<id>.json: one immutable commit.
type commitFile struct {
	ID        string                      `json:"id"`
	Parent    string                      `json:"parent,omitzero"`
	Depth     int64                       `json:"depth"`
	Op        thread.Op                   `json:"op,omitzero"`
	Time      time.Time                   `json:"time,omitzero"`
	StateFrom string                      `json:"state_from,omitzero"`
	State     *map[string]json.RawMessage `json:"state,omitzero"` // absent: inherited; {} is an empty state
	Metadata  map[string]string           `json:"metadata,omitzero"`
	Messages  []json.RawMessage           `json:"messages"`
}

// threadFile is threads/<id>.json: a thread's record, its checkpoints and
// the newest part of its history. Older history lives in sealed chunks of
// historyChunk entries, history/<id>/<n>.json, that never change once
// written.
type threadFile struct {
	ID          string            `json:"id"`
	Tenant      string            `json:"tenant,omitzero"`
	Kind        thread.Kind       `json:"kind"`
	Title       string            `json:"title,omitzero"`
	Labels      map[string]string `json:"labels,omitzero"`
	Head        string            `json:"head,omitzero"`
	Version     int64             `json:"version"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
	ForkedFrom  thread.ForkPoint  `json:"forked_from,omitzero"`
	Checkpoints []checkpointFile  `json:"checkpoints,omitzero"` // in name order
	// First is the oldest version kept, when above 1 (schema 4): a prune
	// (retention) let the versions below it go, or the thread was made
	// from a pruned one's history.
	First int64 `json:"first_version,omitzero"`
	// Sealed counts the history chunks of history/<id>/: chunk n holds
	// versions up to n*historyChunk+historyChunk. The chunks below the one
	// of version First are gone, and entries below First in that one are
	// not read.
	Sealed int64 `json:"sealed_chunks,omitzero"`
	// History holds versions max(First, Sealed*historyChunk+1) to Version.
	History []entryFile `json:"history"`
}

// first returns the oldest version of the thread's history.
func (f *threadFile) first() int64 { return max(f.First, 1) }

type checkpointFile struct {
	Name      string    `json:"name"`
	Commit    string    `json:"commit"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
}

type entryFile struct {
	Version int64     `json:"version"`
	Commit  string    `json:"commit,omitzero"`
	Op      thread.Op `json:"op"`
	Time    time.Time `json:"time"`
}

// chunkFile is history/<thread>/<n>.json: the entries of versions
// n*historyChunk+1 to n*historyChunk+historyChunk, oldest first; fewer,
// ending there, when the thread's history starts within the chunk (a
// thread made from a pruned one's history).
type chunkFile struct {
	Thread  string      `json:"thread"`
	History []entryFile `json:"history"`
}

// intentFile is intent.json: the writes and removals that finish a batch,
// made durable before the first of them is done, and done again on open (or
// by the next writer) if the process died halfway.
type intentFile struct {
	Ops []intentOp `json:"ops"`
}

type intentOp struct {
	Path string `json:"path"`
	// Data is the whole new content of Path; Remove removes it instead;
	// From (schema 2) renames that temporary file, already durable, to
	// Path, and is skipped if done already.
	Data   string `json:"data,omitzero"`
	Remove bool   `json:"remove,omitzero"`
	From   string `json:"from,omitzero"`
}

// metaFile is loom.json.
type metaFile struct {
	Format string `json:"format"`
	Schema int    `json:"schema"`
}

const formatName = "loom.jsonfile"

// historyChunk is the number of history entries in a sealed chunk.
const historyChunk = 64

func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func toCommitFile(c *thread.Commit) (*commitFile, error) {
	f := &commitFile{ID: c.ID, Parent: c.Parent, Depth: c.Depth, Op: c.Op, Time: c.Time, StateFrom: c.StateFrom,
		Metadata: c.Metadata, Messages: make([]json.RawMessage, len(c.Messages))}
	if len(f.Metadata) == 0 {
		f.Metadata = nil
	}
	if c.State != nil {
		f.State = &c.State
	}
	for i, m := range c.Messages {
		b, err := m.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("commit %s: message %d: %v: %w", c.ID, i, err, thread.ErrInvalid)
		}
		f.Messages[i] = b
	}
	return f, nil
}

func decodeCommit(b []byte) (*thread.Commit, error) {
	var f commitFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	c := &thread.Commit{ID: f.ID, Parent: f.Parent, Depth: f.Depth, Op: f.Op, Time: f.Time, StateFrom: f.StateFrom}
	if len(f.Metadata) > 0 {
		c.Metadata = f.Metadata
	}
	if f.State != nil {
		st := *f.State
		if st == nil {
			st = map[string]json.RawMessage{}
		}
		for k, v := range st {
			// The file is indented; the values were written compact.
			var buf bytes.Buffer
			if err := json.Compact(&buf, v); err != nil {
				return nil, fmt.Errorf("state %q: %w", k, err)
			}
			st[k] = buf.Bytes()
		}
		c.State = st
	}
	if len(f.Messages) > 0 {
		c.Messages = make([]message.Message, len(f.Messages))
		for i, raw := range f.Messages {
			if err := c.Messages[i].UnmarshalJSON(raw); err != nil {
				return nil, fmt.Errorf("message %d: %w", i, err)
			}
		}
	}
	return c, nil
}

func (f *threadFile) record() *thread.Record {
	r := &thread.Record{ID: f.ID, Tenant: f.Tenant, Kind: f.Kind, Title: f.Title, Head: f.Head, Version: f.Version,
		CreatedAt: utc(f.CreatedAt), UpdatedAt: utc(f.UpdatedAt), ForkedFrom: f.ForkedFrom}
	if len(f.Labels) > 0 {
		r.Labels = make(map[string]string, len(f.Labels))
		for k, v := range f.Labels {
			r.Labels[k] = v
		}
	}
	return r
}

func (e entryFile) entry() thread.HistoryEntry {
	return thread.HistoryEntry{Version: e.Version, Commit: e.Commit, Op: e.Op, Time: utc(e.Time)}
}

func (c checkpointFile) checkpoint(th string) thread.Checkpoint {
	return thread.Checkpoint{Thread: th, Name: c.Name, Commit: c.Commit, Version: c.Version, CreatedAt: utc(c.CreatedAt)}
}

// The paths of the store's files, relative to its directory. Ids are
// checked with ids.Valid before they get here, so they are plain file
// names; os.Root would stop them leaving the directory anyway.
func commitPath(id string) string { return "commits/" + id + ".json" }
func refsPath(id string) string   { return "refs/" + id }
func threadPath(id string) string { return "threads/" + nameOfKey(id) + ".json" }
func chunkDir(th string) string   { return "history/" + nameOfKey(th) }

// nameOfKey is the file name of a thread key: a tenant's key "tenant/id"
// is "tenant~id" (no id holds a '~'), so every thread file stays in
// threads/ and a listing reads one directory. keyOfName undoes it.
func nameOfKey(key string) string  { return strings.Replace(key, "/", "~", 1) }
func keyOfName(name string) string { return strings.Replace(name, "~", "/", 1) }
func chunkPath(th string, n int64) string {
	return chunkDir(th) + "/" + strconv.FormatInt(n, 10) + ".json"
}

// writeFile writes data to name under root durably: a temporary file
// beside it, fsync, rename over name. The caller fsyncs the directory.
func (s *Store) writeFile(name string, data []byte) error {
	tmp, err := s.writeTemp(name, data)
	if err == nil {
		if err = s.root.Rename(tmp, name); err != nil {
			s.root.Remove(tmp)
		}
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// writeTemp writes data durably to a new temporary file beside name (its
// name starts with ".tmp-") and returns that file's name.
func (s *Store) writeTemp(name string, data []byte) (string, error) {
	dir, base := splitPath(name)
	tmp := dir + ".tmp-" + strconv.FormatUint(rand.Uint64(), 36) + "-" + base
	if len(tmp)-len(dir) > 250 {
		tmp = dir + ".tmp-" + strconv.FormatUint(rand.Uint64(), 36)
	}
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil && !s.opts.NoSync {
		err = s.syncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		s.root.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// writeInPlace overwrites name with data and syncs it, without a
// temporary file: for files that only a writer holding the lock reads, and
// only after finishing the intent that rewrites them whole.
func (s *Store) writeInPlace(name string, data []byte) error {
	// No O_TRUNC: truncating a file that has data waiting to be written
	// makes ext4 flush it. Callers write values of a fixed width.
	f, err := s.root.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = f.Truncate(int64(len(data)))
	}
	if err == nil && !s.opts.NoSync {
		err = s.syncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// syncDir fsyncs a directory of the store ("" or "." for the top).
func (s *Store) syncDir(dir string) error {
	if s.opts.NoSync {
		return nil
	}
	if dir == "" {
		dir = "."
	}
	f, err := s.root.Open(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	defer f.Close()
	if err := s.syncFile(f); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

func (s *Store) syncFile(f *os.File) error {
	if s.testHooks.sync != nil {
		if err := s.testHooks.sync(f.Name()); err != nil {
			return err
		}
	}
	return f.Sync()
}

// splitPath splits "a/b/c" into "a/b/" and "c".
func splitPath(p string) (dir, base string) {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[:i+1], p[i+1:]
		}
	}
	return "", p
}
