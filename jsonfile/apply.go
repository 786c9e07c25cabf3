package jsonfile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// Apply implements store.Store.
//
// Under the store's lock (a mutex and a flock on DIR/.lock), it answers
// store.PlanBatch's questions from the files the batch touches (every
// rule of a batch is the planner's), works out the new content of every
// file the plan writes, then:
//
//  1. writes the new commit files under temporary names, each durably,
//     and syncs commits/: until step 2 they are garbage that no reader
//     sees and the next Open removes;
//  2. writes intent.json, the list of every write, rename and removal of
//     the batch, durably: this is the commit point;
//  3. does the intent (commit renames first) and syncs its directories;
//  4. empties intent.json.
//
// A process that dies between 2 and 4 leaves the intent behind; the next
// Open, Apply or read that finds it (in any process, under the lock) does
// it again. Its writes are whole files and its renames are skipped once
// done, so doing it twice is doing it once.
//
// Once the intent is durable the batch is committed: if step 3 fails, it
// is tried again a few times, and if the disk still refuses, Apply still
// succeeds (the batch is committed: failing would have it applied twice):
// readers read through its intent, the store is read-only while the disk
// is full, and the batch is finished by the next writer, Open or read.
//
// Batches that wait for the lock at once share these steps: see group.go.
func (s *Store) Apply(ctx context.Context, b *store.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if b == nil {
		return nil
	}
	return s.submit(ctx, &request{b: b})
}

// tx is what one intent writes: the files its batches read, as they change
// them. Each batch is planned against the store as the batches before it
// in the tx leave it.
type tx struct {
	s          *Store
	threads    map[string]*txThread
	threadIDs  []string // in the order first touched
	refs       map[string]*txRef
	refIDs     []string
	newCommits []newCommit
	chunks     []chunkWrite
	// pruned are the history chunks that prunes let go whole.
	pruned []chunkWrite
	// written is set once a batch's plan is written into the tx.
	written bool
}

func newTx(s *Store) *tx {
	return &tx{s: s, threads: map[string]*txThread{}, refs: map[string]*txRef{}}
}

type txThread struct {
	f            *threadFile // nil: no such thread
	changed      bool
	deleted      bool
	reindex      bool // created, deleted or relabelled: for the change log
	sealedOnDisk int64
}

type txRef struct {
	n       int64
	exists  bool // the commit is stored: its refs file exists, or it is new
	isNew   bool
	changed bool
	freed   bool
	parent  *string        // known parent
	head    *thread.Commit // a new commit's ID, Depth and StateFrom, for AppendAt
}

type newCommit struct {
	id   string
	data []byte
}

type chunkWrite struct {
	thread  string
	n       int64
	entries []entryFile
}

func (tx *tx) thread(id string) (*txThread, error) {
	if t, ok := tx.threads[id]; ok {
		return t, nil
	}
	t := &txThread{}
	if tx.s.storableKey(id) {
		f, err := tx.s.readThread(id)
		switch {
		case errors.Is(err, thread.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			t.f, t.sealedOnDisk = f, f.Sealed
		}
	}
	tx.threads[id] = t
	tx.threadIDs = append(tx.threadIDs, id)
	return t, nil
}

func (tx *tx) ref(id string) (*txRef, error) {
	if r, ok := tx.refs[id]; ok {
		return r, nil
	}
	r := &txRef{}
	if tx.s.storable(id) {
		b, err := tx.s.root.ReadFile(refsPath(id))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("refs of commit %q: %w", id, err)
		default:
			n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("refs of commit %q: corrupt file: %v", id, err)
			}
			r.n, r.exists = n, true
		}
	}
	tx.refs[id] = r
	tx.refIDs = append(tx.refIDs, id)
	return r, nil
}

// txFacts answers store.PlanBatch from the files, as the batches already
// in the tx leave them; the lock is held.
type txFacts tx

// Thread implements store.Facts.
func (f *txFacts) Thread(_ context.Context, id string) (int64, string, bool, error) {
	t, err := (*tx)(f).thread(id)
	if err != nil || t.f == nil {
		return 0, "", false, err
	}
	return t.f.Version, t.f.Head, true, nil
}

// Commit implements store.Facts.
func (f *txFacts) Commit(_ context.Context, id string) (bool, error) {
	r, err := (*tx)(f).ref(id)
	if err != nil {
		return false, err
	}
	return r.exists && !r.freed, nil
}

