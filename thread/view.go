package thread

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/tokens"
)

// ViewOptions select what a view keeps. The zero value is a view of every
// message at the handle's version, counted in o200k_base.
type ViewOptions struct {
	// Version views the thread as it was at that version; 0 means the
	// handle's version. Summarize commits only for a view of the handle's
	// version; for an older one it does nothing.
	Version int64
	// Model names the model the view is for; tokens.EncodingFor picks the
	// encoding. Ignored when Encoding is set.
	Model string
	// Encoding counts the tokens. The zero Encoding means the one for
	// Model, and o200k_base when Model is "" too.
	Encoding tokens.Encoding
	// Budget is the most tokens of the whole view: every message, counted
	// with Counter.Count, plus tokens.ReplyTokens once. 0 means no token
	// limit.
	Budget int
	// MaxMessages is the most messages of the view, Instructions included.
	// 0 means no limit.
	MaxMessages int
	// Instructions are the caller's system messages. They come first in
	// every view and are always kept; they are not in the thread.
	Instructions []message.Message
	// Pinned are ids of thread messages that must be kept, with the tool
	// calls or results they belong to. A pinned message that is not in the
	// view's window makes the view read further back, at the cost of the
	// messages read; one that is not in the thread (after its last
	// compaction) is ErrNotFound.
	Pinned []string
	// Strategies make the view fit, applied in order; whatever they leave
	// over the limits is then dropped oldest first (an implicit DropOldest
	// ends every chain). nil means DropOldest alone.
	Strategies []Strategy
	// Counter counts and caches message tokens; nil means a Counter
	// shared by the package.
	Counter *tokens.Counter
}

// View is what a model is given: the messages to send and a report of what
// was left out.
type View struct {
	// Messages are the Instructions, then the thread's kept messages,
	// oldest first. An elided message keeps its id and has its function
	// results replaced by a stub.
	Messages []message.Message
	// Tokens counts Messages plus tokens.ReplyTokens.
	Tokens int
	// Dropped are the ids of the messages read and left out, oldest first.
	// Messages older than what the view read are not listed.
	Dropped []string
	// Elided are the ids of the messages whose function results were
	// replaced by a stub, oldest first.
	Elided []string
	// Compacted is the id of the compact commit the view stopped at, ""
	// if none.
	Compacted string
}

// ErrOverBudget is returned by Thread.View when the messages a view must
// keep (Instructions, system messages in the window, pinned messages and the
// newest user message, with their tool calls and results) exceed
// ViewOptions.Budget or MaxMessages alone. The error is an *OverBudgetError
// that says by how much; it wraps ErrInvalid.
var ErrOverBudget = fmt.Errorf("view over budget: %w", ErrInvalid)

// OverBudgetError is the error of a view whose mandatory messages do not fit.
// errors.Is matches it with ErrOverBudget and ErrInvalid.
type OverBudgetError struct {
	// Tokens counts the mandatory messages plus tokens.ReplyTokens.
	Tokens int
	// Messages counts the mandatory messages.
	Messages int
	// Budget and MaxMessages are the limits asked for.
	Budget, MaxMessages int
}

func (e *OverBudgetError) Error() string {
	return fmt.Sprintf("view over budget: mandatory messages are %d tokens (budget %d) and %d messages (max %d)",
		e.Tokens, e.Budget, e.Messages, e.MaxMessages)
}

// Unwrap returns ErrOverBudget.
func (e *OverBudgetError) Unwrap() error { return ErrOverBudget }

// Strategy is one step of making a view fit: DropOldest, SlidingWindow,
// ElideToolResults or Summarize. A strategy never removes a mandatory
// message, and never splits a tool call from its results.
type Strategy interface {
	apply(ctx context.Context, v *viewer) error
}

// DropOldest drops whole units (a message, or a tool call with its results)
// oldest first until the view fits.
type DropOldest struct{}

// SlidingWindow keeps the last Turns user turns, a turn being a user message
// and what follows it, and drops what is older whether or not the view
// fits. Turns must be at least 1.
type SlidingWindow struct {
	Turns int
}

// ElideToolResults, while the view does not fit, replaces the results of
// older tool messages, oldest first, by a short stub that names what was
// elided. The newest KeepLast tool messages keep their results. Mandatory
// messages are never elided.
type ElideToolResults struct {
	KeepLast int
	// Stub is the text that replaces a result; "{bytes}" is replaced by
	// the result's length and "{name}" by the tool's name. "" means
	// "[elided: {bytes} bytes of {name} result]".
	Stub string
}

