package thread_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// TestAppendAtSizeLimitRoundTrips appends a message without an id whose
// size is the limit exactly, as the thread measures it, and loads its
// export: what Append accepts, Load accepts. A thread gives such a message
// an id, and the size counts it from the start.
func TestAppendAtSizeLimitRoundTrips(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	limit := db.Limits().MessageBytes
	m := message.User("")
	m = message.User(strings.Repeat("x", limit-m.Size()))
	if m.Size() != limit {
		t.Fatalf("size %d, want the limit %d", m.Size(), limit)
	}
	th, err := db.Create(ctx, thread.CreateOptions{})
	must(t, err)
	c, err := th.Append(ctx, m)
	must(t, err)
	if got := c.Messages[0].Size(); got != limit {
		t.Fatalf("stored message of size %d, measured %d before its id", got, limit)
	}
	over := message.User(strings.Repeat("x", limit-message.User("").Size()+1))
	if _, err := th.Append(ctx, over); err == nil {
		t.Fatalf("a message one byte over the limit was appended")
	}
	for _, history := range []bool{false, true} {
		var doc bytes.Buffer
		must(t, th.Save(ctx, &doc, thread.SaveOptions{History: history}))
		if _, err := thread.New(thread.NewMemoryStore(), nil).Load(ctx, bytes.NewReader(doc.Bytes()), thread.LoadOptions{}); err != nil {
			t.Fatalf("history %v: the export of an accepted append does not load: %v", history, err)
		}
	}
}

// TestAppendedThreadsRoundTrip is a property: every thread that a seeded
// random sequence of accepted writes builds — appends of every kind of
// content, with and without ids, some right at the size limit; state;
// checkpoints; rollbacks, resets and restores — saves, loads into a fresh
// store and saves again byte for byte, with and without history. Writes
// the thread refuses are skipped: the property is about what it accepts.
func TestAppendedThreadsRoundTrip(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { roundTrip(t, seed) })
	}
}

func roundTrip(t *testing.T, seed uint64) {
	ctx := t.Context()
	r := rand.New(rand.NewPCG(seed, 7))
	limits := thread.Limits{MessageBytes: 512 + r.IntN(4096)}
	db := thread.New(thread.NewMemoryStore(), &thread.Options{Limits: limits, Now: fakeClock()})
	th, err := db.Create(ctx, thread.CreateOptions{Kind: thread.KindLocal, Title: "t"})
	must(t, err)
	g := &gen{r: r, limit: db.Limits().MessageBytes}
	var cps []string
	for step := range 30 {
		var err error
		switch op := r.IntN(12); {
		case op < 6:
			msgs := make([]message.Message, 1+r.IntN(3))
			for i := range msgs {
				msgs[i] = g.message()
			}
			_, err = th.Append(ctx, msgs...)
		case op < 8:
			opts := thread.CommitOptions{State: map[string]json.RawMessage{g.key(): g.json(3)}}
			if r.IntN(2) == 0 {
				opts.Messages = []message.Message{g.message()}
				opts.Metadata = map[string]string{"run": g.text(8)}
			}
			_, err = th.Commit(ctx, opts)
		case op < 9:
			name := fmt.Sprint("cp", step)
			if _, err = th.Checkpoint(ctx, name); err == nil {
				cps = append(cps, name)
			}
		case op < 10 && len(cps) > 0:
			err = th.Rollback(ctx, cps[r.IntN(len(cps))])
		case op < 11:
			err = th.Reset(ctx)
		default:
			err = th.Restore(ctx, 1+r.Int64N(th.Version()))
		}
		if err != nil {
			t.Logf("step %d refused: %v", step, err)
		}
	}
	for _, history := range []bool{false, true} {
		var first, second bytes.Buffer
		must(t, th.Save(ctx, &first, thread.SaveOptions{History: history}))
		other := thread.New(thread.NewMemoryStore(), &thread.Options{Limits: limits})
		loaded, err := other.Load(ctx, bytes.NewReader(first.Bytes()), thread.LoadOptions{})
		if err != nil {
			t.Fatalf("history %v: the export does not load: %v", history, err)
		}
		must(t, loaded.Save(ctx, &second, thread.SaveOptions{History: history}))
		if !bytes.Equal(first.Bytes(), second.Bytes()) {
			t.Fatalf("history %v: save → load → save differs:\n%s\n---\n%s", history, first.String(), second.String())
		}
	}
}

