package tokens

// noRank is the rank of a byte string that is not a token.
const noRank = ^uint32(0)

// smallPiece is the length up to which merge uses tiktoken's own loop, which
// rescans the parts after each merge: for the short pieces that are nearly
// all of real text it is faster than a heap, and it needs no allocation.
// Longer pieces (long runs of digits-free symbols, base64, whitespace) use a
// heap, so that a piece of n bytes costs O(n log n) rather than O(n²).
const smallPiece = 128

// part is a run of bytes of a piece being merged: where it starts, and the
// rank of the pair it forms with the next part (noRank if none).
type part struct {
	start int32
	rank  uint32
}

// merger runs the byte-pair merge of one piece at a time. Its buffers are
// reused from piece to piece.
type merger struct {
	small [smallPiece + 1]part
	// The result: token k starts at small[k].start, or at large[k].start
	// if isLarge.
	isLarge bool

	// The heap path's buffers.
	next, prev []int32
	heap       []pair
	large      []part
}

// merge splits piece into the tokens the byte-pair merge makes of it and
// returns how many there are; token k is piece[m.start(k):m.start(k+1)].
//
// The merge is tiktoken's: while some two adjacent parts form a token, merge
// the pair whose token has the lowest rank, the leftmost one on a tie.
func (m *merger) merge(v *vocab, piece string) int {
	if len(piece) <= smallPiece {
		return m.mergeSmall(v, piece)
	}
	return m.mergeLarge(v, piece)
}

// start returns where token k starts; start(n) is the piece's length.
func (m *merger) start(k int) int {
	if m.isLarge {
		return int(m.large[k].start)
	}
	return int(m.small[k].start)
}

func (m *merger) mergeSmall(v *vocab, piece string) int {
	parts := m.small[:0]
	minRank, minAt := noRank, -1
	for i := 0; i < len(piece)-1; i++ {
		r := v.rank(piece[i : i+2])
		if r < minRank {
			minRank, minAt = r, i
		}
		parts = append(parts, part{int32(i), r})
	}
	parts = append(parts, part{int32(len(piece) - 1), noRank}, part{int32(len(piece)), noRank})
	// rankAt is the rank of parts i and i+1 merged, given that parts i+1
	// and i+2 are about to be merged.
	rankAt := func(i int) uint32 {
		if i+3 < len(parts) {
			return v.rank(piece[parts[i].start:parts[i+3].start])
		}
		return noRank
	}
	for minRank != noRank {
		i := minAt
		if i > 0 {
			parts[i-1].rank = rankAt(i - 1)
		}
		parts[i].rank = rankAt(i)
		parts = append(parts[:i+1], parts[i+2:]...)
		minRank, minAt = noRank, -1
		for j, p := range parts[:len(parts)-1] {
			if p.rank < minRank {
				minRank, minAt = p.rank, j
			}
		}
	}
	m.isLarge = false
	return len(parts) - 1
}

// pair is a candidate merge of the part at pos with the next part, ending
// at end. It is stale once either part has been merged into another.
type pair struct {
	rank     uint32
	pos, end int32
}

func (p pair) less(q pair) bool {
	return p.rank < q.rank || p.rank == q.rank && p.pos < q.pos
}

func (m *merger) mergeLarge(v *vocab, piece string) int {
	n := int32(len(piece))
	m.next = grow(m.next, int(n)+1)
	m.prev = grow(m.prev, int(n)+1)
	next, prev := m.next, m.prev
	for i := range n + 1 {
		next[i], prev[i] = i+1, i-1
	}
	h := m.heap[:0]
	for i := range n - 1 {
		if r := v.rank(piece[i : i+2]); r != noRank {
			h = append(h, pair{r, i, i + 2})
		}
	}
	heapInit(h)
	for len(h) > 0 {
		p := h[0]
		h = heapPop(h)
		mid := next[p.pos]
		if mid < 0 || mid >= n || next[mid] != p.end {
			continue // stale
		}
		// Merge the part at mid into the part at p.pos.
		next[p.pos] = p.end
		next[mid] = -1
		if p.end < n {
			prev[p.end] = p.pos
		}
		if l := prev[p.pos]; l >= 0 {
			if r := v.rank(piece[l:p.end]); r != noRank {
				h = heapPush(h, pair{r, l, p.end})
			}
		}
		if p.end < n {
			e := next[p.end]
			if r := v.rank(piece[p.pos:e]); r != noRank {
				h = heapPush(h, pair{r, p.pos, e})
			}
		}
	}
	m.heap = h
	parts := m.large[:0]
	for i := int32(0); i < n; i = next[i] {
		parts = append(parts, part{start: i})
	}
	parts = append(parts, part{start: n})
	m.large, m.isLarge = parts, true
	return len(parts) - 1
}

func grow(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

func heapInit(h []pair) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		heapDown(h, i)
	}
}

func heapPush(h []pair, p pair) []pair {
	h = append(h, p)
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h[i].less(h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
	return h
}

func heapPop(h []pair) []pair {
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	heapDown(h, 0)
	return h
}

func heapDown(h []pair, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && h[r].less(h[l]) {
			c = r
		}
		if !h[c].less(h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
