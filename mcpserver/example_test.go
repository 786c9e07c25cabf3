package mcpserver_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/mcpserver"
	"github.com/loomthreads/loom/thread"
)

// A client calls loom's thread tools; here over an in-memory connection,
// in production over HTTP (Handler) or stdio (ServeStdio).
func ExampleNew() {
	ctx := context.Background()
	db, err := thread.Open(ctx, "memory://", nil)
	if err != nil {
		log.Fatal(err)
	}
	serverT, clientT := mcp.NewInMemoryTransports()
	ss, err := mcpserver.New(db, nil).Connect(ctx, serverT, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer ss.Close()
	client := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "1"}, nil)
	cs, err := client.Connect(ctx, clientT, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "thread_create", Arguments: map[string]any{
		"title":    "support chat",
		"messages": []any{map[string]any{"role": "user", "text": "Where is my order?"}},
	}})
	if err != nil {
		log.Fatal(err)
	}
	id := res.StructuredContent.(map[string]any)["thread"].(map[string]any)["id"].(string)

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "thread_append", Arguments: map[string]any{
		"id":         id,
		"messages":   []any{map[string]any{"role": "assistant", "text": "It ships today."}},
		"if_version": 1,
	}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("version", res.StructuredContent.(map[string]any)["version"])

	// The same append again: the thread is no longer at version 1.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "thread_append", Arguments: map[string]any{
		"id":         id,
		"messages":   []any{map[string]any{"role": "assistant", "text": "It ships today."}},
		"if_version": 1,
	}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.IsError, strings.ReplaceAll(res.Content[0].(*mcp.TextContent).Text, id, "ID"))

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "thread_get", Arguments: map[string]any{"id": "th_nope"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.IsError, res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// version 2
	// true conflict: commit to ID: at version 2, not 1
	// true not_found: thread "th_nope"
}