// gen makes random messages and JSON.
type gen struct {
	r     *rand.Rand
	limit int
	n     int
}

// text returns up to n runes of text from a mix of scripts, escapes and
// characters encoding/json writes escaped.
func (g *gen) text(n int) string {
	runes := []rune("aZ9 é€😀\"\\<>&\u2028\t\n/")
	var b strings.Builder
	for range g.r.IntN(n + 1) {
		b.WriteRune(runes[g.r.IntN(len(runes))])
	}
	return b.String()
}

func (g *gen) key() string { return fmt.Sprintf("k/%d", g.r.IntN(4)) }

// json returns a random JSON value nested at most depth deep.
func (g *gen) json(depth int) json.RawMessage {
	var v any
	var build func(d int) any
	build = func(d int) any {
		switch k := g.r.IntN(6); {
		case k == 0 || d == 0:
			return g.text(6)
		case k == 1:
			return json.Number(fmt.Sprint(g.r.IntN(1000) - 500))
		case k == 2:
			return g.r.IntN(2) == 0
		case k == 3:
			return nil
		case k == 4:
			a := make([]any, g.r.IntN(3))
			for i := range a {
				a[i] = build(d - 1)
			}
			return a
		default:
			m := map[string]any{}
			for range g.r.IntN(3) {
				m[g.text(4)] = build(d - 1)
			}
			return m
		}
	}
	v = build(depth)
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// message returns a random message: any content, an id of its own or none,
// metadata or none; one in four is padded to the size limit exactly.
func (g *gen) message() message.Message {
	roles := []message.Role{message.RoleUser, message.RoleAssistant, message.RoleTool, message.RoleSystem}
	m := message.Message{Role: roles[g.r.IntN(len(roles))]}
	if g.r.IntN(3) == 0 {
		g.n++
		m.ID = fmt.Sprintf("own-%d-%d", g.n, g.r.IntN(1000))
	}
	if g.r.IntN(3) == 0 {
		m.AuthorName = g.text(5)
	}
	for range 1 + g.r.IntN(3) {
		var c message.Content
		switch g.r.IntN(8) {
		case 0:
			c = message.FunctionCall{CallID: "call_" + g.text(3), Name: "f", Arguments: string(g.json(2))}
		case 1:
			c = message.FunctionResult{CallID: "call_1", Result: g.text(20), IsError: g.r.IntN(2) == 0}
		case 2:
			c = message.Data{MediaType: "image/png", Data: []byte(g.text(10))}
		case 3:
			c = message.Reasoning{Text: g.text(10), Protected: g.text(5)}
		case 4:
			c = message.Usage{InputTokens: g.r.Int64N(100), OutputTokens: g.r.Int64N(100)}
		case 5:
			// As a caller may build it: spaces, and <, > and & unescaped,
			// which the wire writes escaped.
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(g.text(8)); err != nil {
				panic(err)
			}
			c = message.Unknown{Raw: []byte(fmt.Sprintf(`{"type": "citation", "n": %d, "t": %s}`, g.r.IntN(9), bytes.TrimSpace(b.Bytes())))}
		default:
			c = message.Text{Text: g.text(40)}
		}
		m.Contents = append(m.Contents, c)
	}
	if g.r.IntN(3) == 0 {
		var md map[string]any
		if err := json.Unmarshal([]byte(`{"k":`+string(g.json(2))+`}`), &md); err != nil {
			panic(err)
		}
		m.Metadata = md
	}
	if g.r.IntN(4) == 0 {
		// Pad to the limit exactly: one more byte would be refused.
		if pad := g.limit - m.Size() - 16; pad >= 0 {
			m.Contents = append(m.Contents, message.Text{Text: strings.Repeat("é", pad/2) + strings.Repeat("a", pad%2)})
		}
	}
	return m
}
