package worklog

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomthreads/loom/agent"
)

// Lister lists items; *Log is one.
type Lister interface {
	List(ctx context.Context, opts ListOptions) (*ListResult, error)
}

// ProviderOptions configure a Provider. A nil *ProviderOptions means the
// defaults.
type ProviderOptions struct {
	// MaxItems is how many open items the instructions list, oldest
	// first; the rest are counted. Zero means 20.
	MaxItems int
	// MaxTextLen is how many characters of an item's text the
	// instructions show; longer texts are cut. Zero means 300.
	MaxTextLen int
}

// Provider is an agent.ContextProvider that puts the open items of a Log
// (the items a session carries) into the instructions of every run, with
// their ids, so that the model can resolve them by id. It holds no state
// of its own and adds nothing when there is no open item.
//
//	a := agent.New(client, &agent.Options{Providers: []agent.ContextProvider{worklog.NewProvider(log, nil)}})
type Provider struct {
	src  Lister
	opts ProviderOptions
}

var _ agent.ContextProvider = (*Provider)(nil)

// NewProvider returns a Provider of the open items src lists.
func NewProvider(src Lister, opts *ProviderOptions) *Provider {
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
// returns them as instructions.
func (p *Provider) Invoking(ctx context.Context, inv agent.Invocation) (*agent.Context, error) {
	res, err := p.src.List(ctx, ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("worklog: list open items: %w", err)
	}
	text := Instructions(res.Threads, p.opts.MaxItems, p.opts.MaxTextLen)
	if text == "" {
		return nil, nil
	}
	return &agent.Context{Instructions: text}, nil
}

// Instructions formats open items for a model's instructions: a heading,
// then one line per item — its number (#N), id, creation date and text
// (cut to maxText characters) — at most max of them, then how many more
// there are. It returns "" for no items.
func Instructions(items []Item, max, maxText int) string {
	if len(items) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Open work items carried over from earlier sessions (%d). Resolve one with resolve_thread (its id or #N) when it is done; create one with create_thread for new open work.\n", len(items))
	for i, it := range items {
		if i == max {
			fmt.Fprintf(&b, "… and %d more (list_threads lists them all).\n", len(items)-max)
			break
		}
		text := strings.Join(strings.Fields(it.Text), " ")
		fmt.Fprintf(&b, "#%d [%s]", i+1, it.ID)
		if !it.CreatedAt.IsZero() {
			fmt.Fprintf(&b, " (%s)", it.CreatedAt.UTC().Format("2006-01-02"))
		}
		fmt.Fprintf(&b, " %s\n", shorten(text, maxText))
	}
	return strings.TrimSuffix(b.String(), "\n")
}
