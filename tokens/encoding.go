package tokens

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/pkoukk/tiktoken-go-loader/assets"
)

// ErrUnknownToken is returned by Encoding.Decode when a token is not in the
// encoding's vocabulary (special tokens included).
var ErrUnknownToken = errors.New("tokens: unknown token")

// Encoding is a byte-pair encoding: a pre-tokenizer that splits text into
// pieces and a vocabulary of ranked byte strings that the pieces are merged
// into. The encodings are O200kBase and Cl100kBase; Encoding values compare
// equal when they are the same encoding. The zero Encoding is no encoding:
// its methods panic.
//
// Encodings treat special tokens such as <|endoftext|> as ordinary text, as
// tiktoken's encode_ordinary does: text in a message is never a control token.
type Encoding struct {
	spec *spec
}

// spec describes one encoding; its vocabulary is read once, on first use.
type spec struct {
	name  string
	file  string
	split func(s string, i int) int
	vocab func() *vocab
}

var (
	o200k = &spec{name: "o200k_base", file: "o200k_base.tiktoken", split: splitO200k}
	cl100 = &spec{name: "cl100k_base", file: "cl100k_base.tiktoken", split: splitCl100k}
)

func init() {
	for _, s := range []*spec{o200k, cl100} {
		s.vocab = sync.OnceValue(func() *vocab {
			v, err := loadVocab(s.file)
			if err != nil {
				// The files are embedded and checked by the tests: this
				// cannot happen in a binary that passed them.
				panic(fmt.Sprintf("tokens: load %s: %v", s.name, err))
			}
			return v
		})
	}
}

// The encodings.
var (
	// O200kBase is the encoding of GPT-4o, GPT-4.1, GPT-5 and the o-series.
	O200kBase = Encoding{o200k}
	// Cl100kBase is the encoding of GPT-4, GPT-3.5 Turbo and the
	// text-embedding-3 models.
	Cl100kBase = Encoding{cl100}
)

// EncodingByName returns the encoding named name ("o200k_base" or
// "cl100k_base"), and false if there is none by that name.
func EncodingByName(name string) (Encoding, bool) {
	switch name {
	case o200k.name:
		return O200kBase, true
	case cl100.name:
		return Cl100kBase, true
	}
	return Encoding{}, false
}

// Name returns the encoding's name, such as "o200k_base", or "" for the zero
// Encoding.
func (e Encoding) Name() string {
	if e.spec == nil {
		return ""
	}
	return e.spec.name
}

// String returns the encoding's name.
func (e Encoding) String() string { return e.Name() }

// IsZero reports whether e is the zero Encoding.
func (e Encoding) IsZero() bool { return e.spec == nil }

func (e Encoding) v() *vocab {
	if e.spec == nil {
		panic("tokens: use of the zero Encoding")
	}
	return e.spec.vocab()
}

// Count returns the number of tokens text encodes to. It allocates nothing
// for the pieces of text that are whole tokens, which is most of them.
func (e Encoding) Count(text string) int {
	v := e.v()
	split := e.spec.split
	n := 0
	var m merger
	for i := 0; i < len(text); {
		j := split(text, i)
		n += v.countPiece(&m, text[i:j])
		i = j
	}
	return n
}

// Encode returns the tokens of text.
func (e Encoding) Encode(text string) []int {
	return e.AppendEncode(make([]int, 0, len(text)/4+1), text)
}

// AppendEncode appends the tokens of text to dst and returns the extended
// slice.
func (e Encoding) AppendEncode(dst []int, text string) []int {
	v := e.v()
	split := e.spec.split
	var m merger
	for i := 0; i < len(text); {
		j := split(text, i)
		dst = v.encodePiece(&m, dst, text[i:j])
		i = j
	}
	return dst
}

