package langgraph

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// messagesChannel is the channel that, holding messages, is the thread's.
const messagesChannel = "messages"

// attempts bounds the retries of a write that lost a race with another
// writer of the same thread.
const attempts = 8

// Saver keeps LangGraph checkpoints in the threads of a DB. It is safe for
// concurrent use.
type Saver struct {
	db *thread.DB
}

// New returns a Saver on db (a tenant's DB keeps that tenant's threads).
func New(db *thread.DB) *Saver { return &Saver{db: db} }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), thread.ErrInvalid)
}

func notFound(what string) error { return fmt.Errorf("%s: %w", what, thread.ErrNotFound) }

// named returns th's checkpoint name, or ErrNotFound.
func (s *Saver) named(ctx context.Context, th *thread.Thread, name string) (*record, error) {
	for cp, err := range th.Checkpoints(ctx) {
		if err != nil {
			return nil, err
		}
		if cp.Name == name {
			r, err := s.load(ctx, cp.Commit)
			if err != nil {
				return nil, err
			}
			if r.id() != name {
				break
			}
			return r, nil
		}
	}
	return nil, notFound(fmt.Sprintf("checkpoint %q", name))
}

// open returns the thread of cfg, or ErrNotFound.
func (s *Saver) open(ctx context.Context, cfg Config) (*thread.Thread, error) {
	return s.db.Thread(ctx, ThreadKey(cfg.ThreadID, cfg.CheckpointNS))
}

// latest returns the latest checkpoint of th: its head's, unless writes to
// an older checkpoint moved the head there.
func (s *Saver) latest(ctx context.Context, th *thread.Thread) (*record, error) {
	r, err := s.load(ctx, th.Record().Head)
	if err != nil {
		return nil, err
	}
	if r.st.Latest != "" {
		return s.named(ctx, th, r.st.Latest)
	}
	return r, nil
}

// Put stores a checkpoint and returns its config.
func (s *Saver) Put(ctx context.Context, req PutRequest) (PutResponse, error) {
	cfg := req.Config
	if err := checkConfig(cfg, false); err != nil {
		return PutResponse{}, err
	}
	var h struct {
		ID       string                     `json:"id"`
		Versions map[string]json.RawMessage `json:"channel_versions"`
	}
	if raw, ok := req.Checkpoint["id"]; !ok || json.Unmarshal(raw, &h.ID) != nil {
		return PutResponse{}, invalidf("checkpoint.id: a string is required")
	}
	if err := checkCheckpointID(h.ID, "checkpoint.id"); err != nil {
		return PutResponse{}, err
	}
	if raw, ok := req.Checkpoint["channel_versions"]; ok && json.Unmarshal(raw, &h.Versions) != nil {
		return PutResponse{}, invalidf("checkpoint.channel_versions: an object of versions is required")
	}
	if _, ok := req.Checkpoint["channel_values"]; ok {
		return PutResponse{}, invalidf("checkpoint.channel_values: send the values in channel_values")
	}
	in, err := s.prepare(req, h.ID, h.Versions)
	if err != nil {
		return PutResponse{}, err
	}
	var sum *MessagesSum
	for range attempts {
		sum, err = s.put(ctx, cfg, in)
		if !errors.Is(err, thread.ErrConflict) || errors.Is(err, thread.ErrDuplicateID) || errors.Is(err, errStale) {
			break
		}
	}
	if err != nil {
		return PutResponse{}, err
	}
	return PutResponse{Config: Config{ThreadID: cfg.ThreadID, CheckpointNS: cfg.CheckpointNS, CheckpointID: h.ID}, Messages: sum}, nil
}

