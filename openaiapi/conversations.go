package openaiapi

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/internal/oaiitem"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// MetadataState is the thread state key that holds a conversation's
// metadata, a JSON object of strings: in the state, it is versioned with
// the thread and forks carry it.
const MetadataState = "openai/metadata"

// The limits of OpenAI's metadata, and of items per request (OpenAI takes
// 20 initial items; loom takes up to MaxItems in both calls).
const (
	maxMetadataPairs    = 16
	maxMetadataKeyLen   = 64
	maxMetadataValueLen = 512
	MaxItems            = 1000
	maxTitleRunes       = 80
)

// conversationJSON is OpenAI's conversation object.
type conversationJSON struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"`
	CreatedAt int64             `json:"created_at"`
	Metadata  map[string]string `json:"metadata"`
}

type deletedJSON struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

// createConversationRequest is the body of POST /conversations.
type createConversationRequest struct {
	Items    []json.RawMessage `json:"items"`
	Metadata json.RawMessage   `json:"metadata"`
}

type updateConversationRequest struct {
	Metadata json.RawMessage `json:"metadata"`
}

// itemError turns an item conversion error into OpenAI's 400 with its param.
func itemError(err error) error {
	var e *oaiitem.Error
	if errors.As(err, &e) {
		return invalidParam(e.Param, "Invalid '%s': %s.", e.Param, e.Msg)
	}
	return err
}

// parseMetadata reads a metadata object within OpenAI's limits; null or
// absent is none.
func parseMetadata(raw json.RawMessage) (map[string]string, error) {
	md := map[string]string{}
	if len(raw) == 0 || string(raw) == "null" {
		return md, nil
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, invalidParam("metadata", "Invalid 'metadata': expected an object of string values.")
	}
	if len(obj) > maxMetadataPairs {
		return nil, invalidParam("metadata", "Invalid 'metadata': too many properties. Expected an object with at most %d properties, but got an object with %d properties instead.", maxMetadataPairs, len(obj))
	}
	for k, v := range obj {
		s, ok := v.(string)
		switch {
		case !ok:
			return nil, invalidParam("metadata."+clip(k), "Invalid 'metadata.%s': expected a string.", clip(k))
		case utf8.RuneCountInString(k) > maxMetadataKeyLen:
			return nil, invalidParam("metadata", "Invalid 'metadata': key '%s' is longer than %d characters.", clip(k), maxMetadataKeyLen)
		case utf8.RuneCountInString(s) > maxMetadataValueLen:
			return nil, invalidParam("metadata."+clip(k), "Invalid 'metadata.%s': string too long. Expected a string with maximum length %d, but got a string with length %d instead.", clip(k), maxMetadataValueLen, utf8.RuneCountInString(s))
		}
		md[k] = s
	}
	return md, nil
}

// conversationID reads the path's conversation id: one that cannot name a
// thread is not found, as any other unknown id.
func conversationID(r *http.Request) (string, error) {
	id := r.PathValue("conversation_id")
	if !ids.Valid(id) {
		return "", notFound("Conversation", id)
	}
	return id, nil
}

// conversation opens the request's conversation: any thread of the
// tenant.
func (s *Server) conversation(r *http.Request) (*thread.Thread, error) {
	id, err := conversationID(r)
	if err != nil {
		return nil, err
	}
	th, err := s.tenantDB(r).Thread(r.Context(), id)
	if errors.Is(err, thread.ErrNotFound) {
		return nil, notFound("Conversation", id)
	}
	return th, err
}

// writable refuses writes to a service-managed thread: its conversation is
// kept by a chat service, which would never see them.
func writable(th *thread.Thread) error {
	if th.Kind() == thread.KindService {
		return invalidParam("", "Conversation '%s' is a service-managed loom thread (its provider keeps its messages): it can be read here but not changed.", th.ID())
	}
	return nil
}

// metadataOf reads a conversation's metadata from the thread's state at
// the handle's version; a thread without any has {}.
func metadataOf(ctx context.Context, th *thread.Thread) (map[string]string, error) {
	md := map[string]string{}
	st, err := th.State(ctx, 0)
	if err != nil {
		return nil, err
	}
	if raw, ok := st[MetadataState]; ok {
		var m map[string]any
		if json.Unmarshal(raw, &m) == nil {
			for k, v := range m {
				if s, ok := v.(string); ok {
					md[k] = s
				}
			}
		}
	}
	return md, nil
}

func conversationObject(th *thread.Thread, md map[string]string) conversationJSON {
	return conversationJSON{ID: th.ID(), Object: "conversation", CreatedAt: th.Record().CreatedAt.Unix(), Metadata: md}
}

// titleOf is a thread title from the first user text of msgs: its words
// on one line, at most maxTitleRunes runes.
func titleOf(msgs []message.Message) string {
	for _, m := range msgs {
		if m.Role != message.RoleUser {
			continue
		}
		text := strings.Join(strings.FieldsFunc(m.Text(), func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }), " ")
		if text == "" {
			continue
		}
		if utf8.RuneCountInString(text) > maxTitleRunes {
			runes := []rune(text)
			text = strings.TrimSpace(string(runes[:maxTitleRunes-1])) + "…"
		}
		return text
	}
	return ""
}

