package worklog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/loomthreads/loom/internal/jsonguard"
)

// NormalizeOptions say what Normalize fills in.
type NormalizeOptions struct {
	// Session is the source_session of an item made from a plain string
	// or a legacy {"item", "context"} value: the session whose record held
	// it. Item objects keep theirs, or none.
	Session string
	// Time is the created_at of an item that has none, or one that is not
	// a time. Zero leaves it zero: unknown.
	Time time.Time
}

// Normalize turns one stored value, in any of the formats work items have
// had, into an item:
//
//   - a plain string "Fix the bug": a new open item with a fresh id and
//     that text;
//   - an item object {"id", "text", "status", "created_at", …}: kept as it
//     is;
//   - a JSON string of an item, '{"id":…,"text":…,"status":…}': parsed
//     and kept;
//   - an object or JSON string {"id", "note", "status", …}: note is the
//     text; created_at, resolved_at and source_session are kept;
//   - a legacy {"item", "context"} (object or JSON string): the text is
//     item;
//   - a string that starts with '{' but is not a JSON object with a text
//     (invalid JSON, say): a new item whose text is the whole string;
//   - a text that starts with an old "t-xxxx: " id prefix: the prefix is
//     stripped (and the id, if it has the form NewID makes, becomes the
//     id of an item that has none);
//   - an object whose text is itself the JSON of an item: unwrapped, the
//     inner item's id and text win, the outer one fills what it lacks, and
//     it is resolved if either is.
//
// A missing or malformed id becomes a fresh one (NewID; the caller checks
// it is unique among its items), a missing status is open (resolved if
// there is a resolved_at), a status other than open and resolved is open
// unless it is "resolved" in another case. Values that give no text —
// null, numbers, arrays, blank strings, objects without text, note or
// item — are ErrInvalid, as is nesting deeper than 8 levels, and text
// that is not UTF-8 (raw bytes, or \u escapes of lone surrogates, at any
// level), which decoding would store as U+FFFD.
func Normalize(v json.RawMessage, opts NormalizeOptions) (Item, error) {
	n := normalizer{opts: opts, strict: true}
	r, err := n.value(v, 0)
	if err != nil {
		return Item{}, err
	}
	return r.it, nil
}

// maxDepth bounds how many JSON texts may be nested in one another.
const maxDepth = 8

var errTooDeep = fmt.Errorf("worklog: item nested in more than %d JSON texts: %w", maxDepth, ErrInvalid)

// normalized is a value made an item.
type normalized struct {
	it Item
	// orig holds the fields as the object wrote them (times parsed, zero
	// if they could not be), when keep is set.
	orig Item
	// keep is set for an item object: a JSON object with a "text" string
	// and no key twice. Its JSON can be kept, with the fields that
	// normalization changed rewritten in place.
	keep bool
	// freshID and filledTime say that the id and created_at were not in
	// the value.
	freshID, filledTime bool
}

type normalizer struct {
	opts NormalizeOptions
	// newID makes fresh ids; nil means NewID.
	newID func() string
	// trusted says that the values are valid JSON, decoded already: they
	// are split without being checked again.
	trusted bool
	// strict refuses (ErrInvalid) values that are not UTF-8 — raw bytes,
	// or \u escapes of lone surrogates, at any level of nested JSON —
	// which decoding would turn into U+FFFD: what a caller gives. What is
	// stored already is read as it decodes.
	strict bool
}

// checkUTF8 returns an ErrInvalid error for JSON text that is not UTF-8,
// when n is strict.
func (n *normalizer) checkUTF8(raw []byte) error {
	if !n.strict {
		return nil
	}
	if err := jsonguard.Check(raw, 0); err != nil {
		return fmt.Errorf("worklog: %v: %w", err, ErrInvalid)
	}
	return nil
}

func (n *normalizer) id() string {
	if n.newID != nil {
		return n.newID()
	}
	return NewID()
}

func (n *normalizer) value(raw []byte, depth int) (normalized, error) {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return normalized{}, fmt.Errorf("worklog: empty value: %w", ErrInvalid)
	}
	if err := n.checkUTF8(raw); err != nil {
		return normalized{}, err
	}
	switch raw[0] {
	case '"':
		s, ok := "", false
		if n.trusted {
			s, ok = unquote(raw)
		}
		if !ok {
			if err := json.Unmarshal(raw, &s); err != nil {
				return normalized{}, fmt.Errorf("worklog: %v: %w", err, ErrInvalid)
			}
		}
		return n.str(s, depth)
	case '{':
		if n.trusted {
			if fields, ok := scanObject(raw); ok {
				return n.object(fields, depth)
			}
		}
		fields, err := objectFields(raw)
		if err != nil {
			return normalized{}, fmt.Errorf("worklog: %v: %w", err, ErrInvalid)
		}
		return n.object(fields, depth)
	}
	return normalized{}, fmt.Errorf("worklog: a stored item is a string or an object, not %.20s: %w", raw, ErrInvalid)
}

// str normalizes a string value: the JSON of an item, or a plain text.
func (n *normalizer) str(s string, depth int) (normalized, error) {
	text, pid := stripPrefix(s)
	if fields, ok := itemJSON(text); ok {
		if depth+1 >= maxDepth {
			return normalized{}, errTooDeep
		}
		if err := n.checkUTF8([]byte(text)); err != nil {
			return normalized{}, err
		}
		r, err := n.object(fields, depth+1)
		if err == nil || errors.Is(err, errTooDeep) {
			r.keep = false
			return r, err
		}
		// An object with a blank text: the string is the text.
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return normalized{}, fmt.Errorf("worklog: blank text: %w", ErrInvalid)
	}
	r := normalized{freshID: true, filledTime: true}
	r.it = Item{Text: text, Status: StatusOpen, CreatedAt: n.opts.Time, SourceSession: n.opts.Session}
	if itemID(pid) {
		r.it.ID, r.freshID = pid, false
	} else {
		r.it.ID = n.id()
	}
	return r, nil
}

