package workflow

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// randomRound is a round's tasks as a run makes them: steps and instances
// of steps, in an order of their own, with some ended (in any order) and
// attempts for some.
func randomRound(rng *rand.Rand) execState {
	var ex execState
	next := map[string]int{}
	for range rng.IntN(40) {
		step := fmt.Sprintf("s%d", rng.IntN(4))
		switch rng.IntN(3) {
		case 0:
			if !slices.Contains(ex.Current, step) {
				ex.Current = append(ex.Current, step)
			}
		default:
			for range 1 + rng.IntN(30) {
				ex.Current = append(ex.Current, taskName(step, next[step]))
				next[step] += 1 + rng.IntN(2)/1*btoi(rng.IntN(8) == 0) // now and then a gap
			}
		}
	}
	for _, n := range ex.Current {
		if rng.IntN(2) == 0 {
			ex.Done = append(ex.Done, n)
		}
		if rng.IntN(3) != 0 {
			if ex.Attempts == nil {
				ex.Attempts = map[string]int{}
			}
			ex.Attempts[n] = 1 + btoi(rng.IntN(6) == 0)
		}
	}
	if rng.IntN(10) == 0 { // a count of a task the round does not name
		if ex.Attempts == nil {
			ex.Attempts = map[string]int{}
		}
		ex.Attempts[taskName("stray", rng.IntN(3))] = 3
	}
	rng.Shuffle(len(ex.Done), func(i, j int) { ex.Done[i], ex.Done[j] = ex.Done[j], ex.Done[i] })
	if len(ex.Current) > 0 && rng.IntN(2) == 0 {
		ex.Next = slices.Clone(ex.Current[:rng.IntN(len(ex.Current))])
	}
	return ex
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The state's JSON keeps every task: Current and Next as they were,
// Done as a set (in the order of Current), Attempts as they were; and a
// fan-out's runs of instances take a name each.
func TestTaskRunsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 1))
	for i := range 2000 {
		ex := randomRound(rng)
		ex.Status, ex.Round = StatusRunning, 2
		b, err := json.Marshal(ex)
		if err != nil {
			t.Fatal(err)
		}
		var got execState
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("case %d: %v\n%s", i, err, b)
		}
		if !slices.Equal(got.Current, ex.Current) || !slices.Equal(got.Next, ex.Next) || !maps.Equal(got.Attempts, ex.Attempts) {
			t.Fatalf("case %d: %+v\nread back %+v\nfrom %s", i, ex, got, b)
		}
		if want := inOrderOf(ex.Current, ex.Done); !slices.Equal(got.Done, want) {
			t.Fatalf("case %d: done %v, want %v\nfrom %s", i, got.Done, want, b)
		}
		if got.Status != ex.Status || got.Round != ex.Round {
			t.Fatalf("case %d: the other fields: %+v", i, got)
		}
	}
}

// A fan-out of 10,000 instances, half ended, is a few names, not 10,000.
func TestTaskRunsAreSmall(t *testing.T) {
	ex := execState{Status: StatusRunning, Round: 2, Current: []string{"join"}, Attempts: map[string]int{"join": 1}}
	for i := range 10_000 {
		ex.Current = append(ex.Current, taskName("summarize", i))
		ex.Attempts[taskName("summarize", i)] = 1
	}
	for i := 9_999; i >= 5_000; i-- {
		ex.Done = append(ex.Done, taskName("summarize", i))
	}
	ex.Attempts[taskName("summarize", 7)] = 2
	b, err := json.Marshal(ex)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 300 {
		t.Fatalf("%d bytes: %s", len(b), b)
	}
	for _, want := range []string{`"summarize[0:10000]"`, `"done":["summarize[5000:10000]"]`, `"summarize[8:10000]":1`, `"summarize[7]":2`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
}

// A state written before runs (a name each) reads as it did, and names
// that only look like runs are names.
func TestTaskRunsReadOldStates(t *testing.T) {
	old := `{"status":"running","round":2,"current":["a","b[0]","b[1]"],"done":["b[1]"],"attempts":{"a":1,"b[0]":2,"b[1]":1}}`
	var ex execState
	if err := json.Unmarshal([]byte(old), &ex); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ex.Current, []string{"a", "b[0]", "b[1]"}) || !slices.Equal(ex.Done, []string{"b[1]"}) || ex.Attempts["b[0]"] != 2 || len(ex.Attempts) != 3 {
		t.Fatalf("read %+v", ex)
	}
	for _, name := range []string{"b[1:1]", "b[2:1]", "b[01:3]", "b[-1:3]", "b[1:3", "[1:3]", "b[x:3]"} {
		if _, _, _, ok := parseRun(name); ok {
			t.Errorf("%q parsed as a run", name)
		}
	}
	spread := `{"status":"running","current":["b[0:400000]"],"done":["b[0:400000]"],"attempts":{"b[0:400000]":1}}`
	if err := json.Unmarshal([]byte(spread), &ex); err == nil {
		t.Error("runs of 1,200,000 tasks in all were read")
	}
	huge := `{"status":"running","current":["b[0:2000000000]"]}`
	if err := json.Unmarshal([]byte(huge), &ex); err == nil {
		t.Error("a run of two billion tasks was read")
	}
}
