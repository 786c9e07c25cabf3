package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

func TestToolRunCommitsEachStep(t *testing.T) {
	ctx := t.Context()
	client := scripted.New(
		scripted.Step{Calls: []message.FunctionCall{call("c1", "weather", `{"city":"Paris"}`)}, Usage: message.Usage{InputTokens: 10, OutputTokens: 5}},
		scripted.Step{Text: "21 °C in Paris.", Usage: message.Usage{InputTokens: 20, OutputTokens: 7}},
	)
	a := agent.New(client, &agent.Options{Name: "helper", Tools: []agent.Tool{weatherTool(t)}})
	th, err := a.NewThread(ctx, memDB(t), thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(ctx, th, message.User("Weather in Paris?"))
	if err != nil {
		t.Fatal(err)
	}
	want := `user:Weather in Paris?
assistant:[call c1 weather]
tool:[result c1 {"city":"Paris","temp_c":21}]
assistant:21 °C in Paris.`
	if got := transcript(messages(t, th)); got != want {
		t.Fatalf("thread:\n%s\nwant:\n%s", got, want)
	}
	if res.Text() != "21 °C in Paris." || res.Requests != 2 || res.Usage.InputTokens != 30 || res.Usage.OutputTokens != 12 {
		t.Fatalf("result: text %q requests %d usage %+v", res.Text(), res.Requests, res.Usage)
	}
	if len(res.Messages) != 4 || res.Version != th.Version() {
		t.Fatalf("result lists %d messages, version %d (thread %d)", len(res.Messages), res.Version, th.Version())
	}
	// One commit per step: input, tools, answer; each records the run.
	var ops []string
	for e, err := range th.History(ctx, thread.HistoryOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, string(e.Op))
	}
	if got := strings.Join(ops, ","); got != "append,append,append,create" {
		t.Fatalf("history %s", got)
	}
	// The second request carried the call and its result, and the tool's
	// schema.
	req := client.Requests()[1]
	checkPaired(t, req.Messages)
	if len(req.Options.Tools) != 1 || !strings.Contains(string(req.Options.Tools[0].Parameters), `"city"`) {
		t.Fatalf("tools %+v", req.Options.Tools)
	}
	msgs := messages(t, th)
	if msgs[1].AuthorName != "helper" {
		t.Fatalf("author %q", msgs[1].AuthorName)
	}
}

func TestToolErrorsGoToTheModel(t *testing.T) {
	ctx := t.Context()
	panicky := agent.MustFunc("boom", "panics", func(context.Context, struct{}) (string, error) { panic("kaboom") })
	client := scripted.New(
		scripted.Calls(
			call("c1", "weather", `{"city":"Atlantis"}`), // the tool fails
			call("c2", "weather", `{"town":"Paris"}`),    // arguments do not match the schema
			call("c3", "weather", `not json`),
			call("c4", "nosuch", `{}`),
			call("c5", "boom", `{}`),
		),
		scripted.Text("sorry"),
	)
	a := agent.New(client, &agent.Options{Tools: []agent.Tool{weatherTool(t), panicky}})
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	if _, err := a.Run(ctx, th, message.User("go")); err != nil {
		t.Fatal(err)
	}
	msgs := messages(t, th)
	checkPaired(t, msgs)
	want := map[string]string{
		"c1": "no such city",
		"c2": "do not match the schema",
		"c3": "not JSON",
		"c4": `no tool named "nosuch"`,
		"c5": "panicked: kaboom",
	}
	for _, m := range msgs {
		for _, r := range m.Results() {
			if !r.IsError || !strings.Contains(r.Result, want[r.CallID]) {
				t.Errorf("result %s = %+v, want an error with %q", r.CallID, r, want[r.CallID])
			}
		}
	}
}