// Summarizer writes one message that summarizes msgs, such as a chat client
// asked for a summary.
type Summarizer interface {
	Summarize(ctx context.Context, msgs []message.Message) (message.Message, error)
}

// Summarize, when the view does not fit, has Summarizer summarize every
// message older than the newest Keep units (back to the root or the last
// compaction, beyond what the view read) and commits an OpCompact commit
// on the thread, at the view's version (a thread that moved is
// ErrConflict, never retried). The compact commit holds the system, pinned
// and newest user messages of the summarized prefix, the summary, and the
// newest Keep units, with their ids; its parent keeps the originals, so
// they stay in history. Later views stop at the compact commit and reuse the
// summary without calling the Summarizer again. The handle moves to the new
// version, and the view is then made from it. Keep 0 means 4.
//
// Summarizing reads the whole uncompacted prefix once: the first
// compaction of a long thread costs its length.
type Summarize struct {
	Summarizer Summarizer
	Keep       int
}

// defaultKeep is Summarize's Keep when 0.
const defaultKeep = 4

// firstWindow is the number of messages a view reads first; each next read
// reaches four times as far back.
const firstWindow = 64

// errRestart asks View to start again from the handle's new version.
var errRestart = errors.New("restart view")

// View returns the messages to send a model, within the options' limits.
// Every view keeps the Instructions, the system messages it read, the pinned
// messages and the newest user message; it never keeps a tool result without
// its call nor a call without all its results; it keeps the thread's order,
// and is the same for the same version and options.
//
// A view reads back from the head in growing windows (64 messages, then
// 256, …) until it has enough to fill the limits, or reaches the root or a
// compact commit, whose messages replace everything before it; it also reads
// on until it has found the pinned messages and the newest user message,
// with their tool calls. System
// messages older than what was read are not searched for: pass instructions
// in Instructions, or compact. A view whose limits are never reached (no
// Budget, MaxMessages or SlidingWindow) reads the whole thread back to its
// last compaction.
func (t *Thread) View(ctx context.Context, opts ViewOptions) (_ *View, err error) {
	ctx, span := t.db.startSpan(ctx, "view", t.ID())
	defer endSpan(span, &err)
	v, err := t.view(ctx, opts, false)
	if errors.Is(err, errRestart) {
		opts.Version = 0
		v, err = t.view(ctx, opts, true)
	}
	return v, err
}

func (t *Thread) view(ctx context.Context, opts ViewOptions, noSummarize bool) (*View, error) {
	if opts.Budget < 0 || opts.MaxMessages < 0 {
		return nil, fmt.Errorf("view %s: negative limit: %w", t.ID(), ErrInvalid)
	}
	v := &viewer{t: t, opts: opts, enc: opts.Encoding, counter: opts.Counter, noSummarize: noSummarize}
	if v.enc.IsZero() {
		v.enc, _ = tokens.EncodingFor(opts.Model) // "" gives o200k_base
	}
	if v.counter == nil {
		v.counter = t.db.shared.counter()
	}
	if opts.Strategies == nil {
		v.strategies = []Strategy{DropOldest{}}
	} else {
		v.strategies = append(append(v.strategies, opts.Strategies...), DropOldest{})
	}
	elisions := 0
	for _, s := range v.strategies {
		if e, ok := s.(ElideToolResults); ok {
			v.elide, v.elider, elisions = true, e, elisions+1
		}
	}
	v.elideExact = elisions == 1
	r, h, err := t.headCommit(ctx)
	if err != nil {
		return nil, err
	}
	v.version = r.Version
	if opts.Version != 0 && opts.Version != r.Version {
		v.version, v.old = opts.Version, true
		if h, err = t.commitAt(ctx, opts.Version); err != nil {
			return nil, err
		}
	}
	v.fixed = tokens.ReplyTokens
	for _, m := range opts.Instructions {
		v.fixed += v.counter.Count(m, v.enc)
	}
	if len(opts.Pinned) > 0 {
		v.pins = make(map[string]bool, len(opts.Pinned))
		for _, id := range opts.Pinned {
			v.pins[id] = true
		}
	}
	if h != nil {
		v.next, v.nextDepth = h.ID, h.Depth
	} else {
		v.end = true
	}
	if err := v.read(ctx); err != nil {
		return nil, fmt.Errorf("view %s: %w", t.ID(), err)
	}
	if err := v.prepare(); err != nil {
		return nil, fmt.Errorf("view %s: %w", t.ID(), err)
	}
	for _, s := range v.strategies {
		if err := s.apply(ctx, v); err != nil {
			if errors.Is(err, errRestart) {
				return nil, err
			}
			return nil, fmt.Errorf("view %s: %w", t.ID(), err)
		}
	}
	if !v.fits() { // only the mandatory messages are left
		return nil, v.overBudget()
	}
	return v.result(), nil
}

