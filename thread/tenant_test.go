package thread

import (
	"context"
	"errors"
	"iter"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread/store"
)

// scriptedStore is a store whose listings yield what a test scripted, to
// see what a tenant's view of them passes on. Each listing stops when its
// yield returns false, as a store must, and notes that it was stopped.
type scriptedStore struct {
	*MemoryStore
	records     []scriptedItem[*Record]
	history     []scriptedItem[HistoryEntry]
	checkpoints []scriptedItem[Checkpoint]
	stopped     bool // a listing's yield returned false
}

type scriptedItem[T any] struct {
	v   T
	err error
}

func scripted[T any](s *scriptedStore, items []scriptedItem[T]) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for _, it := range items {
			if !yield(it.v, it.err) {
				s.stopped = true
				return
			}
		}
	}
}

// recs yields copies of s.records: a store's records are the caller's.
func (s *scriptedStore) recs() iter.Seq2[*Record, error] {
	items := slices.Clone(s.records)
	for i, it := range items {
		if it.v != nil {
			c := *it.v
			items[i].v = &c
		}
	}
	return scripted(s, items)
}

func (s *scriptedStore) Threads(context.Context, ListOptions) iter.Seq2[*Record, error] {
	return s.recs()
}

func (s *scriptedStore) History(context.Context, string, HistoryOptions) iter.Seq2[HistoryEntry, error] {
	return scripted(s, s.history)
}

func (s *scriptedStore) Checkpoints(context.Context, string) iter.Seq2[Checkpoint, error] {
	return scripted(s, s.checkpoints)
}

func (s *scriptedStore) Forks(context.Context, string) iter.Seq2[*Record, error] {
	return s.recs()
}

func (s *scriptedStore) Descendants(context.Context, string) iter.Seq2[*Record, error] {
	return s.recs()
}

var (
	_ store.ForkIndex       = (*scriptedStore)(nil)
	_ store.DescendantIndex = (*scriptedStore)(nil)
)

// tenantListing is one of the listings a tenant's store wraps, as the
// records, entries or checkpoints' thread ids it yields.
type tenantListing struct {
	name string
	seq  func(ctx context.Context, ts *tenantStore) iter.Seq2[string, error]
}

func idsOf[T any](seq iter.Seq2[T, error], id func(T) string) iter.Seq2[string, error] {
	// seq is called, not ranged over: a range would panic where seq
	// calls on after false, and the tests count the calls instead.
	return func(yield func(string, error) bool) {
		seq(func(v T, err error) bool {
			s := ""
			if err == nil {
				s = id(v)
			}
			return yield(s, err)
		})
	}
}

func recordID(r *Record) string { return r.ID }

var tenantListings = []tenantListing{
	{"threads", func(ctx context.Context, ts *tenantStore) iter.Seq2[string, error] {
		return idsOf(ts.Threads(ctx, ListOptions{}), recordID)
	}},
	{"history", func(ctx context.Context, ts *tenantStore) iter.Seq2[string, error] {
		return idsOf(ts.History(ctx, "x", HistoryOptions{}), func(e HistoryEntry) string { return e.Commit })
	}},
	{"checkpoints", func(ctx context.Context, ts *tenantStore) iter.Seq2[string, error] {
		return idsOf(ts.Checkpoints(ctx, "x"), func(cp Checkpoint) string { return cp.Thread + "#" + cp.Name })
	}},
	{"forks", func(ctx context.Context, ts *tenantStore) iter.Seq2[string, error] {
		return idsOf(forkIndex(ts).Forks(ctx, "x"), recordID)
	}},
	{"descendants", func(ctx context.Context, ts *tenantStore) iter.Seq2[string, error] {
		return idsOf(descendantIndex(ts).Descendants(ctx, "x"), recordID)
	}},
}

// newScripted returns a store that lists three of tenant a's records,
// history entries and checkpoints (after err, if not nil), and tenant a's
// view of it.
func newScripted(err error) (*scriptedStore, *tenantStore) {
	s := &scriptedStore{MemoryStore: NewMemoryStore()}
	if err != nil {
		s.records = append(s.records, scriptedItem[*Record]{err: err})
		s.history = append(s.history, scriptedItem[HistoryEntry]{err: err})
		s.checkpoints = append(s.checkpoints, scriptedItem[Checkpoint]{err: err})
	}
	for _, id := range []string{"x1", "x2", "x3"} {
		s.records = append(s.records, scriptedItem[*Record]{v: &Record{ID: "a/" + id, Tenant: "a"}})
		s.history = append(s.history, scriptedItem[HistoryEntry]{v: HistoryEntry{Commit: "c_" + id}})
		s.checkpoints = append(s.checkpoints, scriptedItem[Checkpoint]{v: Checkpoint{Thread: "a/x", Name: id}})
	}
	return s, newTenantStore(s, "a")
}