// Checkpoint implements store.Facts.
func (f *txFacts) Checkpoint(_ context.Context, th, name string) (string, bool, error) {
	t, err := (*tx)(f).thread(th)
	if err != nil || t.f == nil {
		return "", false, err
	}
	if i, ok := t.f.checkpoint(name); ok {
		return t.f.Checkpoints[i].Commit, true, nil
	}
	return "", false, nil
}

// checkpoint finds a checkpoint by name: its index, or where it would go.
func (f *threadFile) checkpoint(name string) (int, bool) {
	return slices.BinarySearchFunc(f.Checkpoints, name, func(c checkpointFile, name string) int { return strings.Compare(c.Name, name) })
}

// errRegroup is add's answer for a batch that the batches already in its
// tx keep from joining it (it makes again a thread or a commit that they
// delete): it waits for a tx of its own.
var errRegroup = errors.New("jsonfile: batch needs a group of its own")

// writeError is a failure while writing a plan into a tx: the tx holds part
// of the batch and cannot be committed as it is.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// add plans b against the store as the tx leaves it and writes the plan
// into the tx. A refused batch leaves the tx as it was, unless the error is
// a *writeError.
func (tx *tx) add(b *store.Batch) error {
	if err := tx.s.storableBatch(b); err != nil {
		return err
	}
	if tx.written && tx.clashes(b) {
		return errRegroup
	}
	p, err := store.PlanBatch(context.Background(), (*txFacts)(tx), b)
	if err != nil {
		return err
	}
	data := make([][]byte, len(b.Commits))
	for i, c := range b.Commits {
		f, err := toCommitFile(c)
		if err == nil {
			data[i], err = encode(f)
		}
		if err != nil {
			return fmt.Errorf("commit %q: %v: %w", clip(c.ID), err, thread.ErrInvalid)
		}
	}
	tx.written = true
	if err := tx.write(p, data); err != nil {
		return &writeError{err}
	}
	return nil
}

// storableBatch refuses the ids of b that cannot name files here (see
// storable): not a rule of batches, but what this file system can hold.
func (s *Store) storableBatch(b *store.Batch) error {
	for _, c := range b.Commits {
		switch {
		case c == nil || c.ID == "":
			// The planner's to refuse.
		case !ids.Valid(c.ID):
			return fmt.Errorf("commit id %q: %w", clip(c.ID), thread.ErrInvalid)
		case s.foldCase && hasUpper(c.ID):
			return fmt.Errorf("commit id %q: %w", clip(c.ID), errUpper)
		}
	}
	for _, cr := range b.Create {
		switch r := cr.Record; {
		case r == nil || r.ID == "":
		case s.foldCase && hasUpper(r.ID):
			return fmt.Errorf("create: thread id %q: %w", clip(r.ID), errUpper)
		case !s.storableKey(r.ID):
			return fmt.Errorf("create: thread id %q: %w", clip(r.ID), thread.ErrInvalid)
		}
	}
	return nil
}

// clashes reports whether b makes a commit or a thread that the tx
// deletes: its files would be written and removed by one intent.
func (tx *tx) clashes(b *store.Batch) bool {
	for _, c := range b.Commits {
		if c != nil {
			if r, ok := tx.refs[c.ID]; ok && r.freed {
				return true
			}
		}
	}
	for _, cr := range b.Create {
		if cr.Record != nil {
			if t, ok := tx.threads[cr.Record.ID]; ok && t.deleted {
				return true
			}
		}
	}
	return false
}

