package sqlite

import (
	"container/list"
	"sync"

	"github.com/loomthreads/loom/thread"
)

// commitCache keeps decoded commits, least recently used out first.
// Decoding a commit's messages from JSON costs far more than reading its
// row, and commits never change, so a read that finds the row's commit here
// only copies it.
//
// An entry is keyed by the row's integer key and checked against the row's
// id and the length of its messages: SQLite may give the key of a deleted
// commit to a new one, and then the id differs. (A commit id names one
// commit forever, so the same id at the same key is the same commit, in
// this process or any other.)
type commitCache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	items map[int64]*list.Element
	// byID finds an entry by commit id, for walks up the parents that
	// need no query while the commits are here.
	byID map[string]*list.Element
	lru  list.List // of *cacheEntry, most recent first
}

type cacheEntry struct {
	k    int64
	id   string
	n    int // length of the stored messages
	c    *thread.Commit
	cost int64
}

func newCommitCache(max int64) *commitCache {
	if max <= 0 {
		return nil
	}
	return &commitCache{max: max, items: make(map[int64]*list.Element), byID: make(map[string]*list.Element)}
}

// get returns a copy of the cached commit of row k, if it is the one with
// this id and messages length.
func (cc *commitCache) get(k int64, id string, n int) *thread.Commit {
	if cc == nil {
		return nil
	}
	cc.mu.Lock()
	el, ok := cc.items[k]
	if !ok {
		cc.mu.Unlock()
		return nil
	}
	e := el.Value.(*cacheEntry)
	if e.id != id || e.n != n {
		cc.remove(el)
		cc.mu.Unlock()
		return nil
	}
	cc.lru.MoveToFront(el)
	c := e.c
	cc.mu.Unlock()
	return c.Clone() // c is never changed: copy outside the lock
}

// getID returns a copy of the cached commit with this id, if any. A commit
// id names one commit forever, so the copy is right whoever wrote it; it
// may be a commit that another process has deleted since (DESIGN: caches
// may keep commits forever).
func (cc *commitCache) getID(id string) *thread.Commit {
	c, _ := cc.getIDCost(id)
	return c
}

// getIDCost is getID that also returns the entry's cost.
func (cc *commitCache) getIDCost(id string) (*thread.Commit, int64) {
	if cc == nil {
		return nil, 0
	}
	cc.mu.Lock()
	el, ok := cc.byID[id]
	if !ok {
		cc.mu.Unlock()
		return nil, 0
	}
	cc.lru.MoveToFront(el)
	e := el.Value.(*cacheEntry)
	cc.mu.Unlock()
	return e.c.Clone(), e.cost
}

// walkShare is the share of the cache that one walk up the parents may
// fill: the commits nearest where it starts, whose cost adds up to
// max/walkShare. Views read the end of a thread, so those are the commits
// that a next walk reads again; a walk longer than the cache would
// otherwise put every commit in and push each out before a later walk
// came back to it, paying for the entries, their copies and the churn of
// the list for no hit (issue 27: a full read of 200,000 messages took
// 1.46 times the CPU with the cache on). The commits past the share are
// decoded, handed over and forgotten, and the rest of the cache, other
// threads' ends, stays.
const walkShare = 4

// walkBudget returns the cost of the commits nearest its start that a walk
// may cache; 0 when the cache is off.
func (cc *commitCache) walkBudget() int64 {
	if cc == nil {
		return 0
	}
	return cc.max / walkShare
}

// key returns the row key of the cached commit with this id, if any. The
// row may have been deleted since; the caller checks.
func (cc *commitCache) key(id string) (int64, bool) {
	if cc == nil {
		return 0, false
	}
	cc.mu.Lock()
	el, ok := cc.byID[id]
	var k int64
	if ok {
		k = el.Value.(*cacheEntry).k
	}
	cc.mu.Unlock()
	return k, ok
}

// put caches c, which the caller must not change afterwards, as row k's.
func (cc *commitCache) put(k int64, n int, c *thread.Commit, cost int64) {
	if cc == nil || cost > cc.max/8 {
		return
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if el, ok := cc.items[k]; ok {
		cc.remove(el)
	}
	if el, ok := cc.byID[c.ID]; ok {
		cc.remove(el)
	}
	el := cc.lru.PushFront(&cacheEntry{k: k, id: c.ID, n: n, c: c, cost: cost})
	cc.items[k], cc.byID[c.ID] = el, el
	cc.size += cost
	for cc.size > cc.max {
		cc.remove(cc.lru.Back())
	}
}

// forget drops row k, whose commit was deleted.
func (cc *commitCache) forget(k int64) {
	if cc == nil {
		return
	}
	cc.mu.Lock()
	if el, ok := cc.items[k]; ok {
		cc.remove(el)
	}
	cc.mu.Unlock()
}

func (cc *commitCache) remove(el *list.Element) {
	e := cc.lru.Remove(el).(*cacheEntry)
	delete(cc.items, e.k)
	delete(cc.byID, e.id)
	cc.size -= e.cost
}
