package langgraph

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/loomthreads/loom/thread"
)

// How a checkpoint is kept (DESIGN §3: state is small, and every commit
// that changes it stores all of it):
//
//   - its put commit appends the messages it adds, and carries in its
//     metadata what is its alone: the checkpoint's header, its metadata,
//     its parent's id and the values of the channels whose version moved;
//   - the thread's state holds only small pointers, under the one key
//     "lg": the checkpoint's id, where each channel's value is, the
//     messages channel's count and sum;
//   - each putWrites is one more commit on top, a mark of metadata only,
//     holding that call's writes; the checkpoint's loom checkpoint names
//     the last of them, so its writes are the marks down to its put.
//
// A piece of metadata over loom's 4 KiB value cap is split over several
// keys; what does not fit in a commit's metadata at all goes into that
// commit's state under lg/x/, which the next put drops.

// Commit metadata keys.
const (
	metaCheckpoint = "lg.checkpoint" // on a put commit: the checkpoint's id
	metaWrites     = "lg.writes"     // on a writes commit: the checkpoint's id
	metaSum        = "lg.sum"        // the chain sum of the messages on the commit's line
	metaHeader     = "lg.cp"         // the header, whole
	metaDelta      = "lg.cpd"        // or its merge patch from the header of…
	metaDeltaBase  = "lg.cpb"        // …this put commit
	metaMeta       = "lg.md"
	metaParent     = "lg.parent"
	metaBlob       = "lg.b" // + a number: a channel's value
	metaWriteList  = "lg.w"
	metaDropped    = "lg.dropped" // on a drop mark: how many checkpoints it dropped
	metaTenant     = "lg.tenant"  // on a put commit: the tenant that made it, when not the default
)

// State keys.
const (
	keyState = "lg"
	keyExtra = "lg/x/" // + a metadata key: a piece that did not fit
)

// The caps of commit metadata (thread's checkMeta).
const (
	metaValueMax = 4000
	metaEntries  = 60
)

// Ops of the commits the saver makes.
const (
	opWrites thread.Op = "writes"
	opDrop   thread.Op = "drop"
)

// lgState is the state of a LangGraph thread at a commit.
type lgState struct {
	// ID is the checkpoint whose record the commit is in.
	ID string `json:"id"`
	// Put is the checkpoint's put commit when this state was set by
	// another (writes that moved the latest elsewhere); "" means the
	// commit that set the state.
	Put string `json:"put,omitempty"`
	// Ch says where the value of each channel of the checkpoint is.
	Ch map[string]chanRef `json:"ch,omitempty"`
	// Msgs is the messages channel, when it is the thread's messages.
	Msgs *msgsState `json:"msgs,omitempty"`
	// Latest is the latest checkpoint when it is not this one.
	Latest string `json:"latest,omitempty"`
	// V is the thread's version when the put commit became its head.
	V int64 `json:"v,omitempty"`
	// TID and NS are the thread's names when its labels hold their hashes
	// (too long, or not printable).
	TID string `json:"tid,omitempty"`
	NS  string `json:"ns,omitempty"`
	// HD counts the merge patches the header is kept as, back to a whole
	// one (0: kept whole).
	HD int `json:"hd,omitempty"`
}

// chanRef is where a channel's value at version V is: the metadata key K
// of the put commit At ("" for this state's put commit).
type chanRef struct {
	V  json.RawMessage `json:"v"`
	K  string          `json:"k"`
	At string          `json:"at,omitempty"`
}

// msgsState says the messages channel is the first N messages of the
// thread's line, at version V, with chain sum H.
type msgsState struct {
	V json.RawMessage `json:"v"`
	N int             `json:"n"`
	H string          `json:"h"`
}

// bag gathers a commit's metadata within loom's caps, and what overflows
// them for the commit's state.
type bag struct {
	meta  map[string]string
	extra map[string]json.RawMessage
}

func newBag() *bag { return &bag{meta: map[string]string{}} }

// put keeps data (UTF-8 JSON) under key, split over key, key~1, key~2, …
// when longer than a metadata value, or in the state when the metadata is
// full.
func (b *bag) put(key string, data []byte) {
	var chunks []string
	for len(data) > metaValueMax {
		n := metaValueMax
		for n > 0 && !utf8.RuneStart(data[n]) {
			n--
		}
		chunks = append(chunks, string(data[:n]))
		data = data[n:]
	}
	chunks = append(chunks, string(data))
	if len(b.meta)+len(chunks) > metaEntries {
		if b.extra == nil {
			b.extra = map[string]json.RawMessage{}
		}
		b.extra[keyExtra+key], _ = json.Marshal(string(joined(chunks)))
		return
	}
	for i, c := range chunks {
		k := key
		if i > 0 {
			k += "~" + strconv.Itoa(i)
		}
		b.meta[k] = c
	}
}

func joined(chunks []string) []byte {
	var out []byte
	for _, c := range chunks {
		out = append(out, c...)
	}
	return out
}

// get reads what bag.put kept under key on commit c; nil when nothing is.
func get(c *thread.Commit, key string) []byte {
	v, ok := c.Metadata[key]
	if !ok {
		if c.StateFrom == c.ID {
			var s string
			if raw := c.State[keyExtra+key]; raw != nil && json.Unmarshal(raw, &s) == nil {
				return []byte(s)
			}
		}
		return nil
	}
	out := []byte(v)
	for i := 1; ; i++ {
		next, ok := c.Metadata[key+"~"+strconv.Itoa(i)]
		if !ok {
			return out
		}
		out = append(out, next...)
	}
}

// record is a checkpoint as its thread keeps it.
type record struct {
	// tip is the commit where its record ends: the last of its writes, or
	// its put commit.
	tip *thread.Commit
	put *thread.Commit
	st  lgState
}

