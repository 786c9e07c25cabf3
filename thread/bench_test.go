package thread_test

import (
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
	"github.com/loomthreads/loom/thread/storetest"
)

func BenchmarkMemoryStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store { return thread.NewMemoryStore() }, nil)
}

// BenchmarkTenant measures what a tenant's namespace costs: the same append
// and read of the last 50 messages through the default tenant's DB and
// through a tenant's (whose ids become keys on the way to the store). The
// memory store makes the difference as visible as it can be.
func BenchmarkTenant(b *testing.B) {
	for _, tenant := range []string{"", "alice"} {
		name := "default"
		if tenant != "" {
			name = "tenant"
		}
		db := thread.New(thread.NewMemoryStore(), &thread.Options{Tenant: tenant})
		th, err := db.Create(b.Context(), thread.CreateOptions{ID: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		b.Run("Append/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := th.Append(b.Context(), message.User("hello")); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("GetLast50/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h, err := db.Thread(b.Context(), "bench")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := h.Messages(b.Context(), thread.ReadOptions{Last: 50}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendMetadata appends a message with a little metadata, as
// agents write it (a run id, usage): its depth is checked on the values,
// not on their JSON.
func BenchmarkAppendMetadata(b *testing.B) {
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := db.Create(b.Context(), thread.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		m := message.User("hello")
		m.Metadata = map[string]any{"run": "run_1", "usage": map[string]any{"in": 12, "out": 34}, "tags": []any{"a", "b"}}
		if _, err := th.Append(b.Context(), m); err != nil {
			b.Fatal(err)
		}
	}
}
