package worklog

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/loomthreads/loom/agent"
)

func TestProvider(t *testing.T) {
	clk := newClock()
	l := newLog(t, clk)
	p := NewProvider(l, &ProviderOptions{MaxItems: 2, MaxTextLen: 20})
	if p.Name() != "worklog" {
		t.Errorf("name %q", p.Name())
	}
	c, err := p.Invoking(t.Context(), agent.Invocation{})
	if err != nil || c != nil {
		t.Fatalf("no items: %+v, %v; want nothing", c, err)
	}
	its := seed(t, l, clk, "Publish npm package", "A text that is much longer than twenty characters", "Third", "PROJECT STATE: hidden")
	if _, err := l.Resolve(t.Context(), ResolveOptions{ID: its[2].ID}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, l, "Fourth")
	c, err = p.Invoking(t.Context(), agent.Invocation{})
	if err != nil {
		t.Fatal(err)
	}
	want := "Open work items carried over from earlier sessions (3). Resolve one with resolve_thread (its id or #N) when it is done; create one with create_thread for new open work.\n" +
		"#1 [" + its[0].ID + "] (2026-03-01) Publish npm package\n" +
		"#2 [" + its[1].ID + "] (2026-03-01) A text that is much …\n" +
		"… and 1 more (list_threads lists them all)."
	if c.Instructions != want {
		t.Errorf("instructions:\n%s\nwant\n%s", c.Instructions, want)
	}
	if strings.Contains(c.Instructions, "PROJECT STATE") {
		t.Error("project state in the instructions")
	}
}

type failingLister struct{}

func (failingLister) List(context.Context, ListOptions) (*ListResult, error) {
	return nil, errors.New("disk gone")
}

func TestProviderError(t *testing.T) {
	if _, err := NewProvider(failingLister{}, nil).Invoking(t.Context(), agent.Invocation{}); err == nil || !strings.Contains(err.Error(), "disk gone") {
		t.Errorf("err %v", err)
	}
}
