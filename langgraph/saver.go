package langgraph

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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
	in.tid, in.ns = cfg.ThreadID, cfg.CheckpointNS
	var sum *MessagesSum
	for range attempts {
		sum, err = s.put(ctx, cfg, in)
		if errors.Is(err, errExists) {
			// The checkpoint is there already: it is replaced, as
			// LangGraph's savers upsert, by a put made anew that drops
			// the old name in the same group.
			in.replace = true
			continue
		}
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
	// replace says the checkpoint's id is taken: its name is dropped and
	// made anew in the put's group.
	replace bool
	// tid and ns are the names, kept in the state when a label cannot.
	tid, ns string
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
	for _, ch := range slices.Sorted(maps.Keys(req.ChannelValues)) {
		v := req.ChannelValues[ch]
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
			if e := v.Extends; e != nil && (e.N < 0 || e.N == 0 && e.H != "" || e.N > 0 && len(e.H) != 32) {
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

// errExists says a put's checkpoint id is taken on its thread.
var errExists = errors.New("the checkpoint exists")

// errStale answers a put whose messages extend a list that is not its
// parent's: the client sends the whole list instead.
var errStale = fmt.Errorf("channel_values.messages.extends: not the parent checkpoint's messages; send the whole list: %w", thread.ErrConflict)

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// place says where a new commit goes: on the head, on the empty root
// (reset), on a checkpoint's record (rollback to its name), or on a
// checkpoint's put commit (restore to the version it was made at, checked
// to be that commit).
type place struct {
	reset  bool
	name   string
	v      int64
	commit *thread.Commit // the commit the new one goes on, nil for the head or the root
}

// errNoRestore says a put commit's version no longer names it (the thread
// is a copy, with a history of its own).
var errNoRestore = errors.New("the version no longer names the commit")

// to adds the move to pl to g.
func (pl place) to(ctx context.Context, g *thread.Group, th *thread.Thread) error {
	switch {
	case pl.reset:
		if th.Record().Head != "" {
			return g.Reset(ctx, th)
		}
	case pl.name != "":
		return g.Rollback(ctx, th, pl.name)
	case pl.commit != nil:
		id := pl.commit.ID
		return g.RestoreChecked(ctx, th, pl.v, func(e thread.HistoryEntry) error {
			if e.Commit != id {
				return errNoRestore
			}
			return nil
		})
	}
	return nil
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
	// parent is the checkpoint the new one follows, found at the head in
	// the common case, by name when it branches; nil for none.
	var head *record
	var headCommit *thread.Commit
	if h := th.Record().Head; h != "" {
		if head, err = s.load(ctx, h); err != nil && !errors.Is(err, thread.ErrNotFound) {
			return nil, err
		}
		if head != nil {
			headCommit = head.tip
		} else if headCommit, err = s.commit(ctx, h); err != nil {
			return nil, err
		}
	}
	parent := head
	var pl place
	switch {
	case in.parent == "":
		parent, pl = nil, place{reset: true}
	case head.id() == in.parent && head.st.Latest == "":
	default:
		r, err := s.named(ctx, th, in.parent)
		switch {
		case errors.Is(err, thread.ErrNotFound):
			// A parent this thread does not know: the new checkpoint
			// records it, and follows the head.
			parent = nil
		case err != nil:
			return nil, err
		default:
			parent, pl = r, place{name: in.parent, commit: r.tip}
		}
	}
	// at is the commit the new one goes on.
	at := headCommit
	switch {
	case pl.reset:
		at = nil
	case pl.commit != nil:
		at = pl.commit
	}
	lineSum := ""
	if at != nil {
		lineSum = at.Metadata[metaSum]
	}
	var msgs []message.Message
	var sum *MessagesSum
	if in.hasMsgs {
		// pm: the parent's messages, when they are its put commit's line.
		var pm *msgsState
		if parent != nil && parent.st.Msgs != nil && int64(parent.st.Msgs.N) == parent.put.Depth {
			pm = parent.st.Msgs
		}
		// pending: the messages written on the line after the parent's
		// put (its tasks' writes), which the new list takes in order.
		pending := 0
		if pm != nil && at != nil && at == parent.tip {
			pending = int(at.Depth) - pm.N
		}
		// onPut goes back to the parent's put commit, before its writes
		// (pm is set only with a parent).
		var onPut place
		if pm != nil {
			onPut = place{v: parent.st.V, commit: parent.put}
		}
		if e := in.extends; e != nil {
			if pm == nil || pm.N != e.N || pm.H != e.H {
				return nil, errStale
			}
			lineSum = sumOf(pm.H, in.stored)
			sum = &MessagesSum{N: pm.N + len(in.msgs), H: lineSum}
			switch {
			case pending == 0 && (at == nil || int(at.Depth) == pm.N):
				msgs = in.msgs
			case pending > 0 && len(in.stored) >= pending && sumOf(pm.H, in.stored[:pending]) == at.Metadata[metaSum]:
				msgs = in.msgs[pending:]
			default:
				pl, at, msgs = onPut, parent.put, in.msgs
			}
		} else {
			sums := make([]string, len(in.stored))
			h := ""
			for i, st := range in.stored {
				h = nextSum(h, st)
				sums[i] = h
			}
			lineSum = h
			sum = &MessagesSum{N: len(in.msgs), H: h}
			extends := pm != nil && pm.N <= len(in.msgs) && (pm.N == 0 || sums[pm.N-1] == pm.H)
			switch {
			case extends && pending == 0 && (at == nil || int(at.Depth) == pm.N):
				msgs = in.msgs[pm.N:]
			case extends && pending > 0 && len(sums) >= pm.N+pending && sums[pm.N+pending-1] == at.Metadata[metaSum]:
				msgs = in.msgs[pm.N+pending:]
			case extends:
				pl, at, msgs = onPut, parent.put, in.msgs[pm.N:]
			default:
				var n int
				if pl, at, n, err = s.prefixBase(ctx, at, sums); err != nil {
					return nil, err
				}
				msgs = in.msgs[n:]
			}
		}
	} else if at == nil {
		lineSum = ""
	}
	// What the new checkpoint takes from its parent by reference (its
	// header's patch, its channels' values) must stay reachable from it:
	// it is, when the new commit goes on the parent's record.
	anchored := parent != nil && at != nil && (at.ID == parent.tip.ID || at.ID == parent.put.ID)
	b, st, err := s.putParts(ctx, parent, anchored, in, lineSum, sum)
	if err != nil {
		return nil, err
	}
	st.V = th.Record().Version + 1
	if in.replace && head != nil {
		// A checkpoint put again is not the latest for that, when a
		// greater id is (LangGraph's latest is the greatest).
		if l := cmp.Or(head.st.Latest, head.id()); l > in.id {
			st.Latest = l
		}
	}
	if sum == nil && st.Msgs != nil {
		sum = &MessagesSum{N: st.Msgs.N, H: st.Msgs.H}
	}
	patch := statePatch(at, st, b.extra)
	g := s.db.Group()
	if err := pl.to(ctx, g, th); err != nil {
		if errors.Is(err, errNoRestore) {
			if in.extends != nil {
				return nil, errStale
			}
			return s.putReset(ctx, th, in)
		}
		return nil, err
	}
	op := thread.OpAppend
	if len(msgs) == 0 {
		op = thread.OpState
	}
	opts := thread.CommitOptions{Messages: msgs, State: patch, Op: op, Metadata: b.meta}
	if _, err := g.Commit(ctx, th, opts); err != nil {
		return nil, err
	}
	if in.replace {
		if err := g.DropCheckpoint(ctx, th, in.id); err != nil {
			return nil, err
		}
	}
	if err := g.Checkpoint(ctx, th, in.id); err != nil {
		return nil, err
	}
	if err = g.Apply(ctx); err == nil {
		return sum, nil
	}
	if errors.Is(err, thread.ErrConflict) {
		if r, nerr := s.named(ctx, th, in.id); nerr == nil {
			if errors.Is(err, thread.ErrDuplicateID) && !in.replace {
				// The same put, made by another request first (a client's
				// retry): it is done.
				if m := r.st.Msgs; m != nil {
					return &MessagesSum{N: m.N, H: m.H}, nil
				}
				return sum, nil
			}
			if !in.replace {
				return nil, errExists
			}
		} else if in.replace && errors.Is(nerr, thread.ErrNotFound) {
			in.replace = false
		}
	}
	return nil, err
}

// putReset stores a checkpoint whose messages start a new line from the
// root: the last resort, where no earlier commit can be gone back to.
func (s *Saver) putReset(ctx context.Context, th *thread.Thread, in *putInput) (*MessagesSum, error) {
	parent, err := s.named(ctx, th, in.parent)
	if err != nil && !errors.Is(err, thread.ErrNotFound) {
		return nil, err
	}
	h := sumOf("", in.stored)
	sum := &MessagesSum{N: len(in.msgs), H: h}
	b, st, err := s.putParts(ctx, parent, false, in, h, sum)
	if err != nil {
		return nil, err
	}
	st.V = th.Record().Version + 1
	g := s.db.Group()
	if err := g.Reset(ctx, th); err != nil {
		return nil, err
	}
	if _, err := g.Commit(ctx, th, thread.CommitOptions{Messages: in.msgs, State: statePatch(nil, st, b.extra), Metadata: b.meta}); err != nil {
		return nil, err
	}
	if err := g.Checkpoint(ctx, th, in.id); err != nil {
		return nil, err
	}
	return sum, g.Apply(ctx)
}

// putParts returns the metadata of a checkpoint's put commit and the state
// it sets: the values of the channels whose version moved are in the
// commit; the others keep pointing where base's did, when their version
// is base's.
//
// anchored says the new commit goes on base's record, so that it may
// refer to base's commits; when not, it holds copies.
func (s *Saver) putParts(ctx context.Context, base *record, anchored bool, in *putInput, lineSum string, sum *MessagesSum) (*bag, lgState, error) {
	b := newBag()
	b.meta[metaCheckpoint] = in.id
	if t := s.db.Tenant(); t != "" {
		b.meta[metaTenant] = t
	}
	if lineSum != "" {
		b.meta[metaSum] = lineSum
	}
	if in.parent != "" {
		b.meta[metaParent] = in.parent
	}
	st := lgState{ID: in.id, Ch: map[string]chanRef{}}
	if labelValue(in.tid) != in.tid {
		st.TID = in.tid
	}
	if labelValue(in.ns) != in.ns {
		st.NS = in.ns
	}
	if sum != nil {
		st.Msgs = &msgsState{V: in.msgsV, N: sum.N, H: sum.H}
	}
	whole := true
	if anchored && base.st.HD < headerChain {
		ph, err := s.header(ctx, base.put)
		if err != nil {
			return nil, lgState{}, err
		}
		pv, err1 := decodeAny(ph)
		nv, err2 := decodeAny(in.header)
		po, ok1 := pv.(map[string]any)
		no, ok2 := nv.(map[string]any)
		if err1 == nil && err2 == nil && ok1 && ok2 {
			if d, ok := mergeDiff(po, no); ok {
				if dj, err := json.Marshal(d); err == nil && len(dj) < len(in.header)*3/4 {
					b.put(metaDelta, dj)
					b.meta[metaDeltaBase] = base.put.ID
					st.HD, whole = base.st.HD+1, false
				}
			}
		}
	}
	if whole {
		b.put(metaHeader, in.header)
	}
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
			if !anchored {
				blob, err := s.blob(ctx, base, ref)
				if err != nil {
					return nil, lgState{}, err
				}
				data, _ := json.Marshal(blob)
				k := metaBlob + strconv.Itoa(len(chans))
				chans = append(chans, ch)
				b.put(k, data)
				st.Ch[ch] = chanRef{V: v, K: k}
				continue
			}
			if ref.At == "" {
				ref.At = base.put.ID
			}
			st.Ch[ch] = ref
		}
	}
	return b, st, nil
}

// statePatch is the patch that sets the state st (and the pieces that did
// not fit in metadata) on the commit at.
func statePatch(at *thread.Commit, st lgState, extra map[string]json.RawMessage) map[string]json.RawMessage {
	patch := map[string]json.RawMessage{}
	patch[keyState], _ = json.Marshal(st)
	for k, v := range extra {
		patch[k] = v
	}
	if at != nil && at.StateFrom == at.ID {
		for k := range at.State {
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

// prefixBase finds where a messages list departs from the line that ends
// at commit at, and the put commit on that line to go on: the newest whose
// messages the new list starts with. It returns where to put the new
// commit and how many of the new messages are there already. sums are the
// new list's chain sums.
func (s *Saver) prefixBase(ctx context.Context, at *thread.Commit, sums []string) (place, *thread.Commit, int, error) {
	var line []*thread.Commit
	if at != nil {
		for c, err := range s.db.Store().Ancestors(ctx, at.ID, -1) {
			if err != nil {
				return place{}, nil, 0, err
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
		if int(cm.Depth) > p || cm.Metadata[metaCheckpoint] == "" || cm.StateFrom != cm.ID {
			continue
		}
		var st lgState
		if json.Unmarshal(cm.State[keyState], &st) != nil || st.V == 0 {
			continue
		}
		return place{v: st.V, commit: cm}, cm, int(cm.Depth), nil
	}
	return place{reset: true}, nil, 0, nil
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
	byRef := true
	for range attempts {
		err = s.putWrites(ctx, req, byRef)
		if errors.Is(err, thread.ErrDuplicateID) && byRef {
			// A message of the writes is on the line already (a node that
			// edits one): the writes keep their messages themselves.
			byRef = false
			continue
		}
		if !errors.Is(err, thread.ErrConflict) {
			break
		}
	}
	return err
}

// storedWrite is a pending write as a mark keeps it: its messages, when
// M is set, are the mark's own messages M[0]:M[1] — appended to the
// thread's line as they are written, so that the checkpoint that takes
// them in stores nothing again.
type storedWrite struct {
	PendingWrite
	M []int `json:"m,omitempty"`
}

func (s *Saver) putWrites(ctx context.Context, req WritesRequest, byRef bool) error {
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
	var msgs []message.Message
	sum := target.tip.Metadata[metaSum]
	sws := make([]storedWrite, len(changes))
	for i, w := range changes {
		sws[i].PendingWrite = w
		if !byRef || w.Value.Messages == nil {
			continue
		}
		from := len(msgs)
		for _, raw := range w.Value.Messages {
			m, err := fromStored(raw)
			if err != nil {
				return err
			}
			st, err := toStored(m)
			if err != nil {
				return err
			}
			msgs = append(msgs, m)
			sum = nextSum(sum, st)
		}
		sws[i].Value, sws[i].M = Value{}, []int{from, len(msgs)}
	}
	b := newBag()
	b.meta[metaWrites] = id
	if sum != "" {
		b.meta[metaSum] = sum
	}
	list, err := json.Marshal(sws)
	if err != nil {
		return err
	}
	b.put(metaWriteList, list)
	opts := thread.CommitOptions{Messages: msgs, Op: opWrites, Metadata: b.meta}
	if b.extra != nil || latest != target.st.Latest {
		// This mark sets the state: the checkpoint's, with where its put
		// is, and what did not fit in metadata.
		st := target.st
		st.Put, st.Latest = target.put.ID, latest
		opts.State = statePatch(target.tip, st, b.extra)
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
		if r.id() == id && r.st.Latest == "" {
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
	header, err := s.header(ctx, r.put)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(header, &t.Checkpoint); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", r.id(), err)
	}
	var versions map[string]json.RawMessage
	_ = json.Unmarshal(t.Checkpoint["channel_versions"], &versions)
	values := make(map[string]Value, len(versions))
	for ch, v := range versions {
		if m := r.st.Msgs; ch == messagesChannel && m != nil && jsonEqual(m.V, v) {
			val, err := s.messages(ctx, r.put.ID, *m, rd)
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
