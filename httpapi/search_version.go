package httpapi

import (
	"context"
	"errors"

	"github.com/loomthreads/loom/thread"
)

// maxHitHistory caps the history entries read to place one search hit
// that is not in its thread's head: past it the hit has no version.
const maxHitHistory = 1000

// hitVersions returns, for each hit, 0 when its message is in its thread's
// head, else the newest version of the thread whose head held it (the page
// links the hit to the thread at that version); 0 too when none does any
// more, or the thread is gone. Search finds the messages of every version
// the store keeps, rolled back ones too.
//
// The cost, per thread of the page: one walk of its head's line down to
// the oldest hit's commit; and per hit not in the head, the history entries
// newer than the version that held it, each with the walk of its line down
// to the hit.
func hitVersions(ctx context.Context, db *thread.DB, hits []thread.SearchHit) ([]int64, error) {
	out := make([]int64, len(hits))
	commits := make([]*thread.Commit, len(hits))
	floor := map[string]int64{} // by thread: the least depth of its hits' commits
	for i, h := range hits {
		c, err := db.Store().Commit(ctx, h.Commit)
		if err != nil {
			return nil, err
		}
		commits[i] = c
		if f, ok := floor[h.Thread]; !ok || c.Depth < f {
			floor[h.Thread] = c.Depth
		}
	}
	type line struct {
		th      *thread.Thread
		commits map[string]bool // the head's line, down to the floor
	}
	lines := map[string]*line{}
	for i, h := range hits {
		l, ok := lines[h.Thread]
		if !ok {
			th, err := db.Thread(ctx, h.Thread)
			if errors.Is(err, thread.ErrNotFound) {
				lines[h.Thread] = nil
				continue
			}
			if err != nil {
				return nil, err
			}
			l = &line{th: th, commits: map[string]bool{}}
			if head := th.Record().Head; head != "" {
				if err := walk(ctx, db, head, floor[h.Thread], func(id string) bool { l.commits[id] = true; return true }); err != nil {
					return nil, err
				}
			}
			lines[h.Thread] = l
		}
		if l == nil || l.commits[h.Commit] {
			continue
		}
		v, err := heldAt(ctx, db, l.th, commits[i])
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// heldAt returns the newest version of th, before its head, whose head
// holds commit c (c itself or a descendant of it); 0 for none.
func heldAt(ctx context.Context, db *thread.DB, th *thread.Thread, c *thread.Commit) (int64, error) {
	head := th.Version()
	for e, err := range th.History(ctx, thread.HistoryOptions{Before: head, Limit: maxHitHistory}) {
		if err != nil {
			return 0, err
		}
		if e.Commit == "" {
			continue
		}
		if e.Commit == c.ID {
			return e.Version, nil
		}
		found := false
		err := walk(ctx, db, e.Commit, c.Depth, func(id string) bool {
			found = id == c.ID
			return !found
		})
		if err != nil {
			return 0, err
		}
		if found {
			return e.Version, nil
		}
	}
	return 0, nil
}

// walk calls fn with head and its ancestors, newest first, down to those of
// depth floor (a commit that adds no message has its parent's depth), until
// fn returns false.
func walk(ctx context.Context, db *thread.DB, head string, floor int64, fn func(id string) bool) error {
	for c, err := range db.Store().Ancestors(ctx, head, floor-1) {
		if err != nil {
			return err
		}
		if !fn(c.ID) {
			return nil
		}
	}
	return nil
}
