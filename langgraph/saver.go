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

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// State keys of a LangGraph thread (DESIGN §3: namespaced, small).
const (
	keyPrefix  = "lg/"
	keyHeader  = "lg/cp"     // the checkpoint without channel_values
	keyMeta    = "lg/md"     // its metadata
	keyParent  = "lg/parent" // its parent's id
	keyMsgs    = "lg/msgs"   // the messages channel: msgsState
	keyWrites  = "lg/w"      // its pending writes
	keyLatest  = "lg/latest" // the latest checkpoint, when the head is not its
	keyChannel = "lg/ch/"    // + a channel: chanState
)

// messagesChannel is the channel that, holding messages, is the thread's.
const messagesChannel = "messages"

// msgsState says that the messages channel is the thread's messages: the
// first N of them, at version V, whose chain sum is H.
type msgsState struct {
	V json.RawMessage `json:"v"`
	N int             `json:"n"`
	H string          `json:"h"`
}

// chanState is a channel's value at version V.
type chanState struct {
	V json.RawMessage `json:"v"`
	B Blob            `json:"b"`
}

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

// point is a checkpoint as the thread keeps it: the commit where its
// record ends (its own, or its last pending writes') and the state there.
type point struct {
	commit string
	state  map[string]json.RawMessage
}

func (p *point) id() string {
	var h struct {
		ID string `json:"id"`
	}
	if p == nil || json.Unmarshal(p.state[keyHeader], &h) != nil {
		return ""
	}
	return h.ID
}

// at reads the state in effect at commit id.
func (s *Saver) at(ctx context.Context, id string) (*point, error) {
	p := &point{commit: id, state: map[string]json.RawMessage{}}
	if id == "" {
		return p, nil
	}
	c, err := s.db.Store().Commit(ctx, id)
	if err != nil {
		return nil, err
	}
	switch {
	case c.StateFrom == id:
		p.state = c.State
	case c.StateFrom != "":
		sc, err := s.db.Store().Commit(ctx, c.StateFrom)
		if err != nil {
			return nil, err
		}
		p.state = sc.State
	}
	return p, nil
}

