package message

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loomthreads/loom/internal/ids"
)

// Role says who a message comes from. The four roles below are the ones
// providers know; any other lowercase word is kept as it is.
type Role string

// The roles providers know.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of a thread.
type Message struct {
	// ID names the message within its thread. A thread gives a message
	// without an id a fresh one when it is appended.
	ID string
	// Role says who the message comes from.
	Role Role
	// AuthorName optionally names the author: an agent in a workflow, a
	// user in a group chat.
	AuthorName string
	// Contents are the parts of the message, in order.
	Contents []Content
	// CreatedAt is when the message was made. A thread sets it when it is
	// zero at append time.
	CreatedAt time.Time
	// Metadata is free-form data that travels with the message. Values are
	// whatever encoding/json makes of the JSON: strings, json.Number, bool,
	// nil, []any and map[string]any; Validate also accepts Go integers and
	// finite floats, and refuses anything else.
	Metadata map[string]any
}

// NewID returns a fresh message id.
func NewID() string { return ids.New("msg_") }

// NewIDAt returns a fresh message id whose time part is t.
func NewIDAt(t time.Time) string { return ids.NewAt("msg_", t) }

// New returns a message with the given role and contents.
func New(role Role, contents ...Content) Message {
	return Message{Role: role, Contents: contents}
}

// System returns a system (instructions) message with the given text.
func System(text string) Message { return New(RoleSystem, Text{Text: text}) }

// User returns a user message with the given text.
func User(text string) Message { return New(RoleUser, Text{Text: text}) }

// Assistant returns an assistant message with the given text.
func Assistant(text string) Message { return New(RoleAssistant, Text{Text: text}) }

// ToolCall returns an assistant message that calls the tool name with the
// given arguments (JSON text, as a model writes it). Use New with several
// FunctionCall contents for parallel calls.
func ToolCall(callID, name, arguments string) Message {
	return New(RoleAssistant, FunctionCall{CallID: callID, Name: name, Arguments: arguments})
}

// ToolResult returns a tool message that carries the result of the call
// callID.
func ToolResult(callID, result string) Message {
	return New(RoleTool, FunctionResult{CallID: callID, Result: result})
}

// ToolError returns a tool message that reports that the call callID failed.
func ToolError(callID, reason string) Message {
	return New(RoleTool, FunctionResult{CallID: callID, Result: reason, IsError: true})
}

