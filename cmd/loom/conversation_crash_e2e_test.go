package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loomthreads/loom/thread"
)

// slowModel is a local server that speaks OpenAI's streamed chat
// completions. The requests it is told to hang stream a few words and then
// wait for the client to go (a process killed in the middle of an answer);
// the others answer "the answer, again" whole.
type slowModel struct {
	*httptest.Server
	hang map[int]bool // by request number, from 1

	mu    sync.Mutex
	asked []string // the last message's text of each request
	// streaming gets a value when a hung request has streamed its words.
	streaming chan struct{}
	// gate (guarded by mu), when not nil, holds back the answer of a request that does
	// not hang until it gets a value.
	gate chan struct{}
}

const slowAnswer = "the answer, again"

func newSlowModel(t *testing.T, hang ...int) *slowModel {
	m := &slowModel{hang: map[int]bool{}, streaming: make(chan struct{}, 10)}
	for _, n := range hang {
		m.hang[n] = true
	}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		last := ""
		if n := len(body.Messages); n > 0 {
			last = contentText(body.Messages[n-1].Content)
		}
		m.mu.Lock()
		m.asked = append(m.asked, last)
		n, gate := len(m.asked), m.gate
		m.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta, finish string) {
			f := "null"
			if finish != "" {
				f = `"` + finish + `"`
			}
			d, _ := json.Marshal(map[string]string{"role": "assistant", "content": delta})
			fmt.Fprintf(w, "data: {\"id\":\"c%d\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-test\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", n, d, f)
			w.(http.Flusher).Flush()
		}
		if m.hang[n] {
			chunk("half an ", "")
			chunk("answer, and", "")
			m.streaming <- struct{}{}
			<-r.Context().Done()
			return
		}
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		chunk("the answer, ", "")
		chunk("again", "stop")
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(m.Close)
	t.Setenv("OPENAI_BASE_URL", m.URL+"/v1")
	t.Setenv("OPENAI_API_KEY", "sk-test")
	return m
}

// contentText is the text of an OpenAI message's content: a string, or
// text parts.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct{ Text string }
	json.Unmarshal(raw, &parts)
	for _, p := range parts {
		s += p.Text
	}
	return s
}

func (m *slowModel) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.asked)
}

// midStream waits until a hung request streams.
func (m *slowModel) midStream(t *testing.T) {
	t.Helper()
	select {
	case <-m.streaming:
	case <-time.After(30 * time.Second):
		t.Fatalf("the model was never asked; asked %q", m.requests())
	}
}

// wantKilled fails unless err is the exit of a process killed by SIGKILL.
func wantKilled(t *testing.T, err error) {
	t.Helper()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("exit %v, want killed by SIGKILL", err)
	}
}

// storedTexts reads thread id of store, as role: text.
func storedTexts(t *testing.T, store, id string) []string {
	t.Helper()
	db := openStore(t, store)
	th, err := db.Thread(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := th.Messages(t.Context(), thread.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Role)+": "+m.Text())
	}
	return out
}

type conversationOut struct {
	Status struct {
		Kind   string `json:"kind"`
		Reason string `json:"reason"`
	} `json:"status"`
	Messages []json.RawMessage `json:"messages"`
}

