package thread_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// The limits TestLimits sets, small so that a value at each is cheap.
const (
	limTitle      = 20
	limLabels     = 3
	limLabelBytes = 10
	limPerCommit  = 4
	limStateBytes = 300 // room for a state key of thread.MaxStateKeyLen
	limJSONDepth  = 3
	limMsgText    = 50 // the text of the message whose size is MessageBytes
)

// The limits that are constants rather than Limits, as validate.go states
// them: an id (thread id, label key) is at most 128 bytes, an op at most
// 32, commit metadata at most 64 entries of keys of 128 bytes and values of
// 4096.
const (
	idMax        = 128
	opMax        = 32
	metaEntries  = 64
	metaKeyMax   = 128
	metaValueMax = 4096
)

// limitEnv is what a case of TestLimits writes to: a DB with small limits,
// a local thread "t" with one message (so that it can be checkpointed) and
// an empty local thread "empty".
type limitEnv struct {
	db *thread.DB
	th *thread.Thread
}

func newLimitEnv(t *testing.T) limitEnv {
	t.Helper()
	db := thread.New(thread.NewMemoryStore(), &thread.Options{Limits: thread.Limits{
		MessageBytes:      message.User(strings.Repeat("a", limMsgText)).Size(),
		MessagesPerCommit: limPerCommit,
		StateBytes:        limStateBytes,
		TitleBytes:        limTitle,
		Labels:            limLabels,
		LabelBytes:        limLabelBytes,
		JSONDepth:         limJSONDepth,
	}})
	th, err := db.Create(t.Context(), thread.CreateOptions{ID: "t", Kind: thread.KindLocal, Title: "title", Labels: map[string]string{"k": "v"}})
	must(t, err)
	_, err = th.Append(t.Context(), message.User("first"))
	must(t, err)
	_, err = db.Create(t.Context(), thread.CreateOptions{ID: "empty", Kind: thread.KindLocal})
	must(t, err)
	return limitEnv{db, th}
}

// dbState is everything a DB holds, as its public API reads it back: the
// threads' records, messages, state and checkpoints.
type dbState struct {
	Records     []thread.Record
	Messages    [][]message.Message
	State       []map[string]json.RawMessage
	Checkpoints [][]thread.Checkpoint
}

func readDB(t *testing.T, db *thread.DB) dbState {
	t.Helper()
	ctx := t.Context()
	var s dbState
	for th, err := range db.Threads(ctx, thread.ListOptions{}) {
		must(t, err)
		s.Records = append(s.Records, th.Record())
		msgs, err := th.Messages(ctx, thread.ReadOptions{})
		must(t, err)
		s.Messages = append(s.Messages, msgs)
		st, err := th.State(ctx, 0)
		must(t, err)
		s.State = append(s.State, st)
		var cps []thread.Checkpoint
		for cp, err := range th.Checkpoints(ctx) {
			must(t, err)
			cps = append(cps, cp)
		}
		s.Checkpoints = append(s.Checkpoints, cps)
	}
	return s
}

// refusedUnchanged runs write and checks that it fails with ErrInvalid and
// leaves the DB as it was.
func refusedUnchanged(t *testing.T, e limitEnv, write func() error) {
	t.Helper()
	before := readDB(t, e.db)
	err := write()
	if !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("got %v, want ErrInvalid", err)
	}
	if diff := cmp.Diff(before, readDB(t, e.db)); diff != "" {
		t.Fatalf("a refused write (%v) changed the DB (-before +after):\n%s", err, diff)
	}
}

// nestedObjects returns n objects nested in one another: {"k":{"k":…{}}}.
func nestedObjects(n int) map[string]any {
	m := map[string]any{}
	for range n - 1 {
		m = map[string]any{"k": m}
	}
	return m
}

