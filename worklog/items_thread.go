package worklog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// EventMediaType is the media type of the data a Log kept in a loom thread
// appends for each change (see OpenDB): a JSON object
// {"put": [item, …], "drop": ["t-…", …]} whose items replace those with
// their ids, or join the list at its end, and whose ids leave it.
const EventMediaType = "application/vnd.loom.worklog+json"

// EventRole is the role of the messages that record a Log's changes in
// its thread.
const EventRole message.Role = "worklog"

// LabelProject is the label that names the project of a thread holding
// work items; threads with it are work logs, not conversations.
const LabelProject = "loom.worklog"

// Owner is the value of thread.LabelOwner on the threads a work log makes
// (its items and its sessions), which listings leave out by default.
const Owner = "worklog"

// maxEventBytes bounds the item JSON of one event message, well under the
// thread's default limit of a message (1 MiB); a change of more items is
// several messages of one commit.
const maxEventBytes = 256 << 10

// maxConflicts is how many times a write to a thread is tried again when
// another process moved it meanwhile.
const maxConflicts = 50

// OpenDB returns the Log of a project's items kept in a loom thread of db
// rather than in a file: every change is a commit of one message (role
// EventRole, its data EventMediaType) that says which items it puts and
// drops, so a change costs one append whatever the number of items, two
// processes never lose one another's changes (the append is conditional on
// the thread's version; the loser reads what changed and tries again), and
// the work log has the history, checkpoints and time travel of any
// thread. The thread, made at the first change, is labelled LabelProject
// and its id is ThreadID(db.Tenant(), project).
//
// opts.Sessions nil means the session records are kept in db too
// (NewThreadSessions): items and sessions in one store, any store.
// opts.LockTimeout and opts.NoSync do not apply; Dir returns "".
func OpenDB(db *thread.DB, opts *Options) (*Log, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.Sessions == nil {
		o.Sessions = NewThreadSessions(db)
	}
	l := logOf(o)
	l.items = &threadItems{db: db, id: ThreadID(db.Tenant(), o.Project), project: o.Project}
	return l, nil
}

// ThreadID returns the id of the thread that keeps the items of a tenant's
// project: "wl_" and 32 hex digits of a hash of both (project names are
// free text). The thread lives in the tenant's own namespace of ids, so no
// other tenant can take or see it; the tenant stays in the hash because
// work logs written before tenants had namespaces are found under it.
func ThreadID(tenant, project string) string {
	h := sha256.Sum256([]byte(tenant + "\x00" + project))
	return "wl_" + hex.EncodeToString(h[:16])
}

// threadItems keeps a Log's items in a thread, as events.
type threadItems struct {
	db      *thread.DB
	id      string
	project string

	// wmu makes this process's writes take turns, so that only other
	// processes' writes conflict.
	wmu sync.Mutex

	mu   sync.Mutex
	snap *threadSnap
}

// threadSnap is the items as of one head of the thread.
type threadSnap struct {
	s    *snapshot
	head string // the head commit, "" when there is no thread or no event
	n    int64  // the messages folded: the thread's length at head
	last string // the id of the last of them
}

func (t *threadItems) cached() *threadSnap {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.snap
}

func (t *threadItems) cache(ts *threadSnap) {
	t.mu.Lock()
	t.snap = ts
	t.mu.Unlock()
}

