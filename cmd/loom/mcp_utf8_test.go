package main

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testwait"
)

// TestMCPWorklogRefusesTextThatIsNotUTF8: `loom mcp --worklog` on stdio
// answers a create_thread whose text is not UTF-8 (raw bytes, or a lone
// surrogate escaped) with a -32700 error of its id, and stores nothing of
// it (before, it stored "caf\uFFFD"); the next call is served.
func TestMCPWorklogRefusesTextThatIsNotUTF8(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".gitmem")
	stdin := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"create_thread\",\"arguments\":{\"text\":\"caf\xe9 au lait\"}}}",
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"create_thread","arguments":{"text":"th\udc00e vert"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"create_thread","arguments":{"text":"chocolat chaud"}}}`,
	}, "\n") + "\n"
	// stdin stays open until the answers are in: at its end the session
	// ends, and calls still running with it.
	pr, pw := io.Pipe()
	out := &syncBuffer{}
	e := &Env{Stdin: pr, Stdout: out, Stderr: io.Discard, Getenv: func(string) string { return "" }, IsTerminal: func(any) bool { return false }}
	code := make(chan int, 1)
	go func() { code <- e.Main(context.Background(), []string{"mcp", "--worklog", "--dir", dir}) }()
	if _, err := io.WriteString(pw, stdin); err != nil {
		t.Fatal(err)
	}
	// Missing ones, the checks below say which.
	var answers map[float64]map[string]any
	testwait.Within(20*time.Second, func() bool {
		answers = map[float64]map[string]any{}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil {
				id, _ := m["id"].(float64)
				answers[id] = m
			}
		}
		return len(answers) >= 4
	})
	pw.Close()
	if c := <-code; c != 0 {
		t.Fatalf("loom mcp exited %d", c)
	}
	for _, id := range []float64{2, 3} {
		e, _ := answers[id]["error"].(map[string]any)
		if e == nil || e["code"] != -32700.0 {
			t.Errorf("call %v: %v, want a -32700 error", id, answers[id])
		}
	}
	if answers[4]["result"] == nil {
		t.Fatalf("the good call: %v", answers[4])
	}
	items := loom(t, "items", "list", "--dir", dir).ok(t).stdout
	if !strings.Contains(items, "chocolat chaud") || strings.Contains(items, "caf") || strings.Contains(items, "vert") || strings.Contains(items, "\uFFFD") {
		t.Errorf("items after the calls:\n%s", items)
	}
}
