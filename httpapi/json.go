package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/internal/apierr"
	"github.com/loomthreads/loom/internal/jsonerr"
	"github.com/loomthreads/loom/internal/jsonguard"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// The request bodies. Unknown members are refused; see decode.

type createRequest struct {
	ID       string                     `json:"id"`
	Title    string                     `json:"title"`
	Labels   map[string]string          `json:"labels"`
	Kind     thread.Kind                `json:"kind"`
	Messages messageList                `json:"messages"`
	State    map[string]json.RawMessage `json:"state"`
}

type patchRequest struct {
	Title  *string           `json:"title"`
	Labels map[string]string `json:"labels"`
}

type appendRequest struct {
	Messages messageList `json:"messages"`
}

type viewRequest struct {
	Version      int64             `json:"version"`
	Model        string            `json:"model"`
	Encoding     string            `json:"encoding"`
	Budget       int               `json:"budget"`
	MaxMessages  int               `json:"max_messages"`
	Pinned       []string          `json:"pinned"`
	Instructions instructionList   `json:"instructions"`
	Strategies   []json.RawMessage `json:"strategies"`
}

// strategyRequest is one strategy of a view: its type and that type's
// parameters, which are checked against the type after decoding.
type strategyRequest struct {
	Type     string `json:"type"`
	Turns    *int   `json:"turns"`
	KeepLast *int   `json:"keep_last"`
	Keep     *int   `json:"keep"`
}

type forkRequest struct {
	At      string            `json:"at"`
	Version int64             `json:"version"`
	ID      string            `json:"id"`
	Title   string            `json:"title"`
	Labels  map[string]string `json:"labels"`
}

type copyRequest struct {
	Version int64             `json:"version"`
	ID      string            `json:"id"`
	Title   string            `json:"title"`
	Labels  map[string]string `json:"labels"`
}

type checkpointRequest struct {
	Name string `json:"name"`
}

type rollbackRequest struct {
	Checkpoint string `json:"checkpoint"`
	Version    int64  `json:"version"`
}

type runRequest struct {
	// Input is a list of messages or a string, the text of one user
	// message.
	Input     json.RawMessage   `json:"input"`
	Approvals []approvalRequest `json:"approvals"`
	OnBusy    string            `json:"on_busy"`
	Stream    bool              `json:"stream"`
}

type approvalRequest struct {
	CallID   string `json:"call_id"`
	Approved bool   `json:"approved"`
	Reason   string `json:"reason"`
}

// The response bodies.

type threadJSON struct {
	ID         string            `json:"id"`
	Kind       thread.Kind       `json:"kind"`
	Title      string            `json:"title"`
	Labels     map[string]string `json:"labels"`
	Head       string            `json:"head,omitzero"`
	Version    int64             `json:"version"`
	CreatedAt  time.Time         `json:"created_at"`
	UpdatedAt  time.Time         `json:"updated_at"`
	ForkedFrom *thread.ForkPoint `json:"forked_from,omitzero"`
}

