package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/loomthreads/loom/httpapi"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

func Example() {
	db, _ := thread.Open(context.Background(), "memory://", nil)
	defer db.Close()
	srv := httptest.NewServer(httpapi.New(httpapi.Options{DB: db, Version: "v0.1.0", Logger: slog.New(slog.DiscardHandler)}))
	defer srv.Close()

	// call sends a request and prints the status, the ETag and, when
	// showBody, the body.
	call := func(method, path, body, ifMatch string, showBody bool) {
		r, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if ifMatch != "" {
			r.Header.Set("If-Match", ifMatch)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		// An ETag is "<version>.<the thread's creation>"; the version
		// is what this example shows.
		tag, _, _ := strings.Cut(resp.Header.Get("ETag"), ".")
		if tag != "" {
			tag += `"`
		}
		fmt.Println(strings.TrimSpace(fmt.Sprint(resp.StatusCode, " ", tag)))
		if showBody {
			fmt.Println(strings.TrimSpace(string(b)))
		}
	}

	call("POST", "/v1/threads", `{"id":"support","title":"Support chat"}`, "", false)
	call("POST", "/v1/threads/support/messages",
		`{"messages":[{"id":"m1","role":"user","contents":[{"type":"text","text":"hi"}],"created_at":"2026-01-02T03:04:05Z"}]}`, `"1"`, false)
	call("GET", "/v1/threads/support/messages", "", "", true)
	// A write from a stale version is refused, and changes nothing.
	call("POST", "/v1/threads/support/messages", `{"messages":[{"role":"user","contents":[{"type":"text","text":"again"}]}]}`, `"1"`, true)
	call("GET", "/v1/threads/elsewhere", "", "", true)
	call("GET", "/healthz", "", "", true)
	// Output:
	// 201 "1"
	// 201 "2"
	// 200 "2"
	// {"version":2,"messages":[{"id":"m1","role":"user","contents":[{"type":"text","text":"hi"}],"created_at":"2026-01-02T03:04:05Z"}]}
	// 412
	// {"error":{"code":"precondition_failed","message":"commit to support: at version 2, not 1: conflict"}}
	// 404
	// {"error":{"code":"not_found","message":"thread \"elsewhere\": not found"}}
	// 200
	// {"status":"ok","version":"v0.1.0"}
}

// ExampleOptions_workflows serves workflows of the program's own, which
// clients start by name (POST /v1/workflows) and follow step by step
// (GET /v1/workflows/{id}/events, here read with Workflow.Events).
// examples/workflowserver is a whole main that does so.
func ExampleOptions_workflows() {
	ctx := context.Background()
	db, _ := thread.Open(ctx, "memory://", nil)
	defer db.Close()
	reg := workflow.NewRegistry()
	reg.Register("greet", workflow.NewGraph().
		Add("hello", func(ctx context.Context, s *workflow.Step) (any, error) { return "hello " + string(s.Input()), nil }, "bye").
		Add("bye", func(ctx context.Context, s *workflow.Step) (any, error) { return "bye", nil }), nil)
	runner := workflow.NewRunner(reg, &workflow.RunnerOptions{Logger: slog.New(slog.DiscardHandler)})
	defer runner.Close() // cancels the runs under way, which resume next time
	srv := httptest.NewServer(httpapi.New(httpapi.Options{DB: db, Workflows: runner, Logger: slog.New(slog.DiscardHandler)}))
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/v1/workflows", "application/json", strings.NewReader(`{"name":"greet","id":"g1","input":"you"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("Location"))
	w, _ := workflow.Open(ctx, db, "g1")
	for ev, err := range w.Events(ctx, workflow.EventsOptions{UntilSettled: true}) {
		if err != nil {
			fmt.Println(err)
			return
		}
		if ev.Step != nil {
			fmt.Println(strings.TrimSpace(fmt.Sprint(ev.Kind, " ", ev.Step.ID, " ", string(ev.Step.Output))))
		} else {
			fmt.Println(ev.Kind)
		}
	}
	// Output:
	// 202 /v1/workflows/g1
	// step_started 1/hello#1
	// step_done 1/hello#1 "hello \"you\""
	// step_started 2/bye#1
	// step_done 2/bye#1 "bye"
	// workflow_done
}