// putInput is a checkpoint checked and converted, ready to be committed
// (again, when a race is lost).
type putInput struct {
	id       string
	versions map[string]json.RawMessage
	newV     map[string]json.RawMessage
	parent   string
	// header, meta: the checkpoint's header and metadata, as JSON.
	header, meta []byte
	// blobs: the values of the channels whose version moved.
	blobs map[string][]byte
	// The messages channel, when it holds messages: msgs (all of them, or
	// those after extends), their stored forms, and its version.
	hasMsgs bool
	msgs    []message.Message
	stored  [][]byte
	extends *MessagesSum
	msgsV   json.RawMessage
}

func (s *Saver) prepare(req PutRequest, id string, versions map[string]json.RawMessage) (*putInput, error) {
	in := &putInput{id: id, versions: versions, newV: req.NewVersions, parent: req.Config.CheckpointID, blobs: map[string][]byte{}}
	var err error
	if in.header, err = json.Marshal(req.Checkpoint); err != nil {
		return nil, invalidf("checkpoint: %v", err)
	}
	meta := req.Metadata
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	if in.meta, err = json.Marshal(meta); err != nil {
		return nil, invalidf("metadata: %v", err)
	}
	for ch, v := range req.ChannelValues {
		if ch == "" || len(ch) > maxChannel || !printable(ch) {
			return nil, invalidf("channel %q: 1 to %d printable bytes", clip(ch), maxChannel)
		}
		nv, ok := req.NewVersions[ch]
		if !ok {
			return nil, invalidf("channel_values.%s: not in new_versions", clip(ch))
		}
		isMsgs := v.Messages != nil || v.Extends != nil
		switch {
		case v.Shares != nil || v.Sum != nil:
			return nil, invalidf("channel_values.%s: shares and sum are in answers only", clip(ch))
		case v.Blob != nil && isMsgs, v.Blob == nil && !isMsgs:
			return nil, invalidf("channel_values.%s: one of blob and messages", clip(ch))
		case isMsgs && ch != messagesChannel:
			return nil, invalidf("channel_values.%s: only the channel %q holds messages", clip(ch), messagesChannel)
		case isMsgs:
			if e := v.Extends; e != nil && (e.N < 0 || e.N == 0 && e.H != "" || e.N > 0 && len(e.H) != 64) {
				return nil, invalidf("channel_values.messages.extends: a count and its sum")
			}
			in.hasMsgs, in.extends, in.msgsV = true, v.Extends, nv
			in.msgs = []message.Message{}
			for i, raw := range v.Messages {
				m, err := fromStored(raw)
				if err != nil {
					return nil, fmt.Errorf("channel_values.messages[%d]: %w", i, err)
				}
				st, err := toStored(m)
				if err != nil {
					return nil, err
				}
				in.msgs = append(in.msgs, m)
				in.stored = append(in.stored, st)
			}
		default:
			in.blobs[ch], _ = json.Marshal(v.Blob)
		}
	}
	return in, nil
}

