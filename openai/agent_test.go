package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// These tests run the agent on the real wire format: what a thread sends on
// each request, and how the answers land in it.

func weatherTool(t *testing.T) agent.Tool {
	return agent.MustFunc("weather", "Weather in a city.", func(_ context.Context, in struct {
		City string `json:"city"`
	}) (string, error) {
		return fmt.Sprintf(`{"city":%q,"temp_c":21}`, in.City), nil
	})
}

func responseText(id, text string) string {
	return fmt.Sprintf(`{"id":%q,"object":"response","created_at":1741476542,"status":"completed","model":"gpt-4.1",
"output":[{"id":"msg_%s","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":%q,"annotations":[]}]}],
"usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}}`, id, id, text)
}

func inputTypes(t *testing.T, body map[string]any) []string {
	t.Helper()
	items, _ := body["input"].([]any)
	var out []string
	for _, it := range items {
		m, _ := it.(map[string]any)
		typ, _ := m["type"].(string)
		if typ == "" || typ == "message" {
			typ = "message:" + fmt.Sprint(m["role"])
		}
		out = append(out, typ)
	}
	return out
}

func TestAgentOnResponsesServiceThread(t *testing.T) {
	ctx := t.Context()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", "application/json")
		switch n {
		case 1:
			w.Write(testdata(t, "responses_tools.json")) // resp_1: calls weather(Paris)
		case 2:
			w.Write([]byte(responseText("resp_2", "21 °C in Paris.")))
		case 3:
			w.Write([]byte(responseText("resp_3", "Rome is warm too.")))
		default:
			w.Write([]byte(responseText(fmt.Sprintf("resp_%d", n), "fork answer")))
		}
	})
	db, _ := thread.Open(ctx, "memory://", nil)
	a := agent.New(NewResponses(ResponsesOptions{Options: srv.options()}), &agent.Options{Instructions: "Be brief.", Tools: []agent.Tool{weatherTool(t)}})
	th, err := a.NewThread(ctx, db, thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, th, message.User("Weather in Paris?")); err != nil {
		t.Fatal(err)
	}
	if !agent.IsServiceManaged(th) {
		t.Fatalf("kind %s, want service", th.Kind())
	}
	if id, _ := agent.ServiceID(ctx, th); id != "resp_2" {
		t.Fatalf("ServiceID %q", id)
	}
	if _, err := a.Run(ctx, th, message.User("And Rome?")); err != nil {
		t.Fatal(err)
	}
	reqs := srv.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	// 1: the whole (new) thread, stored, no previous response.
	if got := inputTypes(t, reqs[0].Body); strings.Join(got, ",") != "message:user" || reqs[0].Body["previous_response_id"] != nil || reqs[0].Body["store"] != true {
		t.Fatalf("request 1: input %v previous %v store %v", got, reqs[0].Body["previous_response_id"], reqs[0].Body["store"])
	}
	if reqs[0].Body["instructions"] != "Be brief." {
		t.Fatalf("instructions %v", reqs[0].Body["instructions"])
	}
	// 2: only the tool's output, chained to the response that asked for it.
	if got := inputTypes(t, reqs[1].Body); strings.Join(got, ",") != "function_call_output" || reqs[1].Body["previous_response_id"] != "resp_1" {
		t.Fatalf("request 2: input %v previous %v", got, reqs[1].Body["previous_response_id"])
	}
	out := reqs[1].Body["input"].([]any)[0].(map[string]any)
	if out["call_id"] != "call_a" || !strings.Contains(fmt.Sprint(out["output"]), `"temp_c":21`) {
		t.Fatalf("tool output sent: %v", out)
	}
	// 3: the next run sends only its input, chained to the last answer.
	if got := inputTypes(t, reqs[2].Body); strings.Join(got, ",") != "message:user" || reqs[2].Body["previous_response_id"] != "resp_2" {
		t.Fatalf("request 3: input %v previous %v", got, reqs[2].Body["previous_response_id"])
	}
	// The thread mirrors everything, calls paired with their results.
	msgs, _ := th.Messages(ctx, thread.ReadOptions{})
	var roles []string
	for _, m := range msgs {
		roles = append(roles, string(m.Role))
	}
	if strings.Join(roles, ",") != "user,assistant,tool,assistant,user,assistant" {
		t.Fatalf("thread roles %v", roles)
	}

	// A fork at the first answer continues from that answer's response.
	fork, err := th.Fork(ctx, thread.ForkOptions{At: msgs[3].ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, fork, message.User("Try again")); err != nil {
		t.Fatal(err)
	}
	if prev := srv.last(t).Body["previous_response_id"]; prev != "resp_2" {
		t.Fatalf("fork chained to %v, want resp_2", prev)
	}
}

func TestAgentOnChatLocalThread(t *testing.T) {
	ctx := t.Context()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", "application/json")
		if n == 1 {
			w.Write(testdata(t, "chat_tools.json")) // calls weather twice
			return
		}
		w.Write([]byte(`{"id":"chatcmpl-2","object":"chat.completion","created":1741569952,"model":"gpt-4o-mini",
"choices":[{"index":0,"message":{"role":"assistant","content":"Both are mild."},"finish_reason":"stop"}],
"usage":{"prompt_tokens":50,"completion_tokens":5,"total_tokens":55}}`))
	})
	db, _ := thread.Open(ctx, "memory://", nil)
	a := agent.New(NewChat(srv.options()), &agent.Options{Instructions: "Be brief.", Tools: []agent.Tool{weatherTool(t)}})
	th, _ := a.NewThread(ctx, db, thread.CreateOptions{})
	res, err := a.Run(ctx, th, message.User("Paris and Rome?"))
	if err != nil {
		t.Fatal(err)
	}
	if th.Kind() != thread.KindLocal || res.Text() != "Both are mild." {
		t.Fatalf("kind %s text %q", th.Kind(), res.Text())
	}
	var second struct {
		Messages []struct {
			Role       string            `json:"role"`
			ToolCallID string            `json:"tool_call_id"`
			ToolCalls  []json.RawMessage `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(srv.requests()[1].Raw, &second); err != nil {
		t.Fatal(err)
	}
	var shape []string
	for _, m := range second.Messages {
		s := m.Role
		if len(m.ToolCalls) > 0 {
			s += fmt.Sprintf("(%d calls)", len(m.ToolCalls))
		}
		if m.ToolCallID != "" {
			s += "(" + m.ToolCallID + ")"
		}
		shape = append(shape, s)
	}
	if got := strings.Join(shape, ","); got != "system,user,assistant(2 calls),tool(call_a),tool(call_b)" {
		t.Fatalf("second request: %s", got)
	}
}