func TestToolCallsRunConcurrently(t *testing.T) {
	ctx := t.Context()
	const n = 4
	var started sync.WaitGroup
	started.Add(n)
	all := make(chan struct{})
	go func() { started.Wait(); close(all) }()
	// Each call returns only once all n have started: sequential execution
	// would time out.
	slow := agent.MustFunc("slow", "waits for its siblings", func(ctx context.Context, in struct {
		N int `json:"n"`
	}) (int, error) {
		started.Done()
		select {
		case <-all:
			return in.N, nil
		case <-time.After(10 * time.Second):
			return 0, errors.New("calls did not overlap")
		}
	})
	var calls []message.FunctionCall
	for i := range n {
		calls = append(calls, call("c"+string(rune('0'+i)), "slow", `{"n":`+string(rune('0'+i))+`}`))
	}
	client := scripted.New(scripted.Calls(calls...), scripted.Text("done"))
	a := agent.New(client, &agent.Options{Tools: []agent.Tool{slow}})
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	if _, err := a.Run(ctx, th, message.User("go")); err != nil {
		t.Fatal(err)
	}
	msgs := messages(t, th)
	// Results keep the calls' order whatever order they finished in.
	for i, m := range msgs[2 : 2+n] {
		r := m.Results()[0]
		if r.IsError || r.Result != string(rune('0'+i)) {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
}

func TestSequentialToolCallsDoNotOverlap(t *testing.T) {
	ctx := t.Context()
	var running, most atomic.Int32
	var order []int
	var mu sync.Mutex
	seq := agent.MustFunc("seq", "one at a time", func(ctx context.Context, in struct {
		N int `json:"n"`
	}) (int, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		order = append(order, in.N)
		mu.Unlock()
		return in.N, nil
	}, agent.WithSequential())
	client := scripted.New(scripted.Calls(call("a", "seq", `{"n":1}`), call("b", "seq", `{"n":2}`), call("c", "seq", `{"n":3}`)), scripted.Text("ok"))
	a := agent.New(client, &agent.Options{Tools: []agent.Tool{seq}})
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	if _, err := a.Run(ctx, th, message.User("go")); err != nil {
		t.Fatal(err)
	}
	if most.Load() != 1 || len(order) != 3 || order[0] != 1 || order[1] != 2 || order[2] != 3 {
		t.Fatalf("overlap %d, order %v", most.Load(), order)
	}
}

func TestToolRoundLimit(t *testing.T) {
	ctx := t.Context()
	client := scripted.New(scripted.Calls(call("x", "weather", `{"city":"Paris"}`)))
	client.Repeat = true
	a := agent.New(client, &agent.Options{Tools: []agent.Tool{weatherTool(t)}, MaxRounds: 2})
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	res, err := a.Run(ctx, th, message.User("loop"))
	if !errors.Is(err, agent.ErrMaxRounds) {
		t.Fatalf("err = %v, want ErrMaxRounds", err)
	}
	reqs := client.Requests()
	if len(reqs) != 3 || res.Requests != 3 {
		t.Fatalf("%d requests, want 2 rounds + 1 last", len(reqs))
	}
	if reqs[1].Options.ToolChoice == agent.ToolNone || reqs[2].Options.ToolChoice != agent.ToolNone {
		t.Fatalf("tool choices %q %q: the last request must forbid tools", reqs[1].Options.ToolChoice, reqs[2].Options.ToolChoice)
	}
	msgs := messages(t, th)
	checkPaired(t, msgs)
	last := msgs[len(msgs)-1].Results()[0]
	if !last.IsError || !strings.Contains(last.Result, "limit of 2 tool rounds") {
		t.Fatalf("last result %+v", last)
	}
}

func TestInputIsValidatedBeforeAnythingChanges(t *testing.T) {
	ctx := t.Context()
	client := scripted.New(scripted.Text("never"))
	a := agent.New(client, nil)
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	bad := message.Message{Role: "not a role!", Contents: []message.Content{message.Text{Text: "x"}}}
	if _, err := a.Run(ctx, th, bad); !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("bad role: %v", err)
	}
	if _, err := a.Run(ctx, th); !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("no input on an empty thread: %v", err)
	}
	if _, err := a.Invoke(ctx, th, agent.Request{Input: []message.Message{message.User("x")}, Approvals: []agent.Approval{{CallID: "c"}}}); !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("approvals with nothing pending: %v", err)
	}
	if len(client.Requests()) != 0 || th.Version() != 1 {
		t.Fatalf("%d requests, version %d", len(client.Requests()), th.Version())
	}
	dup := agent.New(client, &agent.Options{Tools: []agent.Tool{weatherTool(t), weatherTool(t)}})
	if _, err := dup.Run(ctx, th, message.User("x")); !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("two tools with one name: %v", err)
	}
}

