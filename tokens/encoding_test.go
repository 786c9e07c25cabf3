package tokens

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/loomthreads/loom/tokens/internal/vocabfile"
	"github.com/pkoukk/tiktoken-go-loader/assets"
)

// TestVocabularyHashes checks the embedded files against the hashes that
// tiktoken itself checks them against (tiktoken_ext/openai_public.py).
func TestVocabularyHashes(t *testing.T) {
	for file, want := range map[string]string{
		"o200k_base.tiktoken":  "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
		"cl100k_base.tiktoken": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
	} {
		data, err := assets.Assets.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != want {
			t.Errorf("%s: sha256 %s, want %s", file, got, want)
		}
	}
}

// TestCompactVocabularies checks that the embedded compact vocabularies are
// what go generate makes of the .tiktoken files today.
func TestCompactVocabularies(t *testing.T) {
	for _, enc := range []Encoding{O200kBase, Cl100kBase} {
		src, err := assets.Assets.ReadFile(enc.Name() + ".tiktoken")
		if err != nil {
			t.Fatal(err)
		}
		want, err := vocabfile.Compact(src)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc.spec.data, want) {
			t.Errorf("%s.vocab is not what vocabgen writes: run go generate ./tokens", enc)
		}
	}
}

// TestLoadVocabRejects checks that a damaged compact vocabulary is an error,
// not a panic.
func TestLoadVocabRejects(t *testing.T) {
	good := O200kBase.spec.data
	for name, data := range map[string][]byte{
		"empty":     nil,
		"magic":     append([]byte("loomvoc0"), good[8:]...),
		"truncated": good[:len(good)-1],
		"header":    good[:vocabfile.HeaderLen],
	} {
		if _, err := loadVocab(data); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestVocabulary(t *testing.T) {
	for _, tt := range []struct {
		enc  Encoding
		size int
	}{{O200kBase, 199998}, {Cl100kBase, 100256}} {
		start := time.Now()
		v := tt.enc.v()
		t.Logf("%s: %d tokens, loaded in %v", tt.enc, v.n, time.Since(start))
		if v.ranks != tt.size || v.n != tt.size {
			t.Errorf("%s: %d ranks, %d tokens, want %d", tt.enc, v.ranks, v.n, tt.size)
		}
		// As tiktoken's test_single_token_roundtrip: each token encodes
		// to itself when it is the whole piece.
		for id := range v.ranks {
			if tok := string(v.token(id)); tok == "" {
				t.Fatalf("%s: no token %d", tt.enc, id)
			} else if r := v.rank(tok); int(r) != id {
				t.Fatalf("%s: token %d %q has rank %d", tt.enc, id, tok, r)
			}
		}
	}
}

// TestKnownTokens checks token ids that tiktoken's own tests assert
// (tests/test_encoding.py), ids looked up in the vocabulary files, and the
// o200k ids of common strings.
func TestKnownTokens(t *testing.T) {
	tests := []struct {
		enc  Encoding
		text string
		want []int
	}{
		// tiktoken's tests.
		{Cl100kBase, "hello world", []int{15339, 1917}},
		{Cl100kBase, "rer", []int{38149}},
		{Cl100kBase, "'rer", []int{2351, 81}},
		{Cl100kBase, "today\n ", []int{31213, 198, 220}},
		{Cl100kBase, "today\n \n", []int{31213, 27907}},
		{Cl100kBase, "today\n  \n", []int{31213, 14211}},
		{Cl100kBase, " \u00850", []int{220, 126, 227, 15}},
		{Cl100kBase, "👍", []int{9468, 239, 235}},
		{Cl100kBase, "", nil},
		// Single words: their rank in the vocabulary file
		// ("aGVsbG8= 15339", "IHdvcmxk 1917"; o200k "aGVsbG8= 24912",
		// "IHdvcmxk 2375").
		{Cl100kBase, "Hello, world!", []int{9906, 11, 1917, 0}},
		{Cl100kBase, "Hello, 使用GPT-4！", []int{9906, 11, 86758, 38, 2898, 12, 19, 6447}},
		{O200kBase, "hello world", []int{24912, 2375}},
		{O200kBase, "Hello, world!", []int{13225, 11, 2375, 0}},
		{O200kBase, "today\n ", []int{58744, 198, 220}},
		{O200kBase, "👍", []int{82514}},
		{O200kBase, "", nil},
	}
	for _, tt := range tests {
		got := tt.enc.Encode(tt.text)
		if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s.Encode(%q) (-want +got):\n%s", tt.enc, tt.text, diff)
		}
		if n := tt.enc.Count(tt.text); n != len(tt.want) {
			t.Errorf("%s.Count(%q) = %d, want %d", tt.enc, tt.text, n, len(tt.want))
		}
	}
}

// TestSingleWords checks that common words are one token, the token whose
// bytes are the word.
func TestSingleWords(t *testing.T) {
	for _, enc := range []Encoding{O200kBase, Cl100kBase} {
		v := enc.v()
		for _, w := range []string{"the", " the", "hello", " world", " token", "ization", " Paris", "123", "\n\n", "    ", " {", "});\n"} {
			got := enc.Encode(w)
			if len(got) != 1 || string(v.token(got[0])) != w {
				t.Errorf("%s.Encode(%q) = %v, want one token", enc, w, got)
			}
		}
	}
}

func TestRoundTrip(t *testing.T) {
	texts := []string{
		"hello", "hello ", "hello  ", " hello", " hello ", " hello  ", "hello world",
		"请考试我的软件！12345",
		"I'm sure you'll see they've done what we'd said; it's DONE'S.",
		"1 12 123 1234 12345 123456 1234567 3.14159 1,000,000 ٣٤٥",
		"emoji: 😀👍🏽🇫🇷👨‍👩‍👧 and CJK: 日本語のテキスト, 한국어 텍스트",
		"\t\t\n\n\r\n   \u00a0\u3000 \u2028 end   ",
		"invalid: \xff\xfe \xc3( \xe2\x82 \xed\xa0\x80 \xf4\x90\x80\x80 \x80",
		"func main() {\n\tfmt.Println(\"hi\")\n}\n",
		`{"city":"Paris","days":[{"high_c":17}]}`,
		strings.Repeat("=", 300) + strings.Repeat("ab", 200),
	}
	for _, enc := range []Encoding{O200kBase, Cl100kBase} {
		for _, s := range texts {
			checkRoundTrip(t, enc, s)
		}
	}
}

func checkRoundTrip(t *testing.T, enc Encoding, s string) {
	t.Helper()
	toks := enc.Encode(s)
	got, err := enc.Decode(toks)
	if err != nil {
		t.Fatalf("%s.Decode(Encode(%q)): %v", enc, s, err)
	}
	if string(got) != s {
		t.Fatalf("%s.Decode(Encode(%q)) = %q", enc, s, got)
	}
	if n := enc.Count(s); n != len(toks) {
		t.Fatalf("%s.Count(%q) = %d, Encode has %d tokens", enc, s, n, len(toks))
	}
	// Counts are additive over the pieces.
	sum := 0
	for _, p := range enc.Pieces(s) {
		sum += enc.Count(p)
	}
	if sum != len(toks) {
		t.Fatalf("%s: the pieces of %q count %d, the whole %d", enc, s, sum, len(toks))
	}
}

// TestRepetitive is tiktoken's test_catastrophically_repetitive: long runs
// round-trip, and quickly.
func TestRepetitive(t *testing.T) {
	for _, enc := range []Encoding{O200kBase, Cl100kBase} {
		for _, c := range []string{"^", "0", "a", "'s", " ", "\n", "ab", "😀"} {
			s := strings.Repeat(c, 10_000)
			for _, s := range []string{s, " " + s, " " + s + "\n"} {
				start := time.Now()
				checkRoundTrip(t, enc, s)
				if d := time.Since(start); d > time.Second {
					t.Errorf("%s: %d × %q took %v", enc, len(s)/len(c), c, d)
				}
			}
		}
	}
}

// TestMergeLargeMatchesSmall checks the heap merge against tiktoken's loop
// on pieces made to merge a lot.
func TestMergeLargeMatchesSmall(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	alphabets := []string{"ab", "abc ", "0123456789", "=-_", "ethaoins", "\xe4\xb8\xad\xe6\x96\x87"}
	for _, enc := range []Encoding{O200kBase, Cl100kBase} {
		v := enc.v()
		for range 2000 {
			a := alphabets[r.IntN(len(alphabets))]
			b := make([]byte, 2+r.IntN(smallPiece-1))
			for i := range b {
				b[i] = a[r.IntN(len(a))]
			}
			piece := string(b)
			var small, large merger
			ns := small.mergeSmall(v, piece)
			nl := large.mergeLarge(v, piece)
			if ns != nl {
				t.Fatalf("%s %q: small merge %d tokens, large %d", enc, piece, ns, nl)
			}
			for k := range ns + 1 {
				if small.start(k) != large.start(k) {
					t.Fatalf("%s %q: token %d starts at %d (small) and %d (large)", enc, piece, k, small.start(k), large.start(k))
				}
			}
		}
	}
}

func TestDecodeUnknown(t *testing.T) {
	for _, tok := range []int{-1, 199998, 1 << 40} {
		if _, err := O200kBase.Decode([]int{tok}); !errors.Is(err, ErrUnknownToken) {
			t.Errorf("Decode(%d): %v, want ErrUnknownToken", tok, err)
		}
	}
	if _, err := Cl100kBase.Decode([]int{100256}); !errors.Is(err, ErrUnknownToken) {
		t.Errorf("Decode(100256): %v, want ErrUnknownToken", err)
	}
}

func TestEncodingByName(t *testing.T) {
	for _, enc := range []Encoding{O200kBase, Cl100kBase} {
		got, ok := EncodingByName(enc.Name())
		if !ok || got != enc {
			t.Errorf("EncodingByName(%q) = %v, %v", enc.Name(), got, ok)
		}
	}
	if _, ok := EncodingByName("p50k_base"); ok {
		t.Error("EncodingByName(p50k_base) is ok")
	}
	var zero Encoding
	if !zero.IsZero() || zero.Name() != "" {
		t.Error("zero Encoding has a name")
	}
}