// viewer is the working state of one view.
type viewer struct {
	t           *Thread
	opts        ViewOptions
	enc         tokens.Encoding
	counter     *tokens.Counter
	strategies  []Strategy
	elide       bool             // the chain elides: tool results may shrink
	elider      ElideToolResults // the elision of the chain
	elideExact  bool             // one elision: its stubs bound what a result can shrink to
	results     int              // messages with results read so far, newest first
	noSummarize bool
	version     int64 // the version viewed
	old         bool  // a version older than the handle's

	fixed int // Instructions plus ReplyTokens
	pins  map[string]bool

	// The walk: items read so far, newest first until read returns.
	items     []item
	next      string // commit to read on from; "" when done
	nextDepth int64  // its Depth
	end       bool   // read back to the root or a compact commit
	compacted string

	units  []unit // by first index
	tokens int    // fixed plus the kept items
	count  int    // messages kept, Instructions included
}

type item struct {
	m      message.Message // as sent: elided or not
	orig   message.Message
	n      int // tokens of m
	lb     int // the fewest tokens m can come to
	unit   int
	must   bool // system, pinned or newest user (the unit is mandatory)
	drop   bool
	elided bool
}

type unit struct {
	members  []int
	first    int
	last     int
	must     bool
	complete bool
	dropped  bool
}

// read walks back from the head in growing windows until the view has
// enough, as prepare needs it; items end oldest first.
func (v *viewer) read(ctx context.Context) error {
	want := int64(firstWindow)
	for !v.end {
		if err := ctx.Err(); err != nil {
			return err
		}
		// A floor of 0 would never yield a commit at depth 0 (one that only
		// set state before the first message): below that, read to the root.
		floor := v.nextDepth - want
		if floor <= 0 {
			floor = -1
		}
		if err := v.walk(ctx, floor); err != nil {
			return err
		}
		want *= 4
		if v.enough() {
			break
		}
	}
	for i, j := 0, len(v.items)-1; i < j; i, j = i+1, j-1 {
		v.items[i], v.items[j] = v.items[j], v.items[i]
	}
	return nil
}

// walk reads the commits from v.next down to floor (or a compact commit),
// appending their messages newest first.
func (v *viewer) walk(ctx context.Context, floor int64) error {
	for c, err := range v.t.db.store.Ancestors(ctx, v.next, floor) {
		if err != nil {
			return err
		}
		for i := len(c.Messages) - 1; i >= 0; i-- {
			m := c.Messages[i]
			it := item{m: m, orig: m, n: v.counter.Count(m, v.enc)}
			it.lb = it.n
			if v.elide && hasResults(m) {
				// The newest KeepLast results stay whole; older ones may
				// shrink to their stub (counted with a placeholder name).
				switch v.results++; {
				case !v.elideExact: // several elisions: any stub may apply
					it.lb = min(it.n, tokens.MessageTokens+1)
				case v.results > v.elider.KeepLast:
					stub := v.elider.stubbed(m, nil)
					stub.ID = ""
					it.lb = min(it.n, v.counter.Count(stub, v.enc))
				}
			}
			v.items = append(v.items, it)
		}
		v.next, v.nextDepth = c.Parent, c.Depth-int64(len(c.Messages))
		if c.Op == OpCompact {
			v.compacted, v.next = c.ID, ""
		}
		if v.next == "" {
			v.end = true
			return nil
		}
	}
	return nil
}

