package worklog

import (
	"context"
	"fmt"
	"strings"
)

// Lister lists items; *Log is one.
type Lister interface {
	List(ctx context.Context, opts ListOptions) (*ListResult, error)
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