// createConversation: POST /conversations {items?, metadata?}
func (s *Server) createConversation(w http.ResponseWriter, r *http.Request) error {
	var req createConversationRequest
	if err := decode(r, &req, true); err != nil {
		return err
	}
	md, err := parseMetadata(req.Metadata)
	if err != nil {
		return err
	}
	if len(req.Items) > MaxItems {
		return invalidParam("items", "Invalid 'items': array too long. Expected an array with maximum length %d, but got an array with length %d instead.", MaxItems, len(req.Items))
	}
	msgs, err := oaiitem.FromItems(req.Items)
	if err != nil {
		return itemError(err)
	}
	mdJSON, _ := json.Marshal(md)
	th, err := s.tenantDB(r).Create(detached(r), thread.CreateOptions{
		ID:       ids.New("conv_"),
		Kind:     thread.KindLocal, // its messages live here, not with a chat service
		Title:    titleOf(msgs),
		Labels:   map[string]string{"openai": "conversation"},
		Messages: msgs,
		State:    map[string]json.RawMessage{MetadataState: mdJSON},
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, conversationObject(th, md))
	return nil
}

// getConversation: GET /conversations/{conversation_id}
func (s *Server) getConversation(w http.ResponseWriter, r *http.Request) error {
	th, err := s.conversation(r)
	if err != nil {
		return err
	}
	md, err := metadataOf(r.Context(), th)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, conversationObject(th, md))
	return nil
}

// updateConversation: POST /conversations/{conversation_id} {metadata}
// replaces the metadata in one state commit, retried on a moved thread (a
// replacement does not depend on what it replaces).
func (s *Server) updateConversation(w http.ResponseWriter, r *http.Request) error {
	var req updateConversationRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if req.Metadata == nil {
		return invalidParam("metadata", "Missing required parameter: 'metadata'.")
	}
	md, err := parseMetadata(req.Metadata)
	if err != nil {
		return err
	}
	th, err := s.conversation(r)
	if err != nil {
		return err
	}
	if err := writable(th); err != nil {
		return err
	}
	mdJSON, _ := json.Marshal(md)
	ctx := detached(r)
	err = onMoved(ctx, th, func() error {
		_, err := th.SetState(ctx, map[string]json.RawMessage{MetadataState: mdJSON})
		return err
	})
	if errors.Is(err, thread.ErrNotFound) {
		return notFound("Conversation", th.ID())
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, conversationObject(th, md))
	return nil
}

// deleteConversation: DELETE /conversations/{conversation_id} deletes the
// thread (its forks stay).
func (s *Server) deleteConversation(w http.ResponseWriter, r *http.Request) error {
	th, err := s.conversation(r)
	if err != nil {
		return err
	}
	if err := writable(th); err != nil {
		return err
	}
	ctx := detached(r)
	err = onMoved(ctx, th, func() error { return th.Delete(ctx) })
	if errors.Is(err, thread.ErrNotFound) {
		return notFound("Conversation", th.ID())
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, deletedJSON{ID: th.ID(), Object: "conversation.deleted", Deleted: true})
	return nil
}

// maxMoves is how many times a write that depends on the thread's version
// (a state commit, a deletion, a restore) is tried again when another
// write moved the thread first.
const maxMoves = 12

// onMoved runs write, and again on a thread read anew, after a short and
// growing pause, while it fails because another write moved th first
// (thread.ErrConflict; not an id taken, which stays taken): such writes
// replace or remove, and do not depend on what moved. A thread deleted
// meanwhile is thread.ErrNotFound.
func onMoved(ctx context.Context, th *thread.Thread, write func() error) error {
	for attempt := 0; ; attempt++ {
		err := write()
		if !errors.Is(err, thread.ErrConflict) || errors.Is(err, thread.ErrDuplicateID) || attempt == maxMoves {
			return err
		}
		pause := time.Duration(1<<min(attempt, 6)) * time.Millisecond
		select {
		case <-time.After(pause/2 + rand.N(pause)):
		case <-ctx.Done():
			return err
		}
		if err := th.Refresh(ctx); err != nil {
			return err
		}
	}
}

// knownIncludes are the values OpenAI takes for include; loom returns
// everything it has whatever is asked.
var knownIncludes = []string{
	"code_interpreter_call.outputs", "computer_call_output.output.image_url", "file_search_call.results",
	"message.input_image.image_url", "message.output_text.logprobs", "reasoning.encrypted_content",
	"web_search_call.action.sources", "web_search_call.results",
}

func init() { sort.Strings(knownIncludes) }

// checkInclude refuses an include value OpenAI does not know.
func checkInclude(r *http.Request) error {
	q := r.URL.Query()
	for _, k := range []string{"include", "include[]"} {
		for _, v := range q[k] {
			if i := sort.SearchStrings(knownIncludes, v); i == len(knownIncludes) || knownIncludes[i] != v {
				return invalidParam("include", "Invalid value: '%s'. Supported values are: %s.", clip(v), "'"+strings.Join(knownIncludes, "', '")+"'")
			}
		}
	}
	return nil
}