// TestTenantListingsStop checks that each listing a tenant's store wraps
// calls yield no more once it returned false, and stops the store's
// listing under it too (which closes its rows).
func TestTenantListingsStop(t *testing.T) {
	for _, l := range tenantListings {
		for n := 1; n <= 2; n++ {
			s, ts := newScripted(nil)
			calls := 0
			l.seq(t.Context(), ts)(func(string, error) bool {
				calls++
				return calls < n
			})
			if calls != n {
				t.Errorf("%s: yield returned false on call %d, and was called %d times", l.name, n, calls)
			}
			if !s.stopped {
				t.Errorf("%s: the store's listing went on after the caller stopped", l.name)
			}
		}
		// A caller that never stops sees all three.
		_, ts := newScripted(nil)
		var got []string
		for id, err := range l.seq(t.Context(), ts) {
			if err != nil {
				t.Fatalf("%s: %v", l.name, err)
			}
			got = append(got, id)
		}
		if len(got) != 3 {
			t.Errorf("%s: %q, want three", l.name, got)
		}
	}
}

// TestTenantListingsStopAfterError checks that each listing a tenant's
// store wraps yields the store's error, as errors.Is sees it, and nothing
// after it, even to a caller that would go on.
func TestTenantListingsStopAfterError(t *testing.T) {
	boom := errors.New("boom")
	for _, l := range tenantListings {
		_, ts := newScripted(boom)
		var got []error
		l.seq(t.Context(), ts)(func(_ string, err error) bool {
			got = append(got, err)
			return true
		})
		if len(got) != 1 || !errors.Is(got[0], boom) {
			t.Errorf("%s: yielded %v, want boom and nothing after it", l.name, got)
		}
	}
}

// TestTenantListingsIDs checks that a tenant sees ids, not the store's
// keys, and none of another tenant's records even from an index that
// yields them.
func TestTenantListingsIDs(t *testing.T) {
	s, ts := newScripted(nil)
	s.records = []scriptedItem[*Record]{
		{v: &Record{ID: "b/y", Tenant: "b"}},
		{v: &Record{ID: "y", Tenant: ""}},
		{v: &Record{ID: "a/y", Tenant: "a", ForkedFrom: ForkPoint{Thread: "a/x"}}},
		{v: &Record{ID: "ab/y", Tenant: "ab"}},
	}
	want := map[string][]string{
		"threads":     {"y"}, // another tenant's record a store lets through is dropped
		"history":     {"c_x1", "c_x2", "c_x3"},
		"checkpoints": {"x#x1", "x#x2", "x#x3"},
		"forks":       {"y"},
		"descendants": {"y"},
	}
	for _, l := range tenantListings {
		var got []string
		for id, err := range l.seq(t.Context(), ts) {
			if err != nil {
				t.Fatalf("%s: %v", l.name, err)
			}
			got = append(got, id)
		}
		if diff := cmp.Diff(want[l.name], got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", l.name, diff)
		}
	}
	for r, err := range forkIndex(ts).Forks(t.Context(), "x") {
		if err != nil || r.ForkedFrom.Thread != "x" {
			t.Errorf("fork %v (%v): ForkedFrom %q, want x", r, err, r.ForkedFrom.Thread)
		}
	}
}