// enough reports whether the items read (newest first) fill the limits and
// hold every pin, the newest user message and the calls of pinned results.
func (v *viewer) enough() bool {
	found, results := 0, map[string]bool{} // pins found; calls still missing
	lb, users := v.fixed, 0
	turns := 0
	for _, s := range v.strategies {
		if w, ok := s.(SlidingWindow); ok && w.Turns > 0 && (turns == 0 || w.Turns < turns) {
			turns = w.Turns
		}
	}
	for _, it := range v.items {
		lb += it.lb
		for _, fc := range it.m.Calls() {
			delete(results, fc.CallID)
		}
		pinned := v.pins[it.m.ID]
		if pinned {
			found++
		}
		if it.m.Role == message.RoleUser {
			if users++; users == 1 {
				pinned = true // the newest user message is kept too
			}
		}
		if pinned {
			for _, fr := range it.m.Results() {
				results[fr.CallID] = true
			}
		}
	}
	if found < len(v.pins) || users == 0 || len(results) > 0 {
		return false
	}
	return (v.opts.Budget > 0 && lb > v.opts.Budget) ||
		(v.opts.MaxMessages > 0 && len(v.opts.Instructions)+len(v.items) > v.opts.MaxMessages) ||
		(turns > 0 && users > turns)
}

func hasResults(m message.Message) bool {
	for _, c := range m.Contents {
		if _, ok := c.(message.FunctionResult); ok {
			return true
		}
	}
	return false
}

// prepare groups the items into units, marks the mandatory ones, drops the
// incomplete ones and checks that the mandatory messages fit.
func (v *viewer) prepare() error {
	n := len(v.items)
	parent := make([]int, n)
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	owner := map[string]int{}     // call id → item that made the call
	answered := map[string]bool{} // call ids with a result
	broken := make([]bool, n)     // item has a result without its call
	newestUser := -1
	for i, it := range v.items {
		for _, c := range it.m.Contents {
			switch c := c.(type) {
			case message.FunctionCall:
				// A result answers the latest call with its id: adapters
				// that number calls per response reuse ids.
				if o, dup := owner[c.CallID]; dup && !answered[c.CallID] {
					broken[o] = true // an earlier call with this id never got its result
				}
				owner[c.CallID] = i
				delete(answered, c.CallID)
			case message.FunctionResult:
				if o, ok := owner[c.CallID]; ok {
					answered[c.CallID] = true
					if a, b := find(i), find(o); a != b {
						parent[max(a, b)] = min(a, b)
					}
				} else {
					broken[i] = true
				}
			}
		}
		if it.m.Role == message.RoleUser {
			newestUser = i
		}
	}
	for id, o := range owner {
		if !answered[id] {
			broken[o] = true
		}
	}
	index := make([]int, n) // root → unit index
	for i := range n {
		root := find(i)
		if root == i {
			index[i] = len(v.units)
			v.units = append(v.units, unit{first: i, complete: true})
		}
		u := &v.units[index[root]]
		v.items[i].unit = index[root]
		u.members = append(u.members, i)
		u.last = i
		if broken[i] {
			u.complete = false
		}
		it := v.items[i]
		if it.m.Role == message.RoleSystem || v.pins[it.m.ID] || i == newestUser {
			u.must = true
		}
	}
	found := 0
	for i := range v.items {
		if v.pins[v.items[i].m.ID] {
			found++
		}
	}
	if found < len(v.pins) {
		for _, id := range v.opts.Pinned {
			if !v.hasID(id) {
				return fmt.Errorf("pinned message %q: %w", id, ErrNotFound)
			}
		}
	}
	v.tokens, v.count = v.fixed, len(v.opts.Instructions)
	mustTokens, mustCount := v.fixed, v.count
	for ui := range v.units {
		u := &v.units[ui]
		for _, i := range u.members {
			v.items[i].must = u.must
			v.tokens += v.items[i].n
			v.count++
			if u.must {
				mustTokens += v.items[i].n
				mustCount++
			}
		}
		if !u.complete {
			if u.must {
				return fmt.Errorf("message %q: a tool call without all its results, or a result without its call, cannot be kept: %w",
					v.items[u.first].m.ID, ErrInvalid)
			}
			v.dropUnit(ui)
		}
	}
	if (v.opts.Budget > 0 && mustTokens > v.opts.Budget) || (v.opts.MaxMessages > 0 && mustCount > v.opts.MaxMessages) {
		return &OverBudgetError{Tokens: mustTokens, Messages: mustCount, Budget: v.opts.Budget, MaxMessages: v.opts.MaxMessages}
	}
	return nil
}