// read returns the items at the thread's head and a handle on the thread
// (nil when it does not exist yet). Only the events after the cached head
// are read, when the cached head is still in the thread's past.
func (t *threadItems) read(ctx context.Context) (*threadSnap, *thread.Thread, bool, error) {
	th, err := t.db.Thread(ctx, t.id)
	if errors.Is(err, thread.ErrNotFound) {
		return &threadSnap{s: &snapshot{}}, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("worklog: items of %s: %w", t.project, err)
	}
	if th.Record().Labels[LabelProject] == "" {
		return nil, nil, false, fmt.Errorf("worklog: thread %s is not a work log: %w", t.id, ErrInvalid)
	}
	head := th.Record().Head
	c := t.cached()
	if c != nil && c.head == head {
		return c, th, true, nil
	}
	n, err := th.Len(ctx)
	if err != nil {
		return nil, nil, false, fmt.Errorf("worklog: items of %s: %w", t.project, err)
	}
	var msgs []message.Message
	if c != nil && c.n > 0 && n > c.n {
		msgs, err = th.Messages(ctx, thread.ReadOptions{Last: int(n - c.n + 1)})
		if err != nil {
			return nil, nil, false, fmt.Errorf("worklog: items of %s: %w", t.project, err)
		}
		if len(msgs) > 0 && msgs[0].ID == c.last {
			msgs = msgs[1:]
		} else {
			c, msgs = nil, nil // rolled back or rewritten: read it all
		}
	} else {
		c = nil
	}
	if c == nil {
		c = &threadSnap{s: &snapshot{}}
		if msgs, err = th.Messages(ctx, thread.ReadOptions{}); err != nil {
			return nil, nil, false, fmt.Errorf("worklog: items of %s: %w", t.project, err)
		}
	}
	entries := fold(c.s.entries, msgs)
	ts := &threadSnap{s: &snapshot{entries: entries, lists: new(listings)}, head: head, n: n, last: c.last}
	if len(msgs) > 0 {
		ts.last = msgs[len(msgs)-1].ID
	}
	t.cache(ts)
	return ts, th, false, nil
}

// event is the data of an event message.
type event struct {
	Put  []Item   `json:"put,omitempty"`
	Drop []string `json:"drop,omitempty"`
}

// eventIn is an event as read: its items in plain fields, decoded without
// Item.UnmarshalJSON's care for the order of the fields (events are
// written by Logs, not by people), which makes a cold read several times
// faster.
type eventIn struct {
	Put []struct {
		ID                string `json:"id"`
		Text              string `json:"text"`
		Status            Status `json:"status"`
		CreatedAt         string `json:"created_at"`
		ResolvedAt        string `json:"resolved_at"`
		SourceSession     string `json:"source_session"`
		ResolvedBySession string `json:"resolved_by_session"`
		ResolutionNote    string `json:"resolution_note"`
	} `json:"put"`
	Drop []string `json:"drop"`
}

// decodeEvent decodes an event's data; items whose times do not parse
// keep zero times.
func decodeEvent(b []byte) (event, error) {
	var in eventIn
	if err := json.Unmarshal(b, &in); err != nil {
		return event{}, err
	}
	ev := event{Drop: in.Drop, Put: make([]Item, len(in.Put))}
	for i, p := range in.Put {
		it := Item{ID: p.ID, Text: p.Text, Status: p.Status, SourceSession: p.SourceSession,
			ResolvedBySession: p.ResolvedBySession, ResolutionNote: p.ResolutionNote}
		if p.CreatedAt != "" {
			it.CreatedAt, _ = parseTime(p.CreatedAt)
		}
		if p.ResolvedAt != "" {
			it.ResolvedAt, _ = parseTime(p.ResolvedAt)
		}
		ev.Put[i] = it
	}
	return ev, nil
}

// fold applies events to entries (which it does not change) and returns
// the new entries. Messages that are not events (a person's note appended
// to the thread) and events that do not decode are skipped, as are items
// without an id or a text.
func fold(entries []*entry, msgs []message.Message) []*entry {
	if len(msgs) == 0 {
		return entries
	}
	out := make([]*entry, len(entries), len(entries)+len(msgs))
	copy(out, entries)
	at := make(map[string]int, len(out))
	for i, e := range out {
		at[e.it.ID] = i
	}
	for _, m := range msgs {
		for _, c := range m.Contents {
			d, ok := c.(message.Data)
			if !ok || d.MediaType != EventMediaType || m.Role != EventRole {
				continue
			}
			ev, err := decodeEvent(d.Data)
			if err != nil {
				// Not written by a Log (one appended through the thread
				// API, say): skipped, so that the work log stays
				// readable.
				continue
			}
			if len(ev.Drop) > 0 {
				drop := make(map[string]bool, len(ev.Drop))
				for _, id := range ev.Drop {
					drop[id] = true
				}
				kept := out[:0:0]
				for _, e := range out {
					if !drop[e.it.ID] {
						kept = append(kept, e)
					}
				}
				out = kept
				clear(at)
				for i, e := range out {
					at[e.it.ID] = i
				}
			}
			for _, it := range ev.Put {
				if !validID(it.ID) || strings.TrimSpace(it.Text) == "" {
					continue
				}
				if it.Status != StatusResolved {
					it.Status = StatusOpen
				}
				if i, ok := at[it.ID]; ok {
					out[i] = newEntry(it)
					continue
				}
				at[it.ID] = len(out)
				out = append(out, newEntry(it))
			}
		}
	}
	return out
}