// named returns the checkpoint name of th, or ErrNotFound.
func (s *Saver) named(ctx context.Context, th *thread.Thread, name string) (*point, error) {
	for cp, err := range th.Checkpoints(ctx) {
		if err != nil {
			return nil, err
		}
		if cp.Name == name {
			p, err := s.at(ctx, cp.Commit)
			if err != nil {
				return nil, err
			}
			if p.id() != name {
				break
			}
			return p, nil
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
func (s *Saver) latest(ctx context.Context, th *thread.Thread) (*point, error) {
	head := th.Record().Head
	if head == "" {
		return nil, notFound("checkpoint")
	}
	p, err := s.at(ctx, head)
	if err != nil {
		return nil, err
	}
	if l := stringOf(p.state[keyLatest]); l != "" {
		return s.named(ctx, th, l)
	}
	if p.id() == "" {
		return nil, notFound("checkpoint")
	}
	return p, nil
}

func stringOf(raw json.RawMessage) string {
	var s string
	if raw != nil && json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
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
	in, err := s.prepare(req, h.Versions)
	if err != nil {
		return PutResponse{}, err
	}
	for range attempts {
		err = s.put(ctx, cfg, h.ID, in)
		if !errors.Is(err, thread.ErrConflict) || errors.Is(err, thread.ErrDuplicateID) {
			break
		}
	}
	if err != nil {
		return PutResponse{}, err
	}
	return PutResponse{Config: Config{ThreadID: cfg.ThreadID, CheckpointNS: cfg.CheckpointNS, CheckpointID: h.ID}}, nil
}

// putInput is a checkpoint checked and converted, ready to be committed
// (again, when a race is lost).
type putInput struct {
	versions map[string]json.RawMessage
	newV     map[string]json.RawMessage
	fixed    map[string]json.RawMessage // the state keys that do not depend on the parent
	msgs     []message.Message          // the messages channel, when it holds messages
	sums     []string                   // sums[i]: the chain sum of msgs[:i+1]
	parent   string
}

func (s *Saver) prepare(req PutRequest, versions map[string]json.RawMessage) (*putInput, error) {
	in := &putInput{versions: versions, newV: req.NewVersions, parent: req.Config.CheckpointID, fixed: map[string]json.RawMessage{}}
	header, err := json.Marshal(req.Checkpoint)
	if err != nil {
		return nil, invalidf("checkpoint: %v", err)
	}
	in.fixed[keyHeader] = header
	meta := req.Metadata
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	if in.fixed[keyMeta], err = json.Marshal(meta); err != nil {
		return nil, invalidf("metadata: %v", err)
	}
	if in.parent != "" {
		in.fixed[keyParent], _ = json.Marshal(in.parent)
	}
	for ch, v := range req.ChannelValues {
		if ch == "" || len(ch) > maxChannel || !printable(ch) {
			return nil, invalidf("channel %q: 1 to %d printable bytes", clip(ch), maxChannel)
		}
		nv, ok := req.NewVersions[ch]
		if !ok {
			return nil, invalidf("channel_values.%s: not in new_versions", clip(ch))
		}
		switch {
		case v.Blob != nil && v.Messages != nil, v.Blob == nil && v.Messages == nil:
			return nil, invalidf("channel_values.%s: one of blob and messages", clip(ch))
		case v.Messages != nil && ch != messagesChannel:
			return nil, invalidf("channel_values.%s: only the channel %q holds messages", clip(ch), messagesChannel)
		case v.Messages != nil:
			c := newChain()
			for i, raw := range v.Messages {
				m, err := fromStored(raw)
				if err != nil {
					return nil, fmt.Errorf("channel_values.messages[%d]: %w", i, err)
				}
				st, err := toStored(m)
				if err != nil {
					return nil, err
				}
				c.add(st)
				in.msgs = append(in.msgs, m)
				in.sums = append(in.sums, c.sum())
			}
			if in.msgs == nil {
				in.msgs = []message.Message{}
			}
			in.fixed[keyMsgs], _ = json.Marshal(msgsState{V: nv, N: len(in.msgs), H: lastSum(in.sums)})
		default:
			in.fixed[keyChannel+ch], _ = json.Marshal(chanState{V: nv, B: *v.Blob})
		}
	}
	return in, nil
}

func lastSum(sums []string) string {
	if len(sums) == 0 {
		return newChain().sum()
	}
	return sums[len(sums)-1]
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// put makes one attempt at storing a checkpoint.
func (s *Saver) put(ctx context.Context, cfg Config, id string, in *putInput) error {
	key := ThreadKey(cfg.ThreadID, cfg.CheckpointNS)
	th, err := s.db.Thread(ctx, key)
	if errors.Is(err, thread.ErrNotFound) {
		th, err = s.create(ctx, cfg)
	}
	if err != nil {
		return err
	}
	// The base is the checkpoint the new one follows: the parent, found
	// at the head in the common case, by name when it branches.
	g := s.db.Group()
	head, err := s.at(ctx, th.Record().Head)
	if err != nil {
		return err
	}
	base := head
	move := "" // the checkpoint to roll back to first, "" for none
	switch {
	case in.parent == "":
		base = &point{state: map[string]json.RawMessage{}}
		move = "reset"
	case head.id() == in.parent && head.state[keyLatest] == nil:
	default:
		p, err := s.named(ctx, th, in.parent)
		switch {
		case errors.Is(err, thread.ErrNotFound):
			// A parent this thread does not know: the new checkpoint
			// records it, and follows the head.
		case err != nil:
			return err
		default:
			base, move = p, in.parent
		}
	}
	var msgs []message.Message
	if in.msgs != nil {
		var ms msgsState
		_ = json.Unmarshal(base.state[keyMsgs], &ms)
		// The line is base's messages when base's messages are the
		// thread's (its head is where they end).
		if ms.H != "" && ms.N <= len(in.msgs) && (ms.N == 0 || in.sums[ms.N-1] == ms.H) && ms.N == s.depth(ctx, base.commit) {
			msgs = in.msgs[ms.N:]
		} else {
			nb, nmove, n, err := s.prefixBase(ctx, th, base, in)
			if err != nil {
				return err
			}
			base, move, msgs = nb, nmove, in.msgs[n:]
		}
	}
	patch := s.patch(base, in)
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
	op := thread.OpAppend
	if len(msgs) == 0 {
		op = thread.OpState
	}
	if _, err := g.Commit(ctx, th, thread.CommitOptions{Messages: msgs, State: patch, Op: op, Metadata: map[string]string{"langgraph.checkpoint": id}}); err != nil {
		return err
	}
	if err := g.Checkpoint(ctx, th, id); err != nil {
		return err
	}
	err = g.Apply(ctx)
	if errors.Is(err, thread.ErrConflict) && !errors.Is(err, thread.ErrDuplicateID) {
		// A checkpoint of this id may exist already: it is replaced, as
		// LangGraph's savers upsert.
		if _, nerr := s.named(ctx, th, id); nerr == nil {
			return s.replace(ctx, th, id, msgs, patch, move, op)
		}
	}
	return err
}

// replace is put for a checkpoint id that the thread has already.
func (s *Saver) replace(ctx context.Context, th *thread.Thread, id string, msgs []message.Message, patch map[string]json.RawMessage, move string, op thread.Op) error {
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
	if _, err := g.Commit(ctx, th, thread.CommitOptions{Messages: msgs, State: patch, Op: op, Metadata: map[string]string{"langgraph.checkpoint": id}}); err != nil {
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

// depth returns the number of messages on the line that ends at commit.
func (s *Saver) depth(ctx context.Context, commit string) int {
	if commit == "" {
		return 0
	}
	c, err := s.db.Store().Commit(ctx, commit)
	if err != nil {
		return -1
	}
	return int(c.Depth)
}

// prefixBase finds where a messages list that does not extend base's
// departs from it, and the checkpoint to branch from: the newest one on
// base's line whose messages are all in the new list's prefix. It returns
// that checkpoint (with the move to it) and how many of the new messages
// its line holds already.
func (s *Saver) prefixBase(ctx context.Context, th *thread.Thread, base *point, in *putInput) (*point, string, int, error) {
	var line []*thread.Commit
	if base.commit != "" {
		for c, err := range s.db.Store().Ancestors(ctx, base.commit, -1) {
			if err != nil {
				return nil, "", 0, err
			}
			line = append(line, c)
		}
	}
	slices.Reverse(line)
	// p: how many of the line's messages the new list starts with.
	p := 0
	c := newChain()
	same := true
	for _, cm := range line {
		for _, m := range cm.Messages {
			if !same || p >= len(in.msgs) {
				same = false
				break
			}
			st, err := toStored(m)
			if err != nil {
				same = false
				break
			}
			c.add(st)
			if c.sum() != in.sums[p] {
				same = false
				break
			}
			p++
		}
	}
	for i := len(line) - 1; i >= 0; i-- {
		cm := line[i]
		if int(cm.Depth) > p {
			continue
		}
		name := cm.Metadata["langgraph.checkpoint"]
		if name == "" {
			continue
		}
		cp, err := s.named(ctx, th, name)
		if err != nil {
			if errors.Is(err, thread.ErrNotFound) {
				continue
			}
			return nil, "", 0, err
		}
		if d := s.depth(ctx, cp.commit); d >= 0 && d <= p {
			return cp, name, d, nil
		}
	}
	return &point{state: map[string]json.RawMessage{}}, "reset", 0, nil
}

// patch returns the state patch that makes base's state the new
// checkpoint's: the lg/ keys set, or removed when the new checkpoint has
// no such key. A channel keeps base's value when its version did not move.
func (s *Saver) patch(base *point, in *putInput) map[string]json.RawMessage {
	want := make(map[string]json.RawMessage, len(in.fixed)+len(in.versions))
	for k, v := range in.fixed {
		want[k] = v
	}
	for ch, v := range in.versions {
		if _, moved := in.newV[ch]; moved {
			continue
		}
		if ch == messagesChannel {
			var ms msgsState
			if raw := base.state[keyMsgs]; raw != nil && json.Unmarshal(raw, &ms) == nil && jsonEqual(ms.V, v) {
				want[keyMsgs] = raw
				continue
			}
		}
		var cs chanState
		if raw := base.state[keyChannel+ch]; raw != nil && json.Unmarshal(raw, &cs) == nil && jsonEqual(cs.V, v) {
			want[keyChannel+ch] = raw
		}
	}
	patch := make(map[string]json.RawMessage, len(want))
	for k, v := range want {
		if !bytes.Equal(base.state[k], v) {
			patch[k] = v
		}
	}
	for k := range base.state {
		if _, ok := want[k]; !ok && len(k) > len(keyPrefix) && k[:len(keyPrefix)] == keyPrefix {
			patch[k] = nil
		}
	}
	if len(patch) == 0 {
		// A commit in a group carries messages or state: one key, set to
		// what it is.
		patch[keyHeader] = want[keyHeader]
	}
	return patch
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
	head, err := s.at(ctx, th.Record().Head)
	if err != nil {
		return err
	}
	id := req.Config.CheckpointID
	target := head
	g := s.db.Group()
	latest := stringOf(head.state[keyLatest])
	if head.id() != id {
		if target, err = s.named(ctx, th, id); err != nil {
			return err
		}
		if latest == "" {
			latest = head.id()
		}
		if err := g.Rollback(ctx, th, id); err != nil {
			return err
		}
	}
	if latest == id {
		latest = ""
	}
	var ws []PendingWrite
	if raw := target.state[keyWrites]; raw != nil {
		if err := json.Unmarshal(raw, &ws); err != nil {
			return fmt.Errorf("pending writes of %s: %w", id, err)
		}
	}
	changed := false
	for _, w := range req.Writes {
		pw := PendingWrite{TaskID: req.TaskID, Channel: w.Channel, Value: w.Value, Idx: w.Idx, TaskPath: req.TaskPath}
		i := slices.IndexFunc(ws, func(o PendingWrite) bool { return o.TaskID == pw.TaskID && o.Idx == pw.Idx })
		switch {
		case i < 0:
			ws = append(ws, pw)
			changed = true
		case pw.Idx < 0:
			ws[i] = pw
			changed = true
		}
	}
	if !changed {
		return nil
	}
	sortWrites(ws)
	patch := map[string]json.RawMessage{}
	if patch[keyWrites], err = json.Marshal(ws); err != nil {
		return err
	}
	if latest != "" {
		patch[keyLatest], _ = json.Marshal(latest)
	} else if target.state[keyLatest] != nil {
		patch[keyLatest] = nil
	}
	if _, err := g.Commit(ctx, th, thread.CommitOptions{State: patch, Op: thread.OpState, Metadata: map[string]string{"langgraph.writes": id}}); err != nil {
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
func (s *Saver) Get(ctx context.Context, cfg Config) (*Tuple, error) {
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
	return s.tuple(ctx, cfg.ThreadID, cfg.CheckpointNS, p)
}

// find returns th's checkpoint id, or its latest for "".
func (s *Saver) find(ctx context.Context, th *thread.Thread, id string) (*point, error) {
	if id == "" {
		return s.latest(ctx, th)
	}
	if head := th.Record().Head; head != "" {
		p, err := s.at(ctx, head)
		if err != nil {
			return nil, err
		}
		if p.id() == id {
			return p, nil
		}
	}
	return s.named(ctx, th, id)
}

// tuple makes the CheckpointTuple of p.
func (s *Saver) tuple(ctx context.Context, threadID, ns string, p *point) (*Tuple, error) {
	t := &Tuple{Config: Config{ThreadID: threadID, CheckpointNS: ns, CheckpointID: p.id()}, PendingWrites: []PendingWrite{}}
	if err := json.Unmarshal(p.state[keyHeader], &t.Checkpoint); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", t.Config.CheckpointID, err)
	}
	var versions map[string]json.RawMessage
	_ = json.Unmarshal(t.Checkpoint["channel_versions"], &versions)
	values := make(map[string]Value, len(versions))
	for ch, v := range versions {
		if ch == messagesChannel {
			var ms msgsState
			if raw := p.state[keyMsgs]; raw != nil && json.Unmarshal(raw, &ms) == nil && jsonEqual(ms.V, v) {
				msgs, err := s.line(ctx, p.commit, ms.N)
				if err != nil {
					return nil, err
				}
				values[ch] = Value{Messages: msgs}
				continue
			}
		}
		var cs chanState
		if raw := p.state[keyChannel+ch]; raw != nil && json.Unmarshal(raw, &cs) == nil && jsonEqual(cs.V, v) {
			b := cs.B
			values[ch] = Value{Blob: &b}
		}
	}
	cv, err := json.Marshal(values)
	if err != nil {
		return nil, err
	}
	t.Checkpoint["channel_values"] = cv
	if err := json.Unmarshal(p.state[keyMeta], &t.Metadata); err != nil || t.Metadata == nil {
		t.Metadata = map[string]json.RawMessage{}
	}
	if parent := stringOf(p.state[keyParent]); parent != "" {
		t.ParentConfig = &Config{ThreadID: threadID, CheckpointNS: ns, CheckpointID: parent}
	}
	if raw := p.state[keyWrites]; raw != nil {
		if err := json.Unmarshal(raw, &t.PendingWrites); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// line returns the first n messages of the line that ends at commit, in
// their stored LangChain form.
func (s *Saver) line(ctx context.Context, commit string, n int) ([]json.RawMessage, error) {
	out := []json.RawMessage{}
	if commit == "" || n == 0 {
		return out, nil
	}
	var commits []*thread.Commit
	for c, err := range s.db.Store().Ancestors(ctx, commit, -1) {
		if err != nil {
			return nil, err
		}
		commits = append(commits, c)
	}
	for _, c := range slices.Backward(commits) {
		for _, m := range c.Messages {
			if len(out) == n {
				return out, nil
			}
			st, err := toStored(m)
			if err != nil {
				return nil, err
			}
			out = append(out, st)
		}
	}
	return out, nil
}
