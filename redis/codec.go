package redis

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// Values are framed byte strings: a uvarint length before each string, so
// every byte (NUL, invalid UTF-8) round-trips. A commit is
//
//	parent, depth, stateFrom, op, time (µs), metadata, state, messages
//
// where metadata and state are a count+1 (0: nil) of key/value pairs, a
// state value is its JSON exactly as given, and a message is its own JSON
// (message.Message.MarshalJSON) exactly as encoded.

var errCorrupt = errors.New("corrupt value")

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b []byte, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errCorrupt
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

// count reads a count+1 of key/value pairs (0: nil). A pair takes at
// least two bytes, so a count the remaining bytes cannot hold is corrupt,
// and so a corrupt count can never make a decoder loop for long.
func (r *reader) count() uint64 {
	n := r.uvarint()
	if r.err == nil && n > 0 && n-1 > uint64(len(r.b))/2 {
		r.err = errCorrupt
	}
	if r.err != nil {
		return 0
	}
	return n
}

func (r *reader) str() string { return string(r.bytes()) }

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func encodeCommit(c *thread.Commit) ([]byte, error) {
	size := 64 + len(c.Parent) + len(c.StateFrom)
	b := make([]byte, 0, size)
	b = appendStr(b, c.Parent)
	b = binary.AppendVarint(b, c.Depth)
	b = appendStr(b, c.StateFrom)
	b = appendStr(b, string(c.Op))
	b = binary.AppendVarint(b, micros(c.Time))
	if c.Metadata == nil {
		b = binary.AppendUvarint(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(c.Metadata))+1)
		for k, v := range c.Metadata {
			b = appendStr(appendStr(b, k), v)
		}
	}
	if c.State == nil {
		b = binary.AppendUvarint(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(c.State))+1)
		for k, v := range c.State {
			b = appendBytes(appendStr(b, k), v)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(c.Messages)))
	for i := range c.Messages {
		j, err := c.Messages[i].MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("commit %q: message %d: %v: %w", c.ID, i, err, thread.ErrInvalid)
		}
		b = appendBytes(b, j)
	}
	return b, nil
}

func decodeCommit(id string, blob []byte) (*thread.Commit, error) {
	r := &reader{b: blob}
	c := &thread.Commit{ID: id}
	c.Parent = r.str()
	c.Depth = r.varint()
	c.StateFrom = r.str()
	c.Op = thread.Op(r.str())
	c.Time = fromMicros(r.varint())
	if n := r.count(); n > 0 {
		c.Metadata = make(map[string]string, n-1)
		for range n - 1 {
			k := r.str()
			c.Metadata[k] = r.str()
		}
	}
	if n := r.count(); n > 0 {
		c.State = make(map[string]json.RawMessage, n-1)
		for range n - 1 {
			k := r.str()
			c.State[k] = json.RawMessage(r.str())
		}
	}
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.err = errCorrupt
	}
	if r.err != nil {
		return nil, fmt.Errorf("commit %q: %w", id, r.err)
	}
	if n > 0 {
		c.Messages = make([]message.Message, n)
		for i := range c.Messages {
			j := r.bytes()
			if r.err != nil {
				return nil, fmt.Errorf("commit %q: %w", id, r.err)
			}
			if err := c.Messages[i].UnmarshalJSON(j); err != nil {
				return nil, fmt.Errorf("commit %q: message %d: %w", id, i, err)
			}
		}
	}
	return c, nil
}

// A record is a hash with these fields.
const (
	fID      = "i"
	fTenant  = "t"
	fKind    = "k"
	fTitle   = "n"
	fLabels  = "l"
	fHead    = "h"
	fVersion = "v"
	fCreated = "c"
	fUpdated = "u"
	fForked  = "f"
	fExpires = "x" // µs; absent without a TTL
	// fSets holds the keys of the fork and label indexes that list the
	// thread, tab-separated (absent when none), so that a move or a
	// delete finds them.
	fSets = "s"
)

func encodeLabels(l map[string]string) string {
	if len(l) == 0 {
		return ""
	}
	b := binary.AppendUvarint(nil, uint64(len(l)))
	for k, v := range l {
		b = appendStr(appendStr(b, k), v)
	}
	return string(b)
}