// errStale answers a put whose messages extend a list that is not its
// parent's: the client sends the whole list instead.
var errStale = fmt.Errorf("channel_values.messages.extends: not the parent checkpoint's messages; send the whole list: %w", thread.ErrConflict)

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// put makes one attempt at storing a checkpoint, and returns the sum of
// its messages when it has them.
func (s *Saver) put(ctx context.Context, cfg Config, in *putInput) (*MessagesSum, error) {
	key := ThreadKey(cfg.ThreadID, cfg.CheckpointNS)
	th, err := s.db.Thread(ctx, key)
	if errors.Is(err, thread.ErrNotFound) {
		th, err = s.create(ctx, cfg)
	}
	if err != nil {
		return nil, err
	}
	// The base is the checkpoint the new one follows: the parent, found
	// at the head in the common case, by name when it branches; nil for
	// none.
	g := s.db.Group()
	var head *record
	if th.Record().Head != "" {
		if head, err = s.load(ctx, th.Record().Head); err != nil && !errors.Is(err, thread.ErrNotFound) {
			return nil, err
		}
	}
	base := head
	move := "" // the checkpoint to roll back to first, "reset", or "" for none
	switch {
	case in.parent == "":
		base, move = nil, "reset"
	case head.id() == in.parent && head.st.Latest == "":
	default:
		r, err := s.named(ctx, th, in.parent)
		switch {
		case errors.Is(err, thread.ErrNotFound):
			// A parent this thread does not know: the new checkpoint
			// records it, and follows the head.
		case err != nil:
			return nil, err
		default:
			base, move = r, in.parent
		}
	}
	lineSum, baseMsgs := "", (*msgsState)(nil)
	if base != nil {
		lineSum, baseMsgs = base.tip.Metadata[metaSum], base.st.Msgs
		if baseMsgs != nil && int64(baseMsgs.N) != base.tip.Depth {
			baseMsgs = nil
		}
	} else if move == "" && th.Record().Head != "" {
		// Following a head that is no checkpoint: its line stays.
		c, err := s.commit(ctx, th.Record().Head)
		if err != nil {
			return nil, err
		}
		lineSum = c.Metadata[metaSum]
	}
	var msgs []message.Message
	var sum *MessagesSum
	if in.hasMsgs {
		if e := in.extends; e != nil {
			if baseMsgs == nil || baseMsgs.N != e.N || baseMsgs.H != e.H {
				return nil, errStale
			}
			msgs, lineSum = in.msgs, sumOf(baseMsgs.H, in.stored)
			sum = &MessagesSum{N: baseMsgs.N + len(msgs), H: lineSum}
		} else {
			sums := make([]string, len(in.stored))
			h := ""
			for i, st := range in.stored {
				h = nextSum(h, st)
				sums[i] = h
			}
			if baseMsgs != nil && baseMsgs.N <= len(in.msgs) && (baseMsgs.N == 0 || sums[baseMsgs.N-1] == baseMsgs.H) {
				msgs = in.msgs[baseMsgs.N:]
			} else {
				nb, nmove, n, err := s.prefixBase(ctx, th, base, sums)
				if err != nil {
					return nil, err
				}
				base, move, msgs = nb, nmove, in.msgs[n:]
			}
			lineSum = h
			sum = &MessagesSum{N: len(in.msgs), H: h}
		}
	} else if move == "reset" {
		lineSum = ""
	}
	b, st := s.putParts(base, in, lineSum, sum)
	patch := statePatch(base, st, b.extra)
	switch move {
	case "":
	case "reset":
		if th.Record().Head != "" {
			err = g.Reset(ctx, th)
		}
	default:
		err = g.Rollback(ctx, th, move)
	}
	if err != nil {
		return nil, err
	}
	op := thread.OpAppend
	if len(msgs) == 0 {
		op = thread.OpState
	}
	if _, err := g.Commit(ctx, th, thread.CommitOptions{Messages: msgs, State: patch, Op: op, Metadata: b.meta}); err != nil {
		return nil, err
	}
	if err := g.Checkpoint(ctx, th, in.id); err != nil {
		return nil, err
	}
	err = g.Apply(ctx)
	if errors.Is(err, thread.ErrConflict) && !errors.Is(err, thread.ErrDuplicateID) {
		// A checkpoint of this id may exist already: it is replaced, as
		// LangGraph's savers upsert.
		if _, nerr := s.named(ctx, th, in.id); nerr == nil {
			err = s.replace(ctx, th, in.id, thread.CommitOptions{Messages: msgs, State: patch, Op: op, Metadata: b.meta}, move)
		}
	}
	if err != nil {
		return nil, err
	}
	return sum, nil
}

