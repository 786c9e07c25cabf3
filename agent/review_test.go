package agent_test

// Regression tests from the review of package agent: each one showed a bug
// that is now fixed.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

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

// On a service thread the service stores what each request sends, so a
// context provider's messages must not be sent again with every tool round
// of a run: the second request of the run carries them a second time.
func TestServiceThreadDoesNotResendProviderMessagesEachRound(t *testing.T) {
	ctx := t.Context()
	c := scripted.New(
		scripted.Step{Calls: []message.FunctionCall{call("w1", "weather", `{"city":"Oslo"}`)}, ConversationID: "conv_1"},
		scripted.Step{Text: "cold", ConversationID: "conv_1"},
	)
	c.Caps.ServiceThreads = true
	p := &recorder{name: "profile", ctx: &agent.Context{Messages: []message.Message{message.User("profile: likes tea")}}}
	a := agent.New(c, &agent.Options{Tools: []agent.Tool{weatherTool(t)}, Providers: []agent.ContextProvider{p}})
	th, err := a.NewServiceThread(ctx, memDB(t), "conv_1", thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, th, message.User("weather?")); err != nil {
		t.Fatal(err)
	}
	reqs := c.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	if !strings.Contains(reqs[0].Transcript(), "profile") {
		t.Fatalf("first request lacks the provider's message:\n%s", reqs[0].Transcript())
	}
	if tr := reqs[1].Transcript(); strings.Contains(tr, "profile") {
		t.Fatalf("the tool round re-sends the provider's message to a service that stored it:\n%s", tr)
	}
}

// A client that returns (nil, nil) — scripted's Func, or any client that
// adapts its Response with agent.StreamOf — makes a streamed run panic in
// StreamOf (resp.Text() on nil), where the unstreamed run reports "client
// returned no response".
func TestStreamedRunWithNilResponseDoesNotPanic(t *testing.T) {
	ctx := t.Context()
	nilResp := scripted.Step{Func: func(context.Context, scripted.Request) (*agent.ChatResponse, error) { return nil, nil }}
	client := scripted.New(nilResp, nilResp)
	a := agent.New(client, nil)
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	if _, err := a.Run(ctx, th, message.User("hi")); err == nil {
		t.Fatal("unstreamed run with a nil response succeeded")
	}
	var err error
	func() {
		defer func() {
			if v := recover(); v != nil {
				t.Fatalf("streamed run panicked: %v", v)
			}
		}()
		for ev, e := range a.RunStream(ctx, th, message.User("hi")) {
			if ev.Result != nil || e != nil {
				err = e
			}
		}
	}()
	if err == nil {
		t.Fatal("streamed run with a nil response succeeded")
	}
}

// New(nil, …) records "no chat client" for every run, but NewServiceThread
// on that agent dereferences the nil client.
func TestNewServiceThreadWithoutClientDoesNotPanic(t *testing.T) {
	a := agent.New(nil, nil)
	defer func() {
		if v := recover(); v != nil {
			t.Fatalf("NewServiceThread panicked: %v", v)
		}
	}()
	if _, err := a.NewServiceThread(t.Context(), memDB(t), "conv_1", thread.CreateOptions{}); err == nil {
		t.Fatal("NewServiceThread without a client succeeded")
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

// An undetermined thread is determined by its first run (local when the
// response has no conversation id), even when the response has no messages.
func TestUndeterminedThreadDeterminedByEmptyResponse(t *testing.T) {
	ctx := t.Context()
	client := scripted.New(scripted.Step{Func: func(context.Context, scripted.Request) (*agent.ChatResponse, error) {
		return &agent.ChatResponse{FinishReason: agent.FinishContentFilter}, nil
	}})
	a := agent.New(client, nil)
	th, _ := a.NewThread(ctx, memDB(t), thread.CreateOptions{})
	if _, err := a.Run(ctx, th, message.User("hi")); err != nil {
		t.Fatal(err)
	}
	if err := th.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if th.Kind() != thread.KindLocal {
		t.Fatalf("kind %s after the first run", th.Kind())
	}
}

// Options.Chat says the agent sets ConversationID and Store itself: a local
// thread's requests must not carry the ones in Options.Chat.
func TestLocalThreadIgnoresConversationIDFromOptions(t *testing.T) {
	ctx := t.Context()
	client := scripted.New(scripted.Text("ok"))
	yes := true
	a := agent.New(client, &agent.Options{Chat: agent.ChatOptions{ConversationID: "conv_stale", Store: &yes}})
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	if _, err := a.Run(ctx, th, message.User("hi")); err != nil {
		t.Fatal(err)
	}
	o := client.Requests()[0].Options
	if o.ConversationID != "" || o.Store == nil || *o.Store {
		t.Fatalf("local thread request: conversation %q, store %v", o.ConversationID, o.Store)
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
