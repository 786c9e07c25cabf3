package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
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

// TestSequentialToolCallsDoNotOverlap runs in a synctest bubble: a call's
// sleep ends only once every other goroutine waits, so a call that would
// overlap it has started by then, whatever the machine's load.
func TestSequentialToolCallsDoNotOverlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
			// Deliberate: a call that lasts a while (in the bubble's time)
			// gives an overlapping call the time to show in running.
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
	})
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

// payTool is a tool that needs approval and counts its runs.
func payTool(ran *atomic.Int32) *agent.FuncTool {
	return agent.MustFunc("pay", "pays", func(_ context.Context, in struct {
		Amount int `json:"amount"`
	}) (string, error) {
		ran.Add(1)
		return "paid", nil
	}, agent.WithApproval())
}

// A run that decides approvals but carries input, metadata or a rejection
// reason the thread refuses must fail before the approved tool runs:
// otherwise the tool's side effect happens, its result is lost with the
// refused commit, the call stays pending, and the next (valid) approval runs
// it a second time.
func TestApprovalWithInvalidInputRunsNoTool(t *testing.T) {
	approve := func(reason string) []agent.Approval {
		return []agent.Approval{{CallID: "p1", Approved: true}, {CallID: "p2", Reason: reason}}
	}
	for _, tc := range []struct {
		name string
		req  agent.Request
	}{
		{"duplicate input ids", func() agent.Request {
			m1, m2 := message.User("a"), message.User("b")
			m1.ID = message.NewID()
			m2.ID = m1.ID
			return agent.Request{Approvals: approve(""), Input: []message.Message{m1, m2}}
		}()},
		{"invalid metadata", agent.Request{Approvals: approve(""), Metadata: map[string]string{"": "no key"}}},
		{"reason not UTF-8", agent.Request{Approvals: approve("too \xff much")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			var ran atomic.Int32
			client := scripted.New(
				scripted.Calls(call("p1", "pay", `{"amount":5}`), call("p2", "pay", `{"amount":500}`)),
				scripted.Text("paid"),
			)
			a := agent.New(client, &agent.Options{Tools: []agent.Tool{payTool(&ran)}})
			th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
			if res, err := a.Run(ctx, th, message.User("pay")); err != nil || len(res.Pending) != 2 {
				t.Fatalf("%v %+v", err, res)
			}
			_, err := a.Invoke(ctx, th, tc.req)
			if !errors.Is(err, thread.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if n := ran.Load(); n != 0 {
				t.Fatalf("the approved tool ran %d times in a run that was refused as bad input (%v)", n, err)
			}
			if _, err := a.Invoke(ctx, th, agent.Request{Approvals: approve("no")}); err != nil {
				t.Fatal(err)
			}
			if n := ran.Load(); n != 1 {
				t.Fatalf("one approval, %d payments", n)
			}
		})
	}
}

// A tool result that is not UTF-8 (a tool that reads a binary file) is the
// tool's output, which goes to the model like an error does; it must not make
// the step's commit fail and with it the whole run (the tools ran, their
// results and the model's response are lost, and every retry repeats it).
func TestToolResultNotUTF8DoesNotFailTheRun(t *testing.T) {
	ctx := t.Context()
	bin := agent.MustFunc("bin", "reads bytes", func(context.Context, struct{}) (string, error) {
		return "\xff\xfe\x00binary", nil
	})
	client := scripted.New(scripted.Calls(call("b1", "bin", `{}`)), scripted.Text("done"))
	a := agent.New(client, &agent.Options{Tools: []agent.Tool{bin}})
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	res, err := a.Run(ctx, th, message.User("read it"))
	if err != nil {
		t.Fatalf("run failed on a tool's output: %v", err)
	}
	if res.Text() != "done" {
		t.Fatalf("text %q", res.Text())
	}
	msgs := messages(t, th)
	checkPaired(t, msgs)
	// The bytes that are not UTF-8 become U+FFFD; the rest is kept.
	if tr := transcript(msgs); !strings.Contains(tr, "[result b1 \uFFFD\x00binary]") {
		t.Fatalf("the tool's output was not kept as valid text:\n%q", tr)
	}
}

// The same for a result over the thread's message limit: the model should
// be told the result was too large, not the run fail.
func TestToolResultOverMessageLimitDoesNotFailTheRun(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), &thread.Options{Limits: thread.Limits{MessageBytes: 4096}})
	big := agent.MustFunc("big", "returns a lot", func(context.Context, struct{}) (string, error) {
		return strings.Repeat("x", 10000), nil
	})
	client := scripted.New(scripted.Calls(call("g1", "big", `{}`)), scripted.Text("done"))
	a := agent.New(client, &agent.Options{Tools: []agent.Tool{big}})
	th, _ := a.NewLocalThread(ctx, db, thread.CreateOptions{})
	res, err := a.Run(ctx, th, message.User("fetch"))
	if err != nil {
		t.Fatalf("run failed on a tool's output: %v", err)
	}
	if res.Text() != "done" {
		t.Fatalf("text %q", res.Text())
	}
	msgs := messages(t, th)
	checkPaired(t, msgs)
	if tr := transcript(msgs); !strings.Contains(tr, "[error g1]") {
		t.Fatalf("the oversized result is not an error for the model:\n%s", tr)
	}
	// The model is told why, in the request after the tool round.
	reqs := client.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	told := false
	for _, m := range reqs[1].Messages {
		for _, r := range m.Results() {
			told = told || (r.CallID == "g1" && r.IsError && strings.Contains(r.Result, "over the thread's limit"))
		}
	}
	if !told {
		t.Fatalf("the model was not told the result was too large:\n%s", transcript(reqs[1].Messages))
	}
}