// write writes plan p into the tx, in the order the plan's doc gives;
// data are the encoded Batch.Commits. The plan was made against the tx,
// so every thread and commit it names is there.
func (tx *tx) write(p *store.Plan, data [][]byte) error {
	b := p.Batch
	for i, c := range b.Commits {
		r, err := tx.ref(c.ID)
		if err != nil {
			return err
		}
		parent := c.Parent
		r.n, r.exists, r.isNew, r.changed, r.parent = p.NewRefs[i], true, true, true, &parent
		r.head = &thread.Commit{ID: c.ID, Depth: c.Depth, StateFrom: c.StateFrom}
		tx.newCommits = append(tx.newCommits, newCommit{id: c.ID, data: data[i]})
	}
	for _, d := range p.Refs {
		r, err := tx.ref(d.Commit)
		if err != nil {
			return err
		}
		r.n += d.N
		r.changed = true
	}
	for _, cr := range b.Create {
		rec := cr.Record
		t, err := tx.thread(rec.ID)
		if err != nil {
			return err
		}
		t.f = &threadFile{ID: rec.ID, Tenant: rec.Tenant, Kind: rec.Kind, Title: rec.Title, Labels: cloneMap(rec.Labels),
			Head: rec.Head, Version: rec.Version, CreatedAt: utc(rec.CreatedAt), UpdatedAt: utc(rec.UpdatedAt), ForkedFrom: rec.ForkedFrom,
			History: []entryFile{}}
		t.changed, t.reindex = true, true
		entries := cr.Entries()
		if first := entries[0].Version; first > 1 {
			// The history of a pruned thread: the chunks below its first
			// version's count as sealed, and are not there.
			t.f.First, t.f.Sealed = first, (first-1)/historyChunk
		}
		for _, e := range entries {
			tx.addEntry(rec.ID, t, e)
		}
	}
	for _, m := range b.Moves {
		t, err := tx.thread(m.Thread)
		if err != nil {
			return err
		}
		f := t.change()
		e := m.Entry()
		f.Version, f.Head, f.UpdatedAt = e.Version, m.Head, utc(m.Time)
		if m.Kind != "" {
			f.Kind = m.Kind
		}
		if m.Title != nil {
			f.Title = *m.Title
		}
		if m.Labels != nil {
			f.Labels = cloneMap(m.Labels)
			t.reindex = true
		}
		tx.addEntry(m.Thread, t, e)
	}
	for i, k := range b.DropCheckpoints {
		t, err := tx.thread(k.Thread)
		if err != nil {
			return err
		}
		f := t.change()
		j, ok := f.checkpoint(k.Name)
		if !ok {
			return fmt.Errorf("jsonfile: checkpoint %q of thread %q is planned but not stored", clip(k.Name), k.Thread)
		}
		f.Checkpoints = slices.Delete(f.Checkpoints, j, j+1)
		if err := tx.unref(p.DropCommits[i]); err != nil {
			return err
		}
	}
	for _, cp := range b.Checkpoints {
		t, err := tx.thread(cp.Thread)
		if err != nil {
			return err
		}
		f := t.change()
		j, _ := f.checkpoint(cp.Name)
		f.Checkpoints = slices.Insert(f.Checkpoints, j, checkpointFile{Name: cp.Name, Commit: cp.Commit, Version: cp.Version, CreatedAt: utc(cp.CreatedAt)})
	}
	for _, pr := range b.Prune {
		t, err := tx.thread(pr.Thread)
		if err != nil {
			return err
		}
		if err := tx.prune(pr.Thread, t, pr.Before); err != nil {
			return err
		}
	}
	for _, d := range b.Delete {
		t, err := tx.thread(d.Thread)
		if err != nil {
			return err
		}
		if err := tx.deleteThread(d.Thread, t); err != nil {
			return err
		}
	}
	return nil
}

