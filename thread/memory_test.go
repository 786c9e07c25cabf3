package thread_test

import (
	"testing"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
	"github.com/loomthreads/loom/thread/storetest"
)

func TestMemoryStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return thread.NewMemoryStore() }, nil)
}