// A run that is cancelled while its tools run, and whose response also has a
// call that waits for approval, must report the cancellation: it aborted the
// other calls, yet returns a nil error as if everything ran.
func TestCancelledRunStoppingForApprovalReportsCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var ran atomic.Int32
	block := agent.MustFunc("block", "waits for the end", func(ctx context.Context, _ struct{}) (string, error) {
		cancel()
		<-ctx.Done()
		return "", ctx.Err()
	})
	client := scripted.New(scripted.Calls(call("b1", "block", `{}`), call("p1", "pay", `{"amount":1}`)))
	a := agent.New(client, &agent.Options{Tools: []agent.Tool{block, payTool(&ran)}})
	th, _ := a.NewLocalThread(t.Context(), memDB(t), thread.CreateOptions{})
	res, err := a.Run(ctx, th, message.User("go"))
	if res == nil || len(res.Pending) != 1 {
		t.Fatalf("pending %+v", res)
	}
	if tr := transcript(messages(t, th)); !strings.Contains(tr, "[error b1]") {
		t.Fatalf("the blocked call was not aborted:\n%s", tr)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v: a cancelled run whose calls were aborted reports success", err)
	}
}

// Invoke promises that a writer that moves the thread during a run makes the
// run fail with ErrConflict rather than interleave. A stream consumer that
// refreshes the run's own handle after a step (a UI showing progress) makes
// the run adopt the other writer's version and build on it.
func TestRunDoesNotAdoptForeignWriteWhenItsHandleIsRefreshed(t *testing.T) {
	ctx := t.Context()
	client := scripted.New(scripted.Calls(call("w1", "weather", `{"city":"Oslo"}`)), scripted.Text("cold"))
	a := agent.New(client, &agent.Options{Tools: []agent.Tool{weatherTool(t)}})
	db := memDB(t)
	th, _ := a.NewLocalThread(ctx, db, thread.CreateOptions{})
	other, _ := db.Thread(ctx, th.ID())
	var runErr error
	for ev, e := range a.RunStream(ctx, th, message.User("weather?")) {
		if ev.Step != nil && ev.Step.Kind == agent.StepTools {
			if _, err := other.Append(ctx, message.User("from elsewhere")); err != nil {
				t.Fatal(err)
			}
			if err := th.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if ev.Result != nil || e != nil {
			runErr = e
		}
	}
	if !errors.Is(runErr, thread.ErrConflict) {
		t.Fatalf("err = %v, want ErrConflict; thread:\n%s", runErr, transcript(messages(t, th)))
	}
}

// A run whose context has already ended must change nothing: on the memory
// store it commits its input and only then notices.
func TestRunWithEndedContextChangesNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	client := scripted.New(scripted.Text("never"))
	a := agent.New(client, nil)
	th, _ := a.NewLocalThread(t.Context(), memDB(t), thread.CreateOptions{})
	v := th.Version()
	if _, err := a.Run(ctx, th, message.User("hi")); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if got := transcript(messages(t, th)); got != "" || th.Version() != v {
		t.Fatalf("a run with an ended context committed:\n%s", got)
	}
}

