package thread_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/storetest"
	"github.com/loomthreads/loom/tokens"
)

var viewWords = strings.Fields("the quick brown fox jumps over a lazy dog while seven weather reports " +
	"arrive from Paris Tokyo and Lima; temperatures 21.5 °C, humidity 40% — {\"ok\":true}")

func viewText(r *rand.Rand, words int) string {
	var b strings.Builder
	for i := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(viewWords[r.IntN(len(viewWords))])
	}
	return b.String()
}

// viewThread is a random thread and what the generator knows about it.
type viewThread struct {
	th      *thread.Thread
	msgs    []message.Message // as stored, oldest first
	pending map[string]bool   // ids of calls whose results never came
}

// newViewThread appends a random thread: system, user and assistant
// messages and tool calls (parallel or not) whose results come back in
// random order, sometimes after other messages, in commits of 1 to 4
// messages; sometimes a call is left without results at the end.
func newViewThread(tb testing.TB, r *rand.Rand, db *thread.DB, n int) *viewThread {
	tb.Helper()
	ctx := context.Background()
	th, err := db.Create(ctx, thread.CreateOptions{})
	must(tb, err)
	var seq []message.Message
	call := 0
	for len(seq) < n {
		switch k := r.IntN(10); {
		case k == 0:
			seq = append(seq, message.System(viewText(r, 1+r.IntN(20))))
		case k < 4:
			seq = append(seq, message.User(viewText(r, 1+r.IntN(40))))
		case k < 6:
			seq = append(seq, message.Assistant(viewText(r, 1+r.IntN(60))))
		default:
			var calls []message.Content
			var results []message.Message
			for range 1 + r.IntN(3) {
				call++
				id := fmt.Sprint("call_", call)
				calls = append(calls, message.FunctionCall{CallID: id, Name: []string{"weather", "search", "read"}[r.IntN(3)], Arguments: `{"q":"x"}`})
				results = append(results, message.ToolResult(id, viewText(r, 1+r.IntN(150))))
			}
			r.Shuffle(len(results), func(i, j int) { results[i], results[j] = results[j], results[i] })
			seq = append(seq, message.New(message.RoleAssistant, calls...))
			if r.IntN(4) == 0 { // a message between the call and its results
				seq = append(seq, message.Assistant(viewText(r, 3)))
			}
			seq = append(seq, results...)
		}
	}
	vt := &viewThread{th: th, pending: map[string]bool{}}
	if r.IntN(5) == 0 {
		call++
		seq = append(seq, message.ToolCall(fmt.Sprint("call_", call), "weather", `{}`))
	}
	for len(seq) > 0 {
		k := min(1+r.IntN(4), len(seq))
		c, err := th.Append(ctx, seq[:k]...)
		must(tb, err)
		vt.msgs = append(vt.msgs, c.Messages...)
		seq = seq[k:]
	}
	if len(vt.msgs) > 0 {
		if last := vt.msgs[len(vt.msgs)-1]; len(last.Calls()) > 0 {
			vt.pending[last.ID] = true
		}
	}
	return vt
}

func randomViewOptions(r *rand.Rand, vt *viewThread, counter *tokens.Counter) thread.ViewOptions {
	opts := thread.ViewOptions{Counter: counter}
	if r.IntN(4) > 0 {
		opts.Budget = 20 + r.IntN(3000)
	}
	if r.IntN(3) == 0 {
		opts.MaxMessages = 1 + r.IntN(40)
	}
	if r.IntN(2) == 0 {
		opts.Model = []string{"gpt-4", "gpt-4o", "claude-sonnet-4"}[r.IntN(3)]
	}
	for range r.IntN(3) {
		opts.Instructions = append(opts.Instructions, message.System(viewText(r, 1+r.IntN(30))))
	}
	if len(vt.msgs) > 0 {
		for range r.IntN(3) {
			opts.Pinned = append(opts.Pinned, vt.msgs[r.IntN(len(vt.msgs))].ID)
		}
	}
	all := []thread.Strategy{thread.DropOldest{}, thread.SlidingWindow{Turns: 1 + r.IntN(5)},
		thread.ElideToolResults{KeepLast: r.IntN(3)}}
	if r.IntN(4) > 0 {
		opts.Strategies = []thread.Strategy{}
		for _, i := range r.Perm(len(all))[:r.IntN(len(all)+1)] {
			opts.Strategies = append(opts.Strategies, all[i])
		}
	}
	return opts
}