// TestLimits checks every limit validate.go keeps just under, at and just
// over it: a value up to the limit is written, one byte, entry or level
// more is ErrInvalid and changes nothing. It fails if a check is deleted
// or a '>' at a limit becomes '>='.
func TestLimits(t *testing.T) {
	msg := func(n int) message.Message { return message.User(fmt.Sprint(n)) }
	msgs := func(n int) []message.Message {
		out := make([]message.Message, n)
		for i := range out {
			out[i] = msg(i)
		}
		return out
	}
	// sized returns a message of n bytes (message.Size).
	messageBytes := message.User(strings.Repeat("a", limMsgText)).Size()
	sized := func(t *testing.T, n int) message.Message {
		m := message.User(strings.Repeat("a", limMsgText+n-messageBytes))
		if m.Size() != n {
			t.Fatalf("message of %d bytes is %d", n, m.Size())
		}
		return m
	}
	labels := func(n int) map[string]string {
		l := make(map[string]string, n)
		for i := range n {
			l[fmt.Sprint("k", i)] = "v"
		}
		return l
	}
	meta := func(n int) map[string]string {
		m := make(map[string]string, n)
		for i := range n {
			m[fmt.Sprint("k", i)] = "v"
		}
		return m
	}
	arrays := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) } // n arrays nested
	x := strings.Repeat

	for _, tc := range []struct {
		name  string
		limit int
		write func(t *testing.T, ctx context.Context, e limitEnv, n int) error
	}{
		{"title bytes", limTitle, func(t *testing.T, ctx context.Context, e limitEnv, n int) error {
			title := x("t", n)
			return e.th.Update(ctx, thread.UpdateOptions{Title: &title})
		}},
		{"title bytes on create", limTitle, func(t *testing.T, ctx context.Context, e limitEnv, n int) error {
			_, err := e.db.Create(ctx, thread.CreateOptions{ID: "new", Title: x("t", n)})
			return err
		}},
		{"labels", limLabels, func(t *testing.T, ctx context.Context, e limitEnv, n int) error {
			return e.th.Update(ctx, thread.UpdateOptions{Labels: labels(n)})
		}},
		{"labels on create", limLabels, func(t *testing.T, ctx context.Context, e limitEnv, n int) error {
			_, err := e.db.Create(ctx, thread.CreateOptions{ID: "new", Labels: labels(n)})
			return err
		}},
		{"label value bytes", limLabelBytes, func(t *testing.T, ctx context.Context, e limitEnv, n int) error {
			return e.th.Update(ctx, thread.UpdateOptions{Labels: map[string]string{"k": x("v", n)}})
		}},
		{"label key bytes", idMax, func(t *testing.T, ctx context.Context, e limitEnv, n int) error {
			return e.th.Update(ctx, thread.UpdateOptions{Labels: map[string]string{x("k", n): "v"}})
		}},
		{"thread id bytes", idMax, func(t *testing.T, ctx context.Context, e limitEnv, n int) error {
			_, err := e.db.Create(ctx, thread.CreateOptions{ID: x("i", n)})
			return err
		}},
		{"messages per commit", limPerCommit, func(t *testing.T, ctx context.Context, e limitEnv, n int) error {
			_, err := e.th.Append(ctx, msgs(n)...)
			return err
		}},
		{"messages per commit on create", limPerCommit, func(t *testing.T, ctx context.Context, e limitEnv, n int) error {
			_, err := e.db.Create(ctx, thread.CreateOptions{ID: "new", Messages: msgs(n)})
			return err
		}},
		{"message bytes", messageBytes, func(t *testing.T, ctx context.Context, e limitEnv, n int) error {
			_, err := e.th.Append(ctx, sized(t, n))
			return err
		}},
		{"state bytes", limStateBytes, func(t *testing.T, ctx context.Context, e limitEnv, n int) error {
			// 1 byte of key and n-1 of JSON string.
			_, err := e.th.SetState(ctx, map[string]json.RawMessage{"k": json.RawMessage(`"` + x("s", n-3) + `"`)})
			return err
		}},
		{"state key bytes", thread.MaxStateKeyLen, func(t *testing.T, ctx context.Context, e limitEnv, n int) error {
			_, err := e.th.SetState(ctx, map[string]json.RawMessage{x("k", n): json.RawMessage(`1`)})
			return err
		}},
		{"state JSON depth", limJSONDepth, func(t *testing.T, ctx context.Context, e limitEnv, n int) error {
			_, err := e.th.SetState(ctx, map[string]json.RawMessage{"k": json.RawMessage(arrays(n))})
			return err
		}},
		{"message metadata JSON depth", limJSONDepth, func(t *testing.T, ctx context.Context, e limitEnv, n int) error {
			m := msg(1)
			m.Metadata = nestedObjects(n)
			_, err := e.th.Append(ctx, m)
			return err
		}},
		{"unknown content JSON depth", limJSONDepth, func(t *testing.T, ctx context.Context, e limitEnv, n int) error {
			// The content object is one level: n-1 arrays inside it.
			raw := `{"type":"x","v":` + arrays(n-1) + `}`
			_, err := e.th.Append(ctx, message.New(message.RoleUser, message.Unknown{Raw: json.RawMessage(raw)}))
			return err
		}},
		{"checkpoint name bytes", thread.CheckpointNameMax, func(t *testing.T, ctx context.Context, e limitEnv, n int) error {
			_, err := e.th.Checkpoint(ctx, x("c", n))
			return err
		}},
		{"op bytes", opMax, func(t *testing.T, ctx context.Context, e limitEnv, n int) error {
			_, err := e.th.Commit(ctx, thread.CommitOptions{Messages: msgs(1), Op: thread.Op(x("o", n))})
			return err
		}},
		{"commit metadata entries", metaEntries, func(t *testing.T, ctx context.Context, e limitEnv, n int) error {
			_, err := e.th.Commit(ctx, thread.CommitOptions{Messages: msgs(1), Metadata: meta(n)})
			return err
		}},
		{"commit metadata key bytes", metaKeyMax, func(t *testing.T, ctx context.Context, e limitEnv, n int) error {
			_, err := e.th.Commit(ctx, thread.CommitOptions{Messages: msgs(1), Metadata: map[string]string{x("k", n): "v"}})
			return err
		}},
		{"commit metadata value bytes", metaValueMax, func(t *testing.T, ctx context.Context, e limitEnv, n int) error {
			_, err := e.th.Commit(ctx, thread.CommitOptions{Messages: msgs(1), Metadata: map[string]string{"k": x("v", n)}})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, n := range []int{tc.limit - 1, tc.limit} {
				e := newLimitEnv(t)
				if err := tc.write(t, t.Context(), e, n); err != nil {
					t.Fatalf("%d, the limit %d: %v", n, tc.limit, err)
				}
			}
			e := newLimitEnv(t)
			refusedUnchanged(t, e, func() error { return tc.write(t, t.Context(), e, tc.limit+1) })
		})
	}
}

