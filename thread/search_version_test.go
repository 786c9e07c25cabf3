package thread

import (
	"fmt"
	"testing"

	"github.com/loomthreads/loom/message"
)

// versionsOf searches db for q with SearchQuery.Versions and returns each
// hit's Version by its text.
func versionsOf(tb testing.TB, db *DB, q string) map[string]int64 {
	tb.Helper()
	hits, err := db.Search(tb.Context(), SearchQuery{Text: q, Versions: true})
	if err != nil {
		tb.Fatal(err)
	}
	got := map[string]int64{}
	for _, h := range hits {
		got[h.Message.Text()] = h.Version
	}
	return got
}

// appendText appends a user message of text to th.
func appendText(tb testing.TB, th *Thread, text string) {
	tb.Helper()
	if _, err := th.Append(tb.Context(), message.User(text)); err != nil {
		tb.Fatal(err)
	}
}

// TestSearchVersions: a hit whose message the head holds has no Version;
// one whose message only a rolled-back version held names the newest
// version that held it, which shows the message; a restore puts it back in
// the head, a reset takes it out again; without Versions, no hit has one.
func TestSearchVersions(t *testing.T) {
	ctx := t.Context()
	db := New(NewMemoryStore(), nil)
	th, err := db.Create(ctx, CreateOptions{ID: "th"})
	if err != nil {
		t.Fatal(err)
	}
	appendText(t, th, "kept aardvark") // v2
	if _, err := th.Checkpoint(ctx, "before"); err != nil {
		t.Fatal(err)
	}
	appendText(t, th, "lost zebra")                    // v3
	appendText(t, th, "lost walrus")                   // v4
	if err := th.Rollback(ctx, "before"); err != nil { // v5
		t.Fatal(err)
	}
	appendText(t, th, "new aardvark") // v6

	for _, q := range []string{"zebra", "walrus"} {
		if got := versionsOf(t, db, q); len(got) != 1 || got["lost "+q] != 4 {
			t.Errorf("%s: %v, want lost %s at version 4", q, got, q)
		}
	}
	msgs, err := th.Messages(ctx, ReadOptions{Version: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 3 || msgs[1].Text() != "lost zebra" || msgs[2].Text() != "lost walrus" {
		t.Errorf("version 4 holds %d messages: %+v", len(msgs), msgs)
	}
	if got := versionsOf(t, db, "aardvark"); len(got) != 2 || got["kept aardvark"] != 0 || got["new aardvark"] != 0 {
		t.Errorf("aardvark: %v, want both without a version", got)
	}
	hits, err := db.Search(ctx, SearchQuery{Text: "zebra"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].Version != 0 {
		t.Errorf("zebra without Versions: %+v, want one hit without a version", hits)
	}

	if err := th.Restore(ctx, 4); err != nil { // v7
		t.Fatal(err)
	}
	if got := versionsOf(t, db, "zebra"); got["lost zebra"] != 0 {
		t.Errorf("zebra restored: %v, want no version", got)
	}
	if err := th.Reset(ctx); err != nil { // v8
		t.Fatal(err)
	}
	if got := versionsOf(t, db, "zebra"); got["lost zebra"] != 7 {
		t.Errorf("zebra after a reset: %v, want version 7", got)
	}
	if err := th.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if got := versionsOf(t, db, "zebra"); len(got) != 0 {
		t.Errorf("zebra of a deleted thread: %v", got)
	}
}

// TestSearchVersionsBounded: a hit deeper than a walk may go, or older
// than the history entries a hit may read, is taken to be in the head (no
// Version); one within both is still placed.
func TestSearchVersionsBounded(t *testing.T) {
	ctx := t.Context()
	db := New(NewMemoryStore(), nil)
	th, err := db.Create(ctx, CreateOptions{ID: "th"})
	if err != nil {
		t.Fatal(err)
	}
	appendText(t, th, "base")       // v2
	appendText(t, th, "deep zebra") // v3
	if _, err := th.Checkpoint(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	appendText(t, th, "lost zebra")               // v4
	if err := th.Rollback(ctx, "c"); err != nil { // v5
		t.Fatal(err)
	}
	for i := range 5 {
		appendText(t, th, fmt.Sprint("filler ", i)) // v6…v10
	}
	hits, err := db.Search(ctx, SearchQuery{Text: "zebra"})
	if err != nil {
		t.Fatal(err)
	}
	// The head's line is 7 commits long down to the first message (base,
	// deep zebra, 5 fillers): a walk of 5 reaches the depth of the lost
	// zebra, which is placed (v4), a walk of 4 does not. The newest history
	// entry that held it is the 6th before the head: a hit that may read 5
	// entries does not reach it. The deep one, in the head, never has a
	// version.
	for _, c := range []struct {
		b    hitBounds
		lost int64
	}{
		{hitBounds{walk: 4, history: 100}, 0},
		{hitBounds{walk: 5, history: 100}, 4},
		{hitBounds{walk: 100, history: 5}, 0},
		{hitBounds{walk: 100, history: 6}, 4},
		{searchBounds(), 4},
	} {
		if err := db.placeHits(ctx, hits, c.b); err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, h := range hits {
			got[h.Message.Text()] = h.Version
		}
		if len(got) != 2 || got["lost zebra"] != c.lost || got["deep zebra"] != 0 {
			t.Errorf("%+v: hits %v, want lost zebra at %d and deep zebra without a version", c.b, got, c.lost)
		}
	}
}

// BenchmarkSearchVersions: what SearchQuery.Versions adds to a search of
// 20 hits, each in a thread of 200 messages whose head holds it (the
// common case: one walk of the head's line per thread), and with every
// hit rolled back out of its head (history read and walked per hit).
func BenchmarkSearchVersions(b *testing.B) {
	for _, rolled := range []bool{false, true} {
		ctx := b.Context()
		db := New(NewMemoryStore(), nil)
		for i := range 20 {
			th, err := db.Create(ctx, CreateOptions{ID: fmt.Sprintf("t%02d", i)})
			if err != nil {
				b.Fatal(err)
			}
			for j := range 199 {
				appendText(b, th, fmt.Sprintf("filler %d", j))
			}
			if rolled {
				if _, err := th.Checkpoint(ctx, "before"); err != nil {
					b.Fatal(err)
				}
			}
			appendText(b, th, "the needle")
			if rolled {
				if err := th.Rollback(ctx, "before"); err != nil {
					b.Fatal(err)
				}
			}
		}
		name := "in-head"
		if rolled {
			name = "rolled-back"
		}
		for _, versions := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/versions=%t", name, versions), func(b *testing.B) {
				for b.Loop() {
					hits, err := db.Search(ctx, SearchQuery{Text: "needle", Limit: 20, Versions: versions})
					if err != nil || len(hits) != 20 {
						b.Fatal(len(hits), err)
					}
				}
			})
		}
	}
}
