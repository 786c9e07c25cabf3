package mcpserver_test

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/mcpserver"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
)

// The server mode: each call's Log comes from a worklog.Logs, by the
// project the call names (and, on a real server, the caller's tenant).
func ExampleAddWorklogToolsFrom() {
	ctx := context.Background()
	db, _ := thread.Open(ctx, "memory://", nil)
	defer db.Close()
	logs := worklog.NewLogs(db, nil)
	src := func(ctx context.Context, project string) (*worklog.Log, error) {
		return logs.Log("acme", project) // a server takes the tenant from ctx
	}

	s := mcp.NewServer(&mcp.Implementation{Name: "example", Version: "0"}, nil)
	mcpserver.AddWorklogToolsFrom(s, src, nil)
	ct, st := mcp.NewInMemoryTransports()
	ss, _ := s.Connect(ctx, st, nil)
	defer ss.Close()
	cs, _ := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "0"}, nil).Connect(ctx, ct, nil)
	defer cs.Close()

	cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_thread", Arguments: map[string]any{"text": "Release notes still to write", "project": "loom"}})
	res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_threads", Arguments: map[string]any{"project": "loom"}})
	fmt.Println(res.StructuredContent.(map[string]any)["total_open"])

	log, _ := logs.Log("acme", "loom")
	list, _ := log.List(ctx, worklog.ListOptions{})
	fmt.Println(list.Threads[0].Text)
	// Output:
	// 1
	// Release notes still to write
}