// TestCheckCommitLimits checks that CheckCommit keeps the limits Commit
// does, at and just over them, and writes nothing either way.
func TestCheckCommitLimits(t *testing.T) {
	e := newLimitEnv(t)
	before := readDB(t, e.db)
	several := func(n int) []message.Message { return make([]message.Message, n) }
	for _, tc := range []struct {
		name     string
		at, over thread.CommitOptions
	}{
		{"messages per commit",
			thread.CommitOptions{Messages: fill(several(limPerCommit))},
			thread.CommitOptions{Messages: fill(several(limPerCommit + 1))}},
		{"op bytes",
			thread.CommitOptions{Messages: fill(several(1)), Op: thread.Op(strings.Repeat("o", opMax))},
			thread.CommitOptions{Messages: fill(several(1)), Op: thread.Op(strings.Repeat("o", opMax+1))}},
		{"commit metadata value bytes",
			thread.CommitOptions{Messages: fill(several(1)), Metadata: map[string]string{"k": strings.Repeat("v", metaValueMax)}},
			thread.CommitOptions{Messages: fill(several(1)), Metadata: map[string]string{"k": strings.Repeat("v", metaValueMax+1)}}},
		{"state key bytes",
			thread.CommitOptions{State: map[string]json.RawMessage{strings.Repeat("k", thread.MaxStateKeyLen): json.RawMessage("1")}},
			thread.CommitOptions{State: map[string]json.RawMessage{strings.Repeat("k", thread.MaxStateKeyLen+1): json.RawMessage("1")}}},
	} {
		if err := e.db.CheckCommit(tc.at); err != nil {
			t.Errorf("%s at the limit: %v", tc.name, err)
		}
		if err := e.db.CheckCommit(tc.over); !errors.Is(err, thread.ErrInvalid) {
			t.Errorf("%s over the limit: %v, want ErrInvalid", tc.name, err)
		}
	}
	if diff := cmp.Diff(before, readDB(t, e.db)); diff != "" {
		t.Fatalf("CheckCommit changed the DB (-before +after):\n%s", diff)
	}
}

// fill makes each of msgs a user message of its own.
func fill(msgs []message.Message) []message.Message {
	for i := range msgs {
		msgs[i] = message.User(fmt.Sprint("m", i))
	}
	return msgs
}

