package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testwait"
)

// TestStdioRefusesTextThatIsNotUTF8: over IOTransport (stdio), a request
// whose bytes are not UTF-8, or that escapes a lone surrogate, is answered
// with a -32700 error of its id and stores nothing, where the SDK alone
// would have stored U+FFFD; a notification of the kind gets no answer;
// the connection goes on serving.
func TestStdioRefusesTextThatIsNotUTF8(t *testing.T) {
	db := newDB(t)
	clientR, serverW := io.Pipe()
	serverR, clientW := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, db, nil, IOTransport(serverR, serverW)) }()
	t.Cleanup(func() {
		clientW.Close()
		cancel()
		<-done
	})
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(clientR)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(clientW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	next := func() map[string]any {
		t.Helper()
		select {
		case l := <-lines:
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("not JSON: %s", l)
			}
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("no answer")
		}
		return nil
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if m := next(); m["id"] != 1.0 || m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"reason\":\"caf\xe9\"}}")
	for id, args := range map[int]string{
		2: "{\"id\":\"latin1\",\"title\":\"caf\xe9\"}",
		3: `{"id":"surrogate","title":"caf\udc00"}`,
	} {
		send(`{"jsonrpc":"2.0","id":` + string(rune('0'+id)) + `,"method":"tools/call","params":{"name":"thread_create","arguments":` + args + `}}`)
		m := next()
		e, _ := m["error"].(map[string]any)
		if m["id"] != float64(id) || e == nil || e["code"] != -32700.0 || !strings.Contains(e["message"].(string), "UTF-8") {
			t.Fatalf("call %d: %v, want a -32700 error of its id", id, m)
		}
	}
	send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"thread_create","arguments":{"id":"fine","title":"café"}}}`)
	if m := next(); m["id"] != 4.0 || m["result"] == nil {
		t.Fatalf("a good call after the refused ones: %v", m)
	}
	// Lines longer than the reader's buffer are checked whole.
	big := strings.Repeat("long text ", 20_000)
	send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"thread_create","arguments":{"id":"big-bad","messages":[{"role":"user","text":"` + big + "\xff" + `"}]}}}`)
	if m := next(); m["id"] != 5.0 || m["error"] == nil {
		t.Fatalf("a long line that is not UTF-8 at its end: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"thread_create","arguments":{"id":"big","messages":[{"role":"user","text":"` + big + `"}]}}}`)
	if m := next(); m["id"] != 6.0 || m["result"] == nil {
		t.Fatalf("a long line: %v", m)
	}
	if _, err := db.Thread(t.Context(), "big-bad"); err == nil {
		t.Error("thread big-bad was created")
	}
	for _, id := range []string{"latin1", "surrogate"} {
		if _, err := db.Thread(t.Context(), id); err == nil {
			t.Errorf("thread %s was created", id)
		}
	}
	th, err := db.Thread(t.Context(), "fine")
	if err != nil || th.Record().Title != "café" {
		t.Fatalf("the good call's thread: %v", err)
	}
}

// TestStdioSessionLeavesTheRestOfItsInput: when a session over IOTransport
// ends (here the SDK ends it on a line that is no JSON), nothing of the
// transport goes on reading r: no goroutine is left behind, however many
// sessions ran, and the line after the session's last is neither consumed
// nor answered but left in r for whoever reads it next.
func TestStdioSessionLeavesTheRestOfItsInput(t *testing.T) {
	db := newDB(t)
	session := func() (clientW, serverR *os.File, answers *syncWriter) {
		t.Helper()
		serverR, clientW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		answers = &syncWriter{w: new(bytes.Buffer)}
		done := make(chan error, 1)
		go func() { done <- Serve(t.Context(), db, nil, IOTransport(serverR, answers)) }()
		io.WriteString(clientW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`+"\n")
		io.WriteString(clientW, "no JSON at all\n")
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the session did not end on a line that is no JSON")
		}
		return clientW, serverR, answers
	}
	before := runtime.NumGoroutine()
	for range 20 {
		// r stays open, as stdin does after a session.
		clientW, serverR, _ := session()
		t.Cleanup(func() {
			clientW.Close()
			serverR.Close()
		})
	}
	testwait.Within(5*time.Second, func() bool { return runtime.NumGoroutine() <= before })
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before 20 sessions, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}

	clientW, serverR, answers := session()
	defer clientW.Close()
	defer serverR.Close()
	next := "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\",\"params\":{\"x\":\"caf\xe9\"}}\n"
	written := make(chan error, 1)
	go func() {
		_, err := io.WriteString(clientW, next)
		written <- err
	}()
	read := make(chan string, 1)
	go func() {
		got, _ := bufio.NewReader(serverR).ReadString('\n')
		read <- got
	}()
	select {
	case got := <-read:
		if got != next {
			t.Fatalf("the next line, read from r after the session: %q; want it whole", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the next line was consumed: reading r after the session got nothing")
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if strings.Contains(answers.String(), `"id":9`) {
		t.Fatalf("the ended session answered the next line: %s", answers)
	}
}

// TestStdioSessionClosedWhileReading: a session whose context ends while
// the SDK waits for the next line of r stops reading r, when r can be
// given a deadline (an *os.File pipe, a net.Conn): no goroutine is left
// waiting on r, the deadline is lifted again, and the next line, even one
// the checks refuse, is neither read nor answered but left in r.
func TestStdioSessionClosedWhileReading(t *testing.T) {
	db := newDB(t)
	type pipes struct{ serverR, clientW *os.File }
	session := func() (pipes, *syncWriter) {
		t.Helper()
		serverR, clientW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			serverR.Close()
			clientW.Close()
		})
		answers := &syncWriter{w: new(bytes.Buffer)}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- Serve(ctx, db, nil, IOTransport(serverR, answers)) }()
		io.WriteString(clientW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`+"\n")
		testwait.Until(t, 10*time.Second, "an answer to initialize", func() bool { return strings.Contains(answers.String(), `"id":1`) })
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return when its context ended")
		}
		return pipes{serverR, clientW}, answers
	}
	before := runtime.NumGoroutine()
	for range 20 {
		session()
	}
	testwait.Within(5*time.Second, func() bool { return runtime.NumGoroutine() <= before })
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before 20 sessions, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}

	p, answers := session()
	next := "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\",\"params\":{\"x\":\"caf\xe9\"}}\n"
	if _, err := io.WriteString(p.clientW, next); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(p.serverR).ReadString('\n')
	if err != nil || got != next {
		t.Fatalf("the next line, read from r after the session: %q, %v; want it whole", got, err)
	}
	if strings.Contains(answers.String(), `"id":9`) {
		t.Fatalf("the ended session answered the next line: %s", answers)
	}
}