func TestFailedRequestCommitsNothingOfItsOwn(t *testing.T) {
	ctx := t.Context()
	boom := &agent.ProviderError{Provider: "scripted", StatusCode: 500, Message: "down"}
	p := &recorder{name: "rec"}
	client := scripted.New(scripted.Fail(boom), scripted.Text("back"))
	a := agent.New(client, &agent.Options{Providers: []agent.ContextProvider{p}})
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	_, err := a.Run(ctx, th, message.User("hi"))
	var pe *agent.ProviderError
	if !errors.As(err, &pe) || pe.StatusCode != 500 || !pe.Temporary() {
		t.Fatalf("err = %v", err)
	}
	if got := transcript(messages(t, th)); got != "user:hi" {
		t.Fatalf("thread:\n%s", got)
	}
	if st := providerState(t, th, "rec"); st.Runs != 1 || !strings.Contains(st.LastErr, "down") {
		t.Fatalf("provider state %+v: Invoked must see the error", st)
	}
	// The next run answers the input left behind.
	if _, err := a.Run(ctx, th); err != nil {
		t.Fatal(err)
	}
	if got := transcript(messages(t, th)); got != "user:hi\nassistant:back" {
		t.Fatalf("thread:\n%s", got)
	}
}

func TestContextProvidersMergeInOrder(t *testing.T) {
	ctx := t.Context()
	extraTool := agent.MustFunc("note", "takes a note", func(context.Context, struct{}) (string, error) { return "noted", nil })
	p1 := &recorder{name: "one", ctx: &agent.Context{Instructions: "from one", Messages: []message.Message{message.User("memory: likes tea")}}}
	p2 := &recorder{name: "two", ctx: &agent.Context{Instructions: "from two", Tools: []agent.Tool{extraTool}}}
	client := scripted.New(scripted.Calls(call("n", "note", `{}`)), scripted.Text("ok"))
	a := agent.New(client, &agent.Options{Instructions: "base", Providers: []agent.ContextProvider{p1, p2}, Tools: []agent.Tool{weatherTool(t)}})
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	if _, err := a.Run(ctx, th, message.User("hi")); err != nil {
		t.Fatal(err)
	}
	req := client.Requests()[0]
	if req.Options.Instructions != "base\n\nfrom one\n\nfrom two" {
		t.Fatalf("instructions %q", req.Options.Instructions)
	}
	if got := transcript(req.Messages); got != "user:memory: likes tea\nuser:hi" {
		t.Fatalf("sent:\n%s", got)
	}
	if len(req.Options.Tools) != 2 || req.Options.Tools[1].Name != "note" {
		t.Fatalf("tools %+v", req.Options.Tools)
	}
	// Provider messages are context, not thread content.
	if got := transcript(messages(t, th)); strings.Contains(got, "likes tea") {
		t.Fatalf("provider message stored:\n%s", got)
	}
	if st := providerState(t, th, "two"); st.Runs != 1 {
		t.Fatalf("state %+v", st)
	}
}