// unref lets one reference go and collects the commits left without any
// (the plan's last step), walking up the parents while that frees them:
// O(commits freed).
func (tx *tx) unref(id string) error {
	for id != "" {
		r, err := tx.ref(id)
		if err != nil {
			return err
		}
		if !r.exists || r.freed {
			return fmt.Errorf("jsonfile: commit %q is referenced but not stored", id)
		}
		r.n--
		r.changed = true
		if r.n > 0 {
			return nil
		}
		r.freed = true
		if r.parent == nil {
			b, err := tx.s.root.ReadFile(commitPath(id))
			if err != nil {
				return fmt.Errorf("commit %q: %w", id, err)
			}
			var p struct {
				Parent string `json:"parent"`
			}
			if err := json.Unmarshal(b, &p); err != nil {
				return fmt.Errorf("commit %q: corrupt file: %v", id, err)
			}
			r.parent = &p.Parent
		}
		id = *r.parent
	}
	return nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// addEntry appends a history entry to t, sealing a full chunk: the
// entries up to a multiple of historyChunk (fewer than historyChunk when
// the history starts within the chunk).
func (tx *tx) addEntry(id string, t *txThread, e thread.HistoryEntry) {
	f := t.f
	f.History = append(f.History, entryFile{Version: e.Version, Commit: e.Commit, Op: e.Op, Time: utc(e.Time)})
	for len(f.History) > 0 && f.History[len(f.History)-1].Version >= (f.Sealed+1)*historyChunk {
		if k := (f.Sealed+1)*historyChunk - f.History[0].Version + 1; k > 0 {
			tx.chunks = append(tx.chunks, chunkWrite{thread: id, n: f.Sealed, entries: slices.Clone(f.History[:k])})
			f.History = slices.Clone(f.History[k:])
		}
		f.Sealed++
	}
}

// chunk returns the entries of history chunk n of thread id as the tx
// leaves them: sealed by it, or on disk.
func (tx *tx) chunk(id string, t *txThread, n int64) ([]entryFile, error) {
	for _, c := range tx.chunks {
		if c.thread == id && c.n == n {
			return c.entries, nil
		}
	}
	if n < t.sealedOnDisk {
		return tx.s.readChunk(id, n)
	}
	return nil, nil
}

// prune drops t's history entries below version before, each letting go
// of its reference (the plan's step 7): the chunks wholly below before go
// (O(versions dropped) to read them), the thread file's older entries too,
// and First says where the history now starts. Entries gone already are
// skipped, so a prune may be repeated.
func (tx *tx) prune(id string, t *txThread, before int64) error {
	f := t.change()
	first := f.first()
	if before <= first {
		return nil
	}
	for n := (first - 1) / historyChunk; n < f.Sealed && n*historyChunk+1 < before; n++ {
		entries, err := tx.chunk(id, t, n)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Version >= first && e.Version < before {
				if err := tx.unref(e.Commit); err != nil {
					return err
				}
			}
		}
		if (n+1)*historyChunk < before {
			// Wholly below: the chunk goes.
			tx.chunks = slices.DeleteFunc(tx.chunks, func(c chunkWrite) bool { return c.thread == id && c.n == n })
			tx.pruned = append(tx.pruned, chunkWrite{thread: id, n: n})
		}
	}
	k := 0
	for k < len(f.History) && f.History[k].Version < before {
		if err := tx.unref(f.History[k].Commit); err != nil {
			return err
		}
		k++
	}
	f.History = slices.Clone(f.History[k:])
	f.First = before
	return nil
}

// change returns t's file ready to be changed: a copy of what was read.
func (t *txThread) change() *threadFile {
	if !t.changed {
		f := *t.f
		f.Labels = cloneMap(f.Labels)
		f.Checkpoints = slices.Clone(f.Checkpoints)
		f.History = slices.Clone(f.History)
		t.f = &f
		t.changed = true
	}
	return t.f
}

func cloneMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// deleteThread drops every reference t holds: each history entry (the
// sealed chunks are read for it: O(versions)) and each checkpoint.
func (tx *tx) deleteThread(id string, t *txThread) error {
	var entries []entryFile
	first := t.f.first()
	for n := (first - 1) / historyChunk; n < t.f.Sealed; n++ {
		if n < t.sealedOnDisk {
			chunk, err := tx.s.readChunk(id, n)
			if err != nil {
				return err
			}
			entries = append(entries, chunk...)
		}
	}
	kept := tx.chunks[:0]
	for _, c := range tx.chunks {
		if c.thread == id {
			entries = append(entries, c.entries...)
		} else {
			kept = append(kept, c)
		}
	}
	tx.chunks = kept
	entries = append(entries, t.f.History...)
	for _, e := range entries {
		if e.Version < first {
			continue // pruned already: its reference is gone
		}
		if err := tx.unref(e.Commit); err != nil {
			return err
		}
	}
	for _, cp := range t.f.Checkpoints {
		if err := tx.unref(cp.Commit); err != nil {
			return err
		}
	}
	t.f, t.deleted, t.changed, t.reindex = nil, true, true, true
	return nil
}

