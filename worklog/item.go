package worklog

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Status is an item's state: open until it is resolved.
type Status string

// The statuses of an item.
const (
	StatusOpen     Status = "open"
	StatusResolved Status = "resolved"
)

// The limits on what Create, Resolve and SessionClose accept, in
// characters (Unicode code points). Items read from storage are kept
// whatever their length.
const (
	MaxTextLen = 3000
	MaxNoteLen = 1000
)

// ProjectStatePrefix starts the text of an item that records the state of
// a project rather than open work ("PROJECT STATE: loom: …"). Lists and
// aggregation leave such items out; SessionStart returns them apart.
const ProjectStatePrefix = "PROJECT STATE:"

// Item is a work item: something open — unresolved, blocked, to follow up
// — that is carried from session to session until it is resolved. Its
// JSON is the seed's ThreadObject, the elements of .gitmem/threads.json:
//
//	{"id": "t-05a7ecb6", "text": "…", "status": "open",
//	 "created_at": "2026-02-09T18:12:01.097Z", "source_session": "…"}
//
// with resolved_at, resolved_by_session and resolution_note once it is
// resolved. Empty fields and zero times are left out; times are written
// in UTC with milliseconds, as JavaScript's toISOString does.
//
// The struct tags name the same fields, for schema generators (an MCP
// tool's output schema); MarshalJSON and UnmarshalJSON do the encoding.
type Item struct {
	// ID is "t-" and 8 lower-case hex digits for items made here; items
	// read from storage keep theirs.
	ID string `json:"id"`
	// Text says what is open.
	Text string `json:"text"`
	// Status is StatusOpen or StatusResolved.
	Status Status `json:"status"`
	// CreatedAt is when the item was created; zero if unknown (a plain
	// string from an old session record).
	CreatedAt time.Time `json:"created_at,omitzero"`
	// ResolvedAt is when the item was resolved, zero while it is open.
	ResolvedAt time.Time `json:"resolved_at,omitzero"`
	// SourceSession is the id of the session that created the item, "" if
	// none.
	SourceSession string `json:"source_session,omitzero"`
	// ResolvedBySession is the id of the session that resolved it.
	ResolvedBySession string `json:"resolved_by_session,omitzero"`
	// ResolutionNote says how it was resolved.
	ResolutionNote string `json:"resolution_note,omitzero"`
}

// Open reports whether the item is open (anything but resolved).
func (it Item) Open() bool { return it.Status != StatusResolved }

// ProjectState reports whether the item records a project's state: its
// text starts with ProjectStatePrefix.
func (it Item) ProjectState() bool {
	return strings.HasPrefix(strings.TrimLeftFunc(it.Text, unicode.IsSpace), ProjectStatePrefix)
}

// equal reports whether a and b are the same in every field, times
// compared as instants.
func (a Item) equal(b Item) bool {
	return a.ID == b.ID && a.Text == b.Text && a.Status == b.Status &&
		a.CreatedAt.Equal(b.CreatedAt) && a.ResolvedAt.Equal(b.ResolvedAt) &&
		a.SourceSession == b.SourceSession && a.ResolvedBySession == b.ResolvedBySession &&
		a.ResolutionNote == b.ResolutionNote
}

// MarshalJSON encodes the item as the seed does, fields in the seed's
// order.
func (it Item) MarshalJSON() ([]byte, error) {
	return appendItem(nil, it, ""), nil
}

// UnmarshalJSON decodes an item object. Field names must match exactly;
// other fields are ignored. Times may be any RFC 3339 form. It does not
// normalize: see Normalize for the older formats.
func (it *Item) UnmarshalJSON(b []byte) error {
	fields, err := objectFields(b)
	if err != nil {
		return err
	}
	var out Item
	for _, f := range fields {
		var s string
		if json.Unmarshal(f.val, &s) != nil {
			continue
		}
		switch f.key {
		case "id":
			out.ID = s
		case "text":
			out.Text = s
		case "status":
			out.Status = Status(s)
		case "created_at":
			if out.CreatedAt, err = parseTime(s); err != nil {
				return fmt.Errorf("created_at: %w", err)
			}
		case "resolved_at":
			if out.ResolvedAt, err = parseTime(s); err != nil {
				return fmt.Errorf("resolved_at: %w", err)
			}
		case "source_session":
			out.SourceSession = s
		case "resolved_by_session":
			out.ResolvedBySession = s
		case "resolution_note":
			out.ResolutionNote = s
		}
	}
	*it = out
	return nil
}

// NewID returns a new random item id: "t-" and 8 lower-case hex digits.
// Callers that add it to a list check that no item has it already.
func NewID() string {
	var b [4]byte
	rand.Read(b[:])
	return "t-" + hex.EncodeToString(b[:])
}