// TestServeResumesAConversationAfterSIGKILL kills `loom serve` (SIGKILL)
// while a conversation's answer streams; the next server asks the model
// again on the conversation's first request, and the answer is saved. On
// the way, a message over the limit is refused (400 invalid) and changes
// nothing.
func TestServeResumesAConversationAfterSIGKILL(t *testing.T) {
	model := newSlowModel(t, 1)
	store := sqliteStore(t)
	args := []string{"--provider", "openai", "--model", "gpt-test"}
	srv := startServer(t, store, args...)
	if code, _ := call(t, "POST", srv.url+"/v1/conversations", "", map[string]string{"id": "cv1"}, nil); code != 201 {
		t.Fatalf("create: %d", code)
	}
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	b, _ := json.Marshal(map[string]string{"command": "send", "text": strings.Repeat("x", 1_100_000)})
	resp, err := http.Post(srv.url+"/v1/conversations/cv1/commands", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 400 || e.Error.Code != "invalid" {
		t.Fatalf("a message over the limit: %d %q", resp.StatusCode, e.Error.Code)
	}

	if code, _ := call(t, "POST", srv.url+"/v1/conversations/cv1/commands", "", map[string]string{"command": "send", "text": "where was I?"}, nil); code != 200 {
		t.Fatalf("send: %d", code)
	}
	model.midStream(t)
	srv.cmd.Process.Kill()
	err = <-srv.done
	srv.done <- err // for the cleanup
	wantKilled(t, err)

	// The next server's answer waits until the test listens for its
	// stopped event.
	gate := make(chan struct{}, 1)
	model.mu.Lock()
	model.gate = gate
	model.mu.Unlock()
	srv = startServer(t, store, args...)
	events := conversationEvents(t, srv.url+"/v1/conversations/cv1/events")
	waitEvent(t, events, "state")
	gate <- struct{}{}
	waitEvent(t, events, "stopped")
	var conv conversationOut
	if code, _ := call(t, "GET", srv.url+"/v1/conversations/cv1", "", nil, &conv); code != 200 {
		t.Fatalf("get: %d", code)
	}
	if conv.Status.Kind != "stopped" || conv.Status.Reason != "end_turn" || len(conv.Messages) != 2 {
		t.Fatalf("after the restart: %+v, asked %q", conv, model.requests())
	}
	srv.stop(t)
	if got, want := storedTexts(t, store, "cv1"), []string{"user: where was I?", "assistant: " + slowAnswer}; !slices.Equal(got, want) {
		t.Fatalf("saved %q, want %q", got, want)
	}
	if asked := model.requests(); len(asked) != 2 || asked[1] != "where was I?" {
		t.Fatalf("the model was asked %q", asked)
	}
}

// conversationEvents follows the SSE stream at url, sending the name of
// each event, until the test ends.
func conversationEvents(t *testing.T, url string) <-chan string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		t.Fatalf("events: %s", resp.Status)
	}
	t.Cleanup(func() { resp.Body.Close() })
	ch := make(chan string, 100)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				ch <- name
			}
		}
	}()
	return ch
}

// waitEvent waits for an event named name on events.
func waitEvent(t *testing.T, events <-chan string, name string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case got, ok := <-events:
			if !ok {
				t.Fatalf("the events ended before %q", name)
			}
			if got == name {
				return
			}
		case <-timeout:
			t.Fatalf("no %q event", name)
		}
	}
}

// chatProcess is a built `loom chat` reading lines from a pipe.
type chatProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *syncBuffer
}

func startChatProcess(t *testing.T, args ...string) *chatProcess {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"chat"}, args...)...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return &chatProcess{cmd: cmd, stdin: stdin, out: out}
}

// TestChatResumesAfterSIGKILL kills `loom chat` (SIGKILL) while an answer
// streams; run again on the thread, it asks the model again and shows the
// answer. With --stop-interrupted it opens stopped/interrupted instead,
// and /continue asks.
func TestChatResumesAfterSIGKILL(t *testing.T) {
	model := newSlowModel(t, 1, 3)
	store := sqliteStore(t)
	args := []string{"--store", store, "--thread", "t1", "--provider", "openai", "--model", "gpt-test"}

	killMidTurn := func(say string) {
		t.Helper()
		p := startChatProcess(t, args...)
		io.WriteString(p.stdin, say+"\n")
		model.midStream(t)
		p.cmd.Process.Kill()
		wantKilled(t, p.cmd.Wait())
	}
	rerun := func(stdin string, extra ...string) string {
		t.Helper()
		cmd := exec.Command(binary(t), append(append([]string{"chat"}, args...), extra...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("loom chat: %v\n%s", err, out)
		}
		return string(out)
	}

	killMidTurn("where was I?")
	if got, want := storedTexts(t, store, "t1"), []string{"user: where was I?"}; !slices.Equal(got, want) {
		t.Fatalf("after the kill: %q", got)
	}
	if out := rerun(""); !strings.Contains(out, "loom: "+slowAnswer) {
		t.Fatalf("run again:\n%s", out)
	}
	if got, want := storedTexts(t, store, "t1"), []string{"user: where was I?", "assistant: " + slowAnswer}; !slices.Equal(got, want) {
		t.Fatalf("saved %q, want %q", got, want)
	}

	killMidTurn("and then?")
	out := rerun("/continue\n", "--stop-interrupted")
	if !strings.Contains(out, "stopped/interrupted") || !strings.Contains(out, "loom: "+slowAnswer) {
		t.Fatalf("run again with --stop-interrupted, then /continue:\n%s", out)
	}
	if asked := model.requests(); !slices.Equal(asked, []string{"where was I?", "where was I?", "and then?", "and then?"}) {
		t.Fatalf("the model was asked %q", asked)
	}
	if got := storedTexts(t, store, "t1"); len(got) != 4 || got[3] != "assistant: "+slowAnswer {
		t.Fatalf("saved %q", got)
	}
}
