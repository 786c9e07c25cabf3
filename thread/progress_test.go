package thread_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// TestLoadProgress: Load reports after each commit it builds, with the
// messages done growing to the document's total, and last once the thread
// is written; a failed Load never reports it written.
func TestLoadProgress(t *testing.T) {
	for _, history := range []bool{false, true} {
		t.Run(map[bool]string{false: "line", true: "history"}[history], func(t *testing.T) {
			ctx := t.Context()
			var doc bytes.Buffer
			must(t, goldenThread(t).Save(ctx, &doc, thread.SaveOptions{History: history}))
			var got []thread.LoadProgress
			db := thread.New(thread.NewMemoryStore(), nil)
			th, err := db.Load(ctx, bytes.NewReader(doc.Bytes()), thread.LoadOptions{
				ID:       "copy",
				Progress: func(p thread.LoadProgress) { got = append(got, p) },
			})
			must(t, err)
			if len(got) < 2 {
				t.Fatalf("%d reports: %+v", len(got), got)
			}
			last := got[len(got)-1]
			for i, p := range got[:len(got)-1] {
				if p.Written || p.Commits != i+1 || p.Done > p.Total || p.Total != last.Total ||
					(i > 0 && p.Done < got[i-1].Done) {
					t.Errorf("report %d of %+v", i, got)
				}
			}
			if before := got[len(got)-2]; !last.Written || last.Done != last.Total || last.Commits != before.Commits || last.Done != before.Done {
				t.Errorf("last report %+v after %+v", last, before)
			}
			// The line holds 6 messages; with history, the commits hold
			// each of the 7 messages once.
			if want := map[bool]int{false: 6, true: 7}[history]; last.Total != want {
				t.Errorf("Total %d, want %d", last.Total, want)
			}
			if n, err := th.Len(ctx); err != nil || int(n) != 6 {
				t.Errorf("loaded %d messages, %v", n, err)
			}

			// Loaded again under the same id: a conflict, never written.
			got = nil
			_, err = db.Load(ctx, bytes.NewReader(doc.Bytes()), thread.LoadOptions{
				ID:       "copy",
				Progress: func(p thread.LoadProgress) { got = append(got, p) },
			})
			if !errors.Is(err, thread.ErrConflict) {
				t.Fatalf("second load: %v", err)
			}
			for _, p := range got {
				if p.Written {
					t.Errorf("a failed load reported %+v", p)
				}
			}
		})
	}
}

// TestLoadProgressSplitsLongLines: a line longer than MessagesPerCommit is
// built in pieces, one report each.
func TestLoadProgressSplitsLongLines(t *testing.T) {
	ctx := t.Context()
	src := thread.New(thread.NewMemoryStore(), nil)
	th, err := src.Create(ctx, thread.CreateOptions{Kind: thread.KindLocal})
	must(t, err)
	for range 5 {
		_, err := th.Append(ctx, message.User("a"), message.User("b"))
		must(t, err)
	}
	var doc bytes.Buffer
	must(t, th.Save(ctx, &doc, thread.SaveOptions{}))
	var got []thread.LoadProgress
	db := thread.New(thread.NewMemoryStore(), &thread.Options{Limits: thread.Limits{MessagesPerCommit: 4}})
	_, err = db.Load(ctx, &doc, thread.LoadOptions{Progress: func(p thread.LoadProgress) { got = append(got, p) }})
	must(t, err)
	want := []thread.LoadProgress{
		{Done: 4, Total: 10, Commits: 1},
		{Done: 8, Total: 10, Commits: 2},
		{Done: 10, Total: 10, Commits: 3},
		{Done: 10, Total: 10, Commits: 3, Written: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reports (-want +got):\n%s", diff)
	}
}

func TestReportMigration(t *testing.T) {
	// Without a callback: nothing happens.
	store.ReportMigration(t.Context(), thread.MigrationProgress{Store: "x", Done: 1, Total: 2})

	var got []thread.MigrationProgress
	ctx := thread.WithMigrationProgress(t.Context(), func(p thread.MigrationProgress) { got = append(got, p) })
	ctx, cancel := context.WithCancel(ctx) // derived contexts carry it
	defer cancel()
	want := []thread.MigrationProgress{
		{Store: "redis", Step: "tenant keys", Done: 1, Total: 2},
		{Store: "redis", Step: "tenant keys", Done: 2, Total: 2},
	}
	for _, p := range want {
		store.ReportMigration(ctx, p)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reports (-want +got):\n%s", diff)
	}
}

// A program that wants to see a store migrate as it opens passes a
// callback in the context of Open; the store reports to it with
// ReportMigration, as here.
func ExampleWithMigrationProgress() {
	ctx := thread.WithMigrationProgress(context.Background(), func(p thread.MigrationProgress) {
		fmt.Printf("%s, %s: %d/%d threads\n", p.Store, p.Step, p.Done, p.Total)
	})
	// db, err := thread.Open(ctx, "redis://…", nil) migrates, if the data
	// is older, reporting after each thread:
	for i := 1; i <= 2; i++ {
		store.ReportMigration(ctx, thread.MigrationProgress{Store: "redis", Step: "tenant keys", Done: i, Total: 2})
	}
	// Output:
	// redis, tenant keys: 1/2 threads
	// redis, tenant keys: 2/2 threads
}
