// Package jsonstr writes JSON strings fast, byte for byte as encoding/json
// writes them (HTML characters, U+2028 and U+2029 escaped; invalid UTF-8 as
// U+FFFD), for the encoders that build JSON by hand: what they write reads
// and compares the same as what encoding/json would have written.
package jsonstr

import "unicode/utf8"

// Append appends s as a JSON string, escaped as encoding/json's
// appendString escapes it by default (with escapeHTML): ", \ and the
// control characters are escaped (\b, \f, \n, \r and \t by their short
// forms, the others as \u00XX), and so are <, > and &, and U+2028 and
// U+2029, so that the JSON is safe in HTML and JavaScript; each byte of
// invalid UTF-8 becomes \ufffd.
func Append(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0 // s[start:i] is yet to be written
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if htmlSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default: // the other control characters, <, > and &
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// htmlSafe holds, for each ASCII character, whether Append writes it
// as it is: all but the control characters, ", \, <, > and &. It is
// encoding/json's htmlSafeSet.
var htmlSafe = func() (safe [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		safe[c] = true
	}
	for _, c := range `"\<>&` {
		safe[c] = false
	}
	return safe
}()
