package thread

import (
	"context"
	"fmt"
	"slices"
)

// MaxFamily caps the threads Family returns.
const MaxFamily = 10_000

// Family returns the fork family of thread id, oldest first: the thread
// its forks (and Parent links) lead back to, and every thread forked from
// it or from any of its forks, each with its ForkedFrom. A link to a
// thread deleted since ends the walk back: the oldest thread still there
// is the family's root. A store with a DescendantIndex yields the family
// in one call; one with a ForkIndex finds each member's forks in its
// index, so a family costs reads of its members; otherwise forks
// are found by listing the tenant's threads, a read of every record of the
// tenant. A family past MaxFamily threads is cut there.
func (db *DB) Family(ctx context.Context, id string) (root string, family []Record, err error) {
	r, err := db.record(ctx, id)
	if err != nil {
		return "", nil, fmt.Errorf("family: %w", err)
	}
	seen := map[string]bool{r.ID: true}
	for r.ForkedFrom.Thread != "" && !seen[r.ForkedFrom.Thread] {
		up, err := db.store.Thread(ctx, r.ForkedFrom.Thread)
		if err != nil {
			break // a deleted ancestor: r is the oldest left
		}
		seen[up.ID] = true
		r = up
	}
	root = r.ID
	family = []Record{*r}
	in := map[string]bool{root: true}
	if di := descendantIndex(db.store); di != nil {
		for rec, err := range di.Descendants(ctx, root) {
			if err != nil {
				return "", nil, fmt.Errorf("family of %s: %w", id, err)
			}
			if len(family) >= MaxFamily {
				break
			}
			if rec.Tenant == db.tenant && !in[rec.ID] {
				in[rec.ID] = true
				family = append(family, *rec)
			}
		}
		slices.SortStableFunc(family[1:], func(a, b Record) int { return a.CreatedAt.Compare(b.CreatedAt) })
		return root, family, nil
	}
	fi := forkIndex(db.store)
	forks := func(parent string) ([]*Record, error) {
		var out []*Record
		for rec, err := range fi.Forks(ctx, parent) {
			if err != nil {
				return nil, err
			}
			out = append(out, rec)
		}
		return out, nil
	}
	if fi == nil {
		children := map[string][]*Record{}
		for rec, err := range db.store.Threads(ctx, ListOptions{Tenant: db.tenant}) {
			if err != nil {
				return "", nil, fmt.Errorf("family of %s: %w", id, err)
			}
			if p := rec.ForkedFrom.Thread; p != "" {
				children[p] = append(children[p], rec)
			}
		}
		forks = func(parent string) ([]*Record, error) { return children[parent], nil }
	}
	for i := 0; i < len(family) && len(family) < MaxFamily; i++ {
		kids, err := forks(family[i].ID)
		if err != nil {
			return "", nil, fmt.Errorf("family of %s: %w", id, err)
		}
		for _, c := range kids {
			if !in[c.ID] && c.Tenant == db.tenant && len(family) < MaxFamily {
				in[c.ID] = true
				family = append(family, *c)
			}
		}
	}
	slices.SortStableFunc(family[1:], func(a, b Record) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return root, family, nil
}
