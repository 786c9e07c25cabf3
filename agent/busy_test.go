package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// slowFirst returns a client whose first response waits until release is
// closed (or its context ends), and a channel closed when it has started.
func slowFirst(t *testing.T, release chan struct{}, steps ...scripted.Step) (*scripted.Client, chan struct{}) {
	started := make(chan struct{})
	first := scripted.Step{Func: func(ctx context.Context, r scripted.Request) (*agent.ChatResponse, error) {
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &agent.ChatResponse{Messages: []message.Message{message.Assistant("first answer")}}, nil
	}}
	return scripted.New(append([]scripted.Step{first}, steps...)...), started
}

func TestConcurrentRunRejectedByDefault(t *testing.T) {
	ctx := t.Context()
	release := make(chan struct{})
	client, started := slowFirst(t, release, scripted.Text("never"))
	a := agent.New(client, nil)
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	done := make(chan error, 1)
	go func() {
		_, err := a.Run(ctx, th, message.User("one"))
		done <- err
	}()
	<-started
	// Another handle on the same thread, as a second request would have.
	th2, _ := th.DB().Thread(ctx, th.ID())
	if _, err := a.Run(ctx, th2, message.User("two")); !errors.Is(err, agent.ErrBusy) {
		t.Fatalf("second run: %v, want ErrBusy", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := transcript(messages(t, th)); got != "user:one\nassistant:first answer" {
		t.Fatalf("thread:\n%s", got)
	}
	// Once the first has ended, the thread is free again.
	if _, err := a.Run(ctx, th2, message.User("two")); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentRunQueued(t *testing.T) { synctest.Test(t, testConcurrentRunQueued) }

// testConcurrentRunQueued runs in a synctest bubble, so that it can wait
// until the queued run is blocked.
func testConcurrentRunQueued(t *testing.T) {
	ctx := t.Context()
	release := make(chan struct{})
	client, started := slowFirst(t, release, scripted.Text("second answer"))
	a := agent.New(client, nil)
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	var wg sync.WaitGroup
	var err1, err2 error
	wg.Go(func() { _, err1 = a.Run(ctx, th, message.User("one")) })
	<-started
	th2, _ := th.DB().Thread(ctx, th.ID())
	wg.Go(func() {
		_, err2 = a.Invoke(ctx, th2, agent.Request{Input: []message.Message{message.User("two")}, OnBusy: agent.Queue})
	})
	// The queued run waits: nothing of it is in the thread yet.
	synctest.Wait()
	if got := transcript(messages(t, th)); got != "user:one" {
		t.Fatalf("while queued:\n%s", got)
	}
	close(release)
	wg.Wait()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	want := "user:one\nassistant:first answer\nuser:two\nassistant:second answer"
	if got := transcript(messages(t, th)); got != want {
		t.Fatalf("thread:\n%s\nwant:\n%s", got, want)
	}
	// The queued run was sent the first run's answer.
	if got := transcript(client.Requests()[1].Messages); got != want[:strings.LastIndex(want, "\n")] {
		t.Fatalf("queued run sent:\n%s", got)
	}
}

func TestConcurrentRunQueuedGivesUpWithItsContext(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	client, started := slowFirst(t, release)
	a := agent.New(client, nil)
	th, _ := a.NewLocalThread(t.Context(), memDB(t), thread.CreateOptions{})
	go a.Run(t.Context(), th, message.User("one"))
	<-started
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	_, err := a.Invoke(ctx, th, agent.Request{Input: []message.Message{message.User("two")}, OnBusy: agent.Queue})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline", err)
	}
}

func TestConcurrentRunInterrupts(t *testing.T) {
	ctx := t.Context()
	never := make(chan struct{})
	// The first run is in a tool round when it is interrupted: the call in
	// flight gets an aborted result, the thread stays valid.
	inTool := make(chan struct{})
	wait := agent.MustFunc("wait", "waits", func(ctx context.Context, _ struct{}) (string, error) {
		close(inTool)
		select {
		case <-never:
		case <-ctx.Done():
		}
		return "", context.Cause(ctx)
	})
	client := scripted.New(scripted.Calls(call("w", "wait", `{}`)), scripted.Text("second answer"))
	a := agent.New(client, &agent.Options{Tools: []agent.Tool{wait}})
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	done := make(chan error, 1)
	go func() {
		_, err := a.Run(ctx, th, message.User("one"))
		done <- err
	}()
	<-inTool
	th2, _ := th.DB().Thread(ctx, th.ID())
	res, err := a.Invoke(ctx, th2, agent.Request{Input: []message.Message{message.User("two")}, OnBusy: agent.Interrupt})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, agent.ErrInterrupted) {
		t.Fatalf("first run: %v, want ErrInterrupted", err)
	}
	msgs := messages(t, th)
	checkPaired(t, msgs)
	want := "user:one\nassistant:[call w wait]\ntool:[error w]\nuser:two\nassistant:second answer"
	if got := transcript(msgs); got != want {
		t.Fatalf("thread:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(msgs[2].Results()[0].Result, "interrupted") {
		t.Fatalf("aborted result %q", msgs[2].Results()[0].Result)
	}
	if res.Text() != "second answer" {
		t.Fatalf("text %q", res.Text())
	}
}

func TestManyConcurrentQueuedRunsKeepTheThreadValid(t *testing.T) {
	ctx := t.Context()
	client := scripted.New(scripted.Calls(call("x", "weather", `{"city":"Rome"}`)), scripted.Text("ok"))
	client.Repeat = true
	client.Record = false
	a := agent.New(client, &agent.Options{Tools: []agent.Tool{weatherTool(t)}})
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			h, _ := th.DB().Thread(ctx, th.ID())
			_, errs[i] = a.Invoke(ctx, h, agent.Request{Input: []message.Message{message.User("go")}, OnBusy: agent.Queue})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	msgs := messages(t, th)
	checkPaired(t, msgs)
	if len(msgs) != 4*n {
		t.Fatalf("%d messages, want %d", len(msgs), 4*n)
	}
	// Runs never interleave: each is input, call, result, answer.
	for i := 0; i < len(msgs); i += 4 {
		if msgs[i].Role != message.RoleUser || msgs[i+3].Text() != "ok" {
			t.Fatalf("interleaved at %d:\n%s", i, transcript(msgs))
		}
	}
}

// blockingStore is a store whose Thread read, once armed, waits for its
// context to end and fails with the context's error, as a network store's
// driver does (pgx answers a cancelled query with context.Canceled, not
// with the context's cause).
type blockingStore struct {
	store.Store
	armed   chan struct{} // closed: the next Thread read blocks
	entered chan struct{} // closed when a read has blocked
	once    sync.Once
}

func (s *blockingStore) Thread(ctx context.Context, id string) (*thread.Record, error) {
	select {
	case <-s.armed:
		blocked := false
		s.once.Do(func() { blocked = true })
		if blocked {
			close(s.entered)
			<-ctx.Done()
			return nil, ctx.Err()
		}
	default:
	}
	return s.Store.Thread(ctx, id)
}

// TestInterruptedWhileReadingIsInterrupted checks that a run interrupted
// while its store read is in flight fails with ErrInterrupted (409
// interrupted over HTTP) and not with the bare context.Canceled the store
// answers, which would be told to a client that is still there as 499
// canceled.
func TestInterruptedWhileReadingIsInterrupted(t *testing.T) {
	ctx := t.Context()
	st := &blockingStore{Store: thread.NewMemoryStore(), armed: make(chan struct{}), entered: make(chan struct{})}
	db := thread.New(st, nil)
	a := agent.New(scripted.New(scripted.Text("second answer")), nil)
	th, err := a.NewLocalThread(ctx, db, thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	th2, err := db.Thread(ctx, th.ID())
	if err != nil {
		t.Fatal(err)
	}
	close(st.armed)
	done := make(chan error, 1)
	go func() {
		_, err := a.Run(ctx, th, message.User("one"))
		done <- err
	}()
	<-st.entered
	if _, err := a.Invoke(ctx, th2, agent.Request{Input: []message.Message{message.User("two")}, OnBusy: agent.Interrupt}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, agent.ErrInterrupted) {
		t.Fatalf("interrupted run: %v, want ErrInterrupted", err)
	}
}
