package workflow_test

import (
	"slices"
	"testing"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// A workflow's sub-threads, made, forked or added later, are loom's own
// (thread.Own, with thread.LabelOwner): listings leave them out by
// default. The workflow's own thread is people's.
func TestSubThreadsAreLoomsOwn(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "post", SubThreads: []string{"writer"}}))
	must[*thread.Thread](t)(w.CreateSubThread(ctx, "extra", workflow.SubThreadOptions{}))
	must[*workflow.Workflow](t)(w.Fork(ctx, workflow.Point{Version: 1}, workflow.ForkOptions{ID: "post-fork"}))
	var people, own []string
	for th, err := range db.Threads(ctx, thread.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		r := th.Record()
		if !thread.Own(&r) {
			people = append(people, r.ID)
			continue
		}
		own = append(own, r.ID)
		if r.Labels[thread.LabelOwner] != workflow.Owner {
			t.Errorf("%s: labels %v, want %s=%s", r.ID, r.Labels, thread.LabelOwner, workflow.Owner)
		}
	}
	if !slices.Equal(people, []string{"post", "post-fork"}) || len(own) != 5 {
		t.Fatalf("people's threads %v, loom's own %v", people, own)
	}
	var listed []string
	for th, err := range db.Threads(ctx, thread.ListOptions{Internal: thread.InternalExclude}) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, th.ID())
	}
	if !slices.Equal(listed, people) {
		t.Fatalf("InternalExclude listed %v, want %v", listed, people)
	}
}

// Sub-threads made before thread.LabelOwner are loom's own by their
// workflow labels; the workflow's thread is not, whatever its labels.
func TestLegacySubThreadsAreLoomsOwn(t *testing.T) {
	labels := map[string]string{workflow.LabelWorkflow: "wf", workflow.LabelKey: "main"}
	if !thread.Own(&thread.Record{Kind: thread.KindLocal, Labels: labels}) {
		t.Error("a legacy sub-thread is not loom's own")
	}
	if thread.Own(&thread.Record{Kind: thread.KindWorkflow, Labels: labels}) {
		t.Error("a workflow's thread is loom's own")
	}
	if thread.Own(&thread.Record{Kind: thread.KindLocal, Labels: map[string]string{workflow.LabelWorkflow: "wf"}}) {
		t.Error("a thread with only the workflow label is loom's own")
	}
}
