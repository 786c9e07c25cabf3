// Package worklogagent puts work items into an agent's runs: a context
// provider (package agent) that adds the open items of a worklog.Log to
// the instructions of every run, with their ids, so that the model can
// resolve them by id. It is a package of its own so that package worklog,
// which the stores import for their session tables, does not depend on
// package agent.
//
//	a := agent.New(client, &agent.Options{Providers: []agent.ContextProvider{worklogagent.New(log, nil)}})
package worklogagent

import (
	"context"
	"fmt"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/worklog"
)

// Options configure a Provider. A nil *Options means the defaults.
type Options struct {
	// MaxItems is how many open items the instructions list, oldest
	// first; the rest are counted. Zero means 20.
	MaxItems int
	// MaxTextLen is how many characters of an item's text the
	// instructions show; longer texts are cut. Zero means 300.
	MaxTextLen int
}

// Provider is an agent.ContextProvider that puts the open items of a Log
// (the items a session carries) into the instructions of every run. It
// holds no state of its own and adds nothing when there is no open item.
type Provider struct {
	src  worklog.Lister
	opts Options
}

var _ agent.ContextProvider = (*Provider)(nil)

// New returns a Provider of the open items src lists.
func New(src worklog.Lister, opts *Options) *Provider {
	p := &Provider{src: src}
	if opts != nil {
		p.opts = *opts
	}
	if p.opts.MaxItems <= 0 {
		p.opts.MaxItems = 20
	}
	if p.opts.MaxTextLen <= 0 {
		p.opts.MaxTextLen = 300
	}
	return p
}

// Name implements agent.ContextProvider.
func (p *Provider) Name() string { return "worklog" }

// Invoking implements agent.ContextProvider: it lists the open items and
// returns them as instructions (worklog.Instructions).
func (p *Provider) Invoking(ctx context.Context, inv agent.Invocation) (*agent.Context, error) {
	res, err := p.src.List(ctx, worklog.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("worklog: list open items: %w", err)
	}
	text := worklog.Instructions(res.Threads, p.opts.MaxItems, p.opts.MaxTextLen)
	if text == "" {
		return nil, nil
	}
	return &agent.Context{Instructions: text}, nil
}
