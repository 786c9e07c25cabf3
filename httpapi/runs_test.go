package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
)

type weatherIn struct {
	City string `json:"city"`
}

func weatherTool(opts ...agent.ToolOption) agent.Tool {
	return agent.MustFunc("weather", "Current weather of a city.", func(_ context.Context, in weatherIn) (string, error) {
		return fmt.Sprintf(`{"city":%q,"temp_c":21}`, in.City), nil
	}, opts...)
}

func weatherScript() *scripted.Client {
	return scripted.New(
		scripted.Calls(message.FunctionCall{CallID: "c1", Name: "weather", Arguments: `{"city":"Paris"}`}),
		scripted.Step{Text: "It is 21 °C in Paris.", Usage: message.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}},
	)
}

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	id, name string
	data     json.RawMessage
}

// scanEvents parses an event stream, handing each event to each until it
// returns false or the stream ends. It fails on an event whose data is not
// JSON and on a line that belongs to no event.
func scanEvents(r io.Reader, each func(sseEvent) bool) error {
	var cur sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name == "" {
				continue
			}
			if !json.Valid(cur.data) {
				return fmt.Errorf("event %s: data is not JSON: %s", cur.name, cur.data)
			}
			if !each(cur) {
				return nil
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = json.RawMessage(strings.TrimPrefix(line, "data: "))
		case strings.HasPrefix(line, ":"): // a comment: the heartbeat
		default:
			return fmt.Errorf("unexpected line %q", line)
		}
	}
	return nil
}