// commit writes the batch that build worked out: commit files first, then
// the intent (the commit point), then everything else.
func (tx *tx) commit() (err error) {
	s := tx.s
	// The new commits are written under temporary names that the intent
	// renames: until the commit point no reader can see them, and if the
	// batch fails before it they are removed (or, after a crash, by the
	// next Open).
	var ops, removes []intentOp
	committed, keep := false, false
	defer func() {
		if !committed && !keep {
			for _, op := range ops {
				if op.From != "" {
					s.root.Remove(op.From)
				}
			}
		}
	}()
	var commits []newCommit
	for _, c := range tx.newCommits {
		if !tx.refs[c.id].freed { // else made and freed by the same tx
			commits = append(commits, c)
		}
	}
	tmps := make([]string, len(commits))
	err = s.each(len(commits), func(i int) error {
		tmp, err := s.writeTemp(commitPath(commits[i].id), commits[i].data)
		if err != nil {
			return fmt.Errorf("write %s: %w", commitPath(commits[i].id), err)
		}
		tmps[i] = tmp
		return nil
	})
	for i, c := range commits {
		if tmps[i] != "" {
			ops = append(ops, intentOp{Path: commitPath(c.id), From: tmps[i]})
		}
	}
	if err != nil {
		return err
	}
	if len(ops) > 0 {
		if err := s.syncDir("commits"); err != nil {
			return err
		}
	}
	for _, c := range tx.chunks {
		data, err := encode(chunkFile{Thread: c.thread, History: c.entries})
		if err != nil {
			return err
		}
		ops = append(ops, intentOp{Path: chunkPath(c.thread, c.n), Data: string(data)})
	}
	for _, c := range tx.pruned {
		if !tx.threads[c.thread].deleted { // else its directory goes
			removes = append(removes, intentOp{Path: chunkPath(c.thread, c.n), Remove: true})
		}
	}
	for _, id := range tx.threadIDs {
		t := tx.threads[id]
		switch {
		case t.deleted:
			removes = append(removes, intentOp{Path: threadPath(id), Remove: true})
			if t.sealedOnDisk > 0 {
				removes = append(removes, intentOp{Path: chunkDir(id), Remove: true})
			}
		case t.changed:
			data, err := encode(t.f)
			if err != nil {
				return err
			}
			ops = append(ops, intentOp{Path: threadPath(id), Data: string(data)})
		}
	}
	var freed []intentOp
	for _, id := range tx.refIDs {
		r := tx.refs[id]
		switch {
		case r.freed && r.isNew:
		case r.freed:
			freed = append(freed, intentOp{Path: refsPath(id), Remove: true}, intentOp{Path: commitPath(id), Remove: true})
		case r.changed:
			ops = append(ops, intentOp{Path: refsPath(id), Data: fmt.Sprintf("%-15d\n", r.n)})
		}
	}
	ops = append(append(ops, removes...), freed...)
	if len(ops) == 0 {
		return nil
	}
	data, err := encode(intentFile{Ops: ops})
	if err != nil {
		return err
	}
	if undone, err := s.writeIntent(data); err != nil {
		// An intent that could not be surely taken back may come back
		// after a crash, and its renames need the temporary files.
		keep = !undone
		return err
	}
	committed = true
	if s.testHooks.afterIntent != nil {
		if err := s.testHooks.afterIntent(); err != nil {
			return err
		}
	}
	var keys []string
	for _, id := range tx.threadIDs {
		if tx.threads[id].reindex {
			keys = append(keys, id)
		}
	}
	if err := s.finish(ops, keys); err != nil {
		s.unfinished(ops, err)
	}
	return nil
}

// unfinished keeps a batch that reached its commit point but that the disk
// refused to finish, even when tried again. The batch IS committed, so
// Apply succeeds: an error would have its caller apply it again, and the
// thread hold it twice. Readers read through it (pending), the store is
// read-only while the disk is full, and the next Apply, Open or read of
// any process that finds room finishes it; the lock is held.
func (s *Store) unfinished(ops []intentOp, err error) {
	if fi, serr := s.intent.Stat(); serr == nil {
		s.pending.Store(newPending(ops, fi, err))
	} // else the readers find the intent and try to finish it themselves
	s.logger().Warn("jsonfile: a committed batch could not be finished: it is read through until the disk lets it be", "dir", s.dir, "err", err)
	if diskFull(err) {
		s.markFull(err)
	}
}

// errUpper refuses ids that a case-insensitive file system would confuse.
var errUpper = fmt.Errorf("ids with upper-case letters are refused on a file system that ignores case: %w", thread.ErrInvalid)