// putParts returns the metadata of a checkpoint's put commit and the state
// it sets: the values of the channels whose version moved are in the
// commit; the others keep pointing where base's did, when their version
// is base's.
func (s *Saver) putParts(base *record, in *putInput, lineSum string, sum *MessagesSum) (*bag, lgState) {
	b := newBag()
	b.meta[metaCheckpoint] = in.id
	if lineSum != "" {
		b.meta[metaSum] = lineSum
	}
	if in.parent != "" {
		b.meta[metaParent] = in.parent
	}
	st := lgState{ID: in.id, Ch: map[string]chanRef{}}
	if sum != nil {
		st.Msgs = &msgsState{V: in.msgsV, N: sum.N, H: sum.H}
	}
	b.put(metaHeader, in.header)
	b.put(metaMeta, in.meta)
	chans := make([]string, 0, len(in.blobs))
	for ch := range in.blobs {
		chans = append(chans, ch)
	}
	slices.Sort(chans)
	for i, ch := range chans {
		k := metaBlob + strconv.Itoa(i)
		b.put(k, in.blobs[ch])
		st.Ch[ch] = chanRef{V: in.newV[ch], K: k}
	}
	for ch, v := range in.versions {
		if _, moved := in.newV[ch]; moved || base == nil {
			continue
		}
		if ch == messagesChannel && st.Msgs == nil {
			if m := base.st.Msgs; m != nil && jsonEqual(m.V, v) {
				st.Msgs = m
				continue
			}
		}
		if ref, ok := base.st.Ch[ch]; ok && jsonEqual(ref.V, v) {
			if ref.At == "" {
				ref.At = base.put.ID
			}
			st.Ch[ch] = ref
		}
	}
	return b, st
}

// statePatch is the patch that sets the state st (and the pieces that did
// not fit in metadata) over base's.
func statePatch(base *record, st lgState, extra map[string]json.RawMessage) map[string]json.RawMessage {
	patch := map[string]json.RawMessage{}
	patch[keyState], _ = json.Marshal(st)
	for k, v := range extra {
		patch[k] = v
	}
	if base != nil {
		sc := base.put
		if base.tip.StateFrom == base.tip.ID {
			sc = base.tip
		}
		for k := range sc.State {
			if _, ok := extra[k]; !ok && strings.HasPrefix(k, keyExtra) {
				patch[k] = nil
			}
		}
	}
	return patch
}

func sumOf(h string, stored [][]byte) string {
	for _, st := range stored {
		h = nextSum(h, st)
	}
	return h
}

// replace is put for a checkpoint id that the thread has already.
func (s *Saver) replace(ctx context.Context, th *thread.Thread, id string, opts thread.CommitOptions, move string) error {
	if err := th.Refresh(ctx); err != nil {
		return err
	}
	g := s.db.Group()
	var err error
	switch move {
	case "":
	case "reset":
		if th.Record().Head != "" {
			err = g.Reset(ctx, th)
		}
	default:
		err = g.Rollback(ctx, th, move)
	}
	if err != nil {
		return err
	}
	if _, err := g.Commit(ctx, th, opts); err != nil {
		return err
	}
	if err := g.DropCheckpoint(ctx, th, id); err != nil {
		return err
	}
	if err := g.Checkpoint(ctx, th, id); err != nil {
		return err
	}
	return g.Apply(ctx)
}

// create makes the thread of cfg; a subgraph's thread is linked to its
// root graph's when that exists.
func (s *Saver) create(ctx context.Context, cfg Config) (*thread.Thread, error) {
	opts := thread.CreateOptions{ID: ThreadKey(cfg.ThreadID, cfg.CheckpointNS), Kind: thread.KindLocal, Title: title(cfg.ThreadID, cfg.CheckpointNS), Labels: labels(cfg.ThreadID, cfg.CheckpointNS)}
	if cfg.CheckpointNS != "" {
		root := ThreadKey(cfg.ThreadID, "")
		if _, err := s.db.Thread(ctx, root); err == nil {
			opts.Parent = root
		}
	}
	th, err := s.db.Create(ctx, opts)
	if errors.Is(err, thread.ErrConflict) {
		return s.db.Thread(ctx, opts.ID)
	}
	return th, err
}

