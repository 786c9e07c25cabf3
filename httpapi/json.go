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
	"github.com/loomthreads/loom/internal/jsonstr"
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
	// ExpiresAt is when the thread expires if it does not change (its
	// retention's TTL, its own or the server's default); absent when never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// recordJSON is a thread's record as the API answers it; def is the
// server's default retention, for its expiry.
func recordJSON(r thread.Record, def thread.Retention) threadJSON {
	out := threadJSON{ID: r.ID, Kind: r.Kind, Title: r.Title, Labels: r.Labels, Head: r.Head, Version: r.Version,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	// A label that does not parse leaves the default: what GC applies.
	ret, _ := thread.RetentionOf(&r, def)
	out.ExpiresAt = ret.Expires(r.UpdatedAt)
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
	// appendFields appends the body's other members to b, each followed
	// by a comma.
	appendFields(b []byte) ([]byte, error)
	// messages returns the messages.
	messages() []message.Message
}

func (r messagesResponse) appendFields(b []byte) ([]byte, error) {
	return appendMembers(b, struct {
		Version    int64  `json:"version"`
		NextBefore string `json:"next_before,omitzero"`
	}{r.Version, r.NextBefore})
}

func (r messagesResponse) messages() []message.Message { return r.Messages }

// appendFields writes the version and the commit id by hand: an append's
// answer is the server's commonest, and encoding/json's reflection cost
// more than the rest of writing it.
func (r commitResponse) appendFields(b []byte) ([]byte, error) {
	b = append(b, `"version":`...)
	b = strconv.AppendInt(b, r.Version, 10)
	b = append(b, `,"commit":`...)
	b = jsonstr.Append(b, r.Commit)
	return append(b, ','), nil
}

func (r commitResponse) messages() []message.Message { return r.Messages }

func (r viewResponse) appendFields(b []byte) ([]byte, error) {
	return appendMembers(b, struct {
		Version   int64    `json:"version"`
		Tokens    int      `json:"tokens"`
		Dropped   []string `json:"dropped"`
		Elided    []string `json:"elided"`
		Compacted string   `json:"compacted,omitzero"`
	}{r.Version, r.Tokens, r.Dropped, r.Elided, r.Compacted})
}

func (r viewResponse) messages() []message.Message { return r.Messages }

// appendMembers appends the members of fields, a value that marshals to a
// JSON object, each followed by a comma.
func appendMembers(b []byte, fields any) ([]byte, error) {
	m, err := json.Marshal(fields)
	if err != nil || len(m) < 2 || m[0] != '{' || m[len(m)-1] != '}' {
		return nil, fmt.Errorf("marshal %T: not an object (%v)", fields, err)
	}
	if len(m) == 2 {
		return b, nil
	}
	b = append(b, m[1:len(m)-1]...)
	return append(b, ','), nil
}

// marshal writes v as JSON, the messages of a withMessages last.
func marshal(v any) ([]byte, error) {
	wm, ok := v.(withMessages)
	if !ok {
		return json.Marshal(v)
	}
	b, err := wm.appendFields(append(make([]byte, 0, 512), '{'))
	if err != nil {
		return nil, err
	}
	b = append(b, `"messages":[`...)
	for i, m := range wm.messages() {
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
	data, err := readBody(r)
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

// readBody reads r's body whole, as io.ReadAll does, into a buffer the
// size the request announces (io.ReadAll grows one from 512 bytes).
func readBody(r *http.Request) ([]byte, error) {
	n := r.ContentLength
	if n <= 0 {
		return io.ReadAll(r.Body)
	}
	// One byte more, for the read that finds the end; a length over the
	// body limit was refused before, but a handler may be mounted without
	// the limit: the buffer grows past 1 MiB only as the bytes come.
	b := make([]byte, 0, min(n, 1<<20)+1)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		m, err := r.Body.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
	}
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
	if fd, ok := v.(fastDecoder); ok && fd.decodeFast(data) {
		return nil
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
	if msgs, end, ok := scanMessages(b, 0); ok && end == len(b) {
		return msgs, nil
	}
	return decodeMessagesStd(b, name)
}

// decodeMessagesStd is decodeMessages with encoding/json: the reference
// that scanMessages follows, and what answers whatever it leaves.
func decodeMessagesStd(b []byte, name string) ([]message.Message, error) {
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

// fastDecoder is a request body that reads its common shape itself, as
// encoding/json would read it but without reflection or a second pass.
type fastDecoder interface {
	// decodeFast reads data, which jsonguard.Check has passed, and
	// reports whether it did. It reports false, leaving its receiver as
	// it was, for anything it does not read exactly as encoding/json
	// would, errors included: decodeValue then decodes data with
	// encoding/json, which gives the answer and every error.
	decodeFast(data []byte) bool
}

// decodeFast reads {"messages":[…]}, the messages objects that read as
// messages with contents, with any whitespace between the tokens. Any
// other member, a key spelt otherwise (encoding/json ignores case) or
// given twice, is left to encoding/json.
func (a *appendRequest) decodeFast(data []byte) bool {
	i := skipSpace(data, 0)
	if !hasPrefixAt(data, i, "{") {
		return false
	}
	if i = skipSpace(data, i+1); !hasPrefixAt(data, i, `"messages"`) {
		return false
	}
	if i = skipSpace(data, i+len(`"messages"`)); !hasPrefixAt(data, i, ":") {
		return false
	}
	msgs, i, ok := scanMessages(data, skipSpace(data, i+1))
	if !ok {
		return false
	}
	if i = skipSpace(data, i); !hasPrefixAt(data, i, "}") || skipSpace(data, i+1) != len(data) {
		return false
	}
	a.Messages = msgs
	return true
}

// scanMessages reads the array of messages that starts at data[i], and
// returns them and the offset after the array. It reads only what it can
// read as decodeMessages would without an error: each element an object
// that message.Message.UnmarshalJSON takes and that has contents; for
// anything else (null, another value, a syntax error, a message without
// contents) it reports false, for decodeMessages to answer.
func scanMessages(data []byte, i int) ([]message.Message, int, bool) {
	if !hasPrefixAt(data, i, "[") {
		return nil, 0, false
	}
	i = skipSpace(data, i+1)
	if hasPrefixAt(data, i, "]") {
		return []message.Message{}, i + 1, true // as decodeMessages makes it
	}
	var msgs []message.Message
	for {
		end, ok := objectEnd(data, i)
		if !ok {
			return nil, 0, false
		}
		var m message.Message
		// UnmarshalJSON refuses whatever is not one well-formed message,
		// so that objectEnd need only find where the object ends.
		if m.UnmarshalJSON(data[i:end]) != nil || len(m.Contents) == 0 {
			return nil, 0, false
		}
		msgs = append(msgs, m)
		i = skipSpace(data, end)
		switch {
		case hasPrefixAt(data, i, ","):
			i = skipSpace(data, i+1)
		case hasPrefixAt(data, i, "]"):
			return msgs, i + 1, true
		default:
			return nil, 0, false
		}
	}
}

// objectEnd returns the offset after the object that starts at data[i]:
// after the bracket that closes the one at data[i], counting brackets
// outside strings. It does not check the syntax between them.
func objectEnd(data []byte, i int) (int, bool) {
	if !hasPrefixAt(data, i, "{") {
		return 0, false
	}
	depth := 0
	for ; i < len(data); i++ {
		switch data[i] {
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1, true
			}
		case '"':
			// The string ends at the next quote that no backslash escapes.
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		}
	}
	return 0, false
}

// skipSpace returns the offset of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t') {
		i++
	}
	return i
}

// hasPrefixAt reports whether data[i:] starts with p.
func hasPrefixAt(data []byte, i int, p string) bool {
	return len(data)-i >= len(p) && string(data[i:i+len(p)]) == p
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
	b := make([]byte, 0, 40)
	b = append(b, '"')
	b = strconv.AppendInt(b, version, 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, rec.CreatedAt.UnixMicro(), 36)
	return string(append(b, '"'))
}

// setETag sets the ETag header of w to the tag of rec at version.
func setETag(w http.ResponseWriter, rec thread.Record, version int64) {
	// "Etag" is how http.Header.Set spells the key; set so, it need not
	// be made canonical on every answer.
	w.Header()["Etag"] = []string{etag(rec, version)}
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