func decodeLabels(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	r := &reader{b: []byte(s)}
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b))/2 {
		return nil, errCorrupt
	}
	l := make(map[string]string, n)
	for range n {
		k := r.str()
		l[k] = r.str()
	}
	return l, r.err
}

// recordFields returns the hash fields of r, as HSET arguments.
func recordFields(r *thread.Record, expires int64) []string {
	f := []string{
		fID, r.ID, fTenant, r.Tenant, fKind, string(r.Kind), fTitle, r.Title, fLabels, encodeLabels(r.Labels),
		fHead, r.Head, fVersion, strconv.FormatInt(r.Version, 10),
		fCreated, strconv.FormatInt(micros(r.CreatedAt), 10), fUpdated, strconv.FormatInt(micros(r.UpdatedAt), 10),
	}
	if r.ForkedFrom != (thread.ForkPoint{}) {
		ff := r.ForkedFrom
		f = append(f, fForked, string(appendStr(appendStr(appendStr(nil, ff.Thread), ff.Commit), ff.Message)))
	}
	if expires != 0 {
		f = append(f, fExpires, strconv.FormatInt(expires, 10))
	}
	return f
}

// decodeRecord reads a record hash; it also returns the expiry (0: none).
func decodeRecord(h map[string]string) (*thread.Record, int64, error) {
	var err error
	num := func(k string) int64 {
		n, e := strconv.ParseInt(h[k], 10, 64)
		if e != nil && err == nil {
			err = fmt.Errorf("record field %s: %w", k, errCorrupt)
		}
		return n
	}
	r := &thread.Record{ID: h[fID], Tenant: h[fTenant], Kind: thread.Kind(h[fKind]), Title: h[fTitle], Head: h[fHead],
		Version: num(fVersion), CreatedAt: fromMicros(num(fCreated)), UpdatedAt: fromMicros(num(fUpdated))}
	if r.Labels, err = decodeLabels(h[fLabels]); err != nil {
		return nil, 0, err
	}
	if ff := h[fForked]; ff != "" {
		rd := &reader{b: []byte(ff)}
		r.ForkedFrom = thread.ForkPoint{Thread: rd.str(), Commit: rd.str(), Message: rd.str()}
		if rd.err != nil {
			return nil, 0, fmt.Errorf("record field %s: %w", fForked, errCorrupt)
		}
	}
	var exp int64
	if h[fExpires] != "" {
		exp = num(fExpires)
	}
	return r, exp, err
}

// A history entry is "µs \t op \t commit \t family"; a checkpoint is
// "µs \t version \t commit \t family". The family is "" when it is the
// thread's own. The apply script reads the commit and family of both.

func entryValue(t time.Time, op thread.Op, commit, fam string) string {
	return strconv.FormatInt(micros(t), 10) + "\t" + string(op) + "\t" + commit + "\t" + fam
}

func checkpointValue(cp thread.Checkpoint, fam string) string {
	return strconv.FormatInt(micros(cp.CreatedAt), 10) + "\t" + strconv.FormatInt(cp.Version, 10) + "\t" + cp.Commit + "\t" + fam
}

func splitValue(v string) (a, b, commit string, err error) {
	p := strings.SplitN(v, "\t", 4)
	if len(p) != 4 {
		return "", "", "", errCorrupt
	}
	return p[0], p[1], p[2], nil
}

func decodeEntry(version int64, v string) (thread.HistoryEntry, error) {
	us, op, commit, err := splitValue(v)
	t, perr := strconv.ParseInt(us, 10, 64)
	if err != nil || perr != nil {
		return thread.HistoryEntry{}, fmt.Errorf("history entry %d: %w", version, errCorrupt)
	}
	return thread.HistoryEntry{Version: version, Commit: commit, Op: thread.Op(op), Time: fromMicros(t)}, nil
}

func decodeCheckpoint(th, name, v string) (thread.Checkpoint, error) {
	us, ver, commit, err := splitValue(v)
	t, e1 := strconv.ParseInt(us, 10, 64)
	n, e2 := strconv.ParseInt(ver, 10, 64)
	if err != nil || e1 != nil || e2 != nil {
		return thread.Checkpoint{}, fmt.Errorf("checkpoint %q: %w", name, errCorrupt)
	}
	return thread.Checkpoint{Thread: th, Name: name, Commit: commit, Version: n, CreatedAt: fromMicros(t)}, nil
}
