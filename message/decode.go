package message

import (
	"encoding/base64"
	"encoding/json"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// decoder reads messages and contents in the shapes MarshalJSON writes, with
// any whitespace between tokens, about ten times faster than encoding/json.
// encoding/json stays the reference: Message.UnmarshalJSON and
// UnmarshalContent try decoder first and fall back to encoding/json whenever
// it gives up. It gives up on whatever it does not read exactly as
// encoding/json would: a member it does not know or has already seen (it
// matches keys exactly, encoding/json ignores case), invalid UTF-8 (which
// encoding/json replaces by U+FFFD), a value of the wrong type, a syntax
// error. So a message decoder reads is the message encoding/json reads, and
// every error comes from encoding/json. A content decoder gives up on, such
// as an Unknown, is read by encoding/json alone, and the rest of the message
// stays on the fast path. FuzzDecoder checks decoder against encoding/json.
type decoder struct {
	data []byte
	off  int
	buf  []byte // unescaped strings
}

// maxDepth bounds the nesting decoder skips through; encoding/json refuses
// more than 10000, and decoder leaves anything deeper than maxDepth to it.
const maxDepth = 1000

// decodeMessage reads a message, or reports false if the decoder gives up.
func decodeMessage(b []byte) (Message, bool) {
	var m Message
	d := decoder{data: b}
	d.ws()
	if !d.consume('{') {
		return Message{}, false
	}
	var seen uint8
	d.ws()
	if !d.consume('}') {
		for {
			key, ok := d.key()
			if !ok {
				return Message{}, false
			}
			var bit uint8
			switch string(key) {
			case "id":
				bit = 1 << 0
				m.ID, ok = d.string()
			case "role":
				bit = 1 << 1
				m.Role, ok = d.role()
			case "author_name":
				bit = 1 << 2
				m.AuthorName, ok = d.string()
			case "contents":
				bit = 1 << 3
				m.Contents, ok = d.contents()
			case "created_at":
				bit = 1 << 4
				m.CreatedAt, ok = d.time()
			case "metadata":
				bit = 1 << 5
				m.Metadata, ok = d.metadata()
			}
			if bit == 0 || !ok || seen&bit != 0 {
				return Message{}, false
			}
			seen |= bit
			more, ok := d.next('}')
			if !ok {
				return Message{}, false
			}
			if !more {
				break
			}
		}
	}
	d.ws()
	if d.off != len(d.data) {
		return Message{}, false
	}
	return m, true
}

// decodeContent reads one content, or reports false if the decoder gives up.
func decodeContent(b []byte) (Content, bool) {
	d := decoder{data: b}
	d.ws()
	c, ok := d.content()
	d.ws()
	return c, ok && d.off == len(d.data)
}

// contents reads the array of contents, or null.
func (d *decoder) contents() ([]Content, bool) {
	if d.null() {
		return nil, true
	}
	if !d.consume('[') {
		return nil, false
	}
	d.ws()
	if d.consume(']') {
		return nil, true // as encoding/json reads it: no contents
	}
	var small [4]Content
	cs := small[:0]
	for {
		start := d.off
		c, ok := d.content()
		if !ok {
			d.off = start
			if !d.skip(0) {
				return nil, false
			}
			var err error
			if c, err = unmarshalContentStd(d.data[start:d.off]); err != nil {
				return nil, false
			}
		}
		cs = append(cs, c)
		more, ok := d.next(']')
		if !ok {
			return nil, false
		}
		if !more {
			break
		}
	}
	return append(make([]Content, 0, len(cs)), cs...), true
}

// The members of the known contents, as bits of a set.
const (
	fText = 1 << iota
	fCallID
	fName
	fArguments
	fResult
	fIsError
	fMediaType
	fURI
	fData
	fProtected
	fInputTokens
	fOutputTokens
	fTotalTokens
	fCachedInputTokens
	fReasoningTokens
	fCode
	fMessage
)

// content reads a content of a known type, and gives up on any other.
func (d *decoder) content() (Content, bool) {
	if !d.consume('{') {
		return nil, false
	}
	var (
		typ                                   []byte
		text, callID, name, arguments, result string
		mediaType, uri, protected, code, msg  string
		isError                               bool
		data                                  []byte
		in, out, total, cached, reasoning     int64
		set                                   uint32
	)
	d.ws()
	if !d.consume('}') {
		for {
			key, ok := d.key()
			if !ok {
				return nil, false
			}
			var bit uint32
			switch string(key) {
			case "type":
				if typ != nil || d.off >= len(d.data) || d.data[d.off] != '"' {
					return nil, false
				}
				// typ must outlive the next string read, so it may not
				// be in d.buf: escaped types are left to encoding/json.
				start := d.off
				typ, ok = d.str()
				ok = ok && d.off-start == len(typ)+2
			case "text":
				bit = fText
				text, ok = d.string()
			case "call_id":
				bit = fCallID
				callID, ok = d.string()
			case "name":
				bit = fName
				name, ok = d.string()
			case "arguments":
				bit = fArguments
				arguments, ok = d.string()
			case "result":
				bit = fResult
				result, ok = d.string()
			case "is_error":
				bit = fIsError
				isError, ok = d.bool()
			case "media_type":
				bit = fMediaType
				mediaType, ok = d.string()
			case "uri":
				bit = fURI
				uri, ok = d.string()
			case "data":
				bit = fData
				data, ok = d.bytes()
			case "protected":
				bit = fProtected
				protected, ok = d.string()
			case "input_tokens":
				bit = fInputTokens
				in, ok = d.int()
			case "output_tokens":
				bit = fOutputTokens
				out, ok = d.int()
			case "total_tokens":
				bit = fTotalTokens
				total, ok = d.int()
			case "cached_input_tokens":
				bit = fCachedInputTokens
				cached, ok = d.int()
			case "reasoning_tokens":
				bit = fReasoningTokens
				reasoning, ok = d.int()
			case "code":
				bit = fCode
				code, ok = d.string()
			case "message":
				bit = fMessage
				msg, ok = d.string()
			default:
				return nil, false
			}
			if !ok || set&bit != 0 {
				return nil, false
			}
			set |= bit
			more, ok := d.next('}')
			if !ok {
				return nil, false
			}
			if !more {
				break
			}
		}
	}
	// A member of another variant is ignored by encoding/json if it has
	// the wrong type, and might match a member of this one in another
	// case: leave such contents to it.
	var c Content
	var allowed uint32
	switch string(typ) {
	case "text":
		c, allowed = Text{Text: text}, fText
	case "function_call":
		c, allowed = FunctionCall{CallID: callID, Name: name, Arguments: arguments}, fCallID|fName|fArguments
	case "function_result":
		c, allowed = FunctionResult{CallID: callID, Result: result, IsError: isError}, fCallID|fResult|fIsError
	case "data":
		c, allowed = Data{MediaType: mediaType, URI: uri, Data: data, Name: name}, fMediaType|fURI|fData|fName
	case "reasoning":
		c, allowed = Reasoning{Text: text, Protected: protected}, fText|fProtected
	case "usage":
		c = Usage{InputTokens: in, OutputTokens: out, TotalTokens: total, CachedInputTokens: cached, ReasoningTokens: reasoning}
		allowed = fInputTokens | fOutputTokens | fTotalTokens | fCachedInputTokens | fReasoningTokens
	case "error":
		c, allowed = Error{Code: code, Message: msg}, fCode|fMessage
	default:
		return nil, false // missing, empty or unknown type
	}
	if set&^allowed != 0 {
		return nil, false
	}
	return c, true
}

// time reads created_at: a string time.Time reads, or null.
func (d *decoder) time() (time.Time, bool) {
	var t time.Time
	if d.null() {
		return t, true
	}
	start := d.off
	if !d.skipString() || t.UnmarshalJSON(d.data[start:d.off]) != nil {
		return t, false
	}
	// The check unmarshalJSONStd makes: a time in UTC was read from a
	// four-digit year and "Z", which MarshalJSON always writes back.
	if t.Location() != time.UTC {
		if _, err := t.MarshalJSON(); err != nil {
			return t, false
		}
	}
	return t, true
}

// metadata reads the metadata object, or null, as encoding/json reads it
// into a map[string]any with UseNumber.
func (d *decoder) metadata() (map[string]any, bool) {
	if d.null() {
		return nil, true
	}
	if d.off >= len(d.data) || d.data[d.off] != '{' {
		return nil, false
	}
	v, ok := d.any(0)
	if !ok {
		return nil, false
	}
	return v.(map[string]any), true
}

// any reads any value into what encoding/json makes of it in an any, with
// json.Number for numbers; a member that comes twice keeps its last value.
func (d *decoder) any(depth int) (any, bool) {
	if d.off >= len(d.data) {
		return nil, false
	}
	switch d.data[d.off] {
	case '"':
		return d.string()
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	case 'n':
		return nil, d.literal("null")
	case '{':
		if depth >= maxDepth {
			return nil, false
		}
		d.off++
		m := make(map[string]any)
		d.ws()
		if d.consume('}') {
			return m, true
		}
		for {
			k, ok := d.str()
			if !ok {
				return nil, false
			}
			key := string(k)
			d.ws()
			if !d.consume(':') {
				return nil, false
			}
			d.ws()
			v, ok := d.any(depth + 1)
			if !ok {
				return nil, false
			}
			more, ok := d.next('}')
			if !ok {
				return nil, false
			}
			m[key] = v
			if !more {
				return m, true
			}
		}
	case '[':
		if depth >= maxDepth {
			return nil, false
		}
		d.off++
		a := make([]any, 0)
		d.ws()
		if d.consume(']') {
			return a, true
		}
		for {
			v, ok := d.any(depth + 1)
			if !ok {
				return nil, false
			}
			more, ok := d.next(']')
			if !ok {
				return nil, false
			}
			a = append(a, v)
			if !more {
				return a, true
			}
		}
	}
	start := d.off
	if !d.skipNumber() {
		return nil, false
	}
	return json.Number(d.data[start:d.off]), true
}

// role reads a role without allocating for the known ones.
func (d *decoder) role() (Role, bool) {
	if d.null() {
		return "", true
	}
	b, ok := d.str()
	if !ok {
		return "", false
	}
	switch string(b) {
	case "user":
		return RoleUser, true
	case "assistant":
		return RoleAssistant, true
	case "tool":
		return RoleTool, true
	case "system":
		return RoleSystem, true
	}
	return Role(b), true
}

// string reads a string, or null as "".
func (d *decoder) string() (string, bool) {
	if d.null() {
		return "", true
	}
	b, ok := d.str()
	return string(b), ok
}

// bytes reads base64 as encoding/json does, or null as nil.
func (d *decoder) bytes() ([]byte, bool) {
	if d.null() {
		return nil, true
	}
	s, ok := d.str()
	if !ok {
		return nil, false
	}
	b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(b, s)
	return b[:n], err == nil
}

// bool reads true, false, or null as false.
func (d *decoder) bool() (bool, bool) {
	switch {
	case d.literal("true"):
		return true, true
	case d.literal("false"), d.literal("null"):
		return false, true
	}
	return false, false
}

// int reads an integer of up to 18 digits, or null as 0; it gives up on
// fractions, exponents and longer numbers.
func (d *decoder) int() (int64, bool) {
	if d.null() {
		return 0, true
	}
	start := d.off
	if !d.skipNumber() {
		return 0, false
	}
	lit := d.data[start:d.off]
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	if len(lit) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range lit {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// key reads an object key and the colon after it, and returns the key as
// it is written: with escapes, it matches no member name.
func (d *decoder) key() ([]byte, bool) {
	start := d.off + 1
	if !d.skipString() {
		return nil, false
	}
	key := d.data[start : d.off-1]
	d.ws()
	if !d.consume(':') {
		return nil, false
	}
	d.ws()
	return key, true
}

// next reads what follows a member or an element: a comma and whitespace,
// and then more follow, or end.
func (d *decoder) next(end byte) (more, ok bool) {
	d.ws()
	if d.consume(',') {
		d.ws()
		return true, true
	}
	return false, d.consume(end)
}

// str reads a string and returns its bytes, unescaped: a slice of the input
// if it holds no escapes, else of d.buf, valid until the next call. It gives
// up on invalid UTF-8.
func (d *decoder) str() ([]byte, bool) {
	data := d.data
	if d.off >= len(data) || data[d.off] != '"' {
		return nil, false
	}
	start := d.off + 1
	for i := start; i < len(data); {
		switch c := data[i]; {
		case c == '"':
			d.off = i + 1
			return data[start:i], true
		case c == '\\':
			return d.unescape(start, i)
		case c < ' ':
			return nil, false
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return nil, false
			}
			i += size
		}
	}
	return nil, false
}

// unescape goes on with the string that starts at start from its first
// escape at i, as encoding/json unquotes: a \u escape of half a surrogate
// pair that is not followed by the other half becomes U+FFFD.
func (d *decoder) unescape(start, i int) ([]byte, bool) {
	data := d.data
	// The unescaped string is no longer than the escaped one.
	end := i
	for end < len(data) && data[end] != '"' {
		if data[end] == '\\' {
			end++
		}
		end++
	}
	if cap(d.buf) < end-start {
		d.buf = make([]byte, 0, end-start+64)
	}
	b := append(d.buf[:0], data[start:i]...)
	for i < len(data) {
		switch c := data[i]; {
		case c == '"':
			d.off = i + 1
			d.buf = b
			return b, true
		case c == '\\':
			if i+1 >= len(data) {
				return nil, false
			}
			switch e := data[i+1]; e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r := hex4(data[i+2:])
				if r < 0 {
					return nil, false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+1 < len(data) && data[i] == '\\' && data[i+1] == 'u' {
						r2 = hex4(data[i+2:])
					}
					if r = utf16.DecodeRune(r, r2); r != utf8.RuneError {
						i += 6
					}
				}
				b = utf8.AppendRune(b, r)
				continue
			default:
				return nil, false
			}
			i += 2
		case c < ' ':
			return nil, false
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return nil, false
			}
			b = append(b, data[i:i+size]...)
			i += size
		}
	}
	return nil, false
}