// ChatOptions.Clone promises to share nothing mutable; ResponseFormat.Schema
// and the tools' Parameters are shared.
func TestChatOptionsCloneSharesNothing(t *testing.T) {
	o := &agent.ChatOptions{
		ResponseFormat: &agent.ResponseFormat{Schema: json.RawMessage(`{"type":"object"}`)},
		Tools:          []agent.ToolSpec{{Name: "t", Parameters: json.RawMessage(`{"type":"object"}`)}},
	}
	c := o.Clone()
	c.ResponseFormat.Schema[2] = 'X'
	c.Tools[0].Parameters[2] = 'X'
	if string(o.ResponseFormat.Schema) != `{"type":"object"}` || string(o.Tools[0].Parameters) != `{"type":"object"}` {
		t.Fatalf("changing the clone changed the original: %s %s", o.ResponseFormat.Schema, o.Tools[0].Parameters)
	}
}

// Invoked.Response is documented as "the run's last response, nil if there
// was none"; a run that fails after a tool round had a response.
func TestInvokedSeesLastResponseOfFailedRun(t *testing.T) {
	ctx := t.Context()
	var got atomic.Pointer[agent.ChatResponse]
	var calls atomic.Int32
	p := &invokedSpy{fn: func(inv agent.Invoked) {
		calls.Add(1)
		got.Store(inv.Response)
	}}
	client := scripted.New(scripted.Calls(call("w1", "weather", `{"city":"Oslo"}`)), scripted.Fail(errors.New("boom")))
	a := agent.New(client, &agent.Options{Tools: []agent.Tool{weatherTool(t)}, Providers: []agent.ContextProvider{p}})
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	if _, err := a.Run(ctx, th, message.User("weather?")); err == nil {
		t.Fatal("run succeeded")
	}
	if calls.Load() != 1 {
		t.Fatalf("Invoked called %d times", calls.Load())
	}
	if got.Load() == nil {
		t.Fatal("Invoked.Response is nil although the run had a response")
	}
}

type invokedSpy struct{ fn func(agent.Invoked) }

func (p *invokedSpy) Name() string { return "spy" }

func (p *invokedSpy) Invoking(context.Context, agent.Invocation) (*agent.Context, error) {
	return nil, nil
}

func (p *invokedSpy) Invoked(_ context.Context, inv agent.Invoked) (json.RawMessage, error) {
	p.fn(inv)
	return nil, nil
}

// A provider's ThreadCreated hook that panics when a run makes the thread
// service-managed crashes the caller, while panics in Invoking and Invoked
// are turned into errors.
func TestThreadCreatedPanicDuringRunIsAnError(t *testing.T) {
	ctx := t.Context()
	client := serviceClient(scripted.Step{Text: "hi", ConversationID: "auto"})
	a := agent.New(client, &agent.Options{Providers: []agent.ContextProvider{panicCreated{}}})
	// Created without the agent, so the hook first runs inside the run.
	th, err := thread.New(thread.NewMemoryStore(), nil).Create(ctx, thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if v := recover(); v != nil {
			t.Fatalf("run panicked: %v", v)
		}
	}()
	if _, err := a.Run(ctx, th, message.User("hi")); err == nil {
		t.Fatal("a panicking hook went unnoticed")
	}
}

type panicCreated struct{}

func (panicCreated) Name() string { return "boom" }

func (panicCreated) Invoking(context.Context, agent.Invocation) (*agent.Context, error) {
	return nil, nil
}

func (panicCreated) ThreadCreated(context.Context, agent.ThreadInfo, json.RawMessage) (json.RawMessage, error) {
	panic("boom")
}

// stateful is a provider whose Invoked returns a fixed state.
type stateful struct{ state json.RawMessage }

func (p stateful) Name() string { return "mem" }

func (p stateful) Invoking(context.Context, agent.Invocation) (*agent.Context, error) {
	return nil, nil
}

func (p stateful) Invoked(context.Context, agent.Invoked) (json.RawMessage, error) {
	return p.state, nil
}

// InvokedHook's state that the thread cannot keep (over its state limit, as
// a memory provider's grows) must be treated like a failed hook — logged,
// old state kept, "the run's outcome stands" — not make the commit of the
// answer fail, losing the model's answer on every run from then on.
func TestProviderStateOverLimitDoesNotLoseTheAnswer(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), &thread.Options{Limits: thread.Limits{StateBytes: 1024}})
	big := json.RawMessage(`"` + strings.Repeat("m", 2000) + `"`)
	client := scripted.New(scripted.Text("answer"))
	a := agent.New(client, &agent.Options{Providers: []agent.ContextProvider{stateful{big}}})
	th, _ := a.NewLocalThread(ctx, db, thread.CreateOptions{})
	res, err := a.Run(ctx, th, message.User("hi"))
	if err != nil {
		t.Fatalf("a provider's state lost the run: %v", err)
	}
	if got := transcript(messages(t, th)); got != "user:hi\nassistant:answer" || res.Text() != "answer" {
		t.Fatalf("thread:\n%s", got)
	}
}