func (r *record) id() string {
	if r == nil {
		return ""
	}
	return r.st.ID
}

// commit reads a commit.
func (s *Saver) commit(ctx context.Context, id string) (*thread.Commit, error) {
	return s.db.Store().Commit(ctx, id)
}

// owned reads the put commit id that a checkpoint refers to (by its
// state or metadata, not by its line), which must be its tenant's: a
// commit id is shared by a store's tenants, and a state or metadata
// written through loom's other faces could name another tenant's.
func (s *Saver) owned(ctx context.Context, id string) (*thread.Commit, error) {
	c, err := s.commit(ctx, id)
	if err != nil {
		return nil, err
	}
	if c.Metadata[metaTenant] != s.db.Tenant() || c.Metadata[metaCheckpoint] == "" {
		return nil, fmt.Errorf("commit %s: not a checkpoint of this tenant's: %w", id, thread.ErrNotFound)
	}
	return c, nil
}

// load reads the checkpoint whose record ends at tip; a commit that is no
// LangGraph checkpoint's is ErrNotFound.
func (s *Saver) load(ctx context.Context, tip string) (*record, error) {
	if tip == "" {
		return nil, notFound("checkpoint")
	}
	c, err := s.commit(ctx, tip)
	if err != nil {
		return nil, err
	}
	r := &record{tip: c}
	sc := c
	if c.StateFrom != c.ID {
		if c.StateFrom == "" {
			return nil, notFound("checkpoint")
		}
		if sc, err = s.commit(ctx, c.StateFrom); err != nil {
			return nil, err
		}
	}
	raw := sc.State[keyState]
	if raw == nil || json.Unmarshal(raw, &r.st) != nil || r.st.ID == "" {
		return nil, notFound("checkpoint")
	}
	r.put = sc
	if r.st.Put != "" {
		if r.put, err = s.owned(ctx, r.st.Put); err != nil {
			return nil, err
		}
	}
	if r.put.Metadata[metaCheckpoint] != r.st.ID {
		return nil, fmt.Errorf("checkpoint %s: its put commit %s is another's: %w", r.st.ID, r.put.ID, thread.ErrNotFound)
	}
	return r, nil
}

// writes returns the pending writes of r: those of the marks from its tip
// down to its put, the later replacing the earlier of the same (task,
// index), in replay order.
func (s *Saver) writes(ctx context.Context, r *record) ([]PendingWrite, error) {
	var marks []*thread.Commit
	for c := r.tip; c.ID != r.put.ID; {
		if c.Metadata[metaWrites] == r.st.ID {
			marks = append(marks, c)
		}
		if c.Parent == "" {
			break
		}
		var err error
		if c, err = s.commit(ctx, c.Parent); err != nil {
			return nil, err
		}
	}
	out := []PendingWrite{}
	type key struct {
		task string
		idx  int
	}
	at := map[key]int{}
	for i := len(marks) - 1; i >= 0; i-- {
		var sws []storedWrite
		if err := json.Unmarshal(get(marks[i], metaWriteList), &sws); err != nil {
			return nil, fmt.Errorf("writes of checkpoint %s: %w", r.st.ID, err)
		}
		for _, sw := range sws {
			w := sw.PendingWrite
			if m := sw.M; len(m) == 2 {
				if m[0] < 0 || m[0] > m[1] || m[1] > len(marks[i].Messages) {
					return nil, fmt.Errorf("writes of checkpoint %s: messages %v of %d", r.st.ID, m, len(marks[i].Messages))
				}
				w.Value = Value{Messages: make([]json.RawMessage, 0, m[1]-m[0])}
				for _, msg := range marks[i].Messages[m[0]:m[1]] {
					st, err := toStored(msg)
					if err != nil {
						return nil, err
					}
					w.Value.Messages = append(w.Value.Messages, st)
				}
			}
			k := key{w.TaskID, w.Idx}
			if j, ok := at[k]; ok {
				out[j] = w
				continue
			}
			at[k] = len(out)
			out = append(out, w)
		}
	}
	sortWrites(out)
	return out, nil
}

// blob returns the value of channel ref.
func (s *Saver) blob(ctx context.Context, r *record, ref chanRef) (*Blob, error) {
	c := r.put
	if ref.At != "" && ref.At != c.ID {
		var err error
		if c, err = s.owned(ctx, ref.At); err != nil {
			return nil, err
		}
	}
	var b Blob
	if err := json.Unmarshal(get(c, ref.K), &b); err != nil {
		return nil, fmt.Errorf("a value of checkpoint %s: %w", r.st.ID, err)
	}
	return &b, nil
}

// header returns the header of the checkpoint whose put commit is c.
func (s *Saver) header(ctx context.Context, c *thread.Commit) ([]byte, error) {
	if h := get(c, metaHeader); h != nil {
		return h, nil
	}
	var patches [][]byte
	for i := 0; ; i++ {
		d, base := get(c, metaDelta), c.Metadata[metaDeltaBase]
		if d == nil || base == "" || i > headerChain {
			return nil, fmt.Errorf("the header of put commit %s: %w", c.ID, thread.ErrNotFound)
		}
		patches = append(patches, d)
		var err error
		if c, err = s.owned(ctx, base); err != nil {
			return nil, err
		}
		if h := get(c, metaHeader); h != nil {
			v, err := decodeAny(h)
			if err != nil {
				return nil, err
			}
			for j := len(patches) - 1; j >= 0; j-- {
				p, err := decodeAny(patches[j])
				if err != nil {
					return nil, err
				}
				v = mergePatch(v, p)
			}
			return json.Marshal(v)
		}
	}
}
