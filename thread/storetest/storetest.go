// Package storetest is the conformance suite that every store.Store runs.
//
// A store's test is a few lines:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s, err := mystore.Open(t.TempDir())
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		}, &storetest.Options{
//			Reopen: func(s store.Store) (store.Store, error) {
//				ms := s.(*mystore.Store)
//				if err := ms.Close(); err != nil {
//					return nil, err
//				}
//				return mystore.Open(ms.Dir())
//			},
//		})
//	}
//
// The suite checks every invariant of a thread store: immutable commits,
// atomic batches, compare-and-swap heads under many goroutines (exactly one
// winner per version, no lost appends), deep fork chains, delete with shared
// prefixes, hostile ids, large messages, history and checkpoints across
// rollbacks and resets, state, listing with filters and paging, the portable
// document, and, for durable stores, that everything reads back the same after
// a close and reopen.
package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/loomthreads/loom/thread/store"
)

// Options tune the suite. A nil *Options runs it with the defaults.
type Options struct {
	// Reopen closes s and opens the same durable data again. Stores that
	// keep nothing after close leave it nil, and the reopen case is skipped.
	Reopen func(s store.Store) (store.Store, error)
	// Writers is the number of goroutines racing on one thread; default 32.
	Writers int
	// ForkDepth is the length of the fork chain; default 1,000.
	ForkDepth int
}

// T is the part of *testing.T the cases use, so that the suite's own tests
// can run a case against a broken store and see it fail.
type T interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Context() context.Context
}

type suiteCase struct {
	name string
	run  func(t T, s store.Store, o *Options)
}

// Run runs every case of the suite, each on a fresh store from newStore.
func Run(t *testing.T, newStore func(t *testing.T) store.Store, opts *Options) {
	o := withDefaults(opts)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, newStore(t), o)
		})
	}
	t.Run("Reopen", func(t *testing.T) {
		if o.Reopen == nil {
			t.Skip("the store keeps nothing after close")
		}
		reopen(t, newStore(t), o)
	})
}

func withDefaults(opts *Options) *Options {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Writers <= 0 {
		o.Writers = 32
	}
	if o.ForkDepth <= 0 {
		o.ForkDepth = 1000
	}
	return &o
}

var cases = []suiteCase{
	{"CommitsAreImmutable", commitsAreImmutable},
	{"BatchIsAtomic", batchIsAtomic},
	{"CreateAndRead", createAndRead},
	{"AppendAndRead", appendAndRead},
	{"EveryContentSurvives", everyContentSurvives},
	{"CASOneWinnerPerVersion", casOneWinnerPerVersion},
	{"ConcurrentAppendsLoseNothing", concurrentAppendsLoseNothing},
	{"ForkAtMessage", forkAtMessage},
	{"MessageIDsOncePerThread", messageIDsOncePerThread},
	{"DeepForkChain", deepForkChain},
	{"DeleteKeepsSharedPrefixes", deleteKeepsSharedPrefixes},
	{"HostileIDs", hostileIDs},
	{"LargeMessages", largeMessages},
	{"HistoryAcrossRollbacks", historyAcrossRollbacks},
	{"Checkpoints", checkpoints},
	{"StateIsVersioned", stateIsVersioned},
	{"ListFiltersAndPaging", listFiltersAndPaging},
	{"ListByUpdated", listByUpdated},
	{"ListInternal", listInternal},
	{"Forks", forks},
	{"LabelIndex", labelIndex},
	{"SaveLoadRoundTrip", saveLoadRoundTrip},
	{"CopyInAndOut", copyInAndOut},
	{"BadBatches", badBatches},
	{"CheckpointAloneKeepsCommits", checkpointAloneKeepsCommits},
	{"TenantNamespaces", tenantNamespaces},
	{"TenantErrorsNameIDs", tenantErrorsNameIDs},
	{"Groups", groups},
	{"Search", search},
	{"Watch", watch},
	{"RetentionTTL", retentionTTL},
	{"RetentionKeepLast", retentionKeepLast},
	{"RetentionForkKeepsShared", retentionForkKeepsShared},
	{"RetentionPruneRules", retentionPruneRules},
	{"RetentionGCAfterCrash", retentionGCAfterCrash},
	{"RetentionLinkedKeepsNamed", retentionLinkedKeepsNamed},
	{"RetentionNamedLivesWithNamer", retentionNamedLivesWithNamer},
}

// recorder is a T that records failures instead of failing, for running a
// case against a store that is supposed to fail it.
type recorder struct {
	ctx    context.Context
	mu     sync.Mutex
	failed []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Logf(string, ...any)       {}
func (r *recorder) Context() context.Context  { return r.ctx }
func (r *recorder) Errorf(f string, a ...any) { r.record(f, a...) }
func (r *recorder) Fatalf(f string, a ...any) { r.record(f, a...); panic(fatal{}) }
func (r *recorder) record(f string, a ...any) {
	r.mu.Lock()
	r.failed = append(r.failed, fmt.Sprintf(f, a...))
	r.mu.Unlock()
}

type fatal struct{}

// runRecorded runs one case against s and returns the failures it reported.
func runRecorded(ctx context.Context, name string, s store.Store, opts *Options) []string {
	r := &recorder{ctx: ctx}
	all := append(cases, suiteCase{"Reopen", reopen})
	for _, c := range all {
		if c.name == name {
			func() {
				defer func() {
					if p := recover(); p != nil {
						if _, ok := p.(fatal); !ok {
							panic(p)
						}
					}
				}()
				c.run(r, s, withDefaults(opts))
			}()
			return r.failed
		}
	}
	panic("no case " + name)
}