// Request.Metadata is recorded on each commit, and Result.RunID "is on every
// commit the run made": a caller's "run" key must not replace it.
func TestRunIDOnEveryCommitDespiteMetadata(t *testing.T) {
	ctx := t.Context()
	client := scripted.New(scripted.Text("ok"))
	a := agent.New(client, nil)
	db := memDB(t)
	th, _ := a.NewLocalThread(ctx, db, thread.CreateOptions{})
	res, err := a.Invoke(ctx, th, agent.Request{Input: []message.Message{message.User("hi")}, Metadata: map[string]string{"run": "mine"}})
	if err != nil {
		t.Fatal(err)
	}
	for e, err := range th.History(ctx, thread.HistoryOptions{Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		c, err := db.Store().Commit(ctx, e.Commit)
		if err != nil {
			t.Fatal(err)
		}
		if c.Metadata["run"] != res.RunID {
			t.Fatalf("commit %s has run %q, the result says %q", c.ID, c.Metadata["run"], res.RunID)
		}
	}
}

// Store decorators passed by value: the outer type is comparable (its one
// field is an interface), the value inside it is not (it holds a func).
type hookedStore struct {
	*thread.MemoryStore
	hook func()
}

type wrappedStore struct{ store.Store }

// The run registry keys threads by their store when the store's type is
// comparable; a comparable type can still hold an uncomparable value, and
// hashing it panics — with the registry's mutex held, so every later run in
// the process hangs. The run happens in a child process for that reason.
func TestRunOnDecoratedStoreDoesNotPanic(t *testing.T) {
	if os.Getenv("LOOM_REVIEW_CHILD") == "1" {
		ctx := t.Context()
		db := thread.New(wrappedStore{hookedStore{thread.NewMemoryStore(), func() {}}}, nil)
		client := scripted.New(scripted.Text("ok"), scripted.Text("ok"))
		a := agent.New(client, nil)
		th, err := a.NewLocalThread(ctx, db, thread.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Errorf("run panicked: %v", v)
				}
			}()
			if _, err := a.Run(ctx, th, message.User("hi")); err != nil {
				t.Error(err)
			}
		}()
		// The registry must still work after that.
		done := make(chan error, 1)
		go func() {
			_, err := a.Run(ctx, th, message.User("again"))
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(time.Second):
			t.Error("a later run hangs: the run registry's mutex is still held")
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunOnDecoratedStoreDoesNotPanic$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LOOM_REVIEW_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// procStore stands for the store as another process sees it: its type is
// not comparable, so the run registry keys its threads by DB, and two DBs on
// one store behave like two processes on one database.
type procStore struct {
	*thread.MemoryStore
	_ [0]func()
}

// One approved call must run once, even when the approval reaches two
// processes (a double submit behind a load balancer): the second run should
// find the decision taken (the first claims it with a commit before running
// the tool), not pay a second time and only then lose with ErrConflict.
func TestApprovedCallRunsOnceAcrossProcesses(t *testing.T) {
	ctx := t.Context()
	store := thread.NewMemoryStore()
	db1 := thread.New(procStore{MemoryStore: store}, nil)
	db2 := thread.New(procStore{MemoryStore: store}, nil)
	var ran atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	pay := agent.MustFunc("pay", "pays", func(context.Context, struct{}) (string, error) {
		if ran.Add(1) == 1 {
			close(started)
			<-release
		}
		return "paid", nil
	}, agent.WithApproval())
	client := scripted.New(scripted.Calls(call("p1", "pay", `{}`)), scripted.Text("paid"), scripted.Text("paid"))
	a := agent.New(client, &agent.Options{Tools: []agent.Tool{pay}})
	th1, _ := a.NewLocalThread(ctx, db1, thread.CreateOptions{})
	if res, err := a.Run(ctx, th1, message.User("pay")); err != nil || len(res.Pending) != 1 {
		t.Fatalf("%v %+v", err, res)
	}
	th2, err := db2.Thread(ctx, th1.ID())
	if err != nil {
		t.Fatal(err)
	}
	approve := agent.Request{Approvals: []agent.Approval{{CallID: "p1", Approved: true}}}
	done := make(chan error, 1)
	go func() {
		_, err := a.Invoke(ctx, th1, approve)
		done <- err
	}()
	<-started
	_, err2 := a.Invoke(ctx, th2, approve)
	close(release)
	err1 := <-done
	if n := ran.Load(); n != 1 {
		t.Fatalf("one approval, %d payments (first run: %v, second run: %v)", n, err1, err2)
	}
}
