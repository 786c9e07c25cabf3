package workflow_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
	_ "github.com/loomthreads/loom/postgres"
	_ "github.com/loomthreads/loom/sqlite"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

func TestMain(m *testing.M) { testserver.Main(m) }

const envChild = "LOOM_WORKFLOW_CHILD"

// childSpec tells a child process what to run.
type childSpec struct {
	URL      string `json:"url"`
	Workflow string `json:"workflow"`
	Graph    string `json:"graph"` // "trip", "review", "loop" or "fanout"
}

// jitter is a deliberate random delay in the child's steps, so that the
// kills land at different points of a run.
func jitter() { time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond) }

// tripGraph is three agents on the scripted provider: two researchers
// fanned out on their own sub-threads, a writer fanned in on main, then a
// last step. Every step is deterministic, and pauses here and there so
// that a kill lands inside steps as well as between them.
func tripGraph() *workflow.Graph {
	research := func(key string) workflow.StepFunc {
		return func(ctx context.Context, s *workflow.Step) (any, error) {
			th, err := s.SubThread(ctx, key)
			if err != nil {
				return nil, err
			}
			jitter()
			var in map[string]string
			if err := s.DecodeInput(&in); err != nil {
				return nil, err
			}
			a := agent.New(scripted.New(scripted.Text(key+" on "+in["plan"])), nil)
			res, err := a.Run(ctx, th, message.User("research "+in["plan"]))
			if err != nil {
				return nil, err
			}
			jitter()
			return res.Text(), nil
		}
	}
	return workflow.NewGraph().
		Add("plan", func(ctx context.Context, s *workflow.Step) (any, error) {
			th, err := s.SubThread(ctx, workflow.MainKey)
			if err != nil {
				return nil, err
			}
			if _, err := th.Append(ctx, message.User("plan a trip to Paris")); err != nil {
				return nil, err
			}
			jitter()
			return "Paris", nil
		}, "hotels", "food").
		Add("hotels", research("hotels"), "write").
		Add("food", research("food"), "write").
		Add("write", func(ctx context.Context, s *workflow.Step) (any, error) {
			th, err := s.SubThread(ctx, workflow.MainKey)
			if err != nil {
				return nil, err
			}
			var in map[string]string
			if err := s.DecodeInput(&in); err != nil {
				return nil, err
			}
			jitter()
			a := agent.New(scripted.New(scripted.Text("Itinerary: "+in["hotels"]+"; "+in["food"])), nil)
			res, err := a.Run(ctx, th, message.User("write it up"))
			if err != nil {
				return nil, err
			}
			return res.Text(), nil
		}, "sign").
		Add("sign", appendStep(workflow.MainKey, "signed"))
}

func graphNamed(name string) *workflow.Graph {
	switch name {
	case "review":
		return reviewGraph(new(atomic.Int32))
	case "loop":
		// The reviewer approves the third draft.
		approve := new(atomic.Int32)
		approve.Store(3)
		return loopGraph(approve, func(json.RawMessage) { jitter() })
	case "fanout":
		return fanOutGraph(func(int, int) error { jitter(); return nil })
	}
	return tripGraph()
}