// tenantFixture is a memory store with a thread "x" of three commits and
// three checkpoints, and three forks of it, in each of the tenants "",
// "a" and "b"; the messages of each tenant's "x" name the tenant.
func tenantFixture(t *testing.T) (db *DB, tenants map[string]*DB) {
	t.Helper()
	ctx := t.Context()
	db = New(NewMemoryStore(), nil)
	tenants = map[string]*DB{"": db, "a": db.WithTenant("a"), "b": db.WithTenant("b")}
	for name, tdb := range tenants {
		th, err := tdb.Create(ctx, CreateOptions{ID: "x", Kind: KindLocal})
		if err != nil {
			t.Fatal(err)
		}
		for _, cp := range []string{"cp1", "cp2", "cp3"} {
			if _, err := th.Append(ctx, message.User("tenant "+name+" before "+cp)); err != nil {
				t.Fatal(err)
			}
			if _, err := th.Checkpoint(ctx, cp); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range []string{"f1", "f2", "f3"} {
			if _, err := th.Fork(ctx, ForkOptions{ID: id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return db, tenants
}

// TestTenantEarlyBreak breaks out of each of a tenant DB's listings after
// the first value: the listing must stop there (Go panics if it goes on),
// and the value must be the tenant's own.
func TestTenantEarlyBreak(t *testing.T) {
	ctx := t.Context()
	_, tenants := tenantFixture(t)
	a := tenants["a"]
	for th, err := range a.Threads(ctx, ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if r := th.Record(); r.Tenant != "a" || !slices.Contains([]string{"x", "f1", "f2", "f3"}, r.ID) {
			t.Errorf("tenant a's first thread: %+v", r)
		}
		break
	}
	th, err := a.Thread(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	for e, err := range th.History(ctx, HistoryOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Version == 0 {
			t.Errorf("history entry %+v", e)
		}
		break
	}
	for cp, err := range th.Checkpoints(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if cp.Thread != "x" || cp.Name != "cp1" {
			t.Errorf("tenant a's first checkpoint: %+v, want x's cp1", cp)
		}
		break
	}
	for r, err := range forkIndex(a.store).Forks(ctx, "x") {
		if err != nil {
			t.Fatal(err)
		}
		if r.Tenant != "a" || r.ForkedFrom.Thread != "x" {
			t.Errorf("tenant a's first fork: %+v", r)
		}
		break
	}

	// The tenant's family, listings and search hold its own, by id.
	root, family, err := a.Family(ctx, "f2")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range family {
		got = append(got, r.Tenant+":"+r.ID)
	}
	slices.Sort(got)
	if diff := cmp.Diff([]string{"a:f1", "a:f2", "a:f3", "a:x"}, got); root != "x" || diff != "" {
		t.Errorf("tenant a's family: root %q (-want +got):\n%s", root, diff)
	}
	got = nil
	for th, err := range a.Threads(ctx, ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, th.ID())
	}
	slices.Sort(got)
	if diff := cmp.Diff([]string{"f1", "f2", "f3", "x"}, got); diff != "" {
		t.Errorf("tenant a's threads (-want +got):\n%s", diff)
	}
	// A page at a time, after the last id of the page before.
	got, after := nil, ""
	for {
		var page []string
		for th, err := range a.Threads(ctx, ListOptions{After: after, Limit: 1}) {
			if err != nil {
				t.Fatal(err)
			}
			page = append(page, th.ID())
		}
		if len(page) == 0 {
			break
		}
		if len(got) > 4 {
			t.Fatalf("paging goes on: %q", got)
		}
		got, after = append(got, page...), page[len(page)-1]
	}
	if diff := cmp.Diff([]string{"f1", "f2", "f3", "x"}, got); diff != "" {
		t.Errorf("tenant a's threads a page at a time (-want +got):\n%s", diff)
	}
	hits, err := a.Search(ctx, SearchQuery{Text: "tenant before cp2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hits {
		if h.Message.Text() != "tenant a before cp2" {
			t.Errorf("tenant a's search found %q in %s", h.Message.Text(), h.Thread)
		}
	}
	if len(hits) == 0 {
		t.Error("tenant a's search found nothing")
	}
}

// checkpointNames returns the checkpoints of each tenant's thread "x".
func checkpointNames(t *testing.T, tenants map[string]*DB) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for name, tdb := range tenants {
		th, err := tdb.Thread(t.Context(), "x")
		if err != nil {
			t.Fatal(err)
		}
		out[name] = []string{}
		for cp, err := range th.Checkpoints(t.Context()) {
			if err != nil {
				t.Fatal(err)
			}
			if cp.Thread != "x" {
				t.Errorf("tenant %q: checkpoint %s of thread %q, want x", name, cp.Name, cp.Thread)
			}
			out[name] = append(out[name], cp.Name)
		}
	}
	return out
}

// TestTenantDropCheckpoint checks that a tenant that drops a checkpoint
// drops its own, by DeleteCheckpoint or in a Group, and that no tenant
// touches another's checkpoint of the same thread id and name.
func TestTenantDropCheckpoint(t *testing.T) {
	ctx := t.Context()
	_, tenants := tenantFixture(t)
	want := map[string][]string{"": {"cp1", "cp2", "cp3"}, "a": {"cp1", "cp2", "cp3"}, "b": {"cp1", "cp2", "cp3"}}
	check := func(what string) {
		t.Helper()
		if diff := cmp.Diff(want, checkpointNames(t, tenants)); diff != "" {
			t.Fatalf("after %s (-want +got):\n%s", what, diff)
		}
	}
	check("nothing")

	a, err := tenants["a"].Thread(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteCheckpoint(ctx, "cp2"); err != nil {
		t.Fatal(err)
	}
	want["a"] = []string{"cp1", "cp3"}
	check("tenant a deletes cp2")
	if err := a.DeleteCheckpoint(ctx, "cp2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("tenant a deletes cp2 again: %v, want ErrNotFound", err)
	}
	check("tenant a deletes cp2 again")

	b, err := tenants["b"].Thread(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	g := tenants["b"].Group()
	if err := g.DropCheckpoint(ctx, b, "cp1"); err != nil {
		t.Fatal(err)
	}
	if err := g.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	want["b"] = []string{"cp2", "cp3"}
	check("tenant b drops cp1 in a group")

	// The default tenant drops its own, not a's or b's "x".
	def, err := tenants[""].Thread(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := def.DeleteCheckpoint(ctx, "cp3"); err != nil {
		t.Fatal(err)
	}
	want[""] = []string{"cp1", "cp2"}
	check("the default tenant deletes cp3")

	// A tenant without "x" has no handle on another's.
	if _, err := tenants["a"].WithTenant("c").Thread(ctx, "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("tenant c opens x: %v, want ErrNotFound", err)
	}
	check("tenant c tries")
}
