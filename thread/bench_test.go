package thread_test

import (
	"testing"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/storetest"
)

func BenchmarkMemoryStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) thread.Store { return thread.NewMemoryStore() }, nil)
}