// validID reports whether id can be kept as an item's id: 1 to 64 ASCII
// letters, digits, '.', '_' or '-'. Items made here have "t-" and 8 hex
// digits; older tools wrote other forms, which are kept.
func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// itemID reports whether s is an id in the form NewID makes.
func itemID(s string) bool {
	if len(s) != 10 || s[:2] != "t-" {
		return false
	}
	for i := 2; i < 10; i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// checkSessionID returns an ErrInvalid error unless s can name a
// session: 1 to 128 ASCII letters, digits, '.', '_', ':' or '-' (a UUID,
// say).
func checkSessionID(s string) error { return checkSessionIDLen(s, maxSessionID) }

// checkSessionIDLen is checkSessionID with max bytes instead of 128 (a
// store's limit, see checkSession); the message names a Log's limit.
func checkSessionIDLen(s string, max int) error {
	ok := s != "" && len(s) <= max
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-'
	}
	if !ok {
		return fmt.Errorf("worklog: session id %q: want 1 to 128 letters, digits, '.', '_', ':' or '-': %w", shorten(s, 140), ErrInvalid)
	}
	return nil
}

// maxSessionID is the longest session id.
const maxSessionID = 128

// newSessionID returns a random (version 4) UUID.
func newSessionID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// NormalizeText returns the key under which texts are compared for
// duplicates: lower case, runs of white space made one space, trimmed, and
// trailing '.', '!', '?', ';' and ':' removed. "Fix the  bug." and "fix the
// bug" have the same key.
func NormalizeText(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return strings.TrimRight(b.String(), ".!?;: ")
}

// checkLen returns an ErrInvalid error if s has more than max characters
// or is not UTF-8.
func checkLen(what, s string, max int) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("worklog: %s is not valid UTF-8: %w", what, ErrInvalid)
	}
	if n := utf8.RuneCountInString(s); n > max {
		return fmt.Errorf("worklog: %s has %d characters, over the limit of %d: %w", what, n, max, ErrInvalid)
	}
	return nil
}

// jsTime is the layout of JavaScript's Date.prototype.toISOString.
const jsTime = "2006-01-02T15:04:05.000Z"

// formatTime formats t in UTC as toISOString does, or with all its
// digits if it has more precision than milliseconds.
func formatTime(t time.Time) string {
	t = t.UTC()
	if t.Nanosecond()%int(time.Millisecond) != 0 {
		return t.Format(time.RFC3339Nano)
	}
	return t.Format(jsTime)
}

// parseTime parses an RFC 3339 time (with or without fraction; a missing
// zone means UTC; "2006-01-02" alone is midnight UTC) and returns it in
// UTC.
func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("worklog: time %q is not RFC 3339: %w", s, ErrInvalid)
}

// appendItem appends the item's JSON, fields in the seed's order (the
// order in which the seed's code adds them to an object). indent "" is
// compact; otherwise the object is written as JSON.stringify(x, null, 2)
// writes an element of the top array, each field on a line that starts
// with indent twice, the braces with indent once (the opening one
// without it: callers write it).
func appendItem(b []byte, it Item, indent string) []byte {
	w := objWriter{b: append(b, '{'), indent: indent}
	w.str("id", it.ID)
	w.str("text", it.Text)
	w.str("status", string(it.Status))
	if !it.CreatedAt.IsZero() {
		w.str("created_at", formatTime(it.CreatedAt))
	}
	if it.SourceSession != "" {
		w.str("source_session", it.SourceSession)
	}
	if !it.ResolvedAt.IsZero() {
		w.str("resolved_at", formatTime(it.ResolvedAt))
	}
	if it.ResolvedBySession != "" {
		w.str("resolved_by_session", it.ResolvedBySession)
	}
	if it.ResolutionNote != "" {
		w.str("resolution_note", it.ResolutionNote)
	}
	return w.end()
}

// objWriter writes a JSON object field by field.
type objWriter struct {
	b      []byte
	indent string
	n      int
}

func (w *objWriter) sep() {
	if w.n > 0 {
		w.b = append(w.b, ',')
	}
	w.n++
	if w.indent != "" {
		w.b = append(w.b, '\n')
		w.b = append(w.b, w.indent...)
		w.b = append(w.b, w.indent...)
	}
}

func (w *objWriter) key(k string) {
	w.sep()
	w.b = appendString(w.b, k)
	w.b = append(w.b, ':')
	if w.indent != "" {
		w.b = append(w.b, ' ')
	}
}

func (w *objWriter) str(k, v string) {
	w.key(k)
	w.b = appendString(w.b, v)
}

func (w *objWriter) raw(k string, v []byte) {
	w.key(k)
	w.b = append(w.b, v...)
}

func (w *objWriter) end() []byte {
	if w.indent != "" && w.n > 0 {
		w.b = append(w.b, '\n')
		w.b = append(w.b, w.indent...)
	}
	return append(w.b, '}')
}

// appendString appends s as a JSON string escaped as JSON.stringify does:
// '"', '\\' and control characters only (\b \t \n \f \r by name, the
// others as \u00xx), everything else as it is. Invalid UTF-8 becomes
// U+FFFD.
func appendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, s[start:i]...)
				b = append(b, "\ufffd"...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\f':
			b = append(b, '\\', 'f')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// field is one member of a JSON object, in the order of the text.
type field struct {
	key string
	val json.RawMessage
}

// objectFields splits a JSON object into its members, in order, keys
// exactly as written (encoding/json would match them without regard to
// case). Duplicate keys are kept.
func objectFields(b []byte) ([]field, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil {
		return nil, err
	} else if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("worklog: not a JSON object: %w", ErrInvalid)
	}
	var fields []field
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		fields = append(fields, field{k, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("worklog: data after the JSON object: %w", ErrInvalid)
	}
	return fields, nil
}
