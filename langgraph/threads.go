package langgraph

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/loomthreads/loom/thread"
)

// nsThread is one namespace of a LangGraph thread: its loom thread and
// the names it answers to.
type nsThread struct {
	th       *thread.Thread
	threadID string
	ns       string
}

// namespaces returns the loom threads of the LangGraph thread threadID
// (every one when threadID is ""), found by their labels.
func (s *Saver) namespaces(ctx context.Context, threadID string, all bool) ([]nsThread, error) {
	want := map[string]string{LabelKind: kindValue}
	if !all {
		want[LabelThread] = labelValue(threadID)
	}
	var out []nsThread
	for th, err := range s.db.Threads(ctx, thread.ListOptions{Labels: want}) {
		if err != nil {
			return nil, err
		}
		l := th.Record().Labels
		t := nsThread{th: th, threadID: l[LabelThread], ns: l[LabelNS]}
		if strings.HasPrefix(t.threadID, hashPrefix) || strings.HasPrefix(t.ns, hashPrefix) {
			// A label holds a hash: the names are in the state.
			r, err := s.load(ctx, th.Record().Head)
			if err != nil {
				continue
			}
			t.threadID, t.ns = cmp.Or(r.st.TID, t.threadID), cmp.Or(r.st.NS, t.ns)
		}
		if !all {
			if th.ID() != ThreadKey(threadID, t.ns) {
				// Another thread_id with the same hashed label.
				continue
			}
			t.threadID = threadID
		}
		out = append(out, t)
	}
	return out, nil
}

// List returns the checkpoints req selects, newest first (by descending
// checkpoint id, as LangGraph's savers order them).
func (s *Saver) List(ctx context.Context, req ListRequest) ([]Tuple, error) {
	if req.ThreadID != "" {
		if err := checkConfig(Config{ThreadID: req.ThreadID}, false); err != nil {
			return nil, err
		}
	}
	if req.CheckpointID != "" {
		if err := checkCheckpointID(req.CheckpointID, "checkpoint_id"); err != nil {
			return nil, err
		}
	}
	if req.Limit < 0 {
		return nil, invalidf("limit: not negative")
	}
	var threads []nsThread
	switch {
	case req.ThreadID != "" && req.CheckpointNS != nil:
		th, err := s.db.Thread(ctx, ThreadKey(req.ThreadID, *req.CheckpointNS))
		if errors.Is(err, thread.ErrNotFound) {
			return []Tuple{}, nil
		}
		if err != nil {
			return nil, err
		}
		threads = []nsThread{{th: th, threadID: req.ThreadID, ns: *req.CheckpointNS}}
	default:
		ts, err := s.namespaces(ctx, req.ThreadID, req.ThreadID == "")
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if req.CheckpointNS == nil || t.ns == *req.CheckpointNS {
				threads = append(threads, t)
			}
		}
	}
	type cand struct {
		t      nsThread
		name   string
		commit string
	}
	var cands []cand
	for _, t := range threads {
		for cp, err := range t.th.Checkpoints(ctx) {
			if err != nil {
				return nil, err
			}
			if req.CheckpointID != "" && cp.Name != req.CheckpointID || req.Before != "" && cp.Name >= req.Before {
				continue
			}
			cands = append(cands, cand{t, cp.Name, cp.Commit})
		}
	}
	slices.SortStableFunc(cands, func(a, b cand) int { return strings.Compare(b.name, a.name) })
	out := []Tuple{}
	reads := map[string]*reading{} // one per thread: lines are shared within one
	for _, c := range cands {
		if req.Limit > 0 && len(out) == req.Limit {
			break
		}
		p, err := s.load(ctx, c.commit)
		if errors.Is(err, thread.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if p.id() != c.name || !matches(get(p.put, metaMeta), req.Filter) {
			continue
		}
		r := reads[c.t.th.ID()]
		if r == nil {
			r = &reading{}
			reads[c.t.th.ID()] = r
		}
		r.index = len(out)
		tu, err := s.tuple(ctx, c.t.threadID, c.t.ns, p, r)
		if err != nil {
			return nil, err
		}
		out = append(out, *tu)
	}
	return out, nil
}

// matches reports whether the metadata holds every key of filter with an
// equal value.
func matches(meta json.RawMessage, filter map[string]json.RawMessage) bool {
	if len(filter) == 0 {
		return true
	}
	var md map[string]json.RawMessage
	if json.Unmarshal(meta, &md) != nil {
		return false
	}
	for k, v := range filter {
		got, ok := md[k]
		if !ok || !jsonEqual(got, v) {
			return false
		}
	}
	return true
}

