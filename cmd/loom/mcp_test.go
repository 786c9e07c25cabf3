package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMCPServesThreadToolsOnStdio(t *testing.T) {
	store := "sqlite://" + filepath.Join(t.TempDir(), "mcp.db")
	clientR, serverW := io.Pipe()
	serverR, clientW := io.Pipe()
	var stderr bytes.Buffer
	e := &Env{Stdin: serverR, Stdout: serverW, Stderr: &stderr,
		Getenv: func(string) string { return "" }, IsTerminal: func(any) bool { return false }}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- e.Main(ctx, []string{"mcp", "--store", store}) }()

	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: clientR, Writer: clientW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "thread_create", Arguments: map[string]any{
		"id": "th_mcp", "title": "over stdio", "messages": []any{map[string]any{"role": "user", "text": "hello"}}}})
	if err != nil || res.IsError {
		t.Fatalf("create: %v %+v", err, res)
	}
	cs.Close()
	clientW.Close()
	if code := <-done; code != 0 {
		t.Fatalf("loom mcp exited %d: %s", code, stderr.String())
	}
	// The thread is in the store, where the rest of loom sees it.
	r := loom(t, "threads", "show", "th_mcp", "--store", store)
	if r.code != 0 || !strings.Contains(r.stdout, "hello") {
		t.Fatalf("show: %d %s %s", r.code, r.stdout, r.stderr)
	}
}