// prefixBase finds where a messages list that does not extend base's
// departs from it, and the checkpoint to branch from: the newest one on
// base's line whose messages are all in the new list's prefix. It returns
// that checkpoint (with the move to it) and how many of the new messages
// its line holds already. sums are the new list's chain sums.
func (s *Saver) prefixBase(ctx context.Context, th *thread.Thread, base *record, sums []string) (*record, string, int, error) {
	var line []*thread.Commit
	if base != nil {
		for c, err := range s.db.Store().Ancestors(ctx, base.tip.ID, -1) {
			if err != nil {
				return nil, "", 0, err
			}
			line = append(line, c)
		}
	}
	slices.Reverse(line)
	// p: how many of the line's messages the new list starts with.
	p := 0
	h := ""
walk:
	for _, cm := range line {
		for _, m := range cm.Messages {
			if p >= len(sums) {
				break walk
			}
			st, err := toStored(m)
			if err != nil {
				break walk
			}
			if h = nextSum(h, st); h != sums[p] {
				break walk
			}
			p++
		}
	}
	for i := len(line) - 1; i >= 0; i-- {
		cm := line[i]
		name := cm.Metadata[metaCheckpoint]
		if int(cm.Depth) > p || name == "" {
			continue
		}
		r, err := s.named(ctx, th, name)
		if err != nil {
			if errors.Is(err, thread.ErrNotFound) {
				continue
			}
			return nil, "", 0, err
		}
		if d := int(r.tip.Depth); d <= p && r.st.Msgs != nil && r.st.Msgs.N == d {
			return r, name, d, nil
		}
	}
	return nil, "reset", 0, nil
}

