package openaiapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/internal/oaiitem"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

type createItemsRequest struct {
	Items []json.RawMessage `json:"items"`
}

// writeItemList answers with OpenAI's list object of items. It is written
// by hand: the items are JSON already, and the list is the hot path.
func writeItemList(w http.ResponseWriter, items []oaiitem.Item, hasMore bool) {
	var b bytes.Buffer
	n := 64
	for _, it := range items {
		n += len(it.JSON) + 1
	}
	b.Grow(n)
	b.WriteString(`{"object":"list","data":[`)
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it.JSON)
	}
	b.WriteString(`],"first_id":`)
	if len(items) == 0 {
		b.WriteString(`null,"last_id":null`)
	} else {
		writeString(&b, items[0].ID)
		b.WriteString(`,"last_id":`)
		writeString(&b, items[len(items)-1].ID)
	}
	b.WriteString(`,"has_more":`)
	b.WriteString(strconv.FormatBool(hasMore))
	b.WriteString("}\n")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusOK)
	w.Write(b.Bytes())
}

// writeString writes an id (ASCII without quotes or backslashes) as a
// JSON string.
func writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	b.WriteString(s)
	b.WriteByte('"')
}

// createItems: POST /conversations/{conversation_id}/items {items} appends
// the items in one commit (a pure append: it retries on a moved thread).
func (s *Server) createItems(w http.ResponseWriter, r *http.Request) error {
	if err := checkInclude(r); err != nil {
		return err
	}
	var req createItemsRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	switch {
	case req.Items == nil:
		return invalidParam("items", "Missing required parameter: 'items'.")
	case len(req.Items) == 0:
		return invalidParam("items", "Invalid 'items': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	case len(req.Items) > MaxItems:
		return invalidParam("items", "Invalid 'items': array too long. Expected an array with maximum length %d, but got an array with length %d instead.", MaxItems, len(req.Items))
	}
	msgs, fresh, err := oaiitem.FromItemsFresh(req.Items)
	if err != nil {
		return itemError(err)
	}
	th, err := s.conversation(r)
	if err != nil {
		return err
	}
	if err := writable(th); err != nil {
		return err
	}
	if err := subIDsFree(r.Context(), th, msgs, "items"); err != nil {
		if e := (*Error)(nil); errors.As(err, &e) && e.Status == http.StatusConflict {
			w.Header().Set("X-Should-Retry", "false") // the id stays taken
		}
		return err
	}
	ctx := detached(r)
	c, err := th.Commit(ctx, thread.CommitOptions{Messages: msgs, FreshIDs: fresh})
	if errors.Is(err, thread.ErrDuplicateID) {
		w.Header().Set("X-Should-Retry", "false") // the id stays taken
		return takenID(ctx, th, msgs, err)
	}
	if err != nil {
		return err
	}
	if th.Title() == "" {
		// A conversation made empty (as the Agents SDK makes its sessions)
		// takes its title from its first user text; a lost race leaves it
		// to the next request.
		if title := titleOf(msgs); title != "" {
			if err := th.Update(ctx, thread.UpdateOptions{Title: &title}); err != nil && !errors.Is(err, thread.ErrConflict) {
				s.log.WarnContext(ctx, "openai api: title not set", "thread", th.ID(), "err", err)
			}
		}
	}
	writeItemList(w, oaiitem.Items(c.Messages), false)
	return nil
}

// subIDsFree refuses, with a 409 whose param names it, a message of msgs
// whose id has the form "<message id>.<k>" of an item th holds already
// (the k-th of a message with several), which the thread's own check of
// message ids does not see. Only ids a client gave can have that form;
// param is the items' ("items" or "input").
func subIDsFree(ctx context.Context, th *thread.Thread, msgs []message.Message, param string) error {
	for k, m := range msgs {
		if _, _, sub := oaiitem.ParseID(m.ID); !sub {
			continue
		}
		_, _, err := locate(ctx, th, m.ID)
		if errors.Is(err, thread.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		p := param + "[" + strconv.Itoa(k) + "].id"
		return &Error{Status: http.StatusConflict, Type: typeInvalidRequest, Code: "conflict", Param: p,
			Message: "Invalid '" + p + "': an item with id '" + m.ID + "' is already in the conversation."}
	}
	return nil
}

// takenID says which item has an id the conversation holds already: a
// 409 whose param names it. err is the commit's, returned if the thread
// (read again) has none of the ids.
func takenID(ctx context.Context, th *thread.Thread, msgs []message.Message, err error) error {
	if th.Refresh(ctx) != nil {
		return err
	}
	held, rerr := th.Messages(ctx, thread.ReadOptions{})
	if rerr != nil {
		return err
	}
	have := make(map[string]bool, len(held))
	for _, m := range held {
		have[m.ID] = true
	}
	for k, m := range msgs {
		if have[m.ID] {
			p := "items[" + strconv.Itoa(k) + "].id"
			return &Error{Status: http.StatusConflict, Type: typeInvalidRequest, Code: "conflict", Param: p,
				Message: "Invalid '" + p + "': an item with id '" + m.ID + "' is already in the conversation."}
		}
	}
	return err
}

// listParams are the query of a list of items.
type listParams struct {
	after string
	limit int
	asc   bool
}

func parseList(r *http.Request) (listParams, error) {
	q := r.URL.Query()
	p := listParams{limit: 20, after: q.Get("after")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return p, invalidParam("limit", "Invalid 'limit': integer out of range. Expected an integer from 1 to 100, but got %s instead.", strconv.Quote(clip(v)))
		}
		p.limit = n
	}
	switch v := q.Get("order"); v {
	case "", "desc":
	case "asc":
		p.asc = true
	default:
		return p, invalidParam("order", "Invalid value for 'order': expected 'asc' or 'desc', got %s.", strconv.Quote(clip(v)))
	}
	if p.after != "" && !ids.Valid(p.after) { // an empty after is none
		return p, afterNotFound(p.after)
	}
	return p, checkInclude(r)
}

// afterNotFound answers an after cursor that names no item of the
// conversation.
func afterNotFound(id string) error {
	return &Error{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "not_found", Param: "after",
		Message: "Item with id '" + clip(id) + "' not found."}
}

// listItems: GET /conversations/{conversation_id}/items. Newest first
// (desc, the default) reads only the page: the newest messages, or those
// before the after cursor. Oldest first reads the thread.
func (s *Server) listItems(w http.ResponseWriter, r *http.Request) error {
	p, err := parseList(r)
	if err != nil {
		return err
	}
	th, err := s.conversation(r)
	if err != nil {
		return err
	}
	var page []oaiitem.Item
	if p.asc {
		page, err = listAsc(r.Context(), th, p)
	} else {
		page, err = listDesc(r.Context(), th, p)
	}
	if err != nil {
		return err
	}
	hasMore := len(page) > p.limit
	if hasMore {
		page = page[:p.limit]
	}
	writeItemList(w, page, hasMore)
	return nil
}

// listAsc returns up to limit+1 items after p.after, oldest first. It
// reads the thread (a line of commits is read from its head), but makes
// items only of the page.
func listAsc(ctx context.Context, th *thread.Thread, p listParams) ([]oaiitem.Item, error) {
	msgs, err := th.Messages(ctx, thread.ReadOptions{})
	if err != nil {
		return nil, err
	}
	start, skip := 0, 0 // the page starts after skip items of msgs[start]
	if p.after != "" {
		start, skip = -1, 0
		if i := slices.IndexFunc(msgs, func(m message.Message) bool { return m.ID == p.after }); i >= 0 {
			start, skip = i, 1
		} else if base, k, ok := oaiitem.ParseID(p.after); ok {
			if i := slices.IndexFunc(msgs, func(m message.Message) bool { return m.ID == base }); i >= 0 {
				start, skip = i, k+1
			}
		}
		if start < 0 || len(oaiitem.Items(msgs[start:start+1])) < skip {
			return nil, afterNotFound(p.after)
		}
	}
	var page []oaiitem.Item
	for j := start; j < len(msgs) && len(page) <= p.limit; j++ {
		items := oaiitem.Items(msgs[j : j+1])
		if j == start {
			items = items[skip:]
		}
		page = append(page, items...)
	}
	return page[:min(len(page), p.limit+1)], nil
}

// listDesc returns up to limit+1 items before p.after, newest first,
// reading the messages back from the head (or the cursor) a page at a
// time: a message may make several items or none.
func listDesc(ctx context.Context, th *thread.Thread, p listParams) ([]oaiitem.Item, error) {
	want := p.limit + 1
	var page []oaiitem.Item
	before, done := "", false
	if p.after != "" {
		msgs, err := th.Messages(ctx, thread.ReadOptions{Before: p.after, Last: want})
		switch {
		case err == nil:
			page = appendNewestFirst(page, msgs)
			done = len(msgs) < want
			if len(msgs) > 0 {
				before = msgs[0].ID
			}
		case errors.Is(err, thread.ErrNotFound):
			// Not a message id: an item <id>.<k> of a message with several.
			m, k, err := locate(ctx, th, p.after)
			if errors.Is(err, thread.ErrNotFound) {
				return nil, afterNotFound(p.after)
			}
			if err != nil {
				return nil, err
			}
			items := oaiitem.Items([]message.Message{m})
			for j := k - 1; j >= 0; j-- {
				page = append(page, items[j])
			}
			before = m.ID
		default:
			return nil, err
		}
	}
	for !done && len(page) < want {
		n := want - len(page)
		msgs, err := th.Messages(ctx, thread.ReadOptions{Before: before, Last: n})
		if err != nil {
			return nil, err
		}
		page = appendNewestFirst(page, msgs)
		if len(msgs) < n {
			break
		}
		before = msgs[0].ID
	}
	return page, nil
}

// appendNewestFirst appends the items of msgs (oldest first) newest first.
func appendNewestFirst(page []oaiitem.Item, msgs []message.Message) []oaiitem.Item {
	items := oaiitem.Items(msgs)
	for i := len(items) - 1; i >= 0; i-- {
		page = append(page, items[i])
	}
	return page
}

// locate finds the item id on th: a message of that id (its first item),
// or the k-th item of a message when id is "<message id>.<k>". It reads
// back from the head in growing pages, so that a recent item costs little.
func locate(ctx context.Context, th *thread.Thread, id string) (message.Message, int, error) {
	base, k, sub := oaiitem.ParseID(id)
	before, n := "", 32
	for {
		msgs, err := th.Messages(ctx, thread.ReadOptions{Before: before, Last: n})
		if err != nil {
			return message.Message{}, 0, err
		}
		for i := len(msgs) - 1; i >= 0; i-- {
			m := msgs[i]
			switch {
			case m.ID == id:
				if len(oaiitem.Items([]message.Message{m})) > 0 {
					return m, 0, nil
				}
			case sub && m.ID == base:
				if k < len(oaiitem.Items([]message.Message{m})) {
					return m, k, nil
				}
				return message.Message{}, 0, thread.ErrNotFound
			}
		}
		if len(msgs) < n {
			return message.Message{}, 0, thread.ErrNotFound
		}
		before, n = msgs[0].ID, min(n*2, 4096)
	}
}

// getItem: GET /conversations/{conversation_id}/items/{item_id}
func (s *Server) getItem(w http.ResponseWriter, r *http.Request) error {
	if err := checkInclude(r); err != nil {
		return err
	}
	th, err := s.conversation(r)
	if err != nil {
		return err
	}
	id := r.PathValue("item_id")
	if !ids.Valid(id) {
		return notFound("Item", id)
	}
	m, k, err := locate(r.Context(), th, id)
	if errors.Is(err, thread.ErrNotFound) {
		return notFound("Item", id)
	}
	if err != nil {
		return err
	}
	it := oaiitem.Items([]message.Message{m})[k]
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(it.JSON)+1))
	w.WriteHeader(http.StatusOK)
	w.Write(append(it.JSON, '\n'))
	return nil
}

