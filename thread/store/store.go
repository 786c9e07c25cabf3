package store

import (
	"context"
	"github.com/loomthreads/loom/internal/ids"
	"iter"
	"slices"
	"strings"
	"time"
)

// Store keeps commits, thread records, history and checkpoints. It is the
// whole contract between package thread and a backend; everything else
// (appending, forking, views, save and load) is built on it here, once.
//
// A store must:
//   - keep commits immutable: a commit id always yields the same commit;
//   - apply a Batch atomically: all of it or none of it, with every version
//     check done inside the same transaction as the writes;
//   - keep a commit while anything reaches it: a child commit, a history
//     entry or a checkpoint of any thread; delete it when the last reference
//     goes (see Batch.Delete). Within a batch, count the new references
//     before letting old ones go, so that replacing a checkpoint never frees
//     what the new one keeps;
//   - return ErrNotFound, ErrConflict and ErrInvalid (wrapped) as documented,
//     and copies that the caller may change.
//
// The thread ids a store sees are keys (see Key): an id, or tenant/id for a
// tenant other than the default; a store checks them with ValidKey and
// needs to know nothing else of tenants but Record.Tenant, which filters
// listings.
//
// thread/storetest checks all of this; every store runs it.
type Store interface {
	// Commit returns the commit with the given id, or ErrNotFound.
	Commit(ctx context.Context, id string) (*Commit, error)
	// Ancestors yields the commit id and then its ancestors, newest first,
	// as long as their Depth is greater than floor: a floor of head.Depth-k
	// yields exactly the commits that hold the last k messages, and a floor
	// of -1 yields every commit down to the root. An unknown id yields
	// ErrNotFound.
	Ancestors(ctx context.Context, id string, floor int64) iter.Seq2[*Commit, error]

	// Thread returns the record of a thread, or ErrNotFound.
	Thread(ctx context.Context, id string) (*Record, error)
	// Threads yields the records that match opts, in opts.Order (id order,
	// or most recently updated first); it ignores opts.Internal.
	Threads(ctx context.Context, opts ListOptions) iter.Seq2[*Record, error]
	// History yields a thread's history entries, newest first. An unknown
	// thread yields ErrNotFound.
	History(ctx context.Context, thread string, opts HistoryOptions) iter.Seq2[HistoryEntry, error]
	// Checkpoints yields a thread's checkpoints in name order. An unknown
	// thread yields ErrNotFound.
	Checkpoints(ctx context.Context, thread string) iter.Seq2[Checkpoint, error]

	// Apply makes all the changes of b, or none of them.
	Apply(ctx context.Context, b *Batch) error
}

// CommitCache is an optional upgrade of a Store that keeps decoded commits
// in memory. CachedCommit returns a copy of the commit id when the store
// holds it, or nil, without asking its backend. A Thread uses it for the
// head of a record it has just read (which the record keeps alive), and
// asks Commit otherwise; a store without it is always asked.
type CommitCache interface {
	CachedCommit(id string) *Commit
}

// Appender is an optional upgrade of a Store for threads that many writers
// append to at once. AppendAt holds the thread's lock — waiting its turn
// in the store's queue — while it reads the thread's record and head
// commit (only ID, Depth and StateFrom are set; head is nil for an empty
// thread), calls build with them, and applies the batch build returns, so
// that racing appends take turns in order instead of losing their
// compare-and-swap and trying again. build may run more than once (a
// store that retries its transaction calls it again) and must not touch
// the store; its error is returned as it is, with nothing applied. An
// unknown thread is ErrNotFound.
//
// Thread.Commit uses it for a pure append that lost a race. Without it,
// such an append is rebased onto the new head and tried again, after a
// jittered backoff, which on a hot thread lets late writers win first.
type Appender interface {
	AppendAt(ctx context.Context, thread string, build func(r *Record, head *Commit) (*Batch, error)) error
}

// ForkIndex is an optional upgrade of a Store that finds a thread's forks
// without a scan. Forks yields, in any order, the records of the threads
// whose ForkedFrom.Thread is parent (a key, as every id a store sees). An
// unknown parent yields nothing. DB.Family uses it, so that a family costs
// reads of its own members; a store without it is scanned (every record
// of the tenant).
type ForkIndex interface {
	Forks(ctx context.Context, parent string) iter.Seq2[*Record, error]
}

