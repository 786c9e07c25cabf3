package thread

import (
	"context"
	"errors"
)

// hitBounds bound the work of placing search hits (SearchQuery.Versions):
// the commits of one walk down a line, and the history entries read for
// one hit that is not in its thread's head. A hit past them is taken to be
// in the head (no Version).
type hitBounds struct {
	walk    int
	history int
}

// searchBounds returns the bounds DB.Search places hits with; the numbers
// are in SearchQuery.Versions' doc.
func searchBounds() hitBounds { return hitBounds{walk: 10_000, history: 1_000} }

// errWalkTooLong is walkLine's when a line is longer than a walk may go.
var errWalkTooLong = errors.New("line too long to walk")

// placeHits sets the Version of each hit: 0 when its message is in its
// thread's head, else the newest version of the thread whose head held it;
// 0 too when none does any more, the thread is gone, or it lies past b.
//
// The cost, per thread of the hits: one walk of its head's line down to
// the oldest hit's commit; and per hit not in the head, the history entries
// newer than the version that held it, each with the walk of its line down
// to the hit.
func (db *DB) placeHits(ctx context.Context, hits []SearchHit, b hitBounds) error {
	commits := make([]*Commit, len(hits))
	floor := map[string]int64{} // by thread: the least depth of its hits' commits
	for i, h := range hits {
		c, err := db.raw.Commit(ctx, h.Commit)
		if err != nil {
			return err
		}
		commits[i] = c
		if f, ok := floor[h.Thread]; !ok || c.Depth < f {
			floor[h.Thread] = c.Depth
		}
	}
	type line struct {
		th      *Thread
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
			if errors.Is(err, ErrNotFound) {
				lines[h.Thread] = nil
				continue
			}
			if err != nil {
				return err
			}
			l = &line{th: th, commits: map[string]bool{}}
			if head := th.Record().Head; head != "" {
				err := db.walkLine(ctx, head, floor[h.Thread], b.walk, func(c *Commit) bool {
					l.commits[c.ID], l.partial = true, c.Depth
					return true
				})
				if err == nil {
					l.partial = 0
				}
				if err != nil && !errors.Is(err, errWalkTooLong) {
					return err
				}
			}
			lines[h.Thread] = l
		}
		hits[i].Version = 0
		if l == nil || l.commits[h.Commit] || commits[i].Depth < l.partial {
			continue
		}
		v, err := db.heldAt(ctx, l.th, commits[i], b)
		if err != nil {
			return err
		}
		hits[i].Version = v
	}
	return nil
}

// heldAt returns the newest version of th, before its head, whose head
// holds commit c (c itself or a descendant of it); 0 for none within b.
func (db *DB) heldAt(ctx context.Context, th *Thread, c *Commit, b hitBounds) (int64, error) {
	for e, err := range th.History(ctx, HistoryOptions{Before: th.Version(), Limit: b.history}) {
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
		err := db.walkLine(ctx, e.Commit, c.Depth, b.walk, func(a *Commit) bool {
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

// walkLine calls fn with head and its ancestors, newest first, down to those of
// depth floor (a commit that adds no message has its parent's depth), until
// fn returns false; errWalkTooLong after limit commits.
func (db *DB) walkLine(ctx context.Context, head string, floor int64, limit int, fn func(*Commit) bool) error {
	n := 0
	for c, err := range db.raw.Ancestors(ctx, head, floor-1) {
		if err != nil {
			return err
		}
		if n++; n > limit {
			return errWalkTooLong
		}
		if !fn(c) {
			return nil
		}
	}
	return nil
}