// Decode returns the bytes that tokens stand for. Decode(Encode(s)) is s,
// byte for byte, even when s is not valid UTF-8. A token that is not in the
// vocabulary is an error wrapping ErrUnknownToken.
func (e Encoding) Decode(tokens []int) ([]byte, error) {
	v := e.v()
	var out []byte
	for _, t := range tokens {
		if t < 0 || t >= len(v.tokens) || v.tokens[t] == "" {
			return out, fmt.Errorf("decode %d: %w", t, ErrUnknownToken)
		}
		out = append(out, v.tokens[t]...)
	}
	return out, nil
}

// Pieces returns the pieces the encoding's pre-tokenizer splits text into,
// in order; the tokens of text are the tokens of each piece, concatenated.
func (e Encoding) Pieces(text string) []string {
	var out []string
	for i := 0; i < len(text); {
		j := e.spec.split(text, i)
		out = append(out, text[i:j])
		i = j
	}
	return out
}

// vocab is a loaded vocabulary.
type vocab struct {
	ranks  map[string]uint32 // token bytes → rank (the token id)
	tokens []string          // rank → token bytes
	bytes  [256]uint32       // rank of each single byte
}

// loadVocab reads an embedded .tiktoken file: one "base64(token) rank"
// line per token.
func loadVocab(file string) (*vocab, error) {
	data, err := assets.Assets.ReadFile(file)
	if err != nil {
		return nil, err
	}
	n := bytes.Count(data, []byte{'\n'}) + 1
	type entry struct {
		off, end int
		rank     uint32
	}
	entries := make([]entry, 0, n)
	buf := make([]byte, 0, len(data)*3/4)
	maxRank := -1
	for line := range bytes.Lines(data) {
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			continue
		}
		sp := bytes.IndexByte(line, ' ')
		if sp < 0 {
			return nil, fmt.Errorf("line %q: no rank", line)
		}
		rank, err := strconv.ParseUint(string(line[sp+1:]), 10, 31)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", line, err)
		}
		off := len(buf)
		if buf, err = base64.StdEncoding.AppendDecode(buf, line[:sp]); err != nil {
			return nil, fmt.Errorf("line %q: %w", line, err)
		}
		if len(buf) == off {
			return nil, fmt.Errorf("line %q: empty token", line)
		}
		entries = append(entries, entry{off, len(buf), uint32(rank)})
		maxRank = max(maxRank, int(rank))
	}
	all := string(buf) // one allocation; every token is a slice of it
	v := &vocab{
		ranks:  make(map[string]uint32, len(entries)),
		tokens: make([]string, maxRank+1),
	}
	for _, e := range entries {
		tok := all[e.off:e.end]
		if _, dup := v.ranks[tok]; dup {
			return nil, fmt.Errorf("token %q twice", tok)
		}
		if v.tokens[e.rank] != "" {
			return nil, fmt.Errorf("rank %d twice", e.rank)
		}
		v.ranks[tok] = e.rank
		v.tokens[e.rank] = tok
	}
	for b := range 256 {
		r, ok := v.ranks[string([]byte{byte(b)})]
		if !ok {
			return nil, fmt.Errorf("byte %#x is not a token", b)
		}
		v.bytes[b] = r
	}
	return v, nil
}

// countPiece returns the number of tokens of one pre-tokenizer piece.
func (v *vocab) countPiece(m *merger, piece string) int {
	if len(piece) == 1 {
		return 1
	}
	if _, ok := v.ranks[piece]; ok {
		return 1
	}
	return m.merge(v, piece)
}

// encodePiece appends the tokens of one pre-tokenizer piece to dst.
func (v *vocab) encodePiece(m *merger, dst []int, piece string) []int {
	if len(piece) == 1 {
		return append(dst, int(v.bytes[piece[0]]))
	}
	if r, ok := v.ranks[piece]; ok {
		return append(dst, int(r))
	}
	n := m.merge(v, piece)
	for k := range n {
		dst = append(dst, int(v.ranks[piece[m.start(k):m.start(k+1)]]))
	}
	return dst
}