// deleteItem: DELETE /conversations/{conversation_id}/items/{item_id}
// makes a new version of the thread without the item; the history keeps
// the old one. It answers with the conversation, as OpenAI does.
func (s *Server) deleteItem(w http.ResponseWriter, r *http.Request) error {
	th, err := s.conversation(r)
	if err != nil {
		return err
	}
	if err := writable(th); err != nil {
		return err
	}
	id := r.PathValue("item_id")
	if !ids.Valid(id) {
		return notFound("Item", id)
	}
	ctx := detached(r)
	err = onMoved(ctx, th, func() error { return dropItem(ctx, th, id) })
	switch {
	case errors.Is(err, errNoItem):
		return notFound("Item", id)
	case errors.Is(err, thread.ErrNotFound) && th.Refresh(ctx) != nil:
		return notFound("Conversation", th.ID())
	}
	if err != nil {
		return err
	}
	md, err := metadataOf(ctx, th)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, conversationObject(th, md))
	return nil
}

var errNoItem = errors.New("no such item")

// dropItem moves th, in one group, to a new version without the item id:
// its head goes back to the newest version in its history whose head is
// an ancestor of the item's commit (the empty root when there is none), and
// one commit on it holds the messages after that, the item left out (an
// item of a message with several: the message cut into one message per
// item left, each keeping its item's id — see oaiitem.Cut), with the
// head's state. It fails with thread.ErrConflict when th moved meanwhile.
func dropItem(ctx context.Context, th *thread.Thread, id string) error {
	rec := th.Record()
	if rec.Head == "" {
		return errNoItem
	}
	// The line, newest commit first.
	var line []*thread.Commit
	for c, err := range th.DB().Store().Ancestors(ctx, rec.Head, -1) {
		if err != nil {
			return err
		}
		line = append(line, c)
	}
	slices.Reverse(line)
	ci, mi, k := findOnLine(line, id)
	if ci < 0 {
		return errNoItem
	}
	// The newest version whose head is on the line below the item's commit.
	below := make(map[string]int, ci)
	for i, c := range line[:ci] {
		below[c.ID] = i
	}
	target, targetVersion := -1, int64(0) // -1: the empty root, by Reset
	for e, err := range th.History(ctx, thread.HistoryOptions{}) {
		if err != nil {
			return err
		}
		if e.Version > rec.Version {
			continue
		}
		if i, ok := below[e.Commit]; ok {
			target, targetVersion = i, e.Version
			break
		}
		if e.Commit == "" {
			targetVersion = e.Version
			break
		}
	}
	var msgs []message.Message
	for i := target + 1; i < len(line); i++ {
		for j, m := range line[i].Messages {
			if i == ci && j == mi {
				cut, ok := oaiitem.Cut(m, k)
				if !ok {
					return errNoItem
				}
				msgs = append(msgs, cut...)
				continue
			}
			msgs = append(msgs, m)
		}
	}
	// The tail is rewritten in one commit (a group moves a thread once):
	// past a commit's limit, say so rather than fail in the store's words.
	if limit := th.DB().Limits().MessagesPerCommit; len(msgs) > limit {
		return unsupported("item_id", "deleting an item with more than %d messages after it (this one has %d): its deletion rewrites them in one commit", limit, len(msgs))
	}
	// The state as the head has it, over the target's.
	headState, err := th.State(ctx, 0)
	if err != nil {
		return err
	}
	patch := map[string]json.RawMessage{}
	if target >= 0 {
		old, err := th.State(ctx, targetVersion)
		if err != nil {
			return err
		}
		for k := range old {
			patch[k] = nil
		}
	}
	for k, v := range headState {
		patch[k] = v
	}
	g := th.DB().Group()
	if target >= 0 {
		err = g.Restore(ctx, th, targetVersion)
	} else {
		err = g.Reset(ctx, th)
	}
	if err != nil {
		return err
	}
	if len(msgs) > 0 || len(patch) > 0 {
		opts := thread.CommitOptions{Messages: msgs, Metadata: map[string]string{"openai.deleted_item": id}}
		if len(patch) > 0 {
			opts.State = patch
		}
		if _, err := g.Commit(ctx, th, opts); err != nil {
			return err
		}
	}
	return g.Apply(ctx)
}

// findOnLine finds the item id on line (oldest commit first): the index of
// its commit, of its message in the commit, and its index among the
// message's items; ci < 0 when the line has no such item. A message id
// matches before an item <id>.<k>.
func findOnLine(line []*thread.Commit, id string) (ci, mi, k int) {
	base, sub, isSub := oaiitem.ParseID(id)
	ci, mi = -1, -1
	for i := len(line) - 1; i >= 0; i-- {
		for j, m := range line[i].Messages {
			switch {
			case m.ID == id:
				if len(oaiitem.Items([]message.Message{m})) > 0 {
					return i, j, 0
				}
			case isSub && m.ID == base && ci < 0:
				if sub < len(oaiitem.Items([]message.Message{m})) {
					ci, mi, k = i, j, sub
				}
			}
		}
	}
	return ci, mi, k
}