func recordJSON(r thread.Record) threadJSON {
	out := threadJSON{ID: r.ID, Kind: r.Kind, Title: r.Title, Labels: r.Labels, Head: r.Head, Version: r.Version,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	if r.ForkedFrom != (thread.ForkPoint{}) {
		fp := r.ForkedFrom
		out.ForkedFrom = &fp
	}
	return out
}

type listResponse struct {
	Threads    []threadJSON `json:"threads"`
	NextCursor string       `json:"next_cursor,omitzero"`
}

type messagesResponse struct {
	Version int64 `json:"version"`
	// NextBefore is the id of the oldest message of the page when older
	// ones exist: the before of the next page back.
	NextBefore string            `json:"next_before,omitzero"`
	Messages   []message.Message `json:"messages"`
}

type commitResponse struct {
	Version  int64             `json:"version"`
	Commit   string            `json:"commit"`
	Messages []message.Message `json:"messages"`
}

type viewResponse struct {
	Version   int64             `json:"version"`
	Messages  []message.Message `json:"messages"`
	Tokens    int               `json:"tokens"`
	Dropped   []string          `json:"dropped"`
	Elided    []string          `json:"elided"`
	Compacted string            `json:"compacted,omitzero"`
}

type historyEntryJSON struct {
	Version int64     `json:"version"`
	Commit  string    `json:"commit,omitzero"`
	Op      thread.Op `json:"op"`
	Time    time.Time `json:"time"`
}

type historyResponse struct {
	Entries    []historyEntryJSON `json:"entries"`
	NextBefore int64              `json:"next_before,omitzero"`
}

type checkpointJSON struct {
	Name      string    `json:"name"`
	Commit    string    `json:"commit"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
}

type checkpointsResponse struct {
	Checkpoints []checkpointJSON `json:"checkpoints"`
}

type runResponse struct {
	RunID    string              `json:"run_id"`
	Version  int64               `json:"version"`
	Messages []message.Message   `json:"messages"`
	Text     string              `json:"text"`
	Pending  []agent.PendingCall `json:"pending"`
	Usage    message.Usage       `json:"usage"`
	Requests int                 `json:"requests"`
	Finish   agent.FinishReason  `json:"finish_reason,omitzero"`
}

type healthResponse struct {
	Status  string `json:"status"`
	Version string `json:"version,omitzero"`
}

// orEmpty returns s, or an empty slice for nil, so that JSON has [] and
// never null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// withMessages is a response body with a "messages" member that
// writeJSON writes itself: encoding/json would check and compact each
// message's JSON once more, which costs more than writing it (a message
// writes itself in its canonical, compact form).
type withMessages interface {
	// jsonParts returns the body's other members, as a value that
	// marshals to a JSON object, and the messages.
	jsonParts() (fields any, msgs []message.Message)
}

func (r messagesResponse) jsonParts() (any, []message.Message) {
	return struct {
		Version    int64  `json:"version"`
		NextBefore string `json:"next_before,omitzero"`
	}{r.Version, r.NextBefore}, r.Messages
}

func (r commitResponse) jsonParts() (any, []message.Message) {
	return struct {
		Version int64  `json:"version"`
		Commit  string `json:"commit"`
	}{r.Version, r.Commit}, r.Messages
}

func (r viewResponse) jsonParts() (any, []message.Message) {
	return struct {
		Version   int64    `json:"version"`
		Tokens    int      `json:"tokens"`
		Dropped   []string `json:"dropped"`
		Elided    []string `json:"elided"`
		Compacted string   `json:"compacted,omitzero"`
	}{r.Version, r.Tokens, r.Dropped, r.Elided, r.Compacted}, r.Messages
}

// marshal writes v as JSON, the messages of a withMessages last.
func marshal(v any) ([]byte, error) {
	wm, ok := v.(withMessages)
	if !ok {
		return json.Marshal(v)
	}
	fields, msgs := wm.jsonParts()
	b, err := json.Marshal(fields)
	if err != nil || len(b) < 2 || b[len(b)-1] != '}' {
		return nil, fmt.Errorf("marshal %T: not an object (%v)", fields, err)
	}
	b = b[:len(b)-1]
	if len(b) > 1 {
		b = append(b, ',')
	}
	b = append(b, `"messages":[`...)
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = m.AppendJSON(b); err != nil {
			return nil, err
		}
	}
	return append(b, "]}"...), nil
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshal(v)
	if err != nil {
		// Every body is made of types that marshal; a failure here is a
		// bug, answered without its text.
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// errBadJSON is a request body that is not what the route takes.
func errBadJSON(msg string) error { return errf(http.StatusBadRequest, "invalid_json", "%s", msg) }

// maxBodyDepth is how deep the arrays and objects of a request body may
// nest. A body nested deeper is refused (400 invalid_json) before it is
// decoded: every later encode of what it holds would pay for the depth.
// It is the default thread.Limits.JSONDepth (128) plus room for the
// request's own levels (a body, its messages, a content, metadata), so
// that a value the thread takes is not refused on its way in, and one
// just over the thread's limit gets the thread's own error.
const maxBodyDepth = 128 + 16

// decode reads r's body, one JSON value, into v, refusing unknown members
// and anything after the value. An empty body is an error unless optional,
// when it leaves v as it is.
func decode(r *http.Request, v any, optional bool) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		// The read error's text names the server's network addresses: it
		// stays out of the answer.
		return errBadJSON("the request body could not be read")
	}
	return decodeBytes(data, v, optional)
}

// decodeBytes is decode of data. Text that is not UTF-8 (raw bytes, or a
// \u escape of half a surrogate pair) is refused rather than read as
// U+FFFD, which would store what the client did not send; so is nesting
// deeper than maxBodyDepth.
func decodeBytes(data []byte, v any, optional bool) error {
	return decodeValue(data, v, optional, "request body")
}

// decodeValue is decodeBytes of a value that what names in errors.
func decodeValue(data []byte, v any, optional bool, what string) error {
	if len(bytes.TrimSpace(data)) == 0 {
		if optional {
			return nil
		}
		return errBadJSON("empty request body: a JSON object is required")
	}
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		// encoding/json would leave v as it is: an empty request.
		return errBadJSON(what + ": expected a JSON object, got null")
	}
	if err := jsonguard.Check(data, maxBodyDepth); err != nil {
		return errBadJSON(what + ": " + err.Error())
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(what, v, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errBadJSON(what + ": data after the JSON value")
	}
	return nil
}

// jsonError is err, an error of decoding JSON into v, told in loom's words
// with what (such as "request body") before it: a sentence that names the
// JSON member and what it should hold, never a Go type. Errors that are
// already loom's (a message without contents) are returned as they are.
func jsonError(what string, v any, err error) error {
	var own *apierr.Error
	if errors.As(err, &own) || errors.Is(err, thread.ErrInvalid) {
		return err
	}
	return errBadJSON(what + ": " + jsonerr.Describe(v, err))
}

// messageList is the messages of a request body. Each must carry
// `contents`: the wire format reads a message without it as a message with
// no contents, which is how a message in another API's shape
// ({"role":"user","content":"hi"}) would be stored, empty.
type messageList []message.Message

func (l *messageList) UnmarshalJSON(b []byte) error {
	msgs, err := decodeMessages(b, "messages")
	*l = msgs
	return err
}

// instructionList is the instructions of a view: messages, named so in
// errors.
type instructionList []message.Message

func (l *instructionList) UnmarshalJSON(b []byte) error {
	msgs, err := decodeMessages(b, "instructions")
	*l = msgs
	return err
}

// howToWriteAMessage ends the error of a message without contents.
const howToWriteAMessage = "messages carry `contents`: [{\"type\":\"text\",\"text\":…}], a list of parts, as in {\"role\":\"user\",\"contents\":[{\"type\":\"text\",\"text\":\"hi\"}]}"

// decodeMessages reads the list of messages b, the member name of a request
// body (for errors). A message without contents is refused.
func decodeMessages(b []byte, name string) ([]message.Message, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || bytes.Equal(b, []byte("null")) {
		return nil, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(b, &raws); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, errBadJSON(fmt.Sprintf("%s: expected an array of messages, got %s", name, typeErrorGot(te)))
		}
		return nil, errBadJSON(name + ": " + jsonerr.Describe(nil, err))
	}
	msgs := make([]message.Message, len(raws))
	for i, raw := range raws {
		if err := msgs[i].UnmarshalJSON(raw); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field == "" {
				return nil, errBadJSON(fmt.Sprintf("%s[%d]: expected a message, an object, got %s", name, i, typeErrorGot(te)))
			}
			return nil, errBadJSON(fmt.Sprintf("%s[%d]: %s", name, i, jsonerr.Describe(nil, err)))
		}
		if len(msgs[i].Contents) > 0 {
			continue
		}
		var shape struct {
			Contents json.RawMessage `json:"contents"`
			Content  json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(raw, &shape)
		switch {
		case shape.Contents != nil && !bytes.Equal(shape.Contents, []byte("null")):
			// [] written out: a message with no parts.
		case shape.Content != nil:
			return nil, invalidf("%s[%d] has `content` and no `contents`: %s", name, i, howToWriteAMessage)
		default:
			return nil, invalidf("%s[%d] has no `contents`: %s", name, i, howToWriteAMessage)
		}
	}
	return msgs, nil
}

// typeErrorGot names the JSON value a type error found.
func typeErrorGot(te *json.UnmarshalTypeError) string {
	_, got, _ := strings.Cut(jsonerr.Describe(nil, &json.UnmarshalTypeError{Value: te.Value, Type: te.Type, Field: "x"}), ", got ")
	return got
}

// ifMatch reads the If-Match header: a version, as an ETag ("5", or 5).
// "*" and no header both mean no condition.
func ifMatch(r *http.Request) (tag etagValue, ok bool, err error) {
	h := strings.TrimSpace(r.Header.Get("If-Match"))
	if h == "" || h == "*" {
		return etagValue{}, false, nil
	}
	tag, err = parseETag(h)
	if err != nil {
		return etagValue{}, false, invalidf("If-Match %q: an ETag this server sent, or a version in quotes such as \"3\"", clip(h))
	}
	return tag, true, nil
}

// etagValue is what an ETag names: a thread's version and, so that a
// thread deleted and created again under its id never matches a tag of the
// old one, its creation time. A tag written by hand as a bare version
// ("3") has created 0 and matches the version of whichever thread has
// the id.
type etagValue struct {
	version int64
	created int64 // microseconds since the epoch; 0 for a bare version
}

func parseETag(h string) (etagValue, error) {
	h = strings.TrimPrefix(h, "W/")
	if len(h) >= 2 && h[0] == '"' && h[len(h)-1] == '"' {
		h = h[1 : len(h)-1]
	}
	vs, cs, both := strings.Cut(h, ".")
	v, err := strconv.ParseInt(vs, 10, 64)
	if err != nil || v < 0 {
		return etagValue{}, errors.New("not a version")
	}
	t := etagValue{version: v}
	if both {
		if t.created, err = strconv.ParseInt(cs, 36, 64); err != nil || t.created <= 0 {
			return etagValue{}, errors.New("not a creation time")
		}
	}
	return t, nil
}

// etag is the ETag of a thread at a version.
func etag(rec thread.Record, version int64) string {
	return `"` + strconv.FormatInt(version, 10) + "." + strconv.FormatInt(rec.CreatedAt.UnixMicro(), 36) + `"`
}

// matches reports whether tag names rec at version.
func (t etagValue) matches(rec thread.Record, version int64) bool {
	return t.version == version && (t.created == 0 || t.created == rec.CreatedAt.UnixMicro())
}

// notModified reports whether the request's If-None-Match names rec at
// version.
func notModified(r *http.Request, rec thread.Record, version int64) bool {
	for tag := range strings.SplitSeq(r.Header.Get("If-None-Match"), ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" {
			return true
		}
		if t, err := parseETag(tag); err == nil && t.matches(rec, version) {
			return true
		}
	}
	return false
}