func jsonEqual(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// PutWrites stores the pending writes of a task against a checkpoint. A
// write whose (task, index) is stored already is kept as it is, unless its
// index is negative (a special channel's: an error, an interrupt), which
// replaces it.
func (s *Saver) PutWrites(ctx context.Context, req WritesRequest) error {
	if err := checkConfig(req.Config, true); err != nil {
		return err
	}
	if req.TaskID == "" || len(req.TaskID) > maxThreadID || !printable(req.TaskID) {
		return invalidf("task_id: 1 to %d printable bytes", maxThreadID)
	}
	if len(req.TaskPath) > maxThreadID || !printable(req.TaskPath) {
		return invalidf("task_path: at most %d printable bytes", maxThreadID)
	}
	for i, w := range req.Writes {
		if w.Channel == "" || len(w.Channel) > maxChannel || !printable(w.Channel) {
			return invalidf("writes[%d].channel: 1 to %d printable bytes", i, maxChannel)
		}
		if (w.Value.Blob == nil) == (w.Value.Messages == nil) {
			return invalidf("writes[%d].value: one of blob and messages", i)
		}
		for j, raw := range w.Value.Messages {
			if _, err := fromStored(raw); err != nil {
				return fmt.Errorf("writes[%d].value.messages[%d]: %w", i, j, err)
			}
		}
	}
	var err error
	for range attempts {
		err = s.putWrites(ctx, req)
		if !errors.Is(err, thread.ErrConflict) {
			break
		}
	}
	return err
}

func (s *Saver) putWrites(ctx context.Context, req WritesRequest) error {
	th, err := s.open(ctx, req.Config)
	if err != nil {
		return err
	}
	id := req.Config.CheckpointID
	g := s.db.Group()
	head, err := s.load(ctx, th.Record().Head)
	if err != nil && !errors.Is(err, thread.ErrNotFound) {
		return err
	}
	target := head
	latest := ""
	if head != nil {
		latest = head.st.Latest
	}
	if head.id() != id {
		// Writes to an older checkpoint: the head moves to its record,
		// and says which checkpoint is still the latest.
		if target, err = s.named(ctx, th, id); err != nil {
			return err
		}
		if latest == "" && head != nil {
			latest = head.id()
		}
		if err := g.Rollback(ctx, th, id); err != nil {
			return err
		}
	}
	if latest == id {
		latest = ""
	}
	have, err := s.writes(ctx, target)
	if err != nil {
		return err
	}
	var changes []PendingWrite
	for _, w := range req.Writes {
		pw := PendingWrite{TaskID: req.TaskID, Channel: w.Channel, Value: w.Value, Idx: w.Idx, TaskPath: req.TaskPath}
		i := slices.IndexFunc(have, func(o PendingWrite) bool { return o.TaskID == pw.TaskID && o.Idx == pw.Idx })
		if i >= 0 && pw.Idx >= 0 {
			continue // stored already: a task's writes are put once
		}
		if j := slices.IndexFunc(changes, func(o PendingWrite) bool { return o.TaskID == pw.TaskID && o.Idx == pw.Idx }); j >= 0 {
			changes[j] = pw
			continue
		}
		changes = append(changes, pw)
	}
	if len(changes) == 0 && latest == target.st.Latest {
		return nil
	}
	b := newBag()
	b.meta[metaWrites] = id
	if sum := target.tip.Metadata[metaSum]; sum != "" {
		b.meta[metaSum] = sum
	}
	list, err := json.Marshal(changes)
	if err != nil {
		return err
	}
	b.put(metaWriteList, list)
	opts := thread.CommitOptions{Op: opWrites, Metadata: b.meta}
	if b.extra != nil || latest != target.st.Latest {
		// This mark sets the state: the checkpoint's, with where its put
		// is, and what did not fit in metadata.
		st := target.st
		st.Put, st.Latest = target.put.ID, latest
		opts.State = statePatch(target, st, b.extra)
	}
	if _, err := g.Commit(ctx, th, opts); err != nil {
		return err
	}
	if err := g.DropCheckpoint(ctx, th, id); err != nil {
		return err
	}
	if err := g.Checkpoint(ctx, th, id); err != nil {
		return err
	}
	return g.Apply(ctx)
}

// sortWrites orders writes as LangGraph replays them: by task path, task
// id (both by code point, which is byte order in UTF-8) and index.
func sortWrites(ws []PendingWrite) {
	slices.SortStableFunc(ws, func(a, b PendingWrite) int {
		return cmp.Or(cmp.Compare(a.TaskPath, b.TaskPath), cmp.Compare(a.TaskID, b.TaskID), cmp.Compare(a.Idx, b.Idx))
	})
}

// Get returns the checkpoint cfg names, or the latest of its thread and
// namespace when cfg.CheckpointID is "". None is ErrNotFound.
//
// known, when not nil, names a list of messages the client holds: when the
// checkpoint's messages begin with it, only the rest is sent (Extends).
func (s *Saver) Get(ctx context.Context, cfg Config, known *MessagesSum) (*Tuple, error) {
	if err := checkConfig(cfg, false); err != nil {
		return nil, err
	}
	th, err := s.open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	p, err := s.find(ctx, th, cfg.CheckpointID)
	if err != nil {
		return nil, err
	}
	return s.tuple(ctx, cfg.ThreadID, cfg.CheckpointNS, p, &reading{known: known})
}

// find returns th's checkpoint id, or its latest for "".
func (s *Saver) find(ctx context.Context, th *thread.Thread, id string) (*record, error) {
	if id == "" {
		return s.latest(ctx, th)
	}
	if head := th.Record().Head; head != "" {
		r, err := s.load(ctx, head)
		if err != nil && !errors.Is(err, thread.ErrNotFound) {
			return nil, err
		}
		if r.id() == id {
			return r, nil
		}
	}
	return s.named(ctx, th, id)
}

// reading is what one answer has read of messages already: the list the
// client knows, and the lines of the tuples answered before.
type reading struct {
	known *MessagesSum
	// seen maps each commit of a line answered before to the tuple it
	// was read for.
	seen  map[string]int
	index int // the index of the tuple being made
}

// tuple makes the CheckpointTuple of r.
func (s *Saver) tuple(ctx context.Context, threadID, ns string, r *record, rd *reading) (*Tuple, error) {
	t := &Tuple{Config: Config{ThreadID: threadID, CheckpointNS: ns, CheckpointID: r.id()}}
	if err := json.Unmarshal(get(r.put, metaHeader), &t.Checkpoint); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", r.id(), err)
	}
	var versions map[string]json.RawMessage
	_ = json.Unmarshal(t.Checkpoint["channel_versions"], &versions)
	values := make(map[string]Value, len(versions))
	for ch, v := range versions {
		if m := r.st.Msgs; ch == messagesChannel && m != nil && jsonEqual(m.V, v) {
			val, err := s.messages(ctx, r.tip.ID, *m, rd)
			if err != nil {
				return nil, err
			}
			values[ch] = val
			continue
		}
		if ref, ok := r.st.Ch[ch]; ok && jsonEqual(ref.V, v) {
			b, err := s.blob(ctx, r, ref)
			if err != nil {
				return nil, err
			}
			values[ch] = Value{Blob: b}
		}
	}
	cv, err := json.Marshal(values)
	if err != nil {
		return nil, err
	}
	t.Checkpoint["channel_values"] = cv
	if err := json.Unmarshal(get(r.put, metaMeta), &t.Metadata); err != nil || t.Metadata == nil {
		t.Metadata = map[string]json.RawMessage{}
	}
	if parent := r.put.Metadata[metaParent]; parent != "" {
		t.ParentConfig = &Config{ThreadID: threadID, CheckpointNS: ns, CheckpointID: parent}
	}
	if t.PendingWrites, err = s.writes(ctx, r); err != nil {
		return nil, err
	}
	return t, nil
}