// hasUpper reports whether id has an upper-case ASCII letter.
func hasUpper(id string) bool {
	return strings.ContainsFunc(id, func(r rune) bool { return r >= 'A' && r <= 'Z' })
}

// storable reports whether id can name a file of this store: ids.Valid,
// and lower case where the file system ignores case.
func (s *Store) storable(id string) bool {
	return ids.Valid(id) && !(s.foldCase && hasUpper(id))
}

// maxKeyName is the longest file name a thread key may have here, so that
// its file (".json") and temporary files stay within the 255 bytes of a
// name on every common file system.
const maxKeyName = 200

// storableKey reports whether a thread key (thread.Key: an id, or
// tenant/id) can name files of this store: ids.ValidKey, at most
// maxKeyName bytes, and lower case where the file system ignores case.
func (s *Store) storableKey(key string) bool {
	return ids.ValidKey(key) && len(key) <= maxKeyName && !(s.foldCase && hasUpper(key))
}

// finishRetries are the pauses between the tries of finish.
var finishRetries = []time.Duration{10 * time.Millisecond, 100 * time.Millisecond}

// finish does a committed intent, trying again after a failure (a full disk
// may have room a moment later), logs the keys of the threads whose
// indexed fields it changes (index.go), then empties the intent; the lock
// is held. Doing an intent again is safe at any point.
func (s *Store) finish(ops []intentOp, keys []string) error {
	do := func() error {
		if err := s.do(ops); err != nil {
			return err
		}
		return s.logChanges(keys)
	}
	err := do()
	for _, pause := range finishRetries {
		if err == nil {
			break
		}
		time.Sleep(pause)
		err = do()
	}
	if err != nil {
		return err
	}
	s.clearIntent()
	return nil
}

// do does the writes and removals of an intent, then syncs the directories
// they touched. It does the commit renames first, so that no file it
// writes names a commit not there yet, then the history chunks, so that no
// thread file counts a chunk not there yet, then the other files, then the
// removals. The writes of a step, and the syncs of the directories, are
// made at once (see each): a file system with a journal makes fsyncs that
// wait together one commit of its journal.
func (s *Store) do(ops []intentOp) error {
	var dirs []string
	var chunks, files []intentOp
	for _, op := range ops {
		if !strings.HasPrefix(op.Path, "commits/") && !strings.HasPrefix(op.Path, "refs/") &&
			!strings.HasPrefix(op.Path, "threads/") && !strings.HasPrefix(op.Path, "history/") {
			return fmt.Errorf("intent: path %q is outside the store's layout", op.Path)
		}
		if op.From != "" {
			if dir, _ := splitPath(op.From); dir != "commits/" || !strings.HasPrefix(op.Path, "commits/") {
				return fmt.Errorf("intent: rename %q to %q is outside the store's layout", op.From, op.Path)
			}
			if err := s.root.Rename(op.From, op.Path); err != nil {
				// Renamed already, by an earlier try of this intent?
				if _, serr := s.root.Lstat(op.Path); !errors.Is(err, fs.ErrNotExist) || serr != nil {
					return fmt.Errorf("rename %s: %w", op.From, err)
				}
			}
		} else if !op.Remove && strings.HasPrefix(op.Path, "history/") {
			chunks = append(chunks, op)
		} else if !op.Remove {
			files = append(files, op)
		}
		dir, _ := splitPath(op.Path)
		dir = strings.TrimSuffix(dir, "/")
		if !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
		if strings.HasPrefix(dir, "history/") && !slices.Contains(dirs, "history") {
			dirs = append(dirs, "history")
		}
	}
	for _, op := range chunks {
		dir, _ := splitPath(op.Path)
		if err := s.root.MkdirAll(strings.TrimSuffix(dir, "/"), 0o700); err != nil {
			return err
		}
	}
	write := func(op intentOp) error {
		if strings.HasPrefix(op.Path, "refs/") {
			// Only writers read refs files, under the lock and after
			// finishing any intent: they are written in place.
			return s.writeInPlace(op.Path, []byte(op.Data))
		}
		return s.writeFile(op.Path, []byte(op.Data))
	}
	if err := s.each(len(chunks), func(i int) error { return write(chunks[i]) }); err != nil {
		return err
	}
	if err := s.each(len(files), func(i int) error { return write(files[i]) }); err != nil {
		return err
	}
	for _, op := range ops {
		if op.Remove {
			if err := s.root.RemoveAll(op.Path); err != nil {
				return fmt.Errorf("remove %s: %w", op.Path, err)
			}
		}
	}
	return s.each(len(dirs), func(i int) error { return s.syncDir(dirs[i]) })
}