// TestViewInvariants checks every invariant of a view on random threads,
// layouts of tool calls and results, budgets, pins and strategy chains.
func TestViewInvariants(t *testing.T) {
	seeds := 250
	if testing.Short() {
		seeds = 50
	}
	counter := tokens.NewCounter(nil)
	db := thread.New(thread.NewMemoryStore(), nil)
	var views, errs, dropped, elided int
	for seed := range uint64(seeds) {
		r := rand.New(rand.NewPCG(seed, 4))
		vt := newViewThread(t, r, db, r.IntN(200))
		for range 4 {
			opts := randomViewOptions(r, vt, counter)
			v, err := vt.th.View(t.Context(), opts)
			checkView(t, fmt.Sprintf("seed %d: %+v", seed, opts), vt, opts, v, err)
			if err != nil {
				errs++
				continue
			}
			views++
			if len(v.Dropped) > 0 {
				dropped++
			}
			if len(v.Elided) > 0 {
				elided++
			}
			again, err := vt.th.View(t.Context(), opts)
			must(t, err)
			if !reflect.DeepEqual(v, again) { // go-cmp only to explain: it is slow
				t.Fatalf("seed %d: a second view differs (-first +second):\n%s", seed, cmp.Diff(v, again))
			}
		}
	}
	t.Logf("%d views (%d with drops, %d with elisions), %d errors", views, dropped, elided, errs)
}

// TestViewSummarizeInvariants checks the invariants of views that compact
// random threads, and of the views that follow.
func TestViewSummarizeInvariants(t *testing.T) {
	seeds := 100
	if testing.Short() {
		seeds = 20
	}
	counter := tokens.NewCounter(nil)
	db := thread.New(thread.NewMemoryStore(), nil)
	compactions := 0
	for seed := range uint64(seeds) {
		r := rand.New(rand.NewPCG(seed, 5))
		vt := newViewThread(t, r, db, r.IntN(250))
		sum := &fakeSummarizer{}
		for range 3 {
			opts := randomViewOptions(r, vt, counter)
			opts.Strategies = append(opts.Strategies, thread.Summarize{Summarizer: sum, Keep: r.IntN(5)})
			v, err := vt.th.View(t.Context(), opts)
			vt.msgs = sinceCompaction(t, db, vt.th)
			checkView(t, fmt.Sprintf("seed %d: %+v", seed, opts), vt, opts, v, err)
			if err == nil && v.Compacted != "" {
				compactions++
			}
		}
	}
	t.Logf("%d views after a compaction", compactions)
}

// recount counts views again, apart from the counters views use.
var recount = tokens.NewCounter(nil)