func (v *viewer) hasID(id string) bool {
	for i := range v.items {
		if v.items[i].m.ID == id {
			return true
		}
	}
	return false
}

func (v *viewer) fits() bool {
	return (v.opts.Budget == 0 || v.tokens <= v.opts.Budget) && (v.opts.MaxMessages == 0 || v.count <= v.opts.MaxMessages)
}

func (v *viewer) dropUnit(ui int) {
	u := &v.units[ui]
	if u.dropped {
		return
	}
	u.dropped = true
	for _, i := range u.members {
		it := &v.items[i]
		it.drop = true
		v.tokens -= it.n
		v.count--
	}
}

func (v *viewer) overBudget() error {
	e := &OverBudgetError{Tokens: v.fixed, Messages: len(v.opts.Instructions), Budget: v.opts.Budget, MaxMessages: v.opts.MaxMessages}
	for _, it := range v.items {
		if it.must {
			e.Tokens += it.n
			e.Messages++
		}
	}
	return e
}

func (v *viewer) result() *View {
	out := &View{Tokens: v.tokens, Compacted: v.compacted}
	out.Messages = make([]message.Message, 0, v.count)
	out.Messages = append(out.Messages, v.opts.Instructions...)
	for _, it := range v.items {
		switch {
		case it.drop:
			out.Dropped = append(out.Dropped, it.m.ID)
		default:
			out.Messages = append(out.Messages, it.m)
			if it.elided {
				out.Elided = append(out.Elided, it.m.ID)
			}
		}
	}
	return out
}

func (DropOldest) apply(_ context.Context, v *viewer) error {
	for ui := range v.units {
		if v.fits() {
			return nil
		}
		if !v.units[ui].must {
			v.dropUnit(ui)
		}
	}
	return nil
}

func (s SlidingWindow) apply(_ context.Context, v *viewer) error {
	if s.Turns < 1 {
		return fmt.Errorf("sliding window of %d turns: %w", s.Turns, ErrInvalid)
	}
	users, start := 0, -1
	for i := len(v.items) - 1; i >= 0; i-- {
		if it := v.items[i]; !it.drop && it.m.Role == message.RoleUser {
			if users++; users == s.Turns {
				start = i
				break
			}
		}
	}
	if start < 0 {
		return nil
	}
	for ui := range v.units {
		if u := v.units[ui]; u.first < start && !u.must {
			v.dropUnit(ui)
		}
	}
	return nil
}

// stubbed returns m with each function result replaced by the stub; names
// maps call ids to tool names ("tool" when unknown).
func (s ElideToolResults) stubbed(m message.Message, names map[string]string) message.Message {
	stub := s.Stub
	if stub == "" {
		stub = "[elided: {bytes} bytes of {name} result]"
	}
	contents := make([]message.Content, len(m.Contents))
	for j, c := range m.Contents {
		if fr, ok := c.(message.FunctionResult); ok {
			name := names[fr.CallID]
			if name == "" {
				name = "tool"
			}
			fr.Result = strings.NewReplacer("{bytes}", strconv.Itoa(len(fr.Result)), "{name}", name).Replace(stub)
			c = fr
		}
		contents[j] = c
	}
	m.Contents = contents
	return m
}

func (s ElideToolResults) apply(_ context.Context, v *viewer) error {
	if s.KeepLast < 0 {
		return fmt.Errorf("elide tool results: negative KeepLast: %w", ErrInvalid)
	}
	if v.fits() {
		return nil
	}
	var cands []int
	for i, it := range v.items {
		if !it.drop && hasResults(it.m) {
			cands = append(cands, i)
		}
	}
	cands = cands[:max(len(cands)-s.KeepLast, 0)]
	names := map[string]string{}
	for _, it := range v.items {
		for _, fc := range it.m.Calls() {
			names[fc.CallID] = fc.Name
		}
	}
	for _, i := range cands {
		if v.fits() {
			return nil
		}
		it := &v.items[i]
		if it.must || it.elided {
			continue
		}
		m := s.stubbed(it.m, names)
		// Counted without an id, so never cached: the stub's text varies
		// with the options, and the cache must keep the original's count.
		counted := m
		counted.ID = ""
		n := v.counter.Count(counted, v.enc)
		if n >= it.n {
			continue
		}
		v.tokens += n - it.n
		it.m, it.n, it.elided = m, n, true
	}
	return nil
}

