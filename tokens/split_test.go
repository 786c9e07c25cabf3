package tokens

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// The reference pre-tokenizers run tiktoken's patterns with Go's regexp,
// which picks the match a backtracking engine would. It has no lookahead,
// no possessive quantifiers and no \p{White_Space}, so the alternatives that
// need them are done by hand, and \s is spelled out.
const white = `\t\n\v\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}`

var (
	refO200k = regexp.MustCompile(`^(?:` +
		`[^\r\n\pL\pN]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\pM]*[\p{Ll}\p{Lm}\p{Lo}\pM]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?` +
		`|[^\r\n\pL\pN]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\pM]+[\p{Ll}\p{Lm}\p{Lo}\pM]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?` +
		`|\pN{1,3}` +
		`| ?[^` + white + `\pL\pN]+[\r\n/]*` +
		`|[` + white + `]*[\r\n]+)`)
	refCl100k   = regexp.MustCompile(`^(?:'(?i:[sdmt]|ll|ve|re)|[^\r\n\pL\pN]?\pL+|\pN{1,3}| ?[^` + white + `\pL\pN]+[\r\n]*)`)
	refCl100kNL = regexp.MustCompile(`^[` + white + `]*[\r\n]`)
	refWhite    = regexp.MustCompile(`^[` + white + `]+`)
)

// refTail matches \s+(?!\S)|\s+ at the start of s.
func refTail(s string) int {
	loc := refWhite.FindStringIndex(s)
	if loc == nil {
		panic("no alternative matches " + s)
	}
	run := s[:loc[1]]
	if loc[1] == len(s) {
		return loc[1]
	}
	_, n := utf8.DecodeLastRuneInString(run)
	if n == len(run) {
		return len(run)
	}
	return len(run) - n
}

func refSplitO200k(s string, i int) int {
	if loc := refO200k.FindStringIndex(s[i:]); loc != nil {
		return i + loc[1]
	}
	return i + refTail(s[i:])
}

func refSplitCl100k(s string, i int) int {
	if loc := refCl100k.FindStringIndex(s[i:]); loc != nil {
		return i + loc[1]
	}
	if loc := refWhite.FindStringIndex(s[i:]); loc != nil && i+loc[1] == len(s) {
		return len(s) // \s++$
	}
	if loc := refCl100kNL.FindStringIndex(s[i:]); loc != nil {
		return i + loc[1]
	}
	return i + refTail(s[i:])
}

func pieces(split func(string, int) int, s string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := split(s, i)
		if j <= i || j > len(s) {
			panic("split did not advance")
		}
		out = append(out, s[i:j])
		i = j
	}
	return out
}

func TestPieces(t *testing.T) {
	tests := []struct {
		enc  Encoding
		text string
		want []string
	}{
		{O200kBase, "Hello, world!", []string{"Hello", ",", " world", "!"}},
		{O200kBase, "HELLOworld helloWorld", []string{"HELLOworld", " hello", "World"}},
		{O200kBase, "HELLO world", []string{"HELLO", " world"}},
		{O200kBase, "don't DON'T they'RE we'll", []string{"don't", " DON'T", " they'RE", " we'll"}},
		{O200kBase, "1234567", []string{"123", "456", "7"}},
		{O200kBase, "a  b", []string{"a", " ", " b"}},
		{O200kBase, "a\n\n  b", []string{"a", "\n\n", " ", " b"}},
		{O200kBase, "x = 1;\n", []string{"x", " =", " ", "1", ";\n"}},
		{O200kBase, "path/to/file.go", []string{"path", "/to", "/file", ".go"}},
		{O200kBase, "}//\n", []string{"}//\n"}},
		{O200kBase, "e\u0301t\u00e9", []string{"e\u0301t\u00e9"}},
		{O200kBase, "请考试我的软件！12345", []string{"请考试我的软件", "！", "123", "45"}},
		{O200kBase, "\tfoo  \n", []string{"\tfoo", "  \n"}},
		{O200kBase, "a\n  ", []string{"a", "\n", "  "}},
		{O200kBase, "dog'\u017f", []string{"dog'\u017f"}},
		{Cl100kBase, "Hello, world!", []string{"Hello", ",", " world", "!"}},
		{Cl100kBase, "HELLOworld helloWorld", []string{"HELLOworld", " helloWorld"}},
		{Cl100kBase, "don't", []string{"don", "'t"}},
		{Cl100kBase, "'rer", []string{"'re", "r"}},
		{Cl100kBase, "e\u0301", []string{"e", "\u0301"}},
		{Cl100kBase, "1234567", []string{"123", "456", "7"}},
		{Cl100kBase, "path/to/file", []string{"path", "/to", "/file"}},
		{Cl100kBase, "a\n  ", []string{"a", "\n  "}},
		{Cl100kBase, "a\n  b", []string{"a", "\n", " ", " b"}},
		{Cl100kBase, "today\n \n", []string{"today", "\n \n"}},
		{Cl100kBase, " \u00850", []string{" ", "\u0085", "0"}},
	}
	for _, tt := range tests {
		got := tt.enc.Pieces(tt.text)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s.Pieces(%q) (-want +got):\n%s", tt.enc, tt.text, diff)
		}
	}
}

// randomText returns text that exercises the pre-tokenizers' corners: every
// class of character, contractions, runs of white space and invalid bytes.
func randomText(r *rand.Rand, n int) string {
	alphabet := []string{
		"a", "b", "Z", "Q", "é", "É", "ǅ", "ß", "ſ", "ʰ", "中", "文", "ا", "\u0301", "\u0903",
		"0", "7", "٣", "Ⅻ", "½",
		" ", "  ", "\t", "\n", "\r", "\r\n", "\u00a0", "\u0085", "\u3000", "\u2028",
		"'", "'s", "'S", "'re", "'LL", "'ve", "'d", "'m", "'t", "'ſ",
		"!", ".", ",", "/", "//", "-", "😀", "👍🏽", "\x00", "\x7f",
		"\xff", "\xc3", "\xe4\xb8", "\xed\xa0\x80",
	}
	var b strings.Builder
	for range n {
		b.WriteString(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

func TestSplitMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		s := randomText(r, r.IntN(40))
		checkSplit(t, s)
	}
}

func checkSplit(t *testing.T, s string) {
	t.Helper()
	if diff := cmp.Diff(pieces(refSplitO200k, s), pieces(splitO200k, s)); diff != "" {
		t.Fatalf("o200k pieces of %q (-reference +got):\n%s", s, diff)
	}
	if diff := cmp.Diff(pieces(refSplitCl100k, s), pieces(splitCl100k, s)); diff != "" {
		t.Fatalf("cl100k pieces of %q (-reference +got):\n%s", s, diff)
	}
}

// TestClassTables checks that the BMP table agrees with classify.
func TestClassTables(t *testing.T) {
	tab := bmpClass()
	for r := range rune(1 << 16) {
		if tab[r] != classify(r) {
			t.Fatalf("class of %U: table %d, classify %d", r, tab[r], classify(r))
		}
	}
}
