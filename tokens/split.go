package tokens

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// The pre-tokenizers split text into the pieces that the byte-pair merge
// works on, exactly as tiktoken's regular expressions do. Go's regexp has
// neither lookahead nor possessive quantifiers, so each pattern is a small
// hand-written matcher: at position i it tries the pattern's alternatives in
// order, with the backtracking a regex engine would do, and returns where the
// match ends. Every alternative set covers every character, so the pieces
// tile the text.

// Character classes. Every rune is in exactly one: the general categories
// Lu, Lt, Ll, Lm, Lo, M and N, and the White_Space property, are disjoint.
const (
	cOther   uint8 = iota // none of the below: [^\s\p{L}\p{N}] minus marks; invalid UTF-8 bytes
	cUpper                // \p{Lu}, \p{Lt}
	cLower                // \p{Ll}
	cLetter               // \p{Lm}, \p{Lo}
	cMark                 // \p{M}
	cNumber               // \p{N}
	cNewline              // \r, \n
	cSpace                // \s (White_Space) other than \r and \n
)

// Class sets, as bit masks of 1<<class.
const (
	setL     = 1<<cUpper | 1<<cLower | 1<<cLetter // \p{L}
	setUpper = 1<<cUpper | 1<<cLetter | 1<<cMark  // o200k's [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	setLower = 1<<cLower | 1<<cLetter | 1<<cMark  // o200k's [\p{Ll}\p{Lm}\p{Lo}\p{M}]
	setPre   = 1<<cOther | 1<<cMark | 1<<cSpace   // [^\r\n\p{L}\p{N}]
	setPunct = 1<<cOther | 1<<cMark               // [^\s\p{L}\p{N}]
	setWhite = 1<<cNewline | 1<<cSpace            // \s
)

func in(set uint16, c uint8) bool { return set&(1<<c) != 0 }

// asciiClass is the class of each ASCII byte.
var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for b := range utf8.RuneSelf {
		t[b] = classify(rune(b))
	}
	return t
}()

// bmpClass is the class of each rune of the Basic Multilingual Plane, built
// on first use of a non-ASCII rune, so that CJK, Cyrillic and the like cost
// a table lookup rather than a search of the Unicode tables. It is filled
// from the ranges of Unicode's tables, in classify's order of precedence
// backwards (a later class overwrites an earlier one), in well under a
// millisecond; TestClassTables checks it against classify.
var bmpClass = sync.OnceValue(func() *[1 << 16]uint8 {
	var t [1 << 16]uint8 // cOther
	for _, f := range []struct {
		tab *unicode.RangeTable
		c   uint8
	}{
		{unicode.N, cNumber},
		{unicode.M, cMark},
		{unicode.Lm, cLetter}, {unicode.Lo, cLetter},
		{unicode.Ll, cLower},
		{unicode.Lu, cUpper}, {unicode.Lt, cUpper},
		{unicode.White_Space, cSpace},
	} {
		for _, r := range f.tab.R16 {
			for x := int(r.Lo); x <= int(r.Hi); x += int(r.Stride) {
				t[x] = f.c
			}
		}
		for _, r := range f.tab.R32 {
			for x := int(r.Lo); x <= min(int(r.Hi), len(t)-1); x += int(r.Stride) {
				t[x] = f.c
			}
		}
	}
	t['\r'], t['\n'] = cNewline, cNewline
	return &t
})

// classify returns the class of r.
func classify(r rune) uint8 {
	switch {
	case r == '\r' || r == '\n':
		return cNewline
	case unicode.IsSpace(r): // White_Space, as regex's \s
		return cSpace
	case unicode.Is(unicode.Lu, r) || unicode.Is(unicode.Lt, r):
		return cUpper
	case unicode.Is(unicode.Ll, r):
		return cLower
	case unicode.Is(unicode.Lm, r) || unicode.Is(unicode.Lo, r):
		return cLetter
	case unicode.Is(unicode.M, r):
		return cMark
	case unicode.Is(unicode.N, r):
		return cNumber
	}
	return cOther
}

// class returns the class of the rune at s[i] and its length in bytes. An
// invalid byte is one rune of class cOther, as U+FFFD would be.
func class(s string, i int) (uint8, int) {
	b := s[i]
	if b < utf8.RuneSelf {
		return asciiClass[b], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r < 1<<16 {
		return bmpClass()[r], n // RuneError is So: cOther
	}
	return classify(r), n
}

// run returns the end of the run of runes of a class in set, starting at i.
func run(s string, i int, set uint16) int {
	for i < len(s) {
		c, n := class(s, i)
		if !in(set, c) {
			break
		}
		i += n
	}
	return i
}

// contraction returns the end of (?i:'s|'t|'re|'ve|'m|'ll|'d) at i, or i
// if there is none there. Case-insensitive matching is Unicode's simple case
// folding, as in Rust's regex: s also matches ſ (U+017F, LATIN SMALL LETTER
// LONG S).
func contraction(s string, i int) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return i
	}
	switch s[i+1] | 0x20 {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r', 'v':
		if i+2 < len(s) && s[i+2]|0x20 == 'e' {
			return i + 3
		}
	case 'l':
		if i+2 < len(s) && s[i+2]|0x20 == 'l' {
			return i + 3
		}
	case 0xc5 | 0x20: // ſ is C5 BF
		if s[i+1] == 0xc5 && i+2 < len(s) && s[i+2] == 0xbf {
			return i + 3
		}
	}
	return i
}