func checkView(t *testing.T, name string, vt *viewThread, opts thread.ViewOptions, v *thread.View, err error) {
	t.Helper()
	enc := opts.Encoding
	if enc.IsZero() {
		enc, _ = tokens.EncodingFor(opts.Model)
	}
	fresh := recount
	if err != nil {
		var ob *thread.OverBudgetError
		switch {
		case errors.As(err, &ob):
			if !errors.Is(err, thread.ErrOverBudget) || !errors.Is(err, thread.ErrInvalid) {
				t.Fatalf("%s: %v does not match ErrOverBudget and ErrInvalid", name, err)
			}
			if !(opts.Budget > 0 && ob.Tokens > opts.Budget) && !(opts.MaxMessages > 0 && ob.Messages > opts.MaxMessages) {
				t.Fatalf("%s: %v, yet the mandatory messages fit", name, err)
			}
			if min := fresh.CountRequest(opts.Instructions, enc); ob.Tokens < min {
				t.Fatalf("%s: %v: fewer tokens than the instructions' %d", name, err, min)
			}
		case errors.Is(err, thread.ErrInvalid) && slices.ContainsFunc(opts.Pinned, func(id string) bool { return vt.pending[id] }):
			// A pinned call without results cannot be kept.
		default:
			t.Fatalf("%s: %v", name, err)
		}
		return
	}
	// Budget and count, recounted from scratch.
	if n := fresh.CountRequest(v.Messages, enc); n != v.Tokens {
		t.Fatalf("%s: view says %d tokens, recount %d", name, v.Tokens, n)
	}
	if opts.Budget > 0 && v.Tokens > opts.Budget {
		t.Fatalf("%s: %d tokens over the budget", name, v.Tokens)
	}
	if opts.MaxMessages > 0 && len(v.Messages) > opts.MaxMessages {
		t.Fatalf("%s: %d messages over the max", name, len(v.Messages))
	}
	// Instructions first.
	if len(v.Messages) < len(opts.Instructions) || len(opts.Instructions) > 0 && !cmp.Equal(v.Messages[:len(opts.Instructions)], opts.Instructions) {
		t.Fatalf("%s: instructions not first", name)
	}
	kept := v.Messages[len(opts.Instructions):]
	pos := map[string]int{}
	for i, m := range vt.msgs {
		pos[m.ID] = i
	}
	elided := map[string]bool{}
	for _, id := range v.Elided {
		elided[id] = true
	}
	// Order preserved; messages unchanged unless elided.
	in := map[string]bool{}
	last := -1
	for _, m := range kept {
		p, ok := pos[m.ID]
		if !ok || p <= last {
			t.Fatalf("%s: message %s out of order or not in the thread", name, m.ID)
		}
		last = p
		in[m.ID] = true
		if elided[m.ID] {
			for _, fr := range m.Results() {
				if !strings.HasPrefix(fr.Result, "[elided: ") {
					t.Fatalf("%s: elided %s has result %q", name, m.ID, fr.Result)
				}
			}
		} else if !reflect.DeepEqual(m, vt.msgs[p]) && !cmp.Equal(m, vt.msgs[p]) {
			t.Fatalf("%s: message %s changed", name, m.ID)
		}
	}
	// Dropped: read, left out, oldest first.
	last = -1
	for _, id := range v.Dropped {
		p, ok := pos[id]
		if !ok || p <= last || in[id] {
			t.Fatalf("%s: dropped %s out of order, unknown or kept", name, id)
		}
		last = p
	}
	// Mandatory messages.
	for _, id := range opts.Pinned {
		if !in[id] {
			t.Fatalf("%s: pinned %s dropped", name, id)
		}
	}
	for i := len(vt.msgs) - 1; i >= 0; i-- {
		if vt.msgs[i].Role == message.RoleUser {
			if !in[vt.msgs[i].ID] {
				t.Fatalf("%s: newest user message %s dropped", name, vt.msgs[i].ID)
			}
			break
		}
	}
	if len(kept) > 0 {
		for _, m := range vt.msgs[pos[kept[0].ID]:] {
			if m.Role == message.RoleSystem && !in[m.ID] {
				t.Fatalf("%s: system message %s in the window dropped", name, m.ID)
			}
		}
	}
	// Tool calls and results are kept together.
	// A compact commit repeats messages of its parent, with their ids:
	// count results by message id.
	results := map[string]map[string]bool{} // call id → ids of its results in the thread
	for _, m := range vt.msgs {
		for _, fr := range m.Results() {
			if results[fr.CallID] == nil {
				results[fr.CallID] = map[string]bool{}
			}
			results[fr.CallID][m.ID] = true
		}
	}
	called := map[string]bool{}
	seen := map[string]int{}
	for _, m := range kept {
		for _, fc := range m.Calls() {
			called[fc.CallID] = true
		}
		for _, fr := range m.Results() {
			if !called[fr.CallID] {
				t.Fatalf("%s: result of %s without its call before it", name, fr.CallID)
			}
			seen[fr.CallID]++
		}
	}
	for id := range called {
		if seen[id] == 0 || seen[id] != len(results[id]) {
			t.Fatalf("%s: call %s without all its results", name, id)
		}
	}
}

// fakeSummarizer counts its calls.
type fakeSummarizer struct{ calls atomic.Int32 }

func (f *fakeSummarizer) Summarize(_ context.Context, msgs []message.Message) (message.Message, error) {
	f.calls.Add(1)
	return message.Assistant(fmt.Sprintf("Summary of %d messages.", len(msgs))), nil
}

