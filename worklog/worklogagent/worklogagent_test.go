package worklogagent_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
	"github.com/loomthreads/loom/worklog/worklogagent"
)

func newLog(t *testing.T) *worklog.Log {
	t.Helper()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	l, err := worklog.Open(filepath.Join(t.TempDir(), ".gitmem"), &worklog.Options{NoSync: true, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func create(t *testing.T, l *worklog.Log, text string) worklog.Item {
	t.Helper()
	res, err := l.Create(t.Context(), worklog.CreateOptions{Text: text})
	if err != nil {
		t.Fatal(err)
	}
	return res.Thread
}

func TestProvider(t *testing.T) {
	l := newLog(t)
	p := worklogagent.New(l, &worklogagent.Options{MaxItems: 2, MaxTextLen: 20})
	if p.Name() != "worklog" {
		t.Errorf("name %q", p.Name())
	}
	c, err := p.Invoking(t.Context(), agent.Invocation{})
	if err != nil || c != nil {
		t.Fatalf("no items: %+v, %v; want nothing", c, err)
	}
	a := create(t, l, "Publish npm package")
	b := create(t, l, "A text that is much longer than twenty characters")
	third := create(t, l, "Third")
	create(t, l, "PROJECT STATE: hidden")
	if _, err := l.Resolve(t.Context(), worklog.ResolveOptions{ID: third.ID}); err != nil {
		t.Fatal(err)
	}
	create(t, l, "Fourth")
	c, err = p.Invoking(t.Context(), agent.Invocation{})
	if err != nil {
		t.Fatal(err)
	}
	want := "Open work items carried over from earlier sessions (3). Resolve one with resolve_thread (its id or #N) when it is done; create one with create_thread for new open work.\n" +
		"#1 [" + a.ID + "] (2026-03-01) Publish npm package\n" +
		"#2 [" + b.ID + "] (2026-03-01) A text that is much …\n" +
		"… and 1 more (list_threads lists them all)."
	if c.Instructions != want {
		t.Errorf("instructions:\n%s\nwant\n%s", c.Instructions, want)
	}
}

type failingLister struct{}

func (failingLister) List(context.Context, worklog.ListOptions) (*worklog.ListResult, error) {
	return nil, errors.New("disk gone")
}

func TestProviderError(t *testing.T) {
	if _, err := worklogagent.New(failingLister{}, nil).Invoking(t.Context(), agent.Invocation{}); err == nil || !strings.Contains(err.Error(), "disk gone") {
		t.Errorf("err %v", err)
	}
}

// The open items reach the model's request, in a real run.
func TestProviderInARun(t *testing.T) {
	l := newLog(t)
	it := create(t, l, "Rotate the API keys")
	client := scripted.New(scripted.Text("noted"))
	a := agent.New(client, &agent.Options{Instructions: "Be brief.", Providers: []agent.ContextProvider{worklogagent.New(l, nil)}})
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := a.NewThread(t.Context(), db, thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(t.Context(), th, message.User("What is left?")); err != nil {
		t.Fatal(err)
	}
	reqs := client.Requests()
	if len(reqs) != 1 || !strings.Contains(reqs[0].Options.Instructions, it.ID) || !strings.Contains(reqs[0].Options.Instructions, "Be brief.") {
		t.Errorf("the request's instructions: %+v", reqs)
	}
}