// messages returns the messages channel of the checkpoint whose line ends
// at commit, as little of it as the reader needs: the part after the list
// the client knows, or after an earlier tuple's line, or all of it.
func (s *Saver) messages(ctx context.Context, commit string, ms msgsState, r *reading) (Value, error) {
	val := Value{Messages: []json.RawMessage{}, Sum: &MessagesSum{N: ms.N, H: ms.H}}
	if commit == "" || ms.N == 0 {
		return val, nil
	}
	floor := int64(-1)
	if k := r.known; k != nil && k.N <= ms.N {
		floor = int64(k.N)
	}
	var walked []*thread.Commit
	boundary := ""
	for c, err := range s.db.Store().Ancestors(ctx, commit, floor) {
		if err != nil {
			return Value{}, err
		}
		if i, ok := r.seen[c.ID]; ok {
			boundary = c.ID
			val.Shares = &Share{Tuple: i, N: int(c.Depth)}
			break
		}
		walked = append(walked, c)
		boundary = c.Parent
	}
	if len(walked) == 0 && val.Shares == nil {
		boundary = commit
	}
	if val.Shares == nil && floor >= 0 {
		// The line below the walk must be the list the client knows.
		ok := false
		if boundary == "" {
			ok = r.known.N == 0 && r.known.H == ""
		} else if b, err := s.db.Store().Commit(ctx, boundary); err == nil {
			ok = b.Depth == int64(r.known.N) && b.Metadata[metaSum] == r.known.H
		}
		if ok {
			val.Extends = r.known
		} else {
			// Not the client's list: read it all.
			return s.messages(ctx, commit, ms, &reading{seen: r.seen, index: r.index})
		}
	}
	if r.seen == nil {
		r.seen = map[string]int{}
	}
	for _, c := range walked {
		r.seen[c.ID] = r.index
	}
	for _, c := range slices.Backward(walked) {
		for _, m := range c.Messages {
			st, err := toStored(m)
			if err != nil {
				return Value{}, err
			}
			val.Messages = append(val.Messages, st)
		}
	}
	if n := len(val.Messages); val.Extends == nil && val.Shares == nil && n != ms.N || val.Shares != nil && val.Shares.N+n != ms.N || val.Extends != nil && val.Extends.N+n != ms.N {
		return Value{}, fmt.Errorf("messages of checkpoint at %s: the line holds %d, the checkpoint %d", commit, n, ms.N)
	}
	return val, nil
}