// TestWorkflowChild is the work of a child process: run one workflow,
// say when it has started, and exit.
func TestWorkflowChild(t *testing.T) {
	raw := os.Getenv(envChild)
	if raw == "" {
		t.Skip("runs only as a child process of the crash tests")
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db, err := thread.Open(ctx, spec.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := workflow.Open(ctx, db, spec.Workflow)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("started")
	ex, err := w.Run(ctx, graphNamed(spec.Graph), &workflow.RunOptions{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("status", ex.Status)
}

// child starts a child process on spec and returns it once it has opened
// the workflow, with a channel that yields its exit.
func child(t *testing.T, spec childSpec) (*exec.Cmd, chan error, *strings.Builder) {
	t.Helper()
	raw, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^TestWorkflowChild$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(), envChild+"="+string(raw))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		once := false
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if !once && sc.Text() == "started" {
				once = true
				close(started)
			}
		}
		if !once {
			close(started)
		}
		done <- cmd.Wait()
	}()
	<-started
	return cmd, done, &out
}

// outcome is what must be the same after an interrupted and an
// uninterrupted run: the steps that ended, with their outputs and
// choices, and every sub-thread's messages.
func outcome(t *testing.T, w *workflow.Workflow) string {
	t.Helper()
	ctx := t.Context()
	if err := w.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	ex, err := w.Execution(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "status %s, round %d\n", ex.Status, ex.Round)
	var steps []string
	for _, s := range ex.Steps {
		if s.Status == workflow.StatusDone {
			steps = append(steps, fmt.Sprintf("step %d/%s in %s out %s next %v subs %v", s.Round, s.Name, s.Input, s.Output, s.Next, s.SubThreads))
		}
	}
	slices.Sort(steps)
	b.WriteString(strings.Join(steps, "\n") + "\n")
	for _, st := range ex.SubThreads {
		sub, err := w.SubThread(ctx, st.Key)
		if err != nil {
			t.Fatal(err)
		}
		if sub.Version() != st.Version {
			fmt.Fprintf(&b, "sub-thread %s at version %d, recorded %d\n", st.Key, sub.Version(), st.Version)
		}
		msgs, err := sub.Messages(ctx, thread.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			fmt.Fprintf(&b, "%s: %s: %s\n", st.Key, m.Role, m.Text())
		}
	}
	return b.String()
}

// crashCase is a workflow for crash to run: its graph (graphNamed), its
// input, what to do to it before the run that is killed (the same for the
// reference run), and the longest time before a kill.
type crashCase struct {
	graph   string
	input   any
	prepare func(t *testing.T, w *workflow.Workflow)
	window  time.Duration
}

// crash runs a workflow to its end in child processes killed with SIGKILL
// at random moments, then compares it with a run that was never
// interrupted.
func crash(t *testing.T, url string, kills int, c crashCase) {
	ctx := t.Context()
	db, err := thread.Open(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if c.window == 0 {
		c.window = 25 * time.Millisecond
	}
	ref := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "reference", Input: c.input}))
	if c.prepare != nil {
		c.prepare(t, ref)
	}
	refStart := ref.Version()
	if ex, err := ref.Run(ctx, graphNamed(c.graph), nil); err != nil || ex.Status != workflow.StatusDone {
		t.Fatalf("reference run: %v", err)
	}
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "crashed", Input: c.input}))
	if c.prepare != nil {
		c.prepare(t, w)
	}
	start := w.Version()
	spec := childSpec{URL: url, Workflow: "crashed", Graph: c.graph}
	// traced counts the kills that landed mid-run, after the child had
	// committed and before it had ended the run: a kill before its first
	// commit, or after its last, leaves nothing to see.
	killed, traced, finished := 0, 0, false
	execution := func() *workflow.Execution {
		if err := w.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		return must[*workflow.Execution](t)(w.Execution(ctx, 0))
	}
	for killed < kills && !finished {
		before := execution().Version
		cmd, done, out := child(t, spec)
		// Deliberate: a random moment of the run to kill the child at.
		time.Sleep(time.Duration(rand.Int64N(int64(c.window))))
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			finished = true
		default:
			cmd.Process.Kill()
			<-done
			killed++
			if after := execution(); after.Version > before && after.Status != workflow.StatusDone {
				traced++
			}
		}
	}
	if !finished {
		_, done, out := child(t, spec)
		if err := <-done; err != nil {
			t.Fatalf("last child: %v\n%s", err, out)
		}
	}
	got, want := outcome(t, w), outcome(t, ref)
	if got != want {
		t.Fatalf("after %d kills:\n%s\nwant, as uninterrupted:\n%s", killed, got, want)
	}
	ex := must[*workflow.Execution](t)(w.Execution(ctx, 0))
	interrupted := 0
	for _, s := range ex.Steps {
		if s.Status == workflow.StatusInterrupted {
			interrupted++
		}
	}
	t.Logf("%d kills (%d after a commit), %d step attempts interrupted, %d versions", killed, traced, interrupted, ex.Version)
	refEx := must[*workflow.Execution](t)(ref.Execution(ctx, 0))
	if traced > 0 && ex.Version-start <= refEx.Version-refStart {
		t.Errorf("%d kills after a commit left no trace in the history", traced)
	}
}