// whitespace returns the end of the match of o200k's and cl100k's last
// alternatives at i, the start of a run of white space:
// \s*[\r\n]+ | \s+(?!\S) | \s+ (cl100k's \s*[\r\n] | \s+(?!\S) | \s match the
// same). If endRun, a run that reaches the end of s is matched whole first
// (cl100k's \s++$).
func whitespace(s string, i int, endRun bool) int {
	j, last, lastNL := i, i, -1
	for j < len(s) {
		c, n := class(s, j)
		if !in(setWhite, c) {
			break
		}
		if c == cNewline {
			lastNL = j + n
		}
		last = j
		j += n
	}
	switch {
	case endRun && j == len(s):
		return j // \s++$
	case lastNL >= 0:
		return lastNL // \s*[\r\n]+: up to the last newline of the run
	case j == len(s) || last == i:
		return j // \s+(?!\S) at the end of s; or \s+ of a single rune
	default:
		return last // \s+(?!\S): all but the last rune, which goes with what follows
	}
}

// splitO200k returns the end of the piece that starts at i, for o200k_base:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}
//	| ?[^\s\p{L}\p{N}]+[\r\n/]*
//	|\s*[\r\n]+
//	|\s+(?!\S)
//	|\s+
func splitO200k(s string, i int) int {
	c, n := class(s, i)
	pre := in(setPre, c) && i+n < len(s)
	// The first two alternatives, with the optional prefix and then
	// without it.
	if pre {
		if e := wordLower(s, i+n); e >= 0 {
			return contraction(s, e)
		}
	}
	if e := wordLower(s, i); e >= 0 {
		return contraction(s, e)
	}
	if pre {
		if e := wordUpper(s, i+n); e >= 0 {
			return contraction(s, e)
		}
	}
	if e := wordUpper(s, i); e >= 0 {
		return contraction(s, e)
	}
	switch c {
	case cNumber:
		return numbers(s, i+n)
	case cOther, cMark:
		return punct(s, i+n, true)
	}
	if s[i] == ' ' && i+1 < len(s) {
		if c, n := class(s, i+1); in(setPunct, c) {
			return punct(s, i+1+n, true)
		}
	}
	return whitespace(s, i, false)
}

// wordLower matches [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+
// at i, and returns its end or -1. The first class is taken greedily, then
// given back one rune at a time until the second can match: so the match
// either runs on through the lower-case letters that follow the run of the
// first class, or ends after the run's last rune that is in both classes.
func wordLower(s string, i int) int {
	lastBoth := -1
	for i < len(s) {
		c, n := class(s, i)
		switch {
		case c == cLower:
			return run(s, i+n, setLower)
		case in(setUpper, c):
			if c != cUpper {
				lastBoth = i + n
			}
			i += n
		default:
			return lastBoth
		}
	}
	return lastBoth
}

// wordUpper matches [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*
// at i, and returns its end or -1.
func wordUpper(s string, i int) int {
	if i >= len(s) {
		return -1
	}
	if c, _ := class(s, i); !in(setUpper, c) {
		return -1
	}
	return run(s, run(s, i, setUpper), setLower)
}

// numbers returns the end of \p{N}{1,3} whose first rune ends at i.
func numbers(s string, i int) int {
	for range 2 {
		if i >= len(s) {
			break
		}
		c, n := class(s, i)
		if c != cNumber {
			break
		}
		i += n
	}
	return i
}

// punct returns the end of [^\s\p{L}\p{N}]+ followed by [\r\n/]* (o200k) or
// [\r\n]* (cl100k), whose first rune ends at i.
func punct(s string, i int, slash bool) int {
	i = run(s, i, setPunct)
	for i < len(s) && (s[i] == '\r' || s[i] == '\n' || slash && s[i] == '/') {
		i++
	}
	return i
}

// splitCl100k returns the end of the piece that starts at i, for
// cl100k_base, whose pattern is tiktoken's
//
//	'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s
func splitCl100k(s string, i int) int {
	if e := contraction(s, i); e > i {
		return e
	}
	c, n := class(s, i)
	switch {
	case in(setL, c):
		return run(s, i+n, setL)
	case in(setPre, c) && i+n < len(s):
		if c2, n2 := class(s, i+n); in(setL, c2) {
			return run(s, i+n+n2, setL)
		}
	}
	switch c {
	case cNumber:
		return numbers(s, i+n)
	case cOther, cMark:
		return punct(s, i+n, false)
	}
	if s[i] == ' ' && i+1 < len(s) {
		if c, n := class(s, i+1); in(setPunct, c) {
			return punct(s, i+1+n, false)
		}
	}
	return whitespace(s, i, true)
}
