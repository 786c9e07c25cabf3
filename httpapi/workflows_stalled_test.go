package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/wftest"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

const envStalledChild = "LOOM_HTTPAPI_STALLED_CHILD"

// stalledSpec tells the child process which workflow of which store to run.
type stalledSpec struct {
	URL      string `json:"url"`
	Workflow string `json:"workflow"`
}

// childWorkflow is, in a child process a test started with env set to a
// spec (JSON; stalledSpec's fields among its own), the workflow the spec
// names, spec read into *into; a process without env skips the test, which
// runs only as a child of parent.
func childWorkflow(t *testing.T, env, parent string, into any) *workflow.Workflow {
	t.Helper()
	raw := os.Getenv(env)
	if raw == "" {
		t.Skip("runs only as a child process of " + parent)
	}
	var spec stalledSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(raw), into); err != nil {
		t.Fatal(err)
	}
	db, err := thread.Open(context.Background(), spec.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	w, err := workflow.Open(context.Background(), db, spec.Workflow)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// slowGraph is one step, "work", that says "in step" on stdout and, with
// block, waits until its context ends: a runner to kill in the middle.
func slowGraph(block bool) *workflow.Graph {
	return workflow.NewGraph().Add("work", func(ctx context.Context, s *workflow.Step) (any, error) {
		if !block {
			return "worked", nil
		}
		fmt.Println("in step")
		<-ctx.Done()
		return nil, ctx.Err()
	})
}

// TestWorkflowStalledChild is the runner that TestWorkflowStalled kills:
// it runs the workflow of the spec until it is killed.
func TestWorkflowStalledChild(t *testing.T) {
	w := childWorkflow(t, envStalledChild, "TestWorkflowStalled", &stalledSpec{})
	_, err := w.Run(context.Background(), slowGraph(true), nil)
	t.Fatalf("the run ended: %v", err)
}

// getWorkflow reads /v1/workflows/{id} and the workflow's entry of the list.
func getWorkflow(t *testing.T, s http.Handler, id string) (workflowResponse, workflowJSON) {
	t.Helper()
	var one workflowResponse
	must(t, s, req{method: "GET", path: "/v1/workflows/" + id}, http.StatusOK, &one)
	var list workflowsResponse
	must(t, s, req{method: "GET", path: "/v1/workflows"}, http.StatusOK, &list)
	for _, w := range list.Workflows {
		if w.ID == id {
			return one, w
		}
	}
	t.Fatalf("%s is not in the list", id)
	return one, workflowJSON{}
}

// TestWorkflowStalled: a workflow whose runner process was SIGKILLed in
// the middle of a step says "running" still, and stalled since its last
// commit; while the runner lived it was not stalled, and once run again
// to its end it is not.
func TestWorkflowStalled(t *testing.T) {
	url := "sqlite://" + filepath.Join(t.TempDir(), "loom.db")
	db, err := thread.Open(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := newServer(t, Options{DB: db})
	if _, err := workflow.Create(t.Context(), db, workflow.CreateOptions{ID: "killed"}); err != nil {
		t.Fatal(err)
	}

	raw, _ := json.Marshal(stalledSpec{URL: url, Workflow: "killed"})
	cmd := exec.Command(os.Args[0], "-test.run=^TestWorkflowStalledChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envStalledChild+"="+string(raw))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	inStep := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "in step" {
				inStep <- true
				return
			}
		}
		inStep <- false
	}()
	select {
	case ok := <-inStep:
		if !ok {
			cmd.Wait()
			t.Fatalf("the runner ended before its step: %s", stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the runner did not start its step")
	}

	one, listed := getWorkflow(t, s, "killed")
	if one.Status != workflow.StatusRunning || one.Stalled != nil || listed.Stalled != nil {
		t.Fatalf("with its runner alive: status %s, stalled %+v, listed %+v", one.Status, one.Stalled, listed.Stalled)
	}
	if one.Execution.Runner == nil || one.Execution.Runner.PID != cmd.Process.Pid {
		t.Fatalf("runner %+v, not the child %d", one.Execution.Runner, cmd.Process.Pid)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	one, listed = getWorkflow(t, s, "killed")
	if one.Status != workflow.StatusRunning {
		t.Fatalf("status %s after the kill", one.Status)
	}
	if one.Stalled == nil || listed.Stalled == nil {
		t.Fatalf("not stalled after its runner was killed: %+v, listed %+v", one.Stalled, listed.Stalled)
	}
	if !one.Stalled.Since.Equal(one.UpdatedAt) || !listed.Stalled.Since.Equal(one.UpdatedAt) || one.Stalled.Since.IsZero() {
		t.Errorf("stalled since %v (listed %v), want the last commit %v", one.Stalled.Since, listed.Stalled.Since, one.UpdatedAt)
	}
	// The JSON has it as the contract says.
	body := must(t, s, req{method: "GET", path: "/v1/workflows/killed"}, http.StatusOK, nil).Body.String()
	if want := `"stalled":{"since":"` + one.UpdatedAt.Format(time.RFC3339Nano) + `"}`; !strings.Contains(body, want) {
		t.Errorf("the answer has no %s: %s", want, body)
	}
	// A past version is what it was: never stalled.
	var past workflowResponse
	must(t, s, req{method: "GET", path: fmt.Sprintf("/v1/workflows/killed?version=%d", one.Version-1)}, http.StatusOK, &past)
	if past.Stalled != nil {
		t.Errorf("version %d is stalled: %+v", one.Version-1, past.Stalled)
	}

	// Run again from its program, it goes on and ends.
	w, err := workflow.Open(t.Context(), db, "killed")
	if err != nil {
		t.Fatal(err)
	}
	if ex, err := w.Run(t.Context(), slowGraph(false), nil); err != nil || ex.Status != workflow.StatusDone {
		t.Fatalf("run again: %v", err)
	}
	one, listed = getWorkflow(t, s, "killed")
	if one.Status != workflow.StatusDone || one.Stalled != nil || listed.Stalled != nil {
		t.Fatalf("run to its end: status %s, stalled %+v, listed %+v", one.Status, one.Stalled, listed.Stalled)
	}
}

// TestWorkflowStalledStates: which workflows are stalled — a lease that
// ran out (its runner on another host, say, that went silent) and a
// workflow given input that nothing has run since are; a pending, a
// waiting and a running one whose runner lives are not.
func TestWorkflowStalledStates(t *testing.T) {
	db := thread.New(thread.NewMemoryStore(), nil)
	s := newServer(t, Options{DB: db})
	ctx := t.Context()

	if _, err := workflow.Create(ctx, db, workflow.CreateOptions{ID: "pending"}); err != nil {
		t.Fatal(err)
	}
	runReview(t, db, "waiting")
	runReview(t, db, "given")
	must(t, s, req{method: "POST", path: "/v1/workflows/given/input", body: map[string]any{"step": "review", "input": "yes"}}, http.StatusOK, nil)

	// Two runners blocked in their step, one with a clock an hour behind:
	// its lease ran out as soon as it was taken.
	wftest.Hold(t, db, "live", nil)
	wftest.Hold(t, db, "expired", wftest.HourBehind)

	for _, c := range []struct {
		id      string
		status  workflow.Status
		stalled bool
	}{
		{"pending", workflow.StatusPending, false},
		{"waiting", workflow.StatusWaiting, false},
		{"given", workflow.StatusRunning, true},
		{"live", workflow.StatusRunning, false},
		{"expired", workflow.StatusRunning, true},
	} {
		one, listed := getWorkflow(t, s, c.id)
		if one.Status != c.status || (one.Stalled != nil) != c.stalled || (listed.Stalled != nil) != c.stalled {
			t.Errorf("%s: status %s, stalled %+v, listed %+v; want %s, stalled %v", c.id, one.Status, one.Stalled, listed.Stalled, c.status, c.stalled)
		}
		if c.stalled && !one.Stalled.Since.Equal(one.UpdatedAt) {
			t.Errorf("%s: stalled since %v, want its last commit %v", c.id, one.Stalled.Since, one.UpdatedAt)
		}
	}
}
