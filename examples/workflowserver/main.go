// Workflowserver is a program that serves loom with workflows of its own:
// what `loom serve` serves (the JSON API, MCP at /mcp, the web page at /),
// plus the workflows its registry names, which clients start and resume
// by name (POST /v1/workflows, POST /v1/workflows/{id}/resume, the MCP
// tools workflow_start, workflow_input and workflow_resume, the page's
// "Start a workflow") and follow step by step
// (GET /v1/workflows/{id}/events). Their steps are this program's Go
// functions; they run in its background, and its shutdown cancels them
// cleanly: a resume goes on from their last committed step.
//
//	go run ./examples/workflowserver
//	curl -s localhost:8080/v1/workflow-definitions
//	curl -s -XPOST localhost:8080/v1/workflows -d '{"name":"trip-approval","id":"weekend","input":{"city":"Porto"}}'
//	curl -sN localhost:8080/v1/workflows/weekend/events
//	curl -s -XPOST localhost:8080/v1/workflows/weekend/input -d '{"step":"approve","input":{"approved":true}}'
//	curl -s -XPOST localhost:8080/v1/workflows/weekend/resume
//
// Register your own graphs beside (or instead of) the examples' trip.
// Without API keys, serve on loopback only.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/loomthreads/loom/examples/workflow/trip"
	"github.com/loomthreads/loom/httpapi"
	"github.com/loomthreads/loom/mcpserver"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/webui"
	"github.com/loomthreads/loom/workflow"

	_ "github.com/loomthreads/loom/postgres"
	_ "github.com/loomthreads/loom/sqlite"
)

func main() {
	store := flag.String("store", "sqlite://./workflows.db", "store URL")
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on (loopback: this example has no API keys)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *store, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "workflowserver:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, store, addr string) error {
	db, err := thread.Open(ctx, store, nil)
	if err != nil {
		return err
	}
	defer db.Close()

	// The workflows this server runs, by name.
	reg := workflow.NewRegistry()
	if err := trip.Register(reg); err != nil {
		return err
	}
	runner := workflow.NewRunner(reg, nil)
	// Closed before the store: the runs under way are cancelled, let their
	// leases go, and resume at the next resume.
	defer runner.Close()

	api := httpapi.New(httpapi.Options{DB: db, Workflows: runner})
	defer api.Close()
	mux := http.NewServeMux()
	mux.Handle("/", api)
	mux.Handle("/mcp", mcpserver.JSONRPCErrors(api.Protect(mcpserver.Handler(db, &mcpserver.Options{Workflows: runner}))))
	mux.Handle("GET /{$}", webui.Handler())
	mux.Handle("GET /assets/", webui.Handler())
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe() }()
	slog.Info("listening", "url", "http://"+addr, "workflows", reg.Names())
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	api.Close()    // event streams end
	runner.Close() // workflow runs are cancelled cleanly
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