// DeleteThread removes a LangGraph thread with every namespace, and every
// commit that nothing else reaches. A missing thread is not an error.
func (s *Saver) DeleteThread(ctx context.Context, threadID string) error {
	if err := checkConfig(Config{ThreadID: threadID}, false); err != nil {
		return err
	}
	ts, err := s.namespaces(ctx, threadID, false)
	if err != nil {
		return err
	}
	// Subgraphs first, so that no namespace is left without its root.
	slices.SortFunc(ts, func(a, b nsThread) int { return strings.Compare(b.ns, a.ns) })
	for _, t := range ts {
		if err := s.db.Delete(ctx, t.th.ID()); err != nil && !errors.Is(err, thread.ErrNotFound) {
			return err
		}
	}
	return nil
}

// CopyThread copies every checkpoint of every namespace of src, with their
// writes, to the new thread dst. Nothing is copied but thread records: the
// copies share src's commits (DESIGN §1). A src without checkpoints is
// ErrNotFound, a dst that has some ErrConflict.
func (s *Saver) CopyThread(ctx context.Context, src, dst string) error {
	for _, id := range []string{src, dst} {
		if err := checkConfig(Config{ThreadID: id}, false); err != nil {
			return err
		}
	}
	ts, err := s.namespaces(ctx, src, false)
	if err != nil {
		return err
	}
	if len(ts) == 0 {
		return notFound("thread " + clip(src))
	}
	if have, err := s.namespaces(ctx, dst, false); err != nil {
		return err
	} else if len(have) > 0 {
		return conflictf("thread %s has checkpoints", clip(dst))
	}
	// Roots first, so that a subgraph's copy is linked to its root's.
	slices.SortFunc(ts, func(a, b nsThread) int { return strings.Compare(a.ns, b.ns) })
	for _, t := range ts {
		if t.th.Record().Head == "" {
			continue
		}
		if _, err := t.th.Copy(ctx, thread.ForkOptions{ID: ThreadKey(dst, t.ns), Title: title(dst, t.ns), Labels: labels(dst, t.ns), Checkpoints: true}); err != nil {
			return err
		}
	}
	return nil
}

func conflictf(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), thread.ErrConflict)
}