// DescendantIndex is an optional upgrade of a ForkIndex for stores that
// answer over a network: Descendants yields, in any order, every thread
// forked from root or from any thread it yields (following
// ForkedFrom.Thread down from root; a deleted thread ends its branch), in
// one call rather than one per member. DB.Family prefers it.
type DescendantIndex interface {
	Descendants(ctx context.Context, root string) iter.Seq2[*Record, error]
}

// Batch is a set of changes that a store applies atomically, in the order of
// its fields: commits, creations, moves, dropped checkpoints, new
// checkpoints, prunes, deletions. Every
// precondition is checked before anything changes, inside the store's
// transaction:
//   - a commit whose id exists already is ErrConflict; a parent that is
//     neither stored nor earlier in Commits is ErrNotFound;
//   - a creation of an existing thread id is ErrConflict;
//   - a move whose From is not the thread's version is ErrConflict;
//   - a head, checkpoint commit or thread that does not exist is ErrNotFound;
//   - a checkpoint name taken on that thread is ErrConflict;
//   - a thread created in a batch cannot be deleted, pruned, or have
//     checkpoints dropped, in that same batch (ErrNotFound);
//   - a prune that would drop the thread's current version is ErrInvalid.
//
// Commits whose last reference a batch lets go are freed after all of the
// batch's new references count.
type Batch struct {
	// Commits are new commits, parents before children.
	Commits []*Commit
	// Create makes new threads.
	Create []Creation
	// Moves move heads (and change record fields) by compare-and-swap.
	Moves []Move
	// DropCheckpoints deletes checkpoints by thread and name; a missing one
	// is ErrNotFound.
	DropCheckpoints []CheckpointKey
	// Checkpoints are new checkpoints.
	Checkpoints []Checkpoint
	// Prune drops the oldest history entries of threads (retention).
	Prune []Prune
	// Delete removes threads with their history and checkpoints, then every
	// commit that nothing else reaches any more.
	Delete []Deletion
}

// Creation makes a thread. Record.Version must equal the version of the last
// entry of History; with no History the store writes the single entry
// {1, Record.Head, Op, Record.CreatedAt} and Record.Version must be 1.
type Creation struct {
	Record  *Record
	Op      Op
	History []HistoryEntry
}

// Move moves a thread's head from version From to From+1 and appends the
// history entry {From+1, Head, Op, Time}. It may change record fields in the
// same step.
type Move struct {
	Thread string
	// From is the version the move was computed against.
	From int64
	// Head is the new head ("" for the empty root); it may equal the old one.
	Head string
	Op   Op
	Time time.Time
	// Kind, when not "", replaces the thread's kind.
	Kind Kind
	// Title, when not nil, replaces the title.
	Title *string
	// Labels, when not nil, replace the labels (an empty map clears them).
	Labels map[string]string
}

// CheckpointKey names a checkpoint.
type CheckpointKey struct {
	Thread, Name string
}

// Prune drops the history entries of Thread whose version is below Before,
// each letting go of the reference it held: the versions are no longer
// readable (At, Restore and History skip them), and the commits that only
// they reached are freed. Checkpoints, the current version and every entry
// from Before on stay. Before must be at least 1 and at most the thread's
// version as the batch's moves leave it; entries already gone below Before
// are no error, so a prune may be repeated.
type Prune struct {
	Thread string
	Before int64
}

// Deletion deletes a thread. A Version other than 0 must match the thread's.
type Deletion struct {
	Thread  string
	Version int64
}

