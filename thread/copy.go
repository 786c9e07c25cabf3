package thread

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/thread/store"
)

// CopyOptions choose what Copy copies and how it reports.
type CopyOptions struct {
	// Filter selects the threads; its Tenant and AllTenants apply as in a
	// listing (set AllTenants to copy every tenant's threads). Limit and
	// After page as usual.
	Filter ListOptions
	// Progress, when set, is called after each thread.
	Progress func(CopyProgress)
}

// CopyProgress reports how far a Copy has got.
type CopyProgress struct {
	// Thread is the thread just handled.
	Thread string
	// Done counts the threads handled so far, Total the threads to handle.
	Done, Total int
	// Copied counts threads written, Skipped threads that dst had already.
	Copied, Skipped int
	// Commits counts the commits written so far.
	Commits int
}

// Copy copies threads with their whole history — commits, history entries,
// checkpoints — from src to dst, keeping every id: a thread reads the same,
// at every version, in both stores, and commits that threads share (forks)
// are written once. A thread that dst has already is skipped, so a copy that
// was interrupted can simply be run again. Each thread is one atomic batch
// in dst. What src holds is checked as if it were written anew (ids,
// messages, ops, metadata, with the default Limits): a thread that fails is
// an ErrInvalid and stops the copy, with the threads before it copied.
func Copy(ctx context.Context, dst, src store.Store, opts CopyOptions) error {
	var ids []string
	filter := opts.Filter
	for r, err := range src.Threads(ctx, filter) {
		if err != nil {
			return fmt.Errorf("copy: list: %w", err)
		}
		ids = append(ids, r.ID)
	}
	p := CopyProgress{Total: len(ids)}
	for _, id := range ids {
		n, err := copyThread(ctx, dst, src, id)
		switch {
		case errors.Is(err, errExists):
			p.Skipped++
		case errors.Is(err, ErrNotFound) && n == 0:
			// Deleted from src since the listing: nothing to copy.
		case err != nil:
			return fmt.Errorf("copy %s: %w", id, err)
		default:
			p.Copied++
			p.Commits += n
		}
		p.Done++
		p.Thread = id
		if opts.Progress != nil {
			opts.Progress(p)
		}
	}
	return nil
}

var errExists = errors.New("exists in the destination")

// copyThread copies one thread and returns the number of commits written.
func copyThread(ctx context.Context, dst, src store.Store, id string) (int, error) {
	if _, err := dst.Thread(ctx, id); err == nil {
		return 0, errExists
	} else if !errors.Is(err, ErrNotFound) {
		return 0, err
	}
	r, err := src.Thread(ctx, id)
	if err != nil {
		return 0, err
	}
	var history []HistoryEntry
	for e, err := range src.History(ctx, id, HistoryOptions{Before: r.Version + 1}) {
		if err != nil {
			return 0, err
		}
		history = append(history, e)
	}
	slices.Reverse(history)
	if len(history) == 0 || history[len(history)-1].Version != r.Version {
		return 0, fmt.Errorf("history and record disagree (the thread moved during the copy): %w", ErrConflict)
	}
	var cps []Checkpoint
	for cp, err := range src.Checkpoints(ctx, id) {
		if err != nil {
			return 0, err
		}
		cps = append(cps, cp)
	}
	// Every commit the history and checkpoints reach that dst lacks,
	// parents first.
	b := &store.Batch{}
	have := map[string]bool{}
	// dst holds a commit's ancestors whenever it holds the commit, so along
	// a chain (newest first) the commits dst lacks come first: probing at
	// positions 0, 1, 3, 7, … and then bisecting finds where they end with
	// O(log n) lookups in dst, not one per commit.
	inDst := func(id string) (bool, error) {
		_, err := dst.Commit(ctx, id)
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	}
	need := func(root string) error {
		var chain []*Commit
		absent, present, probe := -1, -1, 0
		for c, err := range src.Ancestors(ctx, root, -1) {
			if err != nil {
				return err
			}
			if have[c.ID] {
				break
			}
			have[c.ID] = true
			if chain = append(chain, c); len(chain)-1 == probe {
				ok, err := inDst(c.ID)
				if err != nil {
					return err
				}
				if ok {
					present = probe
					break
				}
				absent, probe = probe, 2*probe+1
			}
		}
		if present >= 0 { // the first commit dst has is in (absent, present]
			lo, hi := absent+1, present
			for lo < hi {
				mid := lo + (hi-lo)/2
				ok, err := inDst(chain[mid].ID)
				if err != nil {
					return err
				}
				if ok {
					hi = mid
				} else {
					lo = mid + 1
				}
			}
			chain = chain[:lo]
		}
		slices.Reverse(chain)
		b.Commits = append(b.Commits, chain...)
		return nil
	}
	for _, e := range history {
		if e.Commit != "" && !have[e.Commit] {
			if err := need(e.Commit); err != nil {
				return 0, err
			}
		}
	}
	for _, cp := range cps {
		if !have[cp.Commit] {
			if err := need(cp.Commit); err != nil {
				return 0, err
			}
		}
	}
	if err := checkCopied(r, history, cps, b.Commits); err != nil {
		return 0, err
	}
	r.Head = history[len(history)-1].Commit
	b.Create = []store.Creation{{Record: r, History: history}}
	b.Checkpoints = cps
	if err := dst.Apply(ctx, b); err != nil {
		if errors.Is(err, ErrConflict) {
			if _, err2 := dst.Thread(ctx, id); err2 == nil {
				return 0, errExists // created meanwhile by another copy
			}
		}
		return 0, err
	}
	return len(b.Commits), nil
}

// checkCopied checks what a copy is about to write, as Create, Append and
// Checkpoint would have.
func checkCopied(r *Record, history []HistoryEntry, cps []Checkpoint, commits []*Commit) error {
	// Copied data is checked against the default limits.
	copyChecks := &DB{limits: Limits{}.withDefaults(), now: time.Now}
	// A copy sees keys: the thread's id in its tenant's namespace.
	tenant, id := SplitKey(r.ID)
	if tenant != r.Tenant {
		return fmt.Errorf("thread key %q of tenant %q: %w", clip(r.ID), clip(r.Tenant), ErrInvalid)
	}
	if err := copyChecks.checkRecord(id, r.Kind, r.Title, r.Labels); err != nil {
		return err
	}
	for _, e := range history {
		if err := checkOp(e.Op); err != nil {
			return err
		}
	}
	for _, cp := range cps {
		if err := checkCheckpointName(cp.Name); err != nil {
			return err
		}
	}
	for _, c := range commits {
		if !ids.Valid(c.ID) || (c.Parent != "" && !ids.Valid(c.Parent)) {
			return fmt.Errorf("commit id %q: %w", clip(c.ID), ErrInvalid)
		}
		if err := copyChecks.checkMessages(c.Messages); err != nil {
			return fmt.Errorf("commit %s: %w", c.ID, err)
		}
		for _, m := range c.Messages {
			if !ids.Valid(m.ID) {
				return fmt.Errorf("commit %s: a message without a valid id: %w", c.ID, ErrInvalid)
			}
		}
		if err := checkOp(c.Op); err != nil {
			return err
		}
		if err := checkMeta(c.Metadata); err != nil {
			return err
		}
		if c.State != nil {
			if _, err := copyChecks.applyPatch(nil, c.State); err != nil {
				return err
			}
		}
	}
	return nil
}