// hex4 returns the value of the four hex digits that start b, or -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// skip reads any JSON value, checking its syntax but not its UTF-8.
func (d *decoder) skip(depth int) bool {
	if d.off >= len(d.data) {
		return false
	}
	switch d.data[d.off] {
	case '"':
		return d.skipString()
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	case '{', '[':
		if depth >= maxDepth {
			return false
		}
		end := byte('}')
		if d.data[d.off] == '[' {
			end = ']'
		}
		d.off++
		d.ws()
		if d.consume(end) {
			return true
		}
		for {
			if end == '}' {
				if _, ok := d.key(); !ok {
					return false
				}
			}
			if !d.skip(depth + 1) {
				return false
			}
			more, ok := d.next(end)
			if !ok {
				return false
			}
			if !more {
				return true
			}
		}
	}
	return d.skipNumber()
}

// skipString reads a string, checking its escapes but not its UTF-8.
func (d *decoder) skipString() bool {
	data := d.data
	if d.off >= len(data) || data[d.off] != '"' {
		return false
	}
	for i := d.off + 1; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			d.off = i + 1
			return true
		case c < ' ':
			return false
		case c == '\\':
			if i+1 >= len(data) {
				return false
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if hex4(data[i+2:]) < 0 {
					return false
				}
				i += 5
			default:
				return false
			}
		}
	}
	return false
}

// skipNumber reads a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *decoder) skipNumber() bool {
	data, i := d.data, d.off
	digits := func() bool {
		j := i
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
		return i > j
	}
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(data) && data[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	d.off = i
	return true
}

// null reads null if it comes next.
func (d *decoder) null() bool { return d.literal("null") }

// literal reads lit if it comes next.
func (d *decoder) literal(lit string) bool {
	if rest := d.data[d.off:]; len(rest) < len(lit) || string(rest[:len(lit)]) != lit {
		return false
	}
	d.off += len(lit)
	return true
}

// consume reads c if it comes next.
func (d *decoder) consume(c byte) bool {
	if d.off < len(d.data) && d.data[d.off] == c {
		d.off++
		return true
	}
	return false
}

// ws skips whitespace.
func (d *decoder) ws() {
	for d.off < len(d.data) {
		switch d.data[d.off] {
		case ' ', '\t', '\n', '\r':
			d.off++
		default:
			return
		}
	}
}