// Text returns the concatenated text of the message's Text contents.
func (m Message) Text() string {
	var b strings.Builder
	for _, c := range m.Contents {
		if t, ok := c.(Text); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// Calls returns the message's function calls.
func (m Message) Calls() []FunctionCall {
	var out []FunctionCall
	for _, c := range m.Contents {
		if fc, ok := c.(FunctionCall); ok {
			out = append(out, fc)
		}
	}
	return out
}

// Results returns the message's function results.
func (m Message) Results() []FunctionResult {
	var out []FunctionResult
	for _, c := range m.Contents {
		if fr, ok := c.(FunctionResult); ok {
			out = append(out, fr)
		}
	}
	return out
}

// Clone returns a deep copy of m: changing the copy never changes m.
func (m Message) Clone() Message {
	if m.Contents != nil {
		cs := make([]Content, len(m.Contents))
		for i, c := range m.Contents {
			switch v := c.(type) {
			case Data:
				v.Data = cloneBytes(v.Data)
				cs[i] = v
			case Unknown:
				v.Raw = cloneBytes(v.Raw)
				cs[i] = v
			default:
				cs[i] = c // the other variants hold only strings and numbers
			}
		}
		m.Contents = cs
	}
	if m.Metadata != nil {
		m.Metadata = (&walk{left: maxNodes}).clone(m.Metadata, 0).(map[string]any)
	}
	return m
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// walk bounds a walk of a metadata value: Go callers can build values
// that JSON cannot hold, cyclic or exponentially shared, which a plain
// recursion would follow for ever.
type walk struct{ left int }

// maxNodes is how many values a walk visits at most: more than a message
// within any size limit holds.
const maxNodes = 1 << 21

// enter counts a value at depth and reports whether the walk may go on.
func (w *walk) enter(depth int) bool {
	w.left--
	return w.left >= 0 && depth < maxDepth
}

// clone copies a metadata value; past the walk's bounds (only a value
// Validate refuses goes that far) it shares what is left.
func (w *walk) clone(v any, depth int) any {
	if !w.enter(depth) {
		return v
	}
	switch v := v.(type) {
	case map[string]any:
		out := maps.Clone(v)
		for k, x := range out {
			out[k] = w.clone(x, depth+1)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = w.clone(x, depth+1)
		}
		return out
	default:
		return v
	}
}

// Size returns about how many bytes the message takes: the lengths of its
// strings and raw JSON plus a small overhead per part. It is what size limits
// are checked against, and costs no encoding.
//
// It measures the message as a thread stores it, so that one message has one
// size wherever it is checked (appended, loaded from a document, compared
// with a limit before a commit): a message without an id counts the id a
// thread gives it, and a number in Metadata counts the digits it is written
// with, which is what it reads back as.
func (m Message) Size() int {
	n := 64 + len(m.ID) + len(m.Role) + len(m.AuthorName)
	if m.ID == "" {
		n += newIDLen
	}
	for _, c := range m.Contents {
		n += 16 + contentSize(c)
	}
	w := &walk{left: maxNodes}
	for k, v := range m.Metadata {
		n += 8 + len(k) + w.size(v, 0)
	}
	return n
}

func contentSize(c Content) int {
	switch v := c.(type) {
	case Text:
		return len(v.Text)
	case FunctionCall:
		return len(v.CallID) + len(v.Name) + len(v.Arguments)
	case FunctionResult:
		return len(v.CallID) + len(v.Result)
	case Data:
		return len(v.MediaType) + len(v.URI) + len(v.Name) + (len(v.Data)+2)/3*4
	case Reasoning:
		return len(v.Text) + len(v.Protected)
	case Usage:
		return 48
	case Error:
		return len(v.Code) + len(v.Message)
	case Unknown:
		return len(v.Raw) + escapeGrowth(v.Raw)
	}
	return 0
}

// escapeGrowth is how much longer raw gets when it is written in canonical
// form (see Unknown): <, > and & become \u003c and its kind, U+2028 and
// U+2029 \u2028 and \u2029. Counting it makes an Unknown that a caller
// built measure what it reads back as. (Whitespace that canonical form
// drops still counts: a message only gets smaller on the way.)
func escapeGrowth(raw []byte) int {
	n := 0
	for i, c := range raw {
		switch {
		case c == '<' || c == '>' || c == '&':
			n += 5
		case c == 0xE2 && i+2 < len(raw) && raw[i+1] == 0x80 && (raw[i+2] == 0xA8 || raw[i+2] == 0xA9):
			n += 3
		}
	}
	return n
}

// size is the size of a metadata value; past the walk's bounds it counts
// what is left as too large for any limit.
func (w *walk) size(v any, depth int) int {
	if !w.enter(depth) {
		return math.MaxInt32
	}
	switch v := v.(type) {
	case string:
		return len(v) + 2
	case map[string]any:
		if v == nil {
			return len("null")
		}
		n := 2
		for k, x := range v {
			n += len(k) + 4 + w.size(x, depth+1)
		}
		return n
	case []any:
		if v == nil {
			return len("null")
		}
		n := 2
		for _, x := range v {
			n += 1 + w.size(x, depth+1)
		}
		return n
	case json.Number:
		return max(len(v), 1) // "" is written as 0
	case nil:
		return len("null")
	case bool:
		if v {
			return len("true")
		}
		return len("false")
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return numberLen(v)
	case fmt.Stringer:
		return len(v.String())
	default:
		return 8
	}
}

// newIDLen is the length of the ids NewID makes.
var newIDLen = len(NewID())

// numberLen returns the length of a Go number as encoding/json writes it:
// the length of the json.Number it reads back as.
func numberLen(v any) int {
	var buf [40]byte
	b := buf[:0]
	switch v := v.(type) {
	case int:
		b = strconv.AppendInt(b, int64(v), 10)
	case int8:
		b = strconv.AppendInt(b, int64(v), 10)
	case int16:
		b = strconv.AppendInt(b, int64(v), 10)
	case int32:
		b = strconv.AppendInt(b, int64(v), 10)
	case int64:
		b = strconv.AppendInt(b, v, 10)
	case uint:
		b = strconv.AppendUint(b, uint64(v), 10)
	case uint8:
		b = strconv.AppendUint(b, uint64(v), 10)
	case uint16:
		b = strconv.AppendUint(b, uint64(v), 10)
	case uint32:
		b = strconv.AppendUint(b, uint64(v), 10)
	case uint64:
		b = strconv.AppendUint(b, v, 10)
	case float32:
		b = appendFloat(b, float64(v), 32)
	case float64:
		b = appendFloat(b, v, 64)
	}
	return len(b)
}

// appendFloat appends f as encoding/json writes it.
func appendFloat(b []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...) // Validate refuses it; any length will do
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21)) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// MaxRoleLen is the longest role Validate accepts.
const MaxRoleLen = 32

// Validate reports what is wrong with m, if anything: an id that is not a
// valid loom id, a missing or malformed role, a CreatedAt that RFC 3339 cannot
// write (a year outside 0 to 9999, an offset of a day or more), a string (in
// a content or in Metadata) that is not UTF-8, a content that is nil or not
// one of the variants (such as a *Text), a function call without a call id or
// name, a function result without a call id, or an Unknown whose raw JSON has
// no type or has the type of a known variant.
func (m Message) Validate() error {
	var errs []error
	if m.ID != "" && !ids.Valid(m.ID) {
		errs = append(errs, fmt.Errorf("id %q: not a valid id", truncate(m.ID)))
	}
	if !validRole(m.Role) {
		errs = append(errs, fmt.Errorf("role %q: want a lowercase word such as user or assistant", truncate(string(m.Role))))
	}
	if !utf8.ValidString(m.AuthorName) {
		errs = append(errs, errors.New("author_name: not UTF-8"))
	}
	if !m.CreatedAt.IsZero() {
		if _, err := m.CreatedAt.MarshalJSON(); err != nil {
			errs = append(errs, fmt.Errorf("created_at: %w", err))
		}
	}
	for i, c := range m.Contents {
		if err := validateContent(c); err != nil {
			errs = append(errs, fmt.Errorf("contents[%d]: %w", i, err))
		}
	}
	w := &walk{left: maxNodes}
	for k, v := range m.Metadata {
		if !utf8.ValidString(k) {
			errs = append(errs, errors.New("metadata: a key is not UTF-8"))
		} else if err := w.valid(v, 0); err != nil {
			errs = append(errs, fmt.Errorf("metadata %q: %v", truncate(k), err))
		}
	}
	return errors.Join(errs...)
}

func validRole(r Role) bool {
	if len(r) == 0 || len(r) > MaxRoleLen {
		return false
	}
	for i := 0; i < len(r); i++ {
		if c := r[i]; (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}

func validateContent(c Content) error {
	switch v := c.(type) {
	case nil:
		return errors.New("nil content")
	case Text:
		if !utf8.ValidString(v.Text) {
			return errors.New("text: not UTF-8")
		}
	case FunctionCall:
		if v.CallID == "" || v.Name == "" {
			return errors.New("function_call: call_id and name are required")
		}
		if !utf8.ValidString(v.Arguments) || !utf8.ValidString(v.Name) || !utf8.ValidString(v.CallID) {
			return errors.New("function_call: not UTF-8")
		}
	case FunctionResult:
		if v.CallID == "" {
			return errors.New("function_result: call_id is required")
		}
		if !utf8.ValidString(v.Result) || !utf8.ValidString(v.CallID) {
			return errors.New("function_result: not UTF-8")
		}
	case Data:
		if !utf8.ValidString(v.MediaType) || !utf8.ValidString(v.URI) || !utf8.ValidString(v.Name) {
			return errors.New("data: not UTF-8")
		}
	case Reasoning:
		if !utf8.ValidString(v.Text) || !utf8.ValidString(v.Protected) {
			return errors.New("reasoning: not UTF-8")
		}
	case Usage:
	case Error:
		if !utf8.ValidString(v.Code) || !utf8.ValidString(v.Message) {
			return errors.New("error: not UTF-8")
		}
	case Unknown:
		t, err := unknownType(v.Raw)
		if err != nil {
			return err
		}
		if knownType(t) {
			return fmt.Errorf("unknown content of known type %q", truncate(t))
		}
		if !utf8.Valid(v.Raw) {
			return fmt.Errorf("%s: not UTF-8", truncate(t))
		}
	default:
		return fmt.Errorf("content type %T is not a loom content", c)
	}
	return nil
}

// valid accepts what JSON can hold and Clone can copy: the types
// encoding/json decodes into (with json.Number), finite floats and
// integers, with every string and map key UTF-8 (encoding/json would
// write any other as U+FFFD), within the walk's bounds.
func (w *walk) valid(v any, depth int) error {
	if !w.enter(depth) {
		return fmt.Errorf("deeper than %d levels or more than %d values (a cycle?)", maxDepth, maxNodes)
	}
	switch v := v.(type) {
	case nil, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return errors.New("not a finite number")
		}
	case float32:
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return errors.New("not a finite number")
		}
	case json.Number:
		if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) || !json.Valid([]byte(v)) {
			return fmt.Errorf("json.Number %q is not a number", truncate(string(v)))
		}
	case string:
		if !utf8.ValidString(v) {
			return errors.New("not UTF-8")
		}
	case map[string]any:
		for k, x := range v {
			if !utf8.ValidString(k) {
				return errors.New("a key is not UTF-8")
			}
			if err := w.valid(x, depth+1); err != nil {
				return err
			}
		}
	case []any:
		for _, x := range v {
			if err := w.valid(x, depth+1); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("a %T; metadata holds JSON values (string, number, bool, nil, []any, map[string]any)", v)
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
