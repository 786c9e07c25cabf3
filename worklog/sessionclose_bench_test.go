package worklog

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/loomthreads/loom/thread"
)

// BenchmarkSessionCloseOpenThreads closes a session that carries n new
// open items (plain strings, so each gets a fresh id), on an empty local
// file and on an empty work log in threads: its cost must grow linearly
// with n (issue 22 measured 0.23 / 0.91 / 2.35 / 9.27 s at 5k / 10k / 20k
// / 40k before it did).
func BenchmarkSessionCloseOpenThreads(b *testing.B) {
	for _, store := range []string{"file", "thread"} {
		for _, n := range []int{5_000, 10_000, 20_000, 40_000} {
			open := make([]json.RawMessage, n)
			for i := range open {
				open[i] = json.RawMessage(fmt.Sprintf(`"Open question %d about the migration of the billing service"`, i))
			}
			b.Run(fmt.Sprintf("%s/items=%d", store, n), func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					var l *Log
					var err error
					if store == "file" {
						l, err = Open(filepath.Join(b.TempDir(), ".gitmem"), &Options{NoSync: true})
					} else {
						db := thread.New(thread.NewMemoryStore(), nil)
						l, err = OpenDB(db, nil)
					}
					if err != nil {
						b.Fatal(err)
					}
					start, err := l.SessionStart(b.Context(), StartOptions{})
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					res, err := l.SessionClose(b.Context(), CloseOptions{SessionID: start.SessionID, OpenThreads: open})
					if err != nil {
						b.Fatal(err)
					}
					if len(res.Created) != n {
						b.Fatalf("%d items created, want %d", len(res.Created), n)
					}
				}
			})
		}
	}
}