// maxSyncs caps the files each writes at once.
const maxSyncs = 32

// each runs f(0) to f(n-1), at once when the store syncs (at most maxSyncs
// at a time), and returns the first error of the lowest i.
func (s *Store) each(n int, f func(i int) error) error {
	if n <= 1 || s.opts.NoSync {
		for i := range n {
			if err := f(i); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, n)
	sem := make(chan struct{}, maxSyncs)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = f(i)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// recover finishes the batch whose intent a dead process (or a full disk)
// left behind; the lock is held. When the disk refuses, the batch stays
// pending, for readers to read through.
func (s *Store) recover() error {
	ops, err := s.readIntent()
	if err != nil || ops == nil {
		s.pending.Store(nil)
		return err
	}
	fi, err := s.intent.Stat()
	if err != nil {
		return err
	}
	if err := s.finish(ops, threadKeys(ops)); err != nil {
		s.pending.Store(newPending(ops, fi, err))
		return err
	}
	s.pending.Store(nil)
	s.noteFull(nil) // the disk took it: there is room again
	return nil
}

// threadKeys returns the keys of the threads an intent writes or removes:
// a batch finished by another than its writer logs them all.
func threadKeys(ops []intentOp) []string {
	var keys []string
	for _, op := range ops {
		if name, ok := strings.CutPrefix(op.Path, "threads/"); ok {
			if name, ok := strings.CutSuffix(name, ".json"); ok {
				keys = append(keys, keyOfName(name))
			}
		}
	}
	return keys
}

// The intent file is written in place, always through the same open file:
// a line with the SHA-256 of the rest, then the intent as JSON. A file whose
// sum does not match is an intent whose write was cut short: its batch never
// reached the commit point and was never acknowledged. An empty file is no
// intent.

// writeIntent makes data the durable intent. On failure, undone reports
// whether the intent is surely gone (empty on disk).
func (s *Store) writeIntent(data []byte) (undone bool, err error) {
	sum := sha256.Sum256(data)
	buf := make([]byte, 0, 2*len(sum)+1+len(data))
	buf = hex.AppendEncode(buf, sum[:])
	buf = append(buf, '\n')
	buf = append(buf, data...)
	err = func() error {
		if _, err := s.intent.WriteAt(buf, 0); err != nil {
			return fmt.Errorf("write intent: %w", err)
		}
		if err := s.intent.Truncate(int64(len(buf))); err != nil {
			return fmt.Errorf("write intent: %w", err)
		}
		if !s.opts.NoSync {
			if err := s.syncFile(s.intent); err != nil {
				return fmt.Errorf("sync intent: %w", err)
			}
		}
		return nil
	}()
	if err != nil {
		// The batch fails: take the intent back, so that no one
		// finishes what the caller was told did not happen.
		undone = s.intent.Truncate(0) == nil && (s.opts.NoSync || s.intent.Sync() == nil)
		return undone, err
	}
	return false, nil
}

// clearIntent empties the intent file once its batch is done. It is not
// synced: after a power cut the intent may be back, and doing it again
// changes nothing, for it is the last batch (the next one overwrites it,
// and syncs, before it writes anything else).
func (s *Store) clearIntent() {
	s.intent.Truncate(0)
}

// readIntent returns the ops of a pending intent, or nil.
func (s *Store) readIntent() ([]intentOp, error) {
	fi, err := s.intent.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() == 0 {
		return nil, nil
	}
	b := make([]byte, fi.Size())
	if _, err := s.intent.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("read intent: %w", err)
	}
	line, data, ok := bytes.Cut(b, []byte("\n"))
	sum := sha256.Sum256(data)
	if !ok || string(line) != hex.EncodeToString(sum[:]) {
		s.clearIntent() // cut short: never committed
		return nil, nil
	}
	var in intentFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("intent.json: corrupt: %v", err)
	}
	if in.Ops == nil {
		in.Ops = []intentOp{}
	}
	return in.Ops, nil
}