func (t *threadItems) load(ctx context.Context) (*snapshot, bool, error) {
	ts, _, hit, err := t.read(ctx)
	if err != nil {
		return nil, false, err
	}
	return ts.s, hit, nil
}

func (t *threadItems) update(ctx context.Context, fn func(s *snapshot) ([]*entry, bool, error)) (bool, error) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	for try := 0; ; try++ {
		ts, th, hit, err := t.read(ctx)
		if err != nil {
			return false, err
		}
		entries, changed, err := fn(ts.s)
		if err != nil || !changed {
			return hit, err
		}
		entries = fitItems(ts.s.entries, entries)
		msgs, err := events(ts.s.entries, entries, min(maxEventBytes, t.db.Limits().MessageBytes/2))
		if err != nil {
			return hit, err
		}
		if len(msgs) == 0 {
			return hit, nil
		}
		// The messages get their ids here, so that the cache knows the
		// last one (the store fills in the ids of copies); new by
		// construction, they need no look among the thread's (FreshIDs).
		for i := range msgs {
			msgs[i].ID = message.NewID()
		}
		var c *thread.Commit
		if th == nil {
			th, err = t.db.Create(ctx, thread.CreateOptions{ID: t.id, Kind: thread.KindLocal, Title: "work items: " + t.project,
				Labels: map[string]string{LabelProject: cut(t.project, t.db.Limits().LabelBytes), thread.LabelOwner: Owner}, Messages: msgs})
			if err == nil {
				c = &thread.Commit{ID: th.Record().Head, Depth: int64(len(msgs))}
			}
		} else {
			c, err = th.Commit(ctx, thread.CommitOptions{Messages: msgs, IfVersion: th.Version(), FreshIDs: true})
		}
		// A conflict is another writer's change; a thread not found is
		// one deleted under this write, to be made again: both are read
		// and tried again.
		if (errors.Is(err, thread.ErrConflict) || errors.Is(err, thread.ErrNotFound)) && try < maxConflicts && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return hit, fmt.Errorf("worklog: items of %s: %w", t.project, err)
		}
		if c != nil {
			t.cache(&threadSnap{s: &snapshot{entries: entries, lists: new(listings)}, head: c.ID, n: c.Depth, last: msgs[len(msgs)-1].ID})
		}
		return hit, nil
	}
}

// fitItems returns new with the items that old does not hold and that
// are over the limits of an item — only items carried from a session
// record written by another tool can be — cut to MaxTextLen and
// MaxNoteLen characters, so that every change fits in a thread's messages.
func fitItems(old, new []*entry) []*entry {
	had := make(map[*entry]bool)
	out := new
	for i, e := range new {
		if len(e.it.Text) <= MaxTextLen && len(e.it.ResolutionNote) <= MaxNoteLen {
			continue // bytes bound characters: fits
		}
		if len(had) == 0 {
			for _, o := range old {
				had[o] = true
			}
		}
		if had[e] {
			continue
		}
		it := e.it
		it.Text, it.ResolutionNote = shorten(it.Text, MaxTextLen), shorten(it.ResolutionNote, MaxNoteLen)
		if it == e.it {
			continue
		}
		if &out[0] == &new[0] {
			out = slices.Clone(new)
		}
		out[i] = newEntry(it)
	}
	return out
}