// Prune keeps only the latest checkpoint of each namespace of the threads
// (KeepLatest), or deletes the threads (DeleteAll). Keeping the latest
// drops the other checkpoints' names: LangGraph no longer sees them; the
// commits stay in the thread's history, which loom keeps.
func (s *Saver) Prune(ctx context.Context, threadIDs []string, strategy string) error {
	if strategy != KeepLatest && strategy != DeleteAll {
		return invalidf("strategy: %q or %q", KeepLatest, DeleteAll)
	}
	for _, id := range threadIDs {
		if err := checkConfig(Config{ThreadID: id}, false); err != nil {
			return err
		}
	}
	for _, id := range threadIDs {
		if strategy == DeleteAll {
			if err := s.DeleteThread(ctx, id); err != nil {
				return err
			}
			continue
		}
		ts, err := s.namespaces(ctx, id, false)
		if err != nil {
			return err
		}
		for _, t := range ts {
			p, err := s.latest(ctx, t.th)
			if errors.Is(err, thread.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			keep := p.id()
			if err := s.drop(ctx, t.th, func(name string, _ *record) bool { return name != keep }); err != nil {
				return err
			}
		}
	}
	return nil
}

// drop deletes the checkpoints of th for which gone is true, in one group;
// when the latest goes, the head moves to the newest that stays (or the
// empty root).
func (s *Saver) drop(ctx context.Context, th *thread.Thread, gone func(name string, p *record) bool) error {
	for range attempts {
		if err := th.Refresh(ctx); err != nil {
			return err
		}
		latest, err := s.latest(ctx, th)
		if errors.Is(err, thread.ErrNotFound) {
			latest, err = nil, nil
		}
		if err != nil {
			return err
		}
		g := s.db.Group()
		dropped := 0
		newest := ""
		latestGone := false
		for cp, err := range th.Checkpoints(ctx) {
			if err != nil {
				return err
			}
			p, err := s.load(ctx, cp.Commit)
			if errors.Is(err, thread.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if p.id() != cp.Name {
				continue
			}
			if gone(cp.Name, p) {
				if err := g.DropCheckpoint(ctx, th, cp.Name); err != nil {
					return err
				}
				dropped++
				if latest != nil && cp.Name == latest.id() {
					latestGone = true
				}
				continue
			}
			newest = max(newest, cp.Name)
		}
		if dropped == 0 {
			return nil
		}
		headGone := false
		if h, err := s.load(ctx, th.Record().Head); err == nil && gone(h.id(), h) {
			headGone = true
		}
		switch {
		case latest != nil && !latestGone && headGone:
			// The head holds writes to a checkpoint that goes: back to
			// the latest.
			if err := g.Rollback(ctx, th, latest.id()); err != nil {
				return err
			}
		case latestGone || headGone:
			if newest == "" {
				err = g.Reset(ctx, th)
			} else {
				err = g.Rollback(ctx, th, newest)
			}
			if err != nil {
				return err
			}
		default:
			// A mark on the head ties the drops to the thread's version:
			// a checkpoint put meanwhile fails the group, and the names
			// are read again, so the new latest's is never dropped.
			head, err := s.commit(ctx, th.Record().Head)
			if err != nil {
				return err
			}
			meta := map[string]string{metaDropped: strconv.Itoa(dropped)}
			if sum := head.Metadata[metaSum]; sum != "" {
				meta[metaSum] = sum
			}
			if _, err := g.Commit(ctx, th, thread.CommitOptions{Op: opDrop, Metadata: meta}); err != nil {
				return err
			}
		}
		err = g.Apply(ctx)
		if !errors.Is(err, thread.ErrConflict) {
			return err
		}
	}
	return thread.ErrConflict
}

// DeleteForRuns deletes every checkpoint whose metadata run_id is one of
// runIDs, with its writes.
func (s *Saver) DeleteForRuns(ctx context.Context, runIDs []string) error {
	if len(runIDs) == 0 {
		return nil
	}
	runs := make(map[string]bool, len(runIDs))
	for _, r := range runIDs {
		runs[r] = true
	}
	ts, err := s.namespaces(ctx, "", true)
	if err != nil {
		return err
	}
	for _, t := range ts {
		err := s.drop(ctx, t.th, func(_ string, p *record) bool {
			var md struct {
				RunID string `json:"run_id"`
			}
			_ = json.Unmarshal(get(p.put, metaMeta), &md)
			return md.RunID != "" && runs[md.RunID]
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// DeltaHistory is getDeltaChannelHistory: for each channel, the writes
// to it along the checkpoint's ancestors (oldest first; the checkpoint's
// own writes, pending for the next step, left out) back to the nearest
// ancestor that holds a value of it, which is the seed.
func (s *Saver) DeltaHistory(ctx context.Context, req DeltaRequest) (DeltaResponse, error) {
	if err := checkConfig(req.Config, false); err != nil {
		return DeltaResponse{}, err
	}
	out := DeltaResponse{Channels: make(map[string]DeltaHistory, len(req.Channels))}
	remaining := map[string]bool{}
	collected := map[string][]PendingWrite{}
	for _, ch := range req.Channels {
		remaining[ch] = true
		collected[ch] = nil
	}
	seeds := map[string]Value{}
	th, err := s.open(ctx, req.Config)
	if errors.Is(err, thread.ErrNotFound) {
		th = nil
	} else if err != nil {
		return DeltaResponse{}, err
	}
	var r *record
	if th != nil {
		if r, err = s.find(ctx, th, req.Config.CheckpointID); err != nil && !errors.Is(err, thread.ErrNotFound) {
			return DeltaResponse{}, err
		}
	}
	// The walk reads each ancestor's record, not its tuple: its writes,
	// and where its channels' values are; a value is read only for a seed.
	// The names are listed once, for the parents not on the head.
	var names map[string]string
	visited := map[string]bool{}
	for r != nil && len(remaining) > 0 {
		visited[r.id()] = true
		parent := r.put.Metadata[metaParent]
		if parent == "" || visited[parent] {
			// Parents are what clients said: a checkpoint put as its own
			// parent, or two naming each other, end the walk there.
			break
		}
		if names == nil {
			names = map[string]string{}
			for cp, err := range th.Checkpoints(ctx) {
				if err != nil {
					return DeltaResponse{}, err
				}
				names[cp.Name] = cp.Commit
			}
		}
		commit, ok := names[parent]
		if !ok {
			break
		}
		if r, err = s.load(ctx, commit); err != nil {
			if errors.Is(err, thread.ErrNotFound) {
				break
			}
			return DeltaResponse{}, err
		}
		ws, err := s.writes(ctx, r)
		if err != nil {
			return DeltaResponse{}, err
		}
		for _, w := range slices.Backward(ws) {
			if remaining[w.Channel] {
				collected[w.Channel] = append(collected[w.Channel], w)
			}
		}
		for _, ch := range slices.Sorted(maps.Keys(remaining)) {
			var v Value
			switch ref, ok := r.st.Ch[ch]; {
			case ch == messagesChannel && r.st.Msgs != nil:
				if v, err = s.messages(ctx, r.put.ID, *r.st.Msgs, &reading{}); err != nil {
					return DeltaResponse{}, err
				}
			case ok:
				b, err := s.blob(ctx, r, ref)
				if err != nil {
					return DeltaResponse{}, err
				}
				v = Value{Blob: b}
			default:
				continue
			}
			seeds[ch] = v
			delete(remaining, ch)
		}
	}
	for _, ch := range req.Channels {
		ws := collected[ch]
		slices.Reverse(ws)
		h := DeltaHistory{Writes: append([]PendingWrite{}, ws...)}
		if v, ok := seeds[ch]; ok {
			h.Seed = &v
		}
		out.Channels[ch] = h
	}
	return out, nil
}