// TestRefusedValues checks the checks that are not sizes: what may be in a
// title, a label, a state key, a checkpoint name, an op and commit
// metadata. Each value is ErrInvalid and changes nothing; its neighbour on
// the other side of the rule is written.
func TestRefusedValues(t *testing.T) {
	type write = func(e limitEnv) error
	title := func(s string) write {
		return func(e limitEnv) error { return e.th.Update(t.Context(), thread.UpdateOptions{Title: &s}) }
	}
	label := func(k, v string) write {
		return func(e limitEnv) error {
			return e.th.Update(t.Context(), thread.UpdateOptions{Labels: map[string]string{k: v}})
		}
	}
	create := func(opts thread.CreateOptions) write {
		return func(e limitEnv) error { _, err := e.db.Create(t.Context(), opts); return err }
	}
	state := func(k, v string) write {
		return func(e limitEnv) error {
			_, err := e.th.SetState(t.Context(), map[string]json.RawMessage{k: json.RawMessage(v)})
			return err
		}
	}
	checkpoint := func(name string) write {
		return func(e limitEnv) error { _, err := e.th.Checkpoint(t.Context(), name); return err }
	}
	commit := func(opts thread.CommitOptions) write {
		if opts.Messages == nil {
			opts.Messages = fill(make([]message.Message, 1))
		}
		return func(e limitEnv) error { _, err := e.th.Commit(t.Context(), opts); return err }
	}
	meta := func(k, v string) write { return commit(thread.CommitOptions{Metadata: map[string]string{k: v}}) }
	for _, tc := range []struct {
		name      string
		good, bad write
	}{
		{"title control character", title("a title é"), title("a\ttitle")},
		{"title not UTF-8", title("\u00e9"), title("\xc3")},
		{"title on create control character", create(thread.CreateOptions{ID: "new", Title: "é"}), create(thread.CreateOptions{ID: "new", Title: "\x7f"})},
		{"label value control character", label("k", "a b"), label("k", "a\nb")},
		{"label key not an id", label("a.b", "v"), label("a b", "v")},
		{"empty label key", label("k", ""), label("", "v")},
		{"thread id not an id", create(thread.CreateOptions{ID: "a-b"}), create(thread.CreateOptions{ID: "a/b"})},
		{"kind", create(thread.CreateOptions{ID: "new", Kind: thread.KindLocal}), create(thread.CreateOptions{ID: "new", Kind: "sideways"})},
		{"empty state key", state("k", "1"), state("", "1")},
		{"state key control character", state("a/b c", "1"), state("a\x00", "1")},
		{"state value not JSON", state("k", ` {"a": 1} `), state("k", `{"a":}`)},
		{"empty checkpoint name", checkpoint("c"), checkpoint("")},
		{"checkpoint name control character", checkpoint("before the fix"), checkpoint("before\rthe fix")},
		{"op below 'a'", commit(thread.CommitOptions{Op: "az_"}), commit(thread.CommitOptions{Op: "a`"})},
		{"op above 'z'", commit(thread.CommitOptions{Op: "z"}), commit(thread.CommitOptions{Op: "z{"})},
		{"op upper case", commit(thread.CommitOptions{Op: "_"}), commit(thread.CommitOptions{Op: "Append"})},
		{"empty commit metadata key", meta("k", ""), meta("", "v")},
		{"commit metadata key control character", meta("run id", "v"), meta("run\tid", "v")},
		{"commit metadata value not UTF-8", meta("k", "a\tb\né"), meta("k", "a\xff")},
		{"message not valid",
			commit(thread.CommitOptions{Messages: []message.Message{message.User("hi")}}),
			commit(thread.CommitOptions{Messages: []message.Message{{Role: "user", Contents: []message.Content{nil}}}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.good(newLimitEnv(t)); err != nil {
				t.Fatalf("the good neighbour: %v", err)
			}
			e := newLimitEnv(t)
			refusedUnchanged(t, e, func() error { return tc.bad(e) })
		})
	}
}

// TestCommitRefusesOneIDTwice checks that a commit of two messages with
// the same id is ErrInvalid, which names the id, on every way in: the
// thread would hold one id twice otherwise, and no later read could tell
// the two apart. It is no ErrConflict (ErrDuplicateID): reading the thread
// again does not resolve it. Messages without ids get ids of their own.
func TestCommitRefusesOneIDTwice(t *testing.T) {
	twins := func() []message.Message {
		a, b := message.User("a"), message.User("b")
		a.ID, b.ID = "msg_twin", "msg_twin"
		return []message.Message{message.User("first of three"), a, b}
	}
	for _, tc := range []struct {
		name  string
		write func(ctx context.Context, e limitEnv) error
	}{
		{"Append", func(ctx context.Context, e limitEnv) error { _, err := e.th.Append(ctx, twins()...); return err }},
		{"Append to an empty thread", func(ctx context.Context, e limitEnv) error {
			th, err := e.db.Thread(ctx, "empty")
			if err != nil {
				return fmt.Errorf("open: %v", err) // not ErrInvalid: fails the test
			}
			_, err = th.Append(ctx, twins()...)
			return err
		}},
		{"Commit with FreshIDs", func(ctx context.Context, e limitEnv) error {
			_, err := e.th.Commit(ctx, thread.CommitOptions{Messages: twins(), FreshIDs: true})
			return err
		}},
		{"Commit with state", func(ctx context.Context, e limitEnv) error {
			_, err := e.th.Commit(ctx, thread.CommitOptions{Messages: twins(), State: map[string]json.RawMessage{"k": json.RawMessage("1")}})
			return err
		}},
		{"Create", func(ctx context.Context, e limitEnv) error {
			_, err := e.db.Create(ctx, thread.CreateOptions{ID: "new", Messages: twins()})
			return err
		}},
		{"CheckCommit", func(ctx context.Context, e limitEnv) error {
			return e.db.CheckCommit(thread.CommitOptions{Messages: twins()})
		}},
		{"Group", func(ctx context.Context, e limitEnv) error {
			g := e.db.Group()
			if _, err := g.Commit(ctx, e.th, thread.CommitOptions{Messages: twins()}); err != nil {
				return err
			}
			return g.Apply(ctx)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newLimitEnv(t)
			before := readDB(t, e.db)
			err := tc.write(t.Context(), e)
			if !errors.Is(err, thread.ErrInvalid) || errors.Is(err, thread.ErrConflict) {
				t.Fatalf("got %v, want ErrInvalid and no ErrConflict", err)
			}
			if !strings.Contains(err.Error(), "msg_twin") || !strings.Contains(err.Error(), "twice") {
				t.Errorf("%q does not say which id came twice", err)
			}
			if diff := cmp.Diff(before, readDB(t, e.db)); diff != "" {
				t.Fatalf("a refused commit changed the DB (-before +after):\n%s", diff)
			}
		})
	}

	// Messages without ids, and messages with ids of their own that
	// differ, are one commit.
	e := newLimitEnv(t)
	a, b := message.User("a"), message.User("b")
	a.ID, b.ID = "msg_a", "msg_b"
	c, err := e.th.Append(t.Context(), message.User("x"), message.User("y"), a, b)
	must(t, err)
	if c.Messages[0].ID == "" || c.Messages[0].ID == c.Messages[1].ID {
		t.Fatalf("messages without ids got ids %q and %q", c.Messages[0].ID, c.Messages[1].ID)
	}
}

// TestLoadOps checks the op of a loaded document's history entry, which no
// Commit default fills in: empty, over 32 bytes or not lowercase letters and
// '_' is ErrInvalid, and nothing is written; 32 bytes are loaded.
func TestLoadOps(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "document-history.json"))
	must(t, err)
	for _, tc := range []struct {
		op string
		ok bool
	}{
		{strings.Repeat("o", opMax), true},
		{"a_z", true},
		{"", false},
		{strings.Repeat("o", opMax+1), false},
		{"Create", false},
	} {
		doc := strings.Replace(string(golden), `"op": "create"`, `"op": "`+tc.op+`"`, 1)
		db := thread.New(thread.NewMemoryStore(), nil)
		_, err := db.Load(t.Context(), strings.NewReader(doc), thread.LoadOptions{})
		switch {
		case tc.ok && err != nil:
			t.Errorf("op %q: %v", tc.op, err)
		case !tc.ok && !errors.Is(err, thread.ErrInvalid):
			t.Errorf("op %q: %v, want ErrInvalid", tc.op, err)
		case !tc.ok:
			for r, err := range db.Store().Threads(t.Context(), thread.ListOptions{AllTenants: true}) {
				t.Errorf("op %q: a refused document left thread %v (%v)", tc.op, r, err)
			}
		}
	}
}
