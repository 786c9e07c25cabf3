package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// FuzzState gives a workflow thread any state a caller could write to it
// through the thread API (its wf/exec and wf/subs keys), and checks that
// reading, running, checkpointing, restoring and forking it end in an
// error or a result, never a panic, and that a refused call changes
// nothing.
func FuzzState(f *testing.F) {
	for _, seed := range [][2]string{
		{`{"status":"pending"}`, `{"main":{"version":1}}`},
		{`{"status":"running","round":2,"current":["a","b"],"done":["a"],"next":["b"],"uses":{"b":{"main":1}}}`, `{"main":{"version":1}}`},
		{`{"status":"waiting","round":1,"current":["a"],"waiting":[{"step":"a","since":"2026-01-01T00:00:00Z"}]}`, `{"main":{"version":3,"head":"c_x"}}`},
		{`{"status":"failed","round":1,"current":["a"],"failed":["a"],"error":"x"}`, `{"../x":{"version":-1}}`},
		{`{"status":"running","round":1,"current":["a"],"uses":{"a":{"main":-5,"nobody":2}}}`, `{"main":{"version":99}}`},
		{`{"status":"running","runner":{"id":"r","until":"2999-01-01T00:00:00Z","pid":1}}`, `{}`},
		{`[]`, `7`},
		{`{"status":"running","round":1,"current":["zzz"]}`, `{"main":null}`},
		{`{"status":"done"}`, `null`},
		{`null`, `{}`},
		{`{"status":"running","round":2,"current":["b[0]","b[1]"],"done":["b[1]"],"next":["b[","]"],"given":{"b[0]":1}}`, `{"main":{"version":1}}`},
		{`{"status":"running","round":1,"current":["a[","a]","[0]","a[-1]","a[01]"]}`, `{}`},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, exec, subs string) {
		ctx := context.Background()
		db := thread.New(thread.NewMemoryStore(), nil)
		w, err := workflow.Create(ctx, db, workflow.CreateOptions{ID: "wf", SubThreads: []string{"a"}})
		if err != nil {
			t.Fatal(err)
		}
		sub, err := w.SubThread(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sub.Append(ctx, message.User("hi")); err != nil {
			t.Fatal(err)
		}
		th := w.Thread()
		patch := map[string]json.RawMessage{}
		for k, v := range map[string]string{"wf/exec": exec, "wf/subs": subs} {
			if json.Valid([]byte(v)) {
				patch[k] = json.RawMessage(v)
			}
		}
		if len(patch) == 0 {
			return
		}
		if _, err := th.SetState(ctx, patch); err != nil {
			return
		}
		w, err = workflow.Open(ctx, db, "wf")
		if err != nil {
			if !errors.Is(err, thread.ErrInvalid) && !errors.Is(err, thread.ErrNotFound) {
				t.Fatalf("open: %v", err)
			}
			return
		}
		w.Execution(ctx, 0)
		w.At(ctx, workflow.Point{}, workflow.AtOptions{})
		nop := func(context.Context, *workflow.Step) (any, error) { return nil, nil }
		g := workflow.NewGraph().Add("a", nop, "b").Add("b", nop)
		runCtx, cancel := context.WithTimeout(ctx, 5e9)
		defer cancel()
		w.Run(runCtx, g, nil)
		w.Checkpoint(ctx, "cp")
		w.Fork(ctx, workflow.Point{Version: 2}, workflow.ForkOptions{ID: "f"})
		v := w.Version()
		if err := w.Restore(ctx, workflow.Point{Version: 3}); err != nil {
			if w.Refresh(ctx); w.Version() != v {
				t.Fatalf("a refused restore (%v) moved the workflow", err)
			}
		}
		w.Provide(ctx, "a", 1)
		v = w.Version()
		if err := w.Update(ctx, workflow.Point{Version: 2}, workflow.Update{By: "fuzz", Outputs: map[string]any{"a": 1}, Next: []string{"b"}}); err != nil {
			if w.Refresh(ctx); w.Version() != v {
				t.Fatalf("a refused update (%v) moved the workflow", err)
			}
		}
		w.CreateSubThread(ctx, "new", workflow.SubThreadOptions{})
		w.DeleteSubThread(ctx, "a")
		w.Delete(ctx)
	})
}
