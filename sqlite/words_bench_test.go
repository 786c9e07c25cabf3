package sqlite

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// commonWords are the most frequent words of English, most frequent first:
// the head of the benchmarks' vocabulary.
var commonWords = strings.Fields(`the of and to a in is it you that he was for on are with as I his they
	be at one have this from or had by not word but what some we can out other were all there when up
	use your how said an each she which do their time if will way about many then them write would like
	so these her long make thing see him two has look more day could go come did number sound no most
	people my over know water than call first who may down side been now find any new work part take get
	place made live where after back little only round man year came show every good me give our under
	name very through just form sentence great think say help low line differ turn cause much mean before
	move right boy old too same tell does set three want air well also play small end put home read hand
	port large spell add even land here must big high such follow act why ask men change went light kind
	off need house picture try us again animal point mother world near build self earth father head stand
	own page should country found answer school grow study still learn plant cover food sun four between
	state keep eye never last let thought city tree cross farm hard start might story saw far sea draw
	left late run while press close night real life few north open seem together next white children
	begin got walk example ease paper group always music those both mark often letter until mile river
	car feet care second book carry took science eat room friend began idea fish mountain stop once base
	hear horse cut sure watch color face wood main enough plain girl usual young ready above ever red list
	though feel talk bird soon body dog family direct pose leave song measure door product black short
	numeral class wind question happen complete ship area half rock order fire south problem piece told
	knew pass since top whole king space heard best hour better true during hundred five remember step
	early hold west ground interest reach fast verb sing listen six table travel less morning ten simple
	several vowel toward war lay against pattern slow center love person money serve appear road map rain
	rule govern pull cold notice voice unit power town fine certain fly fall lead cry dark machine note
	wait plan figure star box noun field rest correct able pound done beauty drive stood contain front
	teach week final gave green oh quick develop ocean warm free minute strong special mind behind clear
	tail produce fact street inch multiply nothing course stay wheel full force blue object decide surface
	deep moon island foot system busy test record boat common gold possible plane stead dry wonder laugh
	thousand ago ran check game shape equate hot miss brought heat snow tire bring yes distant fill east
	paint language among`)

// vocabulary returns n words: commonWords, then made-up words of two to
// four syllables, the same ones on every call.
func vocabulary(n int) []string {
	r := rand.New(rand.NewPCG(1, 2))
	seen := make(map[string]bool, n)
	var out []string
	for _, w := range commonWords {
		if w = strings.ToLower(w); !seen[w] && len(out) < n {
			seen[w] = true
			out = append(out, w)
		}
	}
	const onsets, vowels, codas = "bcdfghjklmnprstvwz", "aeiou", "nrstlmk"
	for len(out) < n {
		var b strings.Builder
		for range 2 + r.IntN(3) {
			b.WriteByte(onsets[r.IntN(len(onsets))])
			b.WriteByte(vowels[r.IntN(len(vowels))])
			if r.IntN(3) == 0 {
				b.WriteByte(codas[r.IntN(len(codas))])
			}
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// prose writes English-like text: words of a vocabulary drawn with a Zipf
// distribution (word i about as frequent as 1/i), in sentences.
type prose struct {
	words []string
	r     *rand.Rand
	zipf  *rand.Zipf
}

func newProse(seed uint64, vocab []string) *prose {
	r := rand.New(rand.NewPCG(seed, 7))
	return &prose{words: vocab, r: r, zipf: rand.NewZipf(r, 1.07, 2, uint64(len(vocab)-1))}
}

// text returns min to max words.
func (p *prose) text(min, max int) string {
	n := min + p.r.IntN(max-min+1)
	var b strings.Builder
	start := true
	for i := range n {
		w := p.words[p.zipf.Uint64()]
		if start {
			w = strings.ToUpper(w[:1]) + w[1:]
			start = false
		}
		b.WriteString(w)
		switch {
		case i == n-1 || p.r.IntN(12) == 0:
			b.WriteString(". ")
			start = true
		case p.r.IntN(8) == 0:
			b.WriteString(", ")
		default:
			b.WriteByte(' ')
		}
	}
	return strings.TrimSpace(b.String())
}

// BenchmarkChatTurnWords is a chat turn of English-like text, a question
// of 20 to 40 words and an answer of 100 to 200, so that each message has
// words to index (BenchmarkChatTurn's messages are one word each).
func BenchmarkChatTurnWords(b *testing.B) {
	ctx := context.Background()
	p := newProse(1, vocabulary(30_000))
	var turnsText [256][2]message.Message
	for i := range turnsText {
		turnsText[i] = [2]message.Message{message.User(p.text(20, 40)), message.Assistant(p.text(100, 200))}
	}
	db := thread.New(openBench(b, nil), nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 1; b.Loop(); i++ {
		t := turnsText[i%len(turnsText)]
		if _, err := th.Append(ctx, t[0], t[1]); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 0 {
			b.StopTimer()
			if err := th.Delete(ctx); err != nil {
				b.Fatal(err)
			}
			if th, err = db.Create(ctx, thread.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
}