// itemJSON reports whether s (trimmed) is a JSON object with a string
// text, note or item, and returns its fields.
func itemJSON(s string) ([]field, bool) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "{") {
		return nil, false
	}
	fields, err := objectFields([]byte(s))
	if err != nil {
		return nil, false
	}
	for _, f := range fields {
		switch f.key {
		case "text", "note", "item":
			var v string
			if json.Unmarshal(f.val, &v) == nil {
				return fields, true
			}
		}
	}
	return nil, false
}

// The members of an item object that normalization reads.
const (
	kID = iota
	kText
	kNote
	kItem
	kStatus
	kCreatedAt
	kResolvedAt
	kSourceSession
	kResolvedBySession
	kResolutionNote
	nKeys
)

var knownKeys = map[string]int{
	"id": kID, "text": kText, "note": kNote, "item": kItem, "status": kStatus, "created_at": kCreatedAt,
	"resolved_at": kResolvedAt, "source_session": kSourceSession, "resolved_by_session": kResolvedBySession,
	"resolution_note": kResolutionNote,
}

// object normalizes a JSON object.
func (n *normalizer) object(fields []field, depth int) (normalized, error) {
	var (
		get   [nKeys]string
		isStr [nKeys]bool
		seen  [nKeys]bool
		twice bool
	)
	for _, f := range fields {
		k, ok := knownKeys[f.key]
		if !ok {
			continue
		}
		if seen[k] {
			twice = true
			continue
		}
		seen[k] = true
		get[k], isStr[k] = unquote(f.val)
	}
	src := -1
	for _, k := range []int{kText, kNote, kItem} {
		if isStr[k] && strings.TrimSpace(get[k]) != "" {
			src = k
			break
		}
	}
	if src < 0 {
		return normalized{}, fmt.Errorf("worklog: item object without a text, note or item: %w", ErrInvalid)
	}
	var r normalized
	r.keep = src == kText && !twice
	r.orig = Item{
		ID:                get[kID],
		Text:              get[kText],
		Status:            Status(get[kStatus]),
		SourceSession:     get[kSourceSession],
		ResolvedBySession: get[kResolvedBySession],
		ResolutionNote:    get[kResolutionNote],
	}
	if get[kCreatedAt] != "" {
		r.orig.CreatedAt, _ = parseTime(get[kCreatedAt])
	}
	if get[kResolvedAt] != "" {
		r.orig.ResolvedAt, _ = parseTime(get[kResolvedAt])
	}

	it := r.orig
	it.Text = get[src]
	if src == kItem && it.SourceSession == "" {
		it.SourceSession = n.opts.Session
	}
	switch {
	case it.Status == StatusOpen || it.Status == StatusResolved:
	case strings.EqualFold(string(it.Status), string(StatusResolved)):
		it.Status = StatusResolved
	case it.Status == "" && !it.ResolvedAt.IsZero():
		it.Status = StatusResolved
	default:
		it.Status = StatusOpen
	}
	if it.CreatedAt.IsZero() {
		it.CreatedAt, r.filledTime = n.opts.Time, true
	}

	text, pid := stripPrefix(it.Text)
	if text != it.Text {
		if it.Text = strings.TrimSpace(text); it.Text == "" {
			return normalized{}, fmt.Errorf("worklog: blank text: %w", ErrInvalid)
		}
	}
	if !validID(it.ID) {
		if itemID(pid) {
			it.ID = pid
		} else {
			it.ID, r.freshID = n.id(), true
		}
	}

	// A text that is itself an item: the inner one, filled in from this.
	if inner, ok := itemJSON(it.Text); ok {
		if depth+1 >= maxDepth {
			return normalized{}, errTooDeep
		}
		if err := n.checkUTF8([]byte(it.Text)); err != nil {
			return normalized{}, err
		}
		in, err := n.object(inner, depth+1)
		if errors.Is(err, errTooDeep) {
			return normalized{}, err
		}
		if err == nil {
			if in.freshID && !r.freshID {
				in.it.ID, in.freshID = it.ID, false
			}
			if in.filledTime && !r.filledTime {
				in.it.CreatedAt, in.filledTime = it.CreatedAt, false
			}
			if in.it.SourceSession == "" {
				in.it.SourceSession = it.SourceSession
			}
			if in.it.Open() && !it.Open() {
				in.it.Status, in.it.ResolvedAt = it.Status, it.ResolvedAt
				in.it.ResolvedBySession, in.it.ResolutionNote = it.ResolvedBySession, it.ResolutionNote
			}
			in.keep = false
			return in, nil
		}
	}
	r.it = it
	return r, nil
}

// stripPrefix strips the old "t-xxxx: " id prefixes (t-, 4 to 16 hex
// digits, a colon and white space) from the start of s and returns what
// is left and the last id stripped, in lower case ("" if none). s is
// returned as it is if it has none.
func stripPrefix(s string) (rest, id string) {
	rest = s
	for {
		t := strings.TrimLeftFunc(rest, unicode.IsSpace)
		if !strings.HasPrefix(t, "t-") {
			return rest, id
		}
		i := 2
		for i < len(t) && i < 2+16 && isHex(t[i]) {
			i++
		}
		if i < 2+4 || i >= len(t) || t[i] != ':' || i+1 >= len(t) || !isSpaceByte(t[i+1]) {
			return rest, id
		}
		id = strings.ToLower(t[:i])
		rest = t[i+1:]
	}
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func isSpaceByte(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