// crashCases are the workflows the crash tests kill: the trip (fan-out
// and fan-in of agents), a writer ↔ reviewer loop, a dynamic fan-out of
// 50, and the trip edited in its past (its plan's output set after plan
// ended), then resumed.
func crashCases() map[string]crashCase {
	return map[string]crashCase{
		"trip":   {graph: "trip"},
		"loop":   {graph: "loop"},
		"fanout": {graph: "fanout", input: 50, window: 150 * time.Millisecond},
		"edit": {graph: "trip", prepare: func(t *testing.T, w *workflow.Workflow) {
			ctx := t.Context()
			if _, err := w.Run(ctx, tripGraph(), nil); err != nil {
				t.Fatal(err)
			}
			at := versionWhere(t, w, stepDone("plan"))
			if err := w.Update(ctx, workflow.Point{Version: at}, workflow.Update{By: "alice", Outputs: map[string]any{"plan": "Rome"}}); err != nil {
				t.Fatal(err)
			}
		}},
	}
}

// crashAll runs every crash case on the store at url(t): the trip with
// tripKills kills, the others with fewer, to keep the suite short.
func crashAll(t *testing.T, url func(t *testing.T) string, tripKills int) {
	for name, c := range crashCases() {
		t.Run(name, func(t *testing.T) {
			kills := 4
			if name == "trip" {
				kills = tripKills
			}
			crash(t, url(t), kills, c)
		})
	}
}

func TestCrashSQLite(t *testing.T) {
	crashAll(t, func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "wf.db") }, 12)
}

func TestCrashPostgres(t *testing.T) {
	crashAll(t, func(t *testing.T) string { return testserver.Postgres(t) }, 12)
}

// A workflow waits for input in one process, the input is given in
// another, and a third runs it to its end.
func TestHumanInputInAnotherProcess(t *testing.T) {
	ctx := t.Context()
	url := "sqlite://" + filepath.Join(t.TempDir(), "wf.db")
	db, err := thread.Open(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "post"}))
	spec := childSpec{URL: url, Workflow: "post", Graph: "review"}
	_, done, out := child(t, spec)
	if err := <-done; err != nil || !strings.Contains(out.String(), "status waiting") {
		t.Fatalf("first child: %v\n%s", err, out)
	}
	if err := w.Provide(ctx, "review", true); err != nil {
		t.Fatal(err)
	}
	_, done, out = child(t, spec)
	if err := <-done; err != nil || !strings.Contains(out.String(), "status done") {
		t.Fatalf("second child: %v\n%s", err, out)
	}
	if got := subTexts(t, w, "main"); !slices.Equal(got, []string{"published"}) {
		t.Fatalf("main: %q", got)
	}
}

// Three processes resume one workflow at once: they take turns (Wait),
// every one of them ends well, and no step ends twice.
func TestConcurrentProcessesResume(t *testing.T) {
	ctx := t.Context()
	url := "sqlite://" + filepath.Join(t.TempDir(), "wf.db")
	db, err := thread.Open(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ref := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "reference"}))
	if _, err := ref.Run(ctx, tripGraph(), nil); err != nil {
		t.Fatal(err)
	}
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "shared"}))
	spec := childSpec{URL: url, Workflow: "shared", Graph: "trip"}
	var dones []chan error
	var outs []*strings.Builder
	for range 3 {
		_, done, out := child(t, spec)
		dones, outs = append(dones, done), append(outs, out)
	}
	for i, done := range dones {
		if err := <-done; err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i])
		}
	}
	if got, want := outcome(t, w), outcome(t, ref); got != want {
		t.Fatalf("after three processes:\n%s\nwant:\n%s", got, want)
	}
	ex := must[*workflow.Execution](t)(w.Execution(ctx, 0))
	ends := map[string]int{}
	for _, s := range ex.Steps {
		if s.Status == workflow.StatusDone {
			ends[s.Name]++
		}
	}
	for name, n := range ends {
		if n != 1 {
			t.Fatalf("step %s ended %d times", name, n)
		}
	}
}