func TestApprovalStopsAndResumesTheRun(t *testing.T) {
	ctx := t.Context()
	var ran atomic.Int32
	pay := agent.MustFunc("pay", "pays", func(_ context.Context, in struct {
		Amount int `json:"amount"`
	}) (string, error) {
		ran.Add(1)
		return "paid", nil
	}, agent.WithApproval())
	client := scripted.New(
		scripted.Calls(call("p1", "pay", `{"amount":5}`), call("w1", "weather", `{"city":"Oslo"}`)),
		scripted.Text("paid and it is cold"),
		scripted.Calls(call("p2", "pay", `{"amount":500}`)),
		scripted.Text("not paid"),
	)
	a := agent.New(client, &agent.Options{Tools: []agent.Tool{pay, weatherTool(t)}})
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	res, err := a.Run(ctx, th, message.User("pay 5"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Pending) != 1 || res.Pending[0].CallID != "p1" || res.Pending[0].Arguments != `{"amount":5}` || ran.Load() != 0 {
		t.Fatalf("pending %+v, ran %d", res.Pending, ran.Load())
	}
	// The thread records the wait: the call without its result, the other
	// call answered.
	if got := transcript(messages(t, th)); !strings.Contains(got, "[call p1 pay][call w1 weather]") || strings.Contains(got, "result p1") || !strings.Contains(got, "result w1") {
		t.Fatalf("thread:\n%s", got)
	}
	// A run that does not decide is refused and changes nothing.
	v := th.Version()
	if _, err := a.Run(ctx, th, message.User("hello?")); !errors.Is(err, agent.ErrApprovalRequired) {
		t.Fatalf("undecided run: %v", err)
	}
	if th.Version() != v || len(client.Requests()) != 1 {
		t.Fatalf("undecided run changed the thread or called the model")
	}
	// A fresh handle (another process) resumes with the approval.
	th2, _ := th.DB().Thread(ctx, th.ID())
	res, err = a.Invoke(ctx, th2, agent.Request{Approvals: []agent.Approval{{CallID: "p1", Approved: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 1 || res.Text() != "paid and it is cold" {
		t.Fatalf("ran %d, text %q", ran.Load(), res.Text())
	}
	checkPaired(t, messages(t, th2))
	// A rejection answers the call with an error the model sees.
	if res, err = a.Run(ctx, th2, message.User("pay 500")); err != nil || len(res.Pending) != 1 {
		t.Fatalf("%v %+v", err, res)
	}
	if _, err := a.Invoke(ctx, th2, agent.Request{Approvals: []agent.Approval{{CallID: "p2", Reason: "too much"}}}); err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 1 {
		t.Fatalf("a rejected call ran")
	}
	last := client.Requests()[3]
	checkPaired(t, last.Messages)
	if got := transcript(last.Messages); !strings.Contains(got, "[error p2]") {
		t.Fatalf("rejection not sent:\n%s", got)
	}
	msgs := messages(t, th2)
	for _, m := range msgs {
		for _, r := range m.Results() {
			if r.CallID == "p2" && !strings.Contains(r.Result, "too much") {
				t.Fatalf("rejection result %q", r.Result)
			}
		}
	}
	st, _ := th2.State(ctx, 0)
	if _, ok := st[agent.StatePending]; ok {
		t.Fatalf("pending state left behind")
	}
}

func TestRunCancelledAfterFirstToolRoundLeavesValidThread(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The first round's tool cancels the run once it has finished: the
	// step completes, the run stops before the next request.
	stopper := agent.MustFunc("stopper", "ends the run", func(context.Context, struct{}) (string, error) {
		cancel()
		return "stopped", nil
	}, agent.WithSequential())
	block := agent.MustFunc("block", "waits for the end", func(ctx context.Context, _ struct{}) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}, agent.WithSequential())
	client := scripted.New(
		scripted.Calls(call("s", "stopper", `{}`), call("b", "block", `{}`)),
		scripted.Text("never sent"),
		scripted.Text("resumed"),
	)
	a := agent.New(client, &agent.Options{Tools: []agent.Tool{stopper, block}})
	th, _ := a.NewLocalThread(t.Context(), memDB(t), thread.CreateOptions{})
	res, err := a.Run(ctx, th, message.User("go"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if len(client.Requests()) != 1 {
		t.Fatalf("%d requests after the cancel", len(client.Requests()))
	}
	msgs := messages(t, th)
	checkPaired(t, msgs)
	if len(res.Messages) != len(msgs) {
		t.Fatalf("result lists %d messages, thread has %d", len(res.Messages), len(msgs))
	}
	var results []message.FunctionResult
	for _, m := range msgs {
		results = append(results, m.Results()...)
	}
	if len(results) != 2 || results[0].Result != "stopped" || !results[1].IsError || !strings.Contains(results[1].Result, "aborted") {
		t.Fatalf("results %+v: the finished call keeps its result, the other is aborted", results)
	}
	// The next run accepts the thread.
	res, err = a.Run(t.Context(), th, message.User("again"))
	if err != nil {
		t.Fatal(err)
	}
	client2 := client.Requests()[1]
	checkPaired(t, client2.Messages)
	if res.Text() != "never sent" {
		t.Fatalf("text %q", res.Text())
	}
}

func TestRunFailsOnConflictWithAnotherWriter(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	var other *thread.Thread
	// The tool writes through another handle, as another process would.
	intruder := agent.MustFunc("intrude", "writes elsewhere", func(ctx context.Context, _ struct{}) (string, error) {
		if _, err := other.Append(ctx, message.User("from elsewhere")); err != nil {
			return "", err
		}
		return "done", nil
	})
	client := scripted.New(scripted.Calls(call("i", "intrude", `{}`)), scripted.Text("never"))
	a := agent.New(client, &agent.Options{Tools: []agent.Tool{intruder}})
	th, _ := a.NewLocalThread(ctx, db, thread.CreateOptions{})
	other, _ = db.Thread(ctx, th.ID())
	_, err := a.Run(ctx, th, message.User("go"))
	if !errors.Is(err, thread.ErrConflict) {
		t.Fatalf("err = %v, want ErrConflict", err)
	}
	msgs := messages(t, th)
	if got := transcript(msgs); got != "user:go\nuser:from elsewhere" {
		t.Fatalf("thread:\n%s", got)
	}
}

func TestStateOfProvidersCommittedWithAnswer(t *testing.T) {
	ctx := t.Context()
	p := &recorder{name: "rec"}
	client := scripted.New(scripted.Text("a"), scripted.Text("b"))
	a := agent.New(client, &agent.Options{Providers: []agent.ContextProvider{p}})
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	for _, in := range []string{"x", "y"} {
		if _, err := a.Run(ctx, th, message.User(in)); err != nil {
			t.Fatal(err)
		}
	}
	if st := providerState(t, th, "rec"); st.Runs != 2 {
		t.Fatalf("state %+v", st)
	}
	// The state is versioned with the messages: one commit per step, no
	// extra state commit.
	if th.Version() != 5 {
		t.Fatalf("version %d, want 5 (create + 2×(input, answer))", th.Version())
	}
	old, _ := th.State(ctx, 3)
	if decodeState(old["ctx/rec"]).Runs != 1 {
		t.Fatalf("state at version 3: %s", old["ctx/rec"])
	}
}

func TestNewFuncDerivesSchema(t *testing.T) {
	type in struct {
		City  string   `json:"city" jsonschema:"the city name"`
		Units string   `json:"units,omitempty"`
		Days  []int    `json:"days,omitzero"`
		Tags  []string `json:"tags"`
	}
	tool, err := agent.NewFunc("forecast", "d", func(context.Context, in) (string, error) { return "", nil })
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Type       string                     `json:"type"`
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(tool.Spec().Parameters, &s); err != nil {
		t.Fatal(err)
	}
	if s.Type != "object" || strings.Join(s.Required, ",") != "city,tags" || len(s.Properties) != 4 {
		t.Fatalf("schema %s", tool.Spec().Parameters)
	}
	if !strings.Contains(string(s.Properties["city"]), "the city name") {
		t.Fatalf("description lost: %s", s.Properties["city"])
	}
	if _, err := agent.NewFunc("bad name", "d", func(context.Context, in) (string, error) { return "", nil }); !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := agent.NewFunc("ch", "d", func(context.Context, chan int) (string, error) { return "", nil }); !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("channel input: %v", err)
	}
}

func TestToolsOnClientWithoutToolsFailBeforeRequest(t *testing.T) {
	ctx := t.Context()
	client := scripted.New(scripted.Text("never"))
	client.Caps.Tools = false
	a := agent.New(client, &agent.Options{Tools: []agent.Tool{weatherTool(t)}})
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	if _, err := a.Run(ctx, th, message.User("hi")); !errors.Is(err, thread.ErrUnsupported) {
		t.Fatalf("err = %v, want ErrUnsupported", err)
	}
	if len(client.Requests()) != 0 || th.Version() != 1 {
		t.Fatalf("%d requests, version %d", len(client.Requests()), th.Version())
	}
}