func chat(tb testing.TB, th *thread.Thread, turns int) []message.Message {
	tb.Helper()
	var out []message.Message
	for i := range turns {
		c, err := th.Append(context.Background(),
			message.User(fmt.Sprintf("Question %d: what is the weather like in Paris today?", i)),
			message.Assistant(fmt.Sprintf("Answer %d: it is sunny and 21 degrees in Paris today.", i)))
		must(tb, err)
		out = append(out, c.Messages...)
	}
	return out
}

func TestSummaryCommitIsReused(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	must(t, err)
	originals := chat(t, th, 100)
	before := th.Version()
	sum := &fakeSummarizer{}
	opts := thread.ViewOptions{Budget: 400, Strategies: []thread.Strategy{thread.Summarize{Summarizer: sum, Keep: 4}}}

	v1, err := th.View(ctx, opts)
	must(t, err)
	if sum.calls.Load() != 1 || v1.Compacted == "" {
		t.Fatalf("first view: %d summaries, compacted %q", sum.calls.Load(), v1.Compacted)
	}
	if v1.Tokens > opts.Budget || v1.Messages[0].Text() != "Summary of 196 messages." {
		t.Fatalf("first view: %d tokens, starts with %q", v1.Tokens, v1.Messages[0].Text())
	}
	c, err := db.Store().Commit(ctx, v1.Compacted)
	must(t, err)
	if c.Op != thread.OpCompact || c.Metadata["compacts"] != originals[0].ID+".."+originals[195].ID {
		t.Fatalf("compact commit: op %s, metadata %v", c.Op, c.Metadata)
	}
	if th.Version() != before+1 {
		t.Fatalf("version %d after compaction, want %d", th.Version(), before+1)
	}

	v2, err := th.View(ctx, opts)
	must(t, err)
	if sum.calls.Load() != 1 {
		t.Fatalf("second view called the summarizer again")
	}
	if v2.Compacted != v1.Compacted || !cmp.Equal(v1, v2) {
		t.Fatalf("second view differs:\n%s", cmp.Diff(v1, v2))
	}
	wantTail := []string{originals[196].ID, originals[197].ID, originals[198].ID, originals[199].ID}
	var gotTail []string
	for _, m := range v2.Messages[1:] {
		gotTail = append(gotTail, m.ID)
	}
	if !slices.Equal(gotTail, wantTail) {
		t.Fatalf("kept %v, want %v", gotTail, wantTail)
	}
	// History keeps the originals.
	old, err := th.Messages(ctx, thread.ReadOptions{Version: before})
	must(t, err)
	if !cmp.Equal(old, originals) {
		t.Fatal("history lost the originals")
	}
	if c.Parent == "" {
		t.Fatal("compact commit without a parent")
	}
	// More turns that fit reuse the summary too.
	chat(t, th, 1)
	v3, err := th.View(ctx, opts)
	must(t, err)
	if sum.calls.Load() != 1 || v3.Compacted != v1.Compacted || len(v3.Messages) != 7 {
		t.Fatalf("third view: %d summaries, compacted %q, %d messages", sum.calls.Load(), v3.Compacted, len(v3.Messages))
	}
}

func TestSummarizeConflict(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	must(t, err)
	chat(t, th, 50)
	other, err := db.Thread(ctx, th.ID())
	must(t, err)
	chat(t, other, 1)
	sum := &fakeSummarizer{}
	_, err = th.View(ctx, thread.ViewOptions{Budget: 300, Strategies: []thread.Strategy{thread.Summarize{Summarizer: sum}}})
	if !errors.Is(err, thread.ErrConflict) {
		t.Fatalf("stale compaction: %v, want ErrConflict", err)
	}
	n, err := other.Len(ctx)
	must(t, err)
	if n != 102 {
		t.Fatalf("%d messages after a failed compaction", n)
	}
}

func TestSummarizeOldVersionDoesNotCommit(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	must(t, err)
	chat(t, th, 30)
	v := th.Version()
	chat(t, th, 1)
	sum := &fakeSummarizer{}
	view, err := th.View(ctx, thread.ViewOptions{Version: v, Budget: 300, Strategies: []thread.Strategy{thread.Summarize{Summarizer: sum}}})
	must(t, err)
	if sum.calls.Load() != 0 || view.Compacted != "" || view.Tokens > 300 {
		t.Fatalf("old version: %d summaries, compacted %q, %d tokens", sum.calls.Load(), view.Compacted, view.Tokens)
	}
}

