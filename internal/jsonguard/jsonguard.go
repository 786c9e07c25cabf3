// Package jsonguard checks raw JSON for what encoding/json lets through
// silently or pays for dearly: bytes that are not UTF-8 and \u escapes of
// lone UTF-16 surrogates (both decoded as U+FFFD, so the text a client sent
// is not the text stored), and nesting deeper than a limit (which costs
// memory and time in every later encode, and a stack in every recursive
// reader). A face runs Check on a body before decoding it; package thread
// runs it on the raw JSON values a thread holds.
//
// Check does not validate JSON syntax: the decoder that follows does.
package jsonguard

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"
)

// The reasons Check refuses data, matched with errors.Is.
var (
	// ErrUTF8 is returned for bytes that are not UTF-8 and for \u escapes
	// of a lone UTF-16 surrogate.
	ErrUTF8 = errors.New("not valid UTF-8")
	// ErrDepth is returned for arrays and objects nested deeper than the
	// limit.
	ErrDepth = errors.New("nested too deeply")
)

// Error says why and where Check refused data.
type Error struct {
	// Offset is the byte offset of the fault in the checked data.
	Offset int
	// Depth is the limit that was exceeded, for ErrDepth.
	Depth int
	// Reason is ErrUTF8 or ErrDepth.
	Reason error
}

func (e *Error) Error() string {
	if e.Reason == ErrDepth {
		return fmt.Sprintf("JSON nested deeper than %d levels (at byte %d)", e.Depth, e.Offset)
	}
	return fmt.Sprintf("text is not valid UTF-8 (at byte %d)", e.Offset)
}

// Unwrap returns the reason, so that errors.Is(err, ErrUTF8) holds.
func (e *Error) Unwrap() error { return e.Reason }

// Check returns an *Error when data holds bytes that are not UTF-8, a \u
// escape of a lone surrogate, or arrays and objects nested more than
// maxDepth deep (maxDepth <= 0 means no limit). Otherwise it returns nil.
func Check(data []byte, maxDepth int) error {
	if !utf8.Valid(data) {
		return &Error{Offset: badUTF8(data), Reason: ErrUTF8}
	}
	depth := 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '{', '[':
			depth++
			if maxDepth > 0 && depth > maxDepth {
				return &Error{Offset: i, Depth: maxDepth, Reason: ErrDepth}
			}
		case '}', ']':
			depth--
		case '"':
			end, err := skipString(data, i+1)
			if err != nil {
				return err
			}
			i = end
		}
	}
	return nil
}

// skipString scans the string that starts at data[i] (after its opening
// quote) and returns the index of its closing quote, or len(data) when it
// has none (the decoder reports that). It refuses \u escapes of lone
// surrogates.
func skipString(data []byte, i int) (int, error) {
	for ; i < len(data); i++ {
		// Most of a string is neither a quote nor a backslash.
		j := bytes.IndexAny(data[i:], `"\`)
		if j < 0 {
			return len(data), nil
		}
		i += j
		switch data[i] {
		case '"':
			return i, nil
		case '\\':
			if i+1 >= len(data) {
				return len(data), nil
			}
			if data[i+1] != 'u' {
				i++
				continue
			}
			r, ok := hex4(data, i+2)
			if !ok {
				i++
				continue
			}
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return 0, &Error{Offset: i, Reason: ErrUTF8}
			case r >= 0xD800 && r <= 0xDBFF:
				// A high surrogate must be followed by an escaped low one.
				lo, ok := -1, false
				if i+7 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
					lo, ok = hex4(data, i+8)
				}
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return 0, &Error{Offset: i, Reason: ErrUTF8}
				}
				i += 11
			default:
				i += 5
			}
		}
	}
	return len(data), nil
}

// hex4 reads four hex digits at data[i:].
func hex4(data []byte, i int) (int, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	r := 0
	for _, c := range data[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | int(c)
	}
	return r, true
}

// badUTF8 returns the offset of the first byte that does not begin a valid
// UTF-8 sequence.
func badUTF8(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(data)
}
