package jsonfile

import (
	"context"
	"testing"

	"github.com/loomthreads/loom/internal/proctest"
	"github.com/loomthreads/loom/thread/store"
	"github.com/loomthreads/loom/thread/storetest"
)

func TestChildProcess(t *testing.T) { proctest.Child(t) }

func openTest(t testing.TB, dir string, opts *Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openTest(t, t.TempDir(), nil) }, &storetest.Options{
		Reopen: func(s store.Store) (store.Store, error) {
			fs := s.(*Store)
			if err := fs.Close(); err != nil {
				return nil, err
			}
			return Open(context.Background(), fs.Dir(), nil)
		},
	})
}

func TestCrash(t *testing.T) {
	proctest.Crash(t, "file://"+t.TempDir(), 10)
}

func TestConcurrentProcesses(t *testing.T) {
	proctest.Concurrent(t, "file://"+t.TempDir(), 3, 30)
}