// ids returns the ids of msgs.
func ids(msgs []message.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

func TestViewStrategies(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	must(t, err)
	big := strings.Repeat("sunny and warm ", 200)
	seq := []message.Message{
		message.User("Weather in Paris?"),                     // 0
		message.ToolCall("c1", "weather", `{"city":"Paris"}`), // 1
		message.ToolResult("c1", big),                         // 2
		message.Assistant("Sunny."),                           // 3
		message.User("And in Lima?"),                          // 4
		message.ToolCall("c2", "weather", `{"city":"Lima"}`),  // 5
		message.ToolResult("c2", big),                         // 6
		message.Assistant("Warm."),                            // 7
		message.User("Thanks. Anything else?"),                // 8
		message.Assistant("No."),                              // 9
	}
	c, err := th.Append(ctx, seq...)
	must(t, err)
	msgs := c.Messages
	full, err := th.View(ctx, thread.ViewOptions{})
	must(t, err)

	for _, tc := range []struct {
		name    string
		opts    thread.ViewOptions
		keep    []int
		elided  []int
		dropped []int
	}{
		{name: "no limit", keep: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{name: "drop oldest, units whole", opts: thread.ViewOptions{Budget: full.Tokens - 10},
			keep: []int{3, 4, 5, 6, 7, 8, 9}, dropped: []int{0, 1, 2}},
		{name: "max messages", opts: thread.ViewOptions{MaxMessages: 5},
			keep: []int{5, 6, 7, 8, 9}, dropped: []int{0, 1, 2, 3, 4}},
		{name: "sliding window", opts: thread.ViewOptions{Strategies: []thread.Strategy{thread.SlidingWindow{Turns: 2}}},
			keep: []int{4, 5, 6, 7, 8, 9}, dropped: []int{0, 1, 2, 3}},
		{name: "elide keeps the last", opts: thread.ViewOptions{Budget: full.Tokens - 10,
			Strategies: []thread.Strategy{thread.ElideToolResults{KeepLast: 1}}},
			keep: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, elided: []int{2}},
		{name: "elide then drop", opts: thread.ViewOptions{Budget: 200,
			Strategies: []thread.Strategy{thread.ElideToolResults{}}},
			keep: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, elided: []int{2, 6}},
		{name: "pinned", opts: thread.ViewOptions{Budget: full.Tokens - 10, Pinned: []string{msgs[0].ID}},
			keep: []int{0, 3, 4, 5, 6, 7, 8, 9}, dropped: []int{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := th.View(ctx, tc.opts)
			must(t, err)
			pick := func(is []int) []string {
				var out []string
				for _, i := range is {
					out = append(out, msgs[i].ID)
				}
				return out
			}
			if diff := cmp.Diff(pick(tc.keep), ids(v.Messages)); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(pick(tc.elided), v.Elided); diff != "" {
				t.Errorf("elided (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(pick(tc.dropped), v.Dropped); diff != "" {
				t.Errorf("dropped (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("stub", func(t *testing.T) {
		v, err := th.View(ctx, thread.ViewOptions{Budget: full.Tokens - 10, Strategies: []thread.Strategy{thread.ElideToolResults{KeepLast: 1}}})
		must(t, err)
		want := fmt.Sprintf("[elided: %d bytes of weather result]", len(big))
		if got := v.Messages[2].Results()[0].Result; got != want || v.Messages[2].ID != msgs[2].ID {
			t.Errorf("stub %q, want %q", got, want)
		}
		v, err = th.View(ctx, thread.ViewOptions{Budget: full.Tokens - 10, Strategies: []thread.Strategy{thread.ElideToolResults{KeepLast: 1, Stub: "({name}: {bytes})"}}})
		must(t, err)
		if got := v.Messages[2].Results()[0].Result; got != fmt.Sprintf("(weather: %d)", len(big)) {
			t.Errorf("custom stub %q", got)
		}
	})
}

func TestViewErrors(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	must(t, err)
	chat(t, th, 5)

	instr := []message.Message{message.System(strings.Repeat("Be brief. ", 50))}
	_, err = th.View(ctx, thread.ViewOptions{Budget: 50, Instructions: instr})
	var ob *thread.OverBudgetError
	if !errors.Is(err, thread.ErrOverBudget) || !errors.Is(err, thread.ErrInvalid) || !errors.As(err, &ob) {
		t.Fatalf("over budget: %v", err)
	}
	if want := tokens.CountRequest(append(instr, mustMessages(t, th)[8]), tokens.O200kBase); ob.Tokens != want || ob.Budget != 50 {
		t.Fatalf("over budget: %+v, want %d tokens", ob, want)
	}
	if _, err := th.View(ctx, thread.ViewOptions{MaxMessages: 1, Instructions: instr}); !errors.As(err, &ob) || ob.Messages != 2 {
		t.Fatalf("over max messages: %v", err)
	}
	for name, opts := range map[string]thread.ViewOptions{
		"negative budget": {Budget: -1},
		"zero turns":      {Budget: 10_000, Strategies: []thread.Strategy{thread.SlidingWindow{}}},
		"no summarizer":   {Budget: 60, Strategies: []thread.Strategy{thread.Summarize{Keep: 1}}},
	} {
		if _, err := th.View(ctx, opts); !errors.Is(err, thread.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := th.View(ctx, thread.ViewOptions{Pinned: []string{"msg_nope"}}); !errors.Is(err, thread.ErrNotFound) {
		t.Errorf("unknown pin: %v", err)
	}
}

// sinceCompaction returns the messages of th from its last compact commit
// on, oldest first: what a view can reach.
func sinceCompaction(tb testing.TB, db *thread.DB, th *thread.Thread) []message.Message {
	tb.Helper()
	head := th.Record().Head
	if head == "" {
		return nil
	}
	var out []message.Message
	for c, err := range db.Store().Ancestors(context.Background(), head, -1) {
		must(tb, err)
		out = append(slices.Clone(c.Messages), out...)
		if c.Op == thread.OpCompact {
			break
		}
	}
	return out
}

func mustMessages(tb testing.TB, th *thread.Thread) []message.Message {
	tb.Helper()
	msgs, err := th.Messages(context.Background(), thread.ReadOptions{})
	must(tb, err)
	return msgs
}

// TestViewReadsOnlyWhatItNeeds checks that a budgeted view of a long thread
// does not walk the whole thread.
func TestViewReadsOnlyWhatItNeeds(t *testing.T) {
	ctx := t.Context()
	store := storetest.NewCountingStore()
	db := thread.New(store, nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	must(t, err)
	chat(t, th, 2000)
	store.Commits.Store(0)
	v, err := th.View(ctx, thread.ViewOptions{Budget: 2000})
	must(t, err)
	if n := store.Commits.Load(); n > 4*int64(len(v.Messages)) || n > 400 {
		t.Fatalf("read %d commits for a view of %d messages", n, len(v.Messages))
	}
}

// the count of an elided message is cached under id+"\x00elided" and
// fingerprinted by size only: a second Stub of the same length reuses the
// first stub's count.
func TestViewStubCountNotCached(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	must(t, err)
	_, err = th.Append(ctx, message.User("Weather?"), message.ToolCall("c1", "weather", `{}`),
		message.ToolResult("c1", strings.Repeat("sunny and warm ", 200)), message.User("Thanks"))
	must(t, err)
	s1 := strings.Repeat("x", 60)
	s2 := strings.Repeat("a ", 30)
	counter := tokens.NewCounter(nil)
	for _, stub := range []string{s1, s2} {
		v, err := th.View(ctx, thread.ViewOptions{Budget: 40, Counter: counter,
			Strategies: []thread.Strategy{thread.ElideToolResults{Stub: stub}}})
		if err != nil {
			t.Logf("stub %q: %v", stub[:4], err)
			continue
		}
		real := tokens.NewCounter(nil).CountRequest(v.Messages, tokens.O200kBase)
		t.Logf("stub %q: view says %d tokens, real %d, elided %v", stub[:4], v.Tokens, real, v.Elided)
		if real != v.Tokens || real > 40 {
			t.Errorf("view says %d tokens, real %d (budget 60)", v.Tokens, real)
		}
	}
}