// ListOptions filter and page a listing of threads. The zero value lists
// every thread of the default tenant "" in id order.
type ListOptions struct {
	// Tenant lists only this tenant's threads.
	Tenant string
	// AllTenants ignores Tenant and lists every tenant's threads.
	AllTenants bool
	// Labels, when not empty, lists only threads that have all these labels
	// with these values.
	Labels map[string]string
	// Kind, when not "", lists only threads of this kind.
	Kind Kind
	// Order is the order of the listing; the zero value OrderID is id
	// order.
	Order Order
	// After is the cursor: list threads whose id sorts after it (before it
	// with Desc). Pass the last id of the previous page. With
	// OrderUpdated the cursor is the pair (AfterUpdated, After), the
	// UpdatedAt and ID of the last thread of the previous page.
	After string
	// AfterUpdated is the UpdatedAt half of an OrderUpdated cursor; it is
	// ignored in id order and when After is "".
	AfterUpdated time.Time
	// Desc lists in descending id order: newest first for loom's ids. It
	// has no effect with OrderUpdated.
	Desc bool
	// Limit caps the number of threads; 0 means no cap.
	Limit int
	// Internal says whether loom's own threads (see Own) are listed; the
	// zero value lists them with the others. DB.Threads applies it above
	// the store, which ignores it.
	Internal Internal
}

// Order is the order of a listing of threads (ListOptions.Order).
type Order int8

const (
	// OrderID lists in id order, ascending, or descending with Desc.
	OrderID Order = iota
	// OrderUpdated lists the most recently updated thread first
	// (UpdatedAt descending, ties by id descending). A thread that moves
	// goes to the front, so a listing paged with cursors while threads
	// change can miss the ones that moved meanwhile, never repeat one.
	OrderUpdated
)

// Internal selects threads by whether loom made them for its own use
// (ListOptions.Internal, see Own).
type Internal int8

const (
	// InternalInclude lists every thread: the zero value.
	InternalInclude Internal = iota
	// InternalExclude leaves loom's own threads out: people's threads.
	InternalExclude
	// InternalOnly lists only loom's own threads.
	InternalOnly
)

// CompareUpdated orders records the way OrderUpdated lists them: negative
// when a comes before b.
func CompareUpdated(a, b *Record) int {
	if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
		return c
	}
	return strings.Compare(b.ID, a.ID)
}

// Past reports whether r comes after the cursor of o in o's order; with no
// cursor, every record does. Stores that page in memory use it.
func (o ListOptions) Past(r *Record) bool {
	switch {
	case o.After == "":
		return true
	case o.Order == OrderUpdated:
		return CompareUpdated(&Record{ID: o.After, UpdatedAt: o.AfterUpdated}, r) < 0
	case o.Desc:
		return r.ID < o.After
	}
	return r.ID > o.After
}

// ListByUpdated is the OrderUpdated listing of a store without an index on
// update times: it lists every thread that matches opts' filters with
// byID (in id order, no cursor, no limit), keeps those past the cursor and
// sorts them, which costs a read of every matching record per page. A
// store calls it from Threads when opts.Order is OrderUpdated.
func ListByUpdated(ctx context.Context, opts ListOptions, byID func(context.Context, ListOptions) iter.Seq2[*Record, error]) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		all := opts
		all.Order, all.After, all.AfterUpdated, all.Desc, all.Limit = OrderID, "", time.Time{}, false, 0
		var recs []*Record
		for r, err := range byID(ctx, all) {
			if err != nil {
				yield(nil, err)
				return
			}
			if opts.Past(r) {
				recs = append(recs, r)
			}
		}
		slices.SortFunc(recs, CompareUpdated)
		if opts.Limit > 0 && len(recs) > opts.Limit {
			recs = recs[:opts.Limit]
		}
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
}

// Match reports whether r passes the filters of o (not the cursor).
// Stores that filter in memory use it.
func (o ListOptions) Match(r *Record) bool {
	if !o.AllTenants && r.Tenant != o.Tenant {
		return false
	}
	if o.Kind != "" && r.Kind != o.Kind {
		return false
	}
	for k, v := range o.Labels {
		if got, ok := r.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// HistoryOptions page a thread's history.
type HistoryOptions struct {
	// Before lists entries with a version below it; 0 starts at the newest.
	Before int64
	// Limit caps the number of entries; 0 means no cap.
	Limit int
}

// Key returns the key under which a store keeps the thread id of tenant:
// the id itself for the default tenant "", and tenant + "/" + id for any
// other (see thread.Key).
func Key(tenant, id string) string { return ids.Key(tenant, id) }

// SplitKey returns the tenant and id of a key made by Key.
func SplitKey(key string) (tenant, id string) { return ids.SplitKey(key) }

// ValidKey reports whether s is a key Key makes of a valid tenant and id.
func ValidKey(s string) bool { return ids.ValidKey(s) }
