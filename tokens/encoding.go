package tokens

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/loomthreads/loom/tokens/internal/vocabfile"
)

// The vocabularies, in the compact form of package vocabfile, generated
// from github.com/pkoukk/tiktoken-go-loader's .tiktoken files.
//
//go:generate go run ./internal/vocabgen
var (
	//go:embed o200k_base.vocab
	o200kData []byte
	//go:embed cl100k_base.vocab
	cl100kData []byte
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
	data  []byte // the compact vocabulary
	split func(s string, i int) int
	vocab func() *vocab
}

var (
	o200k = &spec{name: "o200k_base", data: o200kData, split: splitO200k}
	cl100 = &spec{name: "cl100k_base", data: cl100kData, split: splitCl100k}
)

func init() {
	for _, s := range []*spec{o200k, cl100} {
		s.vocab = sync.OnceValue(func() *vocab {
			v, err := loadVocab(s.data)
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
		tok := v.token(t)
		if len(tok) == 0 {
			return out, fmt.Errorf("decode %d: %w", t, ErrUnknownToken)
		}
		out = append(out, tok...)
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

// vocab is a vocabulary in the compact form package vocabfile describes,
// read in place from the embedded file: loading it costs no parsing and
// almost no allocation, and a lookup reads the file's bytes.
type vocab struct {
	ends     []byte // rank → where its token ends in all, as little-endian uint32s
	table    []byte // the hash index, as little-endian uint32s
	all      []byte // every token's bytes, in rank order
	ranks    int    // the number of ranks
	n        int    // the number of tokens
	mask     uint64 // the table's length in entries, less one
	rankBits int
	bytes    [256]uint32 // rank of each single byte
}

// token returns the bytes of the token of rank r, empty if there is none.
// They are the embedded file's: never to be modified.
func (v *vocab) token(r int) []byte {
	if r < 0 || r >= v.ranks {
		return nil
	}
	start := uint32(0)
	if r > 0 {
		start = binary.LittleEndian.Uint32(v.ends[4*(r-1):])
	}
	return v.all[start:binary.LittleEndian.Uint32(v.ends[4*r:])]
}

// rank returns the rank of s, or noRank.
func (v *vocab) rank(s string) uint32 {
	h := vocabfile.Hash(s)
	fp := uint32(h>>32) >> v.rankBits
	for i := h & v.mask; ; i = (i + 1) & v.mask {
		e := binary.LittleEndian.Uint32(v.table[4*i:])
		if e == 0 {
			return noRank
		}
		if e>>v.rankBits == fp {
			if r := e&(1<<v.rankBits-1) - 1; string(v.token(int(r))) == s {
				return r
			}
		}
	}
}

// loadVocab reads an embedded compact vocabulary.
func loadVocab(data []byte) (*vocab, error) {
	if len(data) < vocabfile.HeaderLen || string(data[:len(vocabfile.Magic)]) != vocabfile.Magic {
		return nil, errors.New("not a compact vocabulary")
	}
	h := data[len(vocabfile.Magic):vocabfile.HeaderLen]
	ranks := int(binary.LittleEndian.Uint32(h))
	n := int(binary.LittleEndian.Uint32(h[4:]))
	tableBits := int(binary.LittleEndian.Uint32(h[8:]))
	allLen := int(binary.LittleEndian.Uint32(h[12:]))
	data = data[vocabfile.HeaderLen:]
	if ranks < 1 || tableBits > 30 || len(data) != 4*ranks+4<<tableBits+allLen || n > ranks || 2*ranks > 1<<tableBits {
		return nil, errors.New("compact vocabulary: bad lengths")
	}
	v := &vocab{
		ends:     data[:4*ranks],
		table:    data[4*ranks : 4*ranks+4<<tableBits],
		all:      data[4*ranks+4<<tableBits:],
		ranks:    ranks,
		n:        n,
		mask:     1<<tableBits - 1,
		rankBits: vocabfile.RankBits(ranks),
	}
	if binary.LittleEndian.Uint32(v.ends[4*(ranks-1):]) != uint32(allLen) {
		return nil, errors.New("compact vocabulary: bad lengths")
	}
	for b := range 256 {
		r := v.rank(string([]byte{byte(b)}))
		if r == noRank {
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
	if v.rank(piece) != noRank {
		return 1
	}
	return m.merge(v, piece)
}

// encodePiece appends the tokens of one pre-tokenizer piece to dst.
func (v *vocab) encodePiece(m *merger, dst []int, piece string) []int {
	if len(piece) == 1 {
		return append(dst, int(v.bytes[piece[0]]))
	}
	if r := v.rank(piece); r != noRank {
		return append(dst, int(r))
	}
	n := m.merge(v, piece)
	for k := range n {
		dst = append(dst, int(v.rank(piece[m.start(k):m.start(k+1)])))
	}
	return dst
}
