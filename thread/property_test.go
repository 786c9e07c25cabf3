package thread_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// model is what a thread should read as: its messages and state at every
// version, and its checkpoints.
type model struct {
	th          *thread.Thread
	versions    map[int64][]string
	states      map[int64]map[string]string // nil: not tracked (a fork inside a commit)
	checkpoints map[string]int64            // name → version it was made at
}

func (m *model) head() []string               { return m.versions[m.th.Version()] }
func (m *model) headState() map[string]string { return m.states[m.th.Version()] }
func (m *model) record(msgs []string, st map[string]string) {
	m.versions[m.th.Version()] = msgs
	m.states[m.th.Version()] = st
}

// TestRandomOperationsMatchModel runs random sequences of every thread
// operation against the memory store and checks, after each step, that every
// version of every thread reads as a plain model says it should.
func TestRandomOperationsMatchModel(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 10
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runModel(t, seed) })
	}
}

func runModel(t *testing.T, seed uint64) {
	ctx := t.Context()
	r := rand.New(rand.NewPCG(seed, 99))
	db := thread.New(thread.NewMemoryStore(), nil)
	var threads []*model
	newModel := func(th *thread.Thread, msgs []string, st map[string]string) *model {
		m := &model{th: th, versions: map[int64][]string{}, states: map[int64]map[string]string{}, checkpoints: map[string]int64{}}
		m.record(msgs, st)
		threads = append(threads, m)
		return m
	}
	th, err := db.Create(ctx, thread.CreateOptions{})
	must(t, err)
	newModel(th, nil, map[string]string{})
	n := 0
	text := func() string { n++; return fmt.Sprintf("m%d", n) }
	names := []string{"a", "b", "c"}

	for step := range 80 {
		m := threads[r.IntN(len(threads))]
		v := m.th.Version()
		op := r.IntN(10)
		var what string
		switch op {
		case 0, 1, 2: // append
			k := 1 + r.IntN(3)
			var msgs []message.Message
			want := slices.Clone(m.head())
			for range k {
				s := text()
				msgs = append(msgs, message.User(s))
				want = append(want, s)
			}
			what = fmt.Sprintf("append %d", k)
			_, err := m.th.Append(ctx, msgs...)
			must(t, err)
			m.record(want, m.headState())
		case 3: // state
			key := names[r.IntN(3)]
			val := fmt.Sprint(r.IntN(5))
			st := maps.Clone(m.headState())
			patch := map[string]json.RawMessage{key: json.RawMessage(val)}
			if r.IntN(3) == 0 {
				patch[key] = nil
				if st != nil {
					delete(st, key)
				}
			} else if st != nil {
				st[key] = val
			}
			what = "state " + key
			_, err := m.th.SetState(ctx, patch)
			must(t, err)
			m.record(m.versions[v], st)
		case 4: // checkpoint
			name := names[r.IntN(3)]
			what = "checkpoint " + name
			_, err := m.th.Checkpoint(ctx, name)
			_, exists := m.checkpoints[name]
			switch {
			case len(m.head()) == 0 && m.th.Record().Head == "":
				wantIs(t, err, thread.ErrInvalid, what)
			case exists:
				wantIs(t, err, thread.ErrConflict, what)
			default:
				must(t, err)
				m.checkpoints[name] = v
			}
		case 5: // rollback
			name := names[r.IntN(3)]
			what = "rollback " + name
			err := m.th.Rollback(ctx, name)
			at, exists := m.checkpoints[name]
			if !exists {
				wantIs(t, err, thread.ErrNotFound, what)
				break
			}
			must(t, err)
			m.record(m.versions[at], m.states[at])
		case 6: // restore
			to := 1 + r.Int64N(v+1) // sometimes one past the end
			what = fmt.Sprint("restore ", to)
			err := m.th.Restore(ctx, to)
			if to > v {
				wantIs(t, err, thread.ErrNotFound, what)
				break
			}
			must(t, err)
			m.record(m.versions[to], m.states[to])
		case 7: // reset
			what = "reset"
			must(t, m.th.Reset(ctx))
			m.record(nil, map[string]string{})
		case 8: // fork at the head or at a random message
			msgs, err := m.th.Messages(ctx, thread.ReadOptions{})
			must(t, err)
			if len(msgs) == 0 || r.IntN(2) == 0 {
				what = "fork at head"
				f, err := m.th.Fork(ctx, thread.ForkOptions{})
				must(t, err)
				newModel(f, m.head(), m.headState())
				break
			}
			i := r.IntN(len(msgs))
			what = fmt.Sprint("fork at ", i)
			f, err := m.th.Fork(ctx, thread.ForkOptions{At: msgs[i].ID})
			must(t, err)
			var st map[string]string // depends on commit boundaries: not tracked
			if i == len(msgs)-1 {
				st = m.headState()
			}
			newModel(f, slices.Clone(m.head()[:i+1]), st)
		case 9: // delete a thread, or save and load one
			if len(threads) > 1 && r.IntN(2) == 0 {
				what = "delete " + m.th.ID()
				must(t, m.th.Delete(ctx))
				threads = slices.DeleteFunc(threads, func(x *model) bool { return x == m })
				break
			}
			what = "save/load"
			var doc bytes.Buffer
			must(t, m.th.Save(ctx, &doc, thread.SaveOptions{History: true}))
			l, err := db.Load(ctx, &doc, thread.LoadOptions{ID: fmt.Sprintf("load%d", step)})
			must(t, err)
			lm := newModel(l, nil, nil)
			lm.versions, lm.states = maps.Clone(m.versions), maps.Clone(m.states)
			lm.checkpoints = maps.Clone(m.checkpoints)
		}
		// Every version of every thread reads as the model says.
		for _, x := range threads {
			for ver, want := range x.versions {
				got, err := x.th.Messages(ctx, thread.ReadOptions{Version: ver})
				if err != nil {
					t.Fatalf("step %d (%s): read %s at version %d: %v", step, what, x.th.ID(), ver, err)
				}
				if g := texts(got); !slices.Equal(g, want) {
					t.Fatalf("step %d (%s): %s at version %d reads %v, want %v", step, what, x.th.ID(), ver, g, want)
				}
				if wantSt := x.states[ver]; wantSt != nil {
					st, err := x.th.State(ctx, ver)
					must(t, err)
					gotSt := map[string]string{}
					for k, v := range st {
						gotSt[k] = string(v)
					}
					if !maps.Equal(gotSt, wantSt) {
						t.Fatalf("step %d (%s): %s state at version %d is %v, want %v", step, what, x.th.ID(), ver, gotSt, wantSt)
					}
				}
				if k := 1 + r.IntN(3); len(want) > 0 {
					last, err := x.th.Messages(ctx, thread.ReadOptions{Version: ver, Last: k})
					must(t, err)
					if g := texts(last); !slices.Equal(g, want[max(0, len(want)-k):]) {
						t.Fatalf("step %d (%s): last %d at version %d reads %v", step, what, k, ver, g)
					}
				}
			}
		}
	}
}

func texts(msgs []message.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Text())
	}
	return out
}

func wantIs(t *testing.T, err, want error, what string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got %v, want %v", what, err, want)
	}
}
