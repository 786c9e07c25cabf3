// Package vocabfile is the compact form of a byte-pair vocabulary that package
// tokens embeds: the tokens' bytes and a hash index, laid out so that a
// lookup reads the embedded bytes directly and loading costs nothing.
//
// The layout, every integer little-endian uint32:
//
//	"loomvoc1"
//	ranks, tokens, tableBits, allLen
//	ends[ranks]          rank r's token is all[ends[r-1]:ends[r]] (ends[-1] is 0); empty if no token has rank r
//	table[1<<tableBits]  0, or an entry: Fingerprint(hash) | rank+1, linear probing from hash's low bits
//	all[allLen]          the tokens' bytes in rank order
package vocabfile

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// Magic starts a compact vocabulary.
const Magic = "loomvoc1"

// HeaderLen is the length of the header: Magic and four counts.
const HeaderLen = len(Magic) + 16

// Hash is the hash the index is built with. It must never change without
// regenerating the files (the test that regenerates them would fail).
func Hash(s string) uint64 {
	const m1, m2 = 0xa0761d6478bd642f, 0xe7037ed1a0b428db
	h := uint64(len(s)) ^ m1
	for len(s) >= 8 {
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		h = mix(h^w, m2)
		s = s[8:]
	}
	var w uint64
	for i := 0; i < len(s); i++ {
		w |= uint64(s[i]) << (8 * i)
	}
	return mix(mix(h^w, m2), m1)
}

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// RankBits is the number of low bits of a table entry that hold rank+1 in
// a vocabulary of ranks ranks; the rest hold a fingerprint of the hash.
func RankBits(ranks int) int { return bits.Len32(uint32(ranks)) }

// Compact returns the compact form of a .tiktoken file: one
// "base64(token) rank" line per token.
func Compact(tiktoken []byte) ([]byte, error) {
	var toks [][]byte // by rank
	for line := range bytes.Lines(tiktoken) {
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			continue
		}
		b64, num, ok := bytes.Cut(line, []byte{' '})
		if !ok {
			return nil, fmt.Errorf("line %q: no rank", line)
		}
		var rank int
		if _, err := fmt.Sscan(string(num), &rank); err != nil || rank < 0 || rank >= 1<<24 {
			return nil, fmt.Errorf("line %q: bad rank", line)
		}
		tok, err := base64.StdEncoding.DecodeString(string(b64))
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", line, err)
		}
		if len(tok) == 0 {
			return nil, fmt.Errorf("line %q: empty token", line)
		}
		for len(toks) <= rank {
			toks = append(toks, nil)
		}
		if toks[rank] != nil {
			return nil, fmt.Errorf("rank %d twice", rank)
		}
		toks[rank] = tok
	}
	ranks := len(toks)
	if ranks == 0 {
		return nil, errors.New("no tokens")
	}
	rankBits := RankBits(ranks)
	tableBits := bits.Len(uint(2*ranks - 1)) // at most half full
	table := make([]uint32, 1<<tableBits)
	mask := uint64(len(table) - 1)
	fpMask := ^uint32(0) << rankBits
	n := 0
	for r, tok := range toks {
		if tok == nil {
			continue
		}
		n++
		h := Hash(string(tok))
		for i := h & mask; ; i = (i + 1) & mask {
			e := table[i]
			if e == 0 {
				table[i] = uint32(h>>32)&fpMask | uint32(r+1)
				break
			}
			if bytes.Equal(toks[e&^fpMask-1], tok) {
				return nil, fmt.Errorf("token %q twice", tok)
			}
		}
	}
	out := []byte(Magic)
	var all []byte
	for _, v := range []int{ranks, n, tableBits} {
		out = binary.LittleEndian.AppendUint32(out, uint32(v))
	}
	for _, tok := range toks {
		all = append(all, tok...)
	}
	out = binary.LittleEndian.AppendUint32(out, uint32(len(all)))
	end := 0
	for _, tok := range toks {
		end += len(tok)
		out = binary.LittleEndian.AppendUint32(out, uint32(end))
	}
	for _, e := range table {
		out = binary.LittleEndian.AppendUint32(out, e)
	}
	return append(out, all...), nil
}