// readEvents parses an event stream until it ends, or until stop returns
// true for an event.
func readEvents(t *testing.T, r io.Reader, stop func(sseEvent) bool) []sseEvent {
	t.Helper()
	var out []sseEvent
	err := scanEvents(r, func(ev sseEvent) bool {
		out = append(out, ev)
		return stop == nil || !stop(ev)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// streamEvents opens the event stream at url with key, and lastID (when
// not "") as Last-Event-ID, and reads its events into a channel. The
// channel is closed when the stream ends, or at a line that is not of an
// event; stop closes the stream.
func streamEvents(t *testing.T, url, key, lastID string) (<-chan sseEvent, func()) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		t.Fatalf("events: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	ch := make(chan sseEvent, 1000)
	go func() {
		defer close(ch)
		scanEvents(resp.Body, func(ev sseEvent) bool {
			ch <- ev
			return true
		})
	}()
	return ch, func() { resp.Body.Close() }
}

// TestRunJSON checks a run answered as JSON: the result, and the thread's
// messages after it.
func TestRunJSON(t *testing.T) {
	s := newServer(t, Options{Agent: agent.New(weatherScript(), &agent.Options{Tools: []agent.Tool{weatherTool()}})})
	createThread(t, s, "", "th")
	var res runResponse
	w := must(t, s, req{method: "POST", path: "/v1/threads/th/runs", body: map[string]any{"input": "Weather in Paris?"}}, http.StatusOK, &res)
	if res.Text != "It is 21 °C in Paris." || res.RunID == "" || res.Version != 4 || len(res.Messages) != 4 ||
		res.Usage.TotalTokens != 15 || res.Requests != 2 || len(res.Pending) != 0 || res.Finish != "stop" {
		t.Fatalf("result %+v", res)
	}
	if tagVersion(w.Header().Get("ETag")) != `"4"` {
		t.Errorf("ETag %q", tagVersion(w.Header().Get("ETag")))
	}
	var msgs messagesResponse
	must(t, s, req{method: "GET", path: "/v1/threads/th/messages"}, http.StatusOK, &msgs)
	if diff := cmp.Diff([]string{"Weather in Paris?", "", "", "It is 21 °C in Paris."}, texts(msgs.Messages)); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	// The input may be a list of messages too; a script past its end is a
	// 500 that does not say why.
	w = wantError(t, s, req{method: "POST", path: "/v1/threads/th/runs", body: map[string]any{"input": []any{textMsg("user", "again")}}}, 500, "internal")
	if strings.Contains(w.Body.String(), "scripted") {
		t.Errorf("internal text sent: %s", w.Body.String())
	}
}

// TestRunApprovals checks a run that stops for approval, a run that does
// not decide it (409 approval_required), and one that does.
func TestRunApprovals(t *testing.T) {
	s := newServer(t, Options{Agent: agent.New(weatherScript(), &agent.Options{Tools: []agent.Tool{weatherTool(agent.WithApproval())}})})
	createThread(t, s, "", "th")
	var res runResponse
	must(t, s, req{method: "POST", path: "/v1/threads/th/runs", body: map[string]any{"input": "Weather?"}}, http.StatusOK, &res)
	if len(res.Pending) != 1 || res.Pending[0].CallID != "c1" {
		t.Fatalf("pending %+v", res)
	}
	wantError(t, s, req{method: "POST", path: "/v1/threads/th/runs", body: map[string]any{"input": "hurry"}}, http.StatusConflict, "approval_required")
	must(t, s, req{method: "POST", path: "/v1/threads/th/runs", body: map[string]any{"approvals": []any{map[string]any{"call_id": "c1", "approved": true}}}}, http.StatusOK, &res)
	if res.Text != "It is 21 °C in Paris." || len(res.Pending) != 0 {
		t.Errorf("after approval %+v", res)
	}
}

// TestRunSSE checks a streamed run: updates, steps and the result, each a
// JSON event, on a real connection.
func TestRunSSE(t *testing.T) {
	s := newServer(t, Options{Agent: agent.New(weatherScript(), &agent.Options{Tools: []agent.Tool{weatherTool()}})})
	createThread(t, s, "", "th")
	ts := httptest.NewServer(s)
	defer ts.Close()

	resp, err := http.Post(ts.URL+"/v1/threads/th/runs", "application/json", strings.NewReader(`{"input":"Weather in Paris?","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	events := readEvents(t, resp.Body, nil)
	var text strings.Builder
	var steps []string
	calls := 0
	var res runResponse
	for _, ev := range events {
		switch ev.name {
		case "update":
			var u updateJSON
			mustUnmarshal(t, ev.data, &u)
			text.WriteString(u.Text)
			if u.Call != nil {
				calls++
			}
		case "step":
			var st stepJSON
			mustUnmarshal(t, ev.data, &st)
			if st.Commit == "" || st.Version == 0 || len(st.Messages) == 0 {
				t.Errorf("step %s", ev.data)
			}
			steps = append(steps, string(st.Kind))
		case "result":
			mustUnmarshal(t, ev.data, &res)
		default:
			t.Errorf("event %s: %s", ev.name, ev.data)
		}
	}
	if events[len(events)-1].name != "result" {
		t.Errorf("last event %s", events[len(events)-1].name)
	}
	if text.String() != "It is 21 °C in Paris." || calls != 1 {
		t.Errorf("streamed text %q, %d calls", text.String(), calls)
	}
	if diff := cmp.Diff([]string{"input", "tools", "answer"}, steps); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if res.Text != "It is 21 °C in Paris." || res.Version != 4 {
		t.Errorf("result %+v", res)
	}
}

func mustUnmarshal(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
}

// TestRunSSEErrors checks that an error before the stream starts is an
// ordinary error response, and one after it an error event.
func TestRunSSEErrors(t *testing.T) {
	client := scripted.New(scripted.Fail(&agent.ProviderError{Provider: "openai", StatusCode: 500, Type: "server_error", Message: "org-secret"}))
	s := newServer(t, Options{Agent: agent.New(client, nil)})
	createThread(t, s, "", "th")
	w := must(t, s, req{method: "POST", path: "/v1/threads/th/runs", header: map[string]string{"Accept": "text/event-stream"},
		body: map[string]any{"input": "hi"}}, http.StatusOK, nil)
	events := readEvents(t, w.Body, nil)
	if len(events) != 2 || events[0].name != "step" || events[1].name != "error" {
		t.Fatalf("events %+v", events)
	}
	var e errorJSON
	mustUnmarshal(t, events[1].data, &e)
	if e.Code != "provider_error" || strings.Contains(e.Message, "org-secret") {
		t.Errorf("error event %+v", e)
	}
	// A thread that does not exist: no stream at all.
	wantError(t, s, req{method: "POST", path: "/v1/threads/none/runs", body: map[string]any{"input": "hi", "stream": true}}, http.StatusNotFound, "not_found")
	// Not JSON: 502 as JSON.
	client.Add(scripted.Fail(&agent.ProviderError{Provider: "openai", StatusCode: 429}))
	wantError(t, s, req{method: "POST", path: "/v1/threads/th/runs", body: map[string]any{"input": "hi"}}, http.StatusTooManyRequests, "rate_limited")
}

// TestRunBusy checks that a second run on a running thread is refused with
// 409 busy, or waits with on_busy "queue".
func TestRunBusy(t *testing.T) {
	client := scripted.New(scripted.Step{Text: "slow", Delay: 300 * time.Millisecond}, scripted.Text("queued"))
	s := newServer(t, Options{Agent: agent.New(client, nil)})
	createThread(t, s, "", "th")
	first := make(chan *httptest.ResponseRecorder)
	go func() {
		first <- do(t, s, req{method: "POST", path: "/v1/threads/th/runs", body: map[string]any{"input": "one"}})
	}()
	eventually(t, "the first run reaches the model", func() bool { return len(client.Requests()) > 0 })
	wantError(t, s, req{method: "POST", path: "/v1/threads/th/runs", body: map[string]any{"input": "two"}}, http.StatusConflict, "busy")
	var res runResponse
	must(t, s, req{method: "POST", path: "/v1/threads/th/runs", body: map[string]any{"input": "three", "on_busy": "queue"}}, http.StatusOK, &res)
	if res.Text != "queued" {
		t.Errorf("queued run %+v", res)
	}
	if w := <-first; w.Code != 200 {
		t.Errorf("first run: %d %s", w.Code, w.Body.String())
	}
}

// TestRunDisconnectMidStream checks that a client that goes away in the
// middle of a streamed run cancels it, and leaves the thread valid for the
// next run.
func TestRunDisconnectMidStream(t *testing.T) {
	// The first request waits a minute, or until its run is cancelled.
	client := scripted.New(scripted.Step{Text: "never sent", Delay: time.Minute}, scripted.Text("after"))
	s := newServer(t, Options{Agent: agent.New(client, nil)})
	createThread(t, s, "", "th", "earlier", "reply")
	ts := httptest.NewServer(s)
	defer ts.Close()

	ctx, cancel := context.WithCancel(t.Context())
	r, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/threads/th/runs", strings.NewReader(`{"input":"first","stream":true}`))
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	events := readEvents(t, resp.Body, func(ev sseEvent) bool { return ev.name == "step" })
	if len(events) != 1 {
		t.Fatalf("events %+v", events)
	}
	// The model is "thinking".
	eventually(t, "the run reaches the model", func() bool { return len(client.Requests()) > 0 })
	cancel() // and the client goes away
	resp.Body.Close()

	// The next run waits for the cancelled one to end, then runs on what
	// it committed.
	var res runResponse
	must(t, s, req{method: "POST", path: "/v1/threads/th/runs", body: map[string]any{"input": "second", "on_busy": "queue"}}, http.StatusOK, &res)
	if res.Text != "after" {
		t.Errorf("next run %+v", res)
	}
	var msgs messagesResponse
	must(t, s, req{method: "GET", path: "/v1/threads/th/messages"}, http.StatusOK, &msgs)
	if diff := cmp.Diff([]string{"earlier", "reply", "first", "second", "after"}, texts(msgs.Messages)); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

// TestRunsWithoutAgent checks that runs and summaries answer 501 on a
// server without an agent.
func TestRunsWithoutAgent(t *testing.T) {
	s := newServer(t, Options{})
	createThread(t, s, "", "th", "hi")
	wantError(t, s, req{method: "POST", path: "/v1/threads/th/runs", body: map[string]any{"input": "hi"}}, http.StatusNotImplemented, "unsupported")
	wantError(t, s, req{method: "POST", path: "/v1/threads/th/view", body: map[string]any{"strategies": []any{map[string]any{"type": "summarize"}}}}, http.StatusNotImplemented, "unsupported")
}

// TestViewSummarize checks the summarize strategy on a server with an
// agent: the summary is committed and the view stops at it.
func TestViewSummarize(t *testing.T) {
	s := newServer(t, Options{Agent: agent.New(scripted.New(scripted.Text("They talked about Lisbon.")), nil)})
	var words []string
	for i := range 12 {
		words = append(words, strings.Repeat(fmt.Sprintf("word%d ", i), 40))
	}
	createThread(t, s, "", "th", words...)
	var v viewResponse
	must(t, s, req{method: "POST", path: "/v1/threads/th/view", body: map[string]any{"budget": 600,
		"strategies": []any{map[string]any{"type": "summarize", "keep": 2}}}}, http.StatusOK, &v)
	if v.Compacted == "" || v.Version != 2 || !strings.Contains(fmt.Sprint(texts(v.Messages)), "Lisbon") {
		t.Errorf("view %+v", v)
	}
}

// TestRunSSEHeartbeat checks that a stream waiting on a slow model sends
// comment lines, which clients ignore, and still ends with the result.
func TestRunSSEHeartbeat(t *testing.T) {
	client := scripted.New(scripted.Step{Text: "thought hard", Delay: 300 * time.Millisecond})
	s := newServer(t, Options{Agent: agent.New(client, nil), Heartbeat: 20 * time.Millisecond})
	createThread(t, s, "", "th")
	ts := httptest.NewServer(s)
	defer ts.Close()
	resp, err := http.Post(ts.URL+"/v1/threads/th/runs", "application/json", strings.NewReader(`{"input":"Think.","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	pings := strings.Count(string(body), "\n: ping\n\n")
	if pings < 3 {
		t.Errorf("%d heartbeats in a 300 ms wait at 20 ms:\n%s", pings, body)
	}
	events := readEvents(t, strings.NewReader(string(body)), nil)
	if len(events) == 0 || events[len(events)-1].name != "result" || !strings.Contains(string(events[len(events)-1].data), "thought hard") {
		t.Errorf("events %v", events)
	}
	// Heartbeats come only after the stream started: the first line is an
	// event.
	if !strings.HasPrefix(string(body), "event: ") {
		t.Errorf("the stream starts with %.40q", body)
	}
}

// TestInterruptedRunIsAConflict checks that a run that a later run
// (on_busy "interrupt") took the place of is answered as a conflict, not
// as a 500: agent.ErrInterrupted is the cause of its cancellation, it
// wraps neither context.Canceled nor a sentinel, and the error table has
// no row for it.
func TestInterruptedRunIsAConflict(t *testing.T) {
	client := scripted.New(scripted.Step{Text: "slow", Delay: time.Minute}, scripted.Text("second"))
	s := newServer(t, Options{Agent: agent.New(client, nil)})
	createThread(t, s, "", "th")
	first := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		first <- do(t, s, req{method: "POST", path: "/v1/threads/th/runs", body: map[string]any{"input": "one"}})
	}()
	eventually(t, "the first run reaches the model", func() bool { return len(client.Requests()) > 0 })
	var res runResponse
	must(t, s, req{method: "POST", path: "/v1/threads/th/runs", body: map[string]any{"input": "two", "on_busy": "interrupt"}}, http.StatusOK, &res)

	var w *httptest.ResponseRecorder
	select {
	case w = <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the interrupted run did not end")
	}
	if w.Code != http.StatusConflict {
		t.Errorf("interrupted run answered %d, want 409; body %s", w.Code, w.Body.String())
	}
	if strings.Contains(w.Body.String(), `"internal"`) {
		t.Errorf("interrupted run answered as an internal error: %s", w.Body.String())
	}
}
