package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomthreads/loom/internal/proctest"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

const envChild = "LOOM_WORKFLOW_EXAMPLE_CHILD"

// TestChild is the example run with -crash, when the test binary is
// re-executed by TestKilledWorkflowResumes; it skips otherwise.
func TestChild(t *testing.T) {
	store := os.Getenv(envChild)
	if store == "" {
		t.Skip("runs only as a child of TestKilledWorkflowResumes")
	}
	if err := run(t.Context(), os.Stdout, options{store: store, workflow: "trip", crash: true}); err != nil {
		t.Fatal(err)
	}
}

func TestKilledWorkflowResumes(t *testing.T) {
	store := "sqlite://" + filepath.Join(t.TempDir(), "workflow.db")
	out := proctest.Killed(t, "TestChild", envChild, store)
	for _, want := range []string{"hotels researches", "food researches", "writer writes from 2 findings (attempt 1)", "crashing now"} {
		if !strings.Contains(out, want) {
			t.Fatalf("child output lacks %q:\n%s", want, out)
		}
	}

	// The second run resumes in the writer's step: the researchers do not
	// run again, the writer runs a second attempt.
	var buf bytes.Buffer
	if err := run(t.Context(), &buf, options{store: store, workflow: "trip"}); err != nil {
		t.Fatal(err)
	}
	got := buf.String()
	for _, want := range []string{"resuming trip", "running, round 3 (write)", "writer writes from 2 findings (attempt 2)", "trip: done after 5 step attempts",
		"3/write#1  interrupted", "3/write#2  done", "main says: Your weekend: Stay in Alfama"} {
		if !strings.Contains(got, want) {
			t.Fatalf("resumed run lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "researches") {
		t.Fatalf("a researcher ran again:\n%s", got)
	}
	db, err := thread.Open(t.Context(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, err := workflow.Open(t.Context(), db, "trip")
	if err != nil {
		t.Fatal(err)
	}
	for key, n := range map[string]int{"main": 3, "hotels": 2, "food": 2} {
		sub, err := w.SubThread(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := sub.Messages(t.Context(), thread.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != n {
			b, _ := json.Marshal(msgs)
			t.Fatalf("%s holds %d messages, want %d: %s", key, len(msgs), n, b)
		}
	}
}
