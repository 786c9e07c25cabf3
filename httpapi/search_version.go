package httpapi

import (
	"context"
	"errors"

	"github.com/loomthreads/loom/thread"
)

// Bounds of the work of placing search hits: the history entries read for
// one hit that is not in its thread's head, and the commits of one walk
// down a line. A hit past them is taken to be in the head (no version).
// Variables, for tests.
var (
	maxHitHistory = 1000
	maxHitWalk    = 10000
)

// hitVersions returns, for each hit, 0 when its message is in its thread's
// head, else the newest version of the thread whose head held it (the page
// links the hit to the thread at that version); 0 too when none does any
// more, the thread is gone, or it lies deeper than the bounds above.
// Search finds the messages of every version the store keeps, rolled back
// ones too.
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
		// partial is the depth a walk cut short stopped at: hits deeper
		// than it cannot be placed.
		partial int64
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
				err := walk(ctx, db, head, floor[h.Thread], func(c *thread.Commit) bool {
					l.commits[c.ID], l.partial = true, c.Depth
					return true
				})
				if err == nil {
					l.partial = 0
				}
				if err != nil && !errors.Is(err, errWalkTooLong) {
					return nil, err
				}
			}
			lines[h.Thread] = l
		}
		if l == nil || l.commits[h.Commit] || commits[i].Depth < l.partial {
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
		err := walk(ctx, db, e.Commit, c.Depth, func(a *thread.Commit) bool {
			found = a.ID == c.ID
			return !found
		})
		if errors.Is(err, errWalkTooLong) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		if found {
			return e.Version, nil
		}
	}
	return 0, nil
}

// errWalkTooLong is walk's when the line is longer than maxHitWalk commits.
var errWalkTooLong = errors.New("line too long to walk")

// walk calls fn with head and its ancestors, newest first, down to those of
// depth floor (a commit that adds no message has its parent's depth), until
// fn returns false; errWalkTooLong after maxHitWalk commits.
func walk(ctx context.Context, db *thread.DB, head string, floor int64, fn func(*thread.Commit) bool) error {
	n := 0
	for c, err := range db.Store().Ancestors(ctx, head, floor-1) {
		if err != nil {
			return err
		}
		if n++; n > maxHitWalk {
			return errWalkTooLong
		}
		if !fn(c) {
			return nil
		}
	}
	return nil
}