func (s Summarize) apply(ctx context.Context, v *viewer) error {
	if v.fits() || v.noSummarize || v.old {
		return nil
	}
	if s.Summarizer == nil {
		return fmt.Errorf("summarize: no Summarizer: %w", ErrInvalid)
	}
	keep := s.Keep
	if keep == 0 {
		keep = defaultKeep
	}
	if keep < 0 {
		return fmt.Errorf("summarize: negative Keep: %w", ErrInvalid)
	}
	if len(v.units) <= keep {
		return nil
	}
	b := v.units[len(v.units)-keep].first
	for moved := true; moved; { // no unit may straddle the boundary
		moved = false
		for _, u := range v.units {
			if u.first < b && u.last >= b {
				b, moved = u.first, true
			}
		}
	}
	// The carried messages and the kept tail must leave a quarter of the
	// budget for the summary; otherwise more of the tail is summarized, so
	// that the view after the compaction fits and the next one does not
	// summarize again.
	fitsTail := func(b int) bool {
		n, count := v.fixed, 1 // the summary
		for i, it := range v.items {
			if i >= b || it.must {
				n, count = n+it.n, count+1
			}
		}
		return (v.opts.Budget == 0 || n <= v.opts.Budget-v.opts.Budget/4) &&
			(v.opts.MaxMessages == 0 || count <= v.opts.MaxMessages)
	}
	for b < len(v.items) && !fitsTail(b) {
		b = v.units[v.items[b].unit].last + 1
		for moved := true; moved; {
			moved = false
			for _, u := range v.units {
				if u.first < b && u.last >= b {
					b, moved = u.last+1, true
				}
			}
		}
	}
	if !fitsTail(b) {
		return nil // even the carried messages leave no room: drop instead
	}
	var older []message.Message
	if !v.end {
		var err error
		if older, err = v.readRest(ctx); err != nil {
			return err
		}
	}
	// Older system messages go into the summary's input, not into the
	// compact commit: a view never searched for them, and carrying them
	// could make the next view not fit.
	prefix := make([]message.Message, 0, len(older)+b)
	prefix = append(prefix, older...)
	var msgs []message.Message
	tokensAfter, countAfter := v.fixed, 1
	for _, it := range v.items[:b] {
		prefix = append(prefix, it.orig)
		if it.must {
			msgs = append(msgs, it.orig)
			tokensAfter, countAfter = tokensAfter+it.n, countAfter+1
		}
	}
	if len(prefix) == 0 {
		return nil
	}
	sum, err := s.Summarizer.Summarize(ctx, prefix)
	if err != nil {
		return fmt.Errorf("summarize: %w", err)
	}
	msgs = append(msgs, sum)
	tokensAfter += v.counter.Count(sum, v.enc)
	for _, it := range v.items[b:] {
		msgs = append(msgs, it.orig)
		tokensAfter, countAfter = tokensAfter+it.n, countAfter+1
	}
	if v.opts.Budget > 0 && tokensAfter > v.opts.Budget || v.opts.MaxMessages > 0 && countAfter > v.opts.MaxMessages {
		return nil // the summary is too long to help: commit nothing, drop instead
	}
	meta := map[string]string{"compacts": prefix[0].ID + ".." + prefix[len(prefix)-1].ID}
	if _, err := v.t.Commit(ctx, CommitOptions{Messages: msgs, Op: OpCompact, Metadata: meta, IfVersion: v.version}); err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	return errRestart
}

// readRest returns the messages older than the items read, back to the root
// or a compact commit, oldest first.
func (v *viewer) readRest(ctx context.Context) ([]message.Message, error) {
	var chunks [][]message.Message
	total := 0
	for c, err := range v.t.db.store.Ancestors(ctx, v.next, -1) {
		if err != nil {
			return nil, err
		}
		chunks = append(chunks, c.Messages)
		total += len(c.Messages)
		if c.Op == OpCompact {
			break
		}
	}
	out := make([]message.Message, 0, total)
	for i := len(chunks) - 1; i >= 0; i-- {
		out = append(out, chunks[i]...)
	}
	return out, nil
}