// cut returns the longest start of s, at most max bytes, that ends
// between characters.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// events returns the messages that turn old into new: the entries of new
// that are not in old (by identity) are put, the ids of old that are not
// in new are dropped. Entries a change leaves alone keep their pointer.
func events(old, new []*entry, budget int) ([]message.Message, error) {
	// Most changes keep every entry in its place and change a few or add
	// some at the end: found without a map of all the entries.
	if put, ok := inPlace(old, new); ok {
		if len(put) == 0 {
			return nil, nil
		}
		return eventMessages(put, nil, budget), nil
	}
	had := make(map[*entry]bool, len(old))
	for _, e := range old {
		had[e] = true
	}
	ids := make(map[string]bool, len(new))
	var put []Item
	for _, e := range new {
		ids[e.it.ID] = true
		if !had[e] {
			put = append(put, e.it)
		}
	}
	var drop []string
	for _, e := range old {
		if !ids[e.it.ID] {
			drop = append(drop, e.it.ID)
			ids[e.it.ID] = true // once
		}
	}
	// Entries after a dropped one move up when it is folded, as they did
	// here: the order is kept.
	if len(put) == 0 && len(drop) == 0 {
		return nil, nil
	}
	return eventMessages(put, drop, budget), nil
}

// inPlace returns the items of the entries of new that are not those of
// old, if new is old with some entries replaced by entries of the same
// id and some added at the end.
func inPlace(old, new []*entry) ([]Item, bool) {
	if len(new) < len(old) {
		return nil, false
	}
	var put []Item
	for i, e := range old {
		if n := new[i]; n != e {
			if n.it.ID != e.it.ID {
				return nil, false
			}
			put = append(put, n.it)
		}
	}
	for _, e := range new[len(old):] {
		put = append(put, e.it)
	}
	return put, true
}

// eventMessages returns the event messages that put and drop items: one,
// or several when the items' JSON is over budget bytes. Each item is
// encoded once, to measure it and to write it, as the JSON of an event
// (put, then drop) without HTML escapes, so that the data is as long as
// the items measured.
func eventMessages(put []Item, drop []string, budget int) []message.Message {
	var (
		msgs    []message.Message
		data    []byte // the event being written, nil before its first item
		size    int    // the bytes of its items
		summary = summarize(nil, nil, drop)
	)
	add := func() {
		if data == nil {
			data = append(data, '{')
		} else {
			data = append(data, ']')
		}
		if len(drop) > 0 { // in the first event
			if len(data) > 1 {
				data = append(data, ',')
			}
			data = append(data, `"drop":[`...)
			for i, id := range drop {
				if i > 0 {
					data = append(data, ',')
				}
				data = appendString(data, id)
			}
			data = append(data, ']')
			drop = nil
		}
		data = append(data, '}')
		msgs = append(msgs, message.New(EventRole, message.Text{Text: strings.Join(summary, "\n")},
			message.Data{MediaType: EventMediaType, Data: data}))
		data, size, summary = nil, 0, nil
	}
	for _, it := range put {
		item := appendItem(nil, it, "")
		if size > 0 && size+len(item) > budget {
			add()
		}
		if data == nil {
			data = append(data, `{"put":[`...)
		} else {
			data = append(data, ',')
		}
		data = append(data, item...)
		size += len(item)
		summary = summarize(summary, &it, nil)
	}
	add()
	return msgs
}

// summarize adds a line for people per item put or dropped, so that the
// thread reads as a log: "+ t-… text", "✓ t-… note", "- t-…".
func summarize(lines []string, it *Item, drop []string) []string {
	const most = 20
	if len(lines) > most {
		return lines
	}
	if len(lines) == most {
		return append(lines, "…")
	}
	for _, id := range drop {
		lines = append(lines, "- "+id)
	}
	if it != nil {
		text := shorten(it.Text, 120)
		if it.Open() {
			lines = append(lines, "+ "+it.ID+" "+text)
		} else {
			line := "✓ " + it.ID + " " + text
			if it.ResolutionNote != "" {
				line += " — " + it.ResolutionNote
			}
			lines = append(lines, line)
		}
	}
	return lines
}
