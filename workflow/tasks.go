package workflow

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// The execution state names every task of its round, and every commit of
// the round writes it again: a fan-out of N instances made each commit
// O(N) bytes and the round O(N²). Its JSON therefore writes a run of
// instances of one step with consecutive indices as one name,
// "summarize[0:50]" (instances 0 up to 50, 50 not included): the round's
// tasks, those that ended and the next ones as lists (Done in the order
// of Current, so that runs form however the instances end), and the
// attempts as an object whose keys are runs of instances with the same
// count. A state written before is read as it was.

// maxRoundTasks caps the tasks a state's runs name in all, against a
// state made by hand: a round of 100 steps that each sent the most.
const maxRoundTasks = 100 * maxSends

// execJSON is execState as its JSON holds it.
type execJSON struct {
	execFields
	Current  runList        `json:"current,omitzero"`
	Done     runList        `json:"done,omitzero"`
	Next     runList        `json:"next,omitzero"`
	Attempts map[string]int `json:"attempts,omitzero"`
}

// execFields is execState without its methods, so that execJSON can
// embed it and write the fields it does not replace as they are.
type execFields execState

// MarshalJSON writes the runs of instances as one name each.
func (ex execState) MarshalJSON() ([]byte, error) {
	j := execJSON{execFields: execFields(ex), Current: runs(ex.Current), Next: runs(ex.Next)}
	j.execFields.Current, j.execFields.Done, j.execFields.Next, j.execFields.Attempts = nil, nil, nil, nil
	if len(ex.Done) > 0 {
		j.Done = runs(inOrderOf(ex.Current, ex.Done))
	}
	if len(ex.Attempts) > 0 {
		j.Attempts = attemptRuns(ex.Current, ex.Attempts)
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads runs of instances, and lists and keys of one task
// each, as a state written before them has.
func (ex *execState) UnmarshalJSON(b []byte) error {
	var j execJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*ex = execState(j.execFields)
	budget := maxRoundTasks
	var err error
	if ex.Current, err = expand(j.Current, &budget); err != nil {
		return err
	}
	if ex.Done, err = expand(j.Done, &budget); err != nil {
		return err
	}
	if ex.Next, err = expand(j.Next, &budget); err != nil {
		return err
	}
	if j.Attempts != nil {
		ex.Attempts = make(map[string]int, len(j.Attempts))
		for k, n := range j.Attempts {
			step, from, to, ok := parseRun(k)
			if !ok {
				ex.Attempts[k] = n
				continue
			}
			if budget -= to - from; budget < 0 {
				return fmt.Errorf("attempts of %q: the state names more than %d tasks", k, maxRoundTasks)
			}
			for i := from; i < to; i++ {
				ex.Attempts[taskName(step, i)] = n
			}
		}
	}
	return nil
}

// runList is a list of task names as the state's JSON writes it.
type runList []string

// runs writes each run of instances of names as one name.
func runs(names []string) runList {
	if len(names) == 0 {
		return nil
	}
	var out runList
	for i := 0; i < len(names); {
		name, j := runAt(names, i, nil)
		out = append(out, name)
		i = j
	}
	return out
}

// runAt returns the name of the run of instances of one step with
// consecutive indices that begins at names[i] (and for which also, when
// not nil, holds of each index after i), written as one, and the index
// after it; a task that begins no run is its own name.
func runAt(names []string, i int, also func(j int) bool) (string, int) {
	step, from, ok := instanceOf(names[i])
	j := i + 1
	if ok {
		for j < len(names) {
			s, n, ok := instanceOf(names[j])
			if !ok || s != step || n != from+(j-i) || also != nil && !also(j) {
				break
			}
			j++
		}
	}
	if j-i == 1 {
		return names[i], j
	}
	return runName(step, from, from+(j-i)), j
}

// expand is the names of l, each run written out, taking what runs name
// from budget.
func expand(l runList, budget *int) ([]string, error) {
	if l == nil {
		return nil, nil
	}
	out := make([]string, 0, len(l))
	for _, name := range l {
		step, from, to, ok := parseRun(name)
		if !ok {
			out = append(out, name)
			continue
		}
		if *budget -= to - from; *budget < 0 {
			return nil, fmt.Errorf("task run %q: the state names more than %d tasks", name, maxRoundTasks)
		}
		for i := from; i < to; i++ {
			out = append(out, taskName(step, i))
		}
	}
	return out, nil
}

// inOrderOf returns the names of sub in the order of all, then those of
// sub that all does not hold, in their order.
func inOrderOf(all, sub []string) []string {
	in := make(map[string]bool, len(sub))
	for _, n := range sub {
		in[n] = true
	}
	out := make([]string, 0, len(sub))
	for _, n := range all {
		if in[n] {
			out = append(out, n)
			delete(in, n)
		}
	}
	for _, n := range sub {
		if in[n] {
			out = append(out, n)
			delete(in, n)
		}
	}
	return out
}

// attemptRuns is attempts with each run of instances (in the order of
// order, which names each task once) that has one count as one key.
func attemptRuns(order []string, attempts map[string]int) map[string]int {
	out := make(map[string]int)
	covered := 0
	for i := 0; i < len(order); {
		n, has := attempts[order[i]]
		if !has {
			i++
			continue
		}
		name, j := runAt(order, i, func(j int) bool { m, has := attempts[order[j]]; return has && m == n })
		out[name] = n
		covered += j - i
		i = j
	}
	if covered < len(attempts) {
		// Counts of tasks order does not name (none, as the runner keeps
		// them): each as it is.
		in := make(map[string]bool, len(order))
		for _, name := range order {
			in[name] = true
		}
		for name, n := range attempts {
			if !in[name] {
				out[name] = n
			}
		}
	}
	return out
}

// instanceOf splits the name of an instance, "step[i]", as parseTask
// does, without its checks of the step's name (the state's names were
// checked when they were made) and without allocating: the state's
// encoding reads every name of a round at every commit.
func instanceOf(name string) (step string, i int, ok bool) {
	if len(name) < 4 || name[len(name)-1] != ']' {
		return "", 0, false
	}
	open := strings.LastIndexByte(name, '[')
	digits := name[open+1 : len(name)-1]
	if open < 1 || len(digits) == 0 || len(digits) > 9 || digits[0] == '0' && len(digits) > 1 {
		return "", 0, false
	}
	for j := 0; j < len(digits); j++ {
		c := digits[j]
		if c < '0' || c > '9' {
			return "", 0, false
		}
		i = i*10 + int(c-'0')
	}
	return name[:open], i, true
}

func runName(step string, from, to int) string {
	return step + "[" + strconv.Itoa(from) + ":" + strconv.Itoa(to) + "]"
}

// parseRun parses a run of instances, "step[from:to]", from < to.
func parseRun(name string) (step string, from, to int, ok bool) {
	i := strings.IndexByte(name, '[')
	if i < 0 || !strings.HasSuffix(name, "]") {
		return "", 0, 0, false
	}
	a, b, found := strings.Cut(name[i+1:len(name)-1], ":")
	if !found {
		return "", 0, 0, false
	}
	from, err1 := strconv.Atoi(a)
	to, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || from < 0 || to <= from || !validKey(name[:i]) ||
		runName(name[:i], from, to) != name {
		return "", 0, 0, false
	}
	return name[:i], from, to, true
}
