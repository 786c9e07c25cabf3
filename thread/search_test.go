package thread

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread/store"
)

func TestSearchTokens(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Hello, World!", []string{"hello", "world"}},
		{`{"city":"Paris"}`, []string{"city", "paris"}},
		{"Cloudy-ish 42nd", []string{"cloudy", "ish", "42nd"}},
		{"Ünïcödé café naïve", []string{"ünïcödé", "café", "naïve"}},
		{"日本語 テキスト", []string{"日本語", "テキスト"}},
		{"e\u0301 combining", []string{"e\u0301", "combining"}},
		{strings.Repeat("a", 70), []string{strings.Repeat("a", MaxSearchWordBytes)}},
		{strings.Repeat("é", 40), []string{strings.Repeat("é", MaxSearchWordBytes/2)}},
	} {
		if got := store.SearchTokens(c.in); !slices.Equal(got, c.want) {
			t.Errorf("store.SearchTokens(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// FuzzSearchTokens checks what every store relies on: tokens are valid,
// lower-cased runs of letters, digits and marks no longer than the cap,
// and tokenizing the tokens again gives them back (the index stores
// them joined by spaces and a query's words go through the same).
func FuzzSearchTokens(f *testing.F) {
	for _, s := range []string{"Hello, World!", "Ünïcödé", "a\u0301b", strings.Repeat("xé", 50), "\xff\xfe bad utf8", "İstanbul ǅ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks := store.SearchTokens(s)
		for _, w := range toks {
			if w == "" || len(w) > MaxSearchWordBytes || !utf8.ValidString(w) {
				t.Fatalf("token %q of %q", w, s)
			}
			for _, r := range w {
				if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.IsMark(r) {
					t.Fatalf("token %q of %q holds %q", w, s, r)
				}
			}
		}
		if again := store.SearchTokens(strings.Join(toks, " ")); !slices.Equal(again, toks) {
			t.Fatalf("tokens of %q: %q, then %q", s, toks, again)
		}
	})
}

func TestSearchText(t *testing.T) {
	m := message.New(message.RoleAssistant,
		message.Text{Text: "first"}, message.Reasoning{Text: "thinking"},
		message.FunctionCall{CallID: "c", Name: "lookup", Arguments: `{"q":"x"}`},
		message.FunctionResult{CallID: "c", Result: "found"}, message.Error{Message: "oops"},
		message.Data{MediaType: "image/png", Data: []byte("binary words")})
	if got, want := store.SearchText(m), "first\nthinking\nlookup {\"q\":\"x\"}\nfound\noops"; got != want {
		t.Errorf("store.SearchText = %q, want %q", got, want)
	}
}

func TestSnippet(t *testing.T) {
	long := strings.Repeat("lorem ipsum ", 40) + "needle " + strings.Repeat("dolor sit ", 40)
	s := snippet(long, []string{"needle"})
	if !strings.Contains(s, "needle") || !strings.HasPrefix(s, "…") || !strings.HasSuffix(s, "…") || utf8.RuneCountInString(s) > snippetRunes+2 {
		t.Errorf("snippet %q", s)
	}
	if s := snippet("short  text\nhere", []string{"text"}); s != "short text here" {
		t.Errorf("short snippet %q", s)
	}
	if s := snippet(strings.Repeat("é", 500), []string{"é"}); !utf8.ValidString(s) || !strings.HasSuffix(s, "…") {
		t.Errorf("snippet of runes %q", s)
	}
}

func TestCommitThreads(t *testing.T) {
	c := func(id, parent string) *Commit { return &Commit{ID: id, Parent: parent} }
	b := &store.Batch{
		Commits: []*Commit{c("a1", "old"), c("a2", "a1"), c("b1", "a2"), c("cp", "old"), c("lost", "")},
		Create:  []store.Creation{{Record: &Record{ID: "fork", Head: "b1"}}},
		Moves:   []store.Move{{Thread: "main", Head: "a2"}},
		Checkpoints: []Checkpoint{
			{Thread: "other", Name: "x", Commit: "cp"},
		},
	}
	got := b.CommitThreads()
	want := map[string]string{"b1": "fork", "a2": "fork", "a1": "fork", "cp": "other"}
	// The creation comes first, so the fork claims the shared commits;
	// "lost" is reached by nothing.
	if len(got) != len(want) {
		t.Fatalf("CommitThreads = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("CommitThreads[%s] = %q, want %q", k, got[k], v)
		}
	}
}

// TestScanSearchPages checks the scan's paging where it keeps only a
// page's worth of matches: every match once, newest first.
func TestScanSearchPages(t *testing.T) {
	ctx := t.Context()
	tick := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	db := New(NewMemoryStore(), &Options{Now: func() time.Time { tick = tick.Add(time.Millisecond); return tick }})
	var want []string
	for i := range 3 {
		th, err := db.Create(ctx, CreateOptions{ID: fmt.Sprintf("p%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		for j := range 100 {
			text := fmt.Sprintf("needle %d.%d", i, j)
			if _, err := th.Append(ctx, message.User(text), message.User("hay")); err != nil {
				t.Fatal(err)
			}
			want = append(want, text)
		}
	}
	slices.Reverse(want)
	var got []string
	before := ""
	for range 100 {
		hits, err := db.Search(ctx, SearchQuery{Text: "needle", Limit: 7, Before: before})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hits {
			got = append(got, h.Message.Text())
		}
		if len(hits) < 7 {
			break
		}
		before = hits[len(hits)-1].Cursor
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %d hits, want %d; first %q", len(got), len(want), got[:min(5, len(got))])
	}
}

// commitCounter counts the commits read from a MemoryStore.
type commitCounter struct {
	*MemoryStore
	reads int
}

func (s *commitCounter) Commit(ctx context.Context, id string) (*Commit, error) {
	s.reads++
	return s.MemoryStore.Commit(ctx, id)
}

// TestSearchReadsCommitOnce: the hits in one commit read it once.
func TestSearchReadsCommitOnce(t *testing.T) {
	ctx := t.Context()
	s := &commitCounter{MemoryStore: NewMemoryStore()}
	db := New(s, nil)
	th, err := db.Create(ctx, CreateOptions{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []message.Message
	for i := range 10 {
		msgs = append(msgs, message.User(fmt.Sprint("needle ", i)))
	}
	if _, err := th.Append(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	if _, err := th.Append(ctx, message.User("needle again")); err != nil {
		t.Fatal(err)
	}
	s.reads = 0
	hits, err := db.Search(ctx, SearchQuery{Text: "needle"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 11 || hits[0].Message.Text() != "needle again" || hits[1].Message.Text() != "needle 9" || hits[10].Message.Text() != "needle 0" {
		t.Fatalf("%d hits: %+v", len(hits), hits)
	}
	if s.reads != 2 {
		t.Errorf("%d commits read for hits in 2", s.reads)
	}
}
