package agent_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
	_ "github.com/loomthreads/loom/sqlite"
	"github.com/loomthreads/loom/thread"
)

func TestStreamYieldsUpdatesStepsAndResult(t *testing.T) {
	ctx := t.Context()
	client := scripted.New(
		scripted.Calls(call("c1", "weather", `{"city":"Paris"}`)),
		scripted.Text("It is 21 degrees."),
	)
	a := agent.New(client, &agent.Options{Tools: []agent.Tool{weatherTool(t)}})
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	var text strings.Builder
	var steps []agent.StepKind
	var calls int
	var res *agent.Result
	for ev, err := range a.RunStream(ctx, th, message.User("weather?")) {
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.Update != nil:
			text.WriteString(ev.Update.Text)
			if ev.Update.Call != nil {
				calls++
			}
		case ev.Step != nil:
			steps = append(steps, ev.Step.Kind)
			if ev.Step.Version == 0 || ev.Step.Commit == "" {
				t.Fatalf("step %+v", ev.Step)
			}
		case ev.Result != nil:
			res = ev.Result
		}
	}
	if text.String() != "It is 21 degrees." || calls != 1 {
		t.Fatalf("streamed text %q, %d call deltas", text.String(), calls)
	}
	if got := strings.Join([]string{string(steps[0]), string(steps[1]), string(steps[2])}, ","); len(steps) != 3 || got != "input,tools,answer" {
		t.Fatalf("steps %v", steps)
	}
	if res == nil || res.Text() != "It is 21 degrees." || res.Version != th.Version() {
		t.Fatalf("result %+v", res)
	}
	for _, r := range client.Requests() {
		if !r.Stream {
			t.Fatalf("a request was not streamed")
		}
	}
}

func TestStreamFailingMidwayCommitsCompletedSteps(t *testing.T) {
	ctx := t.Context()
	cut := errors.New("connection reset")
	client := scripted.New(
		scripted.Calls(call("c1", "weather", `{"city":"Paris"}`)),
		scripted.Step{Text: "It is twenty-one", Err: cut}, // streams its text, then fails
		scripted.Text("21 degrees."),
	)
	a := agent.New(client, &agent.Options{Tools: []agent.Tool{weatherTool(t)}})
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	var streamed strings.Builder
	var final *agent.Result
	var got error
	for ev, err := range a.RunStream(ctx, th, message.User("weather?")) {
		if err != nil {
			got, final = err, ev.Result
			break
		}
		if ev.Update != nil {
			streamed.WriteString(ev.Update.Text)
		}
	}
	if !errors.Is(got, cut) {
		t.Fatalf("err = %v, want the cut", got)
	}
	if streamed.String() != "It is twenty-one" {
		t.Fatalf("streamed %q before the failure", streamed.String())
	}
	msgs := messages(t, th)
	checkPaired(t, msgs)
	want := "user:weather?\nassistant:[call c1 weather]\ntool:[result c1 {\"city\":\"Paris\",\"temp_c\":21}]"
	if tr := transcript(msgs); tr != want {
		t.Fatalf("thread:\n%s\nwant:\n%s", tr, want)
	}
	if final == nil || len(final.Messages) != 3 {
		t.Fatalf("the error comes with the result so far: %+v", final)
	}
	// The next run takes the thread as it is.
	if _, err := a.Run(ctx, th); err != nil {
		t.Fatal(err)
	}
	if tr := transcript(messages(t, th)); tr != want+"\nassistant:21 degrees." {
		t.Fatalf("after the next run:\n%s", tr)
	}
}

func TestStreamConsumerStoppingCancelsTheRun(t *testing.T) {
	ctx := t.Context()
	client := scripted.New(scripted.Text("a long answer that the consumer does not wait for"))
	a := agent.New(client, nil)
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	n := 0
	for ev, err := range a.RunStream(ctx, th, message.User("hi")) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Update != nil {
			n++
			break
		}
	}
	if n != 1 {
		t.Fatalf("%d updates", n)
	}
	// The input was committed; the unfinished answer was not.
	if got := transcript(messages(t, th)); got != "user:hi" {
		t.Fatalf("thread:\n%s", got)
	}
	// And the thread is free for the next run.
	client.Add(scripted.Text("short"))
	if _, err := a.Run(ctx, th); err != nil {
		t.Fatal(err)
	}
}

func TestContextProviderStateSurvivesSaveAndLoadIntoAnotherStore(t *testing.T) {
	ctx := t.Context()
	src, err := thread.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "loom.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p := &recorder{name: "profile"}
	client := scripted.New(scripted.Text("one"), scripted.Text("two"), scripted.Text("three"))
	a := agent.New(client, &agent.Options{Providers: []agent.ContextProvider{p}})
	th, err := a.NewThread(ctx, src, thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"a", "b"} {
		if _, err := a.Run(ctx, th, message.User(in)); err != nil {
			t.Fatal(err)
		}
	}
	var doc bytes.Buffer
	if err := th.Save(ctx, &doc, thread.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	dst := memDB(t)
	moved, err := dst.Load(ctx, io.Reader(&doc), thread.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := providerState(t, moved, "profile"); st.Runs != 2 || st.Created != 1 {
		t.Fatalf("state after load: %+v", st)
	}
	if moved.Kind() != thread.KindLocal {
		t.Fatalf("kind %s after load", moved.Kind())
	}
	// The provider goes on from where it was, in the other store.
	if _, err := a.Run(ctx, moved, message.User("c")); err != nil {
		t.Fatal(err)
	}
	if st := providerState(t, moved, "profile"); st.Runs != 3 {
		t.Fatalf("state after a run in the new store: %+v", st)
	}
	if got := transcript(client.Requests()[2].Messages); got != "user:a\nassistant:one\nuser:b\nassistant:two\nuser:c" {
		t.Fatalf("sent after the move:\n%s", got)
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
