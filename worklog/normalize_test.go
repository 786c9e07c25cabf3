package worklog

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

var (
	t0      = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	normOpt = NormalizeOptions{Session: "sess-1", Time: t0}
)

// TestNormalize has one case per row of the normalization table of
// spec/worklog.md, named after the row, then the cases around them.
// "fresh" in want.ID means a new id of the form NewID makes.
func TestNormalize(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want Item
	}{
		// The rows of the table.
		{
			name: "plain string",
			in:   `"Fix the bug"`,
			want: Item{ID: "fresh", Text: "Fix the bug", Status: StatusOpen, CreatedAt: t0, SourceSession: "sess-1"},
		},
		{
			name: "full item object",
			in: `{"id":"t-05a7ecb6","text":"Phase 2 release pending","status":"open","created_at":"2026-02-09T18:12:01.097Z",` +
				`"source_session":"c2d841be"}`,
			want: Item{ID: "t-05a7ecb6", Text: "Phase 2 release pending", Status: StatusOpen,
				CreatedAt: time.Date(2026, 2, 9, 18, 12, 1, 97e6, time.UTC), SourceSession: "c2d841be"},
		},
		{
			name: "JSON string of an item",
			in:   `"{\"id\":\"t-abc\",\"text\":\"Ship it\",\"status\":\"open\"}"`,
			want: Item{ID: "t-abc", Text: "Ship it", Status: StatusOpen, CreatedAt: t0},
		},
		{
			name: "JSON string with note",
			in: `"{\"id\":\"t-0000beef\",\"note\":\"Rotate the keys\",\"status\":\"resolved\",\"created_at\":\"2026-01-02T03:04:05.006Z\",` +
				`\"resolved_at\":\"2026-01-03T00:00:00.000Z\",\"source_session\":\"s-old\"}"`,
			want: Item{ID: "t-0000beef", Text: "Rotate the keys", Status: StatusResolved,
				CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC), ResolvedAt: time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC),
				SourceSession: "s-old"},
		},
		{
			name: "legacy item and context, JSON string",
			in:   `"{\"item\":\"Review the migration\",\"context\":\"from the standup\"}"`,
			want: Item{ID: "fresh", Text: "Review the migration", Status: StatusOpen, CreatedAt: t0, SourceSession: "sess-1"},
		},
		{
			name: "legacy item and context, object",
			in:   `{"item":"Review the migration","context":"from the standup"}`,
			want: Item{ID: "fresh", Text: "Review the migration", Status: StatusOpen, CreatedAt: t0, SourceSession: "sess-1"},
		},
		{
			name: "invalid JSON string that starts with a brace",
			in:   `"{not json, \"text\": oops"`,
			want: Item{ID: "fresh", Text: `{not json, "text": oops`, Status: StatusOpen, CreatedAt: t0, SourceSession: "sess-1"},
		},
		{
			name: "text with an old id prefix",
			in:   `{"id":"t-11112222","text":"t-abcd: Rename the flag","status":"open","created_at":"2026-02-01T00:00:00.000Z"}`,
			want: Item{ID: "t-11112222", Text: "Rename the flag", Status: StatusOpen, CreatedAt: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)},
		},
		{
			name: "object whose text is itself a JSON item",
			in: `{"id":"t-99998888","text":"{\"id\":\"t-12345678\",\"text\":\"Inner work\",\"status\":\"open\"}","status":"open",` +
				`"created_at":"2026-02-05T00:00:00.000Z","source_session":"s-wrap"}`,
			want: Item{ID: "t-12345678", Text: "Inner work", Status: StatusOpen, CreatedAt: time.Date(2026, 2, 5, 0, 0, 0, 0, time.UTC),
				SourceSession: "s-wrap"},
		},

		// Around the rows.
		{
			name: "plain string with an old prefix gives its id",
			in:   `"t-05a7ecb6: Phase 2 release pending"`,
			want: Item{ID: "t-05a7ecb6", Text: "Phase 2 release pending", Status: StatusOpen, CreatedAt: t0, SourceSession: "sess-1"},
		},
		{
			name: "plain string with a short old prefix",
			in:   `"  t-ab12: t-cd34: Two prefixes  "`,
			want: Item{ID: "fresh", Text: "Two prefixes", Status: StatusOpen, CreatedAt: t0, SourceSession: "sess-1"},
		},
		{
			name: "plain string that is not a prefix",
			in:   `"t-rex: a dinosaur"`,
			want: Item{ID: "fresh", Text: "t-rex: a dinosaur", Status: StatusOpen, CreatedAt: t0, SourceSession: "sess-1"},
		},
		{
			name: "JSON string of an object without a text",
			in:   `"{\"foo\":1}"`,
			want: Item{ID: "fresh", Text: `{"foo":1}`, Status: StatusOpen, CreatedAt: t0, SourceSession: "sess-1"},
		},
		{
			name: "object with note",
			in:   `{"id":"t-0000beef","note":"Rotate the keys","status":"open"}`,
			want: Item{ID: "t-0000beef", Text: "Rotate the keys", Status: StatusOpen, CreatedAt: t0},
		},
		{
			name: "status in capitals",
			in:   `{"id":"t-1","text":"x","status":"RESOLVED","created_at":"2026-02-01T00:00:00Z"}`,
			want: Item{ID: "t-1", Text: "x", Status: StatusResolved, CreatedAt: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)},
		},
		{
			name: "unknown status",
			in:   `{"id":"t-1","text":"x","status":"blocked","created_at":"2026-02-01T00:00:00Z"}`,
			want: Item{ID: "t-1", Text: "x", Status: StatusOpen, CreatedAt: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)},
		},
		{
			name: "no status but resolved_at",
			in:   `{"id":"t-1","text":"x","resolved_at":"2026-02-02T00:00:00+02:00"}`,
			want: Item{ID: "t-1", Text: "x", Status: StatusResolved, CreatedAt: t0, ResolvedAt: time.Date(2026, 2, 1, 22, 0, 0, 0, time.UTC)},
		},
		{
			name: "malformed id",
			in:   `{"id":"not an id","text":"x","status":"open"}`,
			want: Item{ID: "fresh", Text: "x", Status: StatusOpen, CreatedAt: t0},
		},
		{
			name: "wrapped item resolved outside",
			in:   `{"id":"t-99998888","text":"{\"text\":\"Inner\"}","status":"resolved","resolved_at":"2026-02-06T00:00:00.000Z","resolution_note":"done"}`,
			want: Item{ID: "t-99998888", Text: "Inner", Status: StatusResolved, CreatedAt: t0,
				ResolvedAt: time.Date(2026, 2, 6, 0, 0, 0, 0, time.UTC), ResolutionNote: "done"},
		},
		{
			name: "keys are case-sensitive",
			in:   `{"ID":"t-12345678","Text":"shouted","item":"quiet"}`,
			want: Item{ID: "fresh", Text: "quiet", Status: StatusOpen, CreatedAt: t0, SourceSession: "sess-1"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Normalize(json.RawMessage(c.in), normOpt)
			if err != nil {
				t.Fatalf("Normalize(%s): %v", c.in, err)
			}
			if c.want.ID == "fresh" {
				if !itemID(got.ID) {
					t.Errorf("id %q, want a fresh t-xxxxxxxx", got.ID)
				}
				c.want.ID = got.ID
			}
			if d := diffItems(c.want, got); d != "" {
				t.Errorf("Normalize(%s) (-want +got):\n%s", c.in, d)
			}
		})
	}
}

func TestNormalizeRejects(t *testing.T) {
	deep := `"Deep"`
	for range maxDepth {
		b, _ := json.Marshal(`{"text":` + deep + `}`)
		deep = string(b)
	}
	for _, in := range []string{
		`null`, `42`, `[1,2]`, `true`, ``, `""`, `"   "`, `{}`, `{"id":"t-1","status":"open"}`,
		`{"text":"  "}`, `{"text":42}`, `"t-abcd1234: "`, `{"text":"t-abcd: "}`, `{"text":"x"} trailing`, `{"text":`,
		deep,
	} {
		if it, err := Normalize(json.RawMessage(in), normOpt); !errors.Is(err, ErrInvalid) {
			t.Errorf("Normalize(%.60s) = %+v, %v; want ErrInvalid", in, it, err)
		}
	}
}

func TestNormalizeKeepsUnknownTime(t *testing.T) {
	it, err := Normalize(json.RawMessage(`"plain"`), NormalizeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !it.CreatedAt.IsZero() || it.SourceSession != "" {
		t.Errorf("got created_at %v, source_session %q; want both empty", it.CreatedAt, it.SourceSession)
	}
}

func TestNormalizeText(t *testing.T) {
	for in, want := range map[string]string{
		"Fix the bug":                 "fix the bug",
		"  Fix   the\tbug.  ":         "fix the bug",
		"Fix the bug!?;:":             "fix the bug",
		"Fix the bug .":               "fix the bug",
		"FIX THE BUG":                 "fix the bug",
		"Ça   marche?":                "ça marche",
		"what: this":                  "what: this",
		"...":                         "",
		"Fix the bug\n\nand the test": "fix the bug and the test",
	} {
		if got := NormalizeText(in); got != want {
			t.Errorf("NormalizeText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestItemJSON(t *testing.T) {
	it := Item{ID: "t-0a0b0c0d", Text: "a \"q\" <b> \u2028 \x01", Status: StatusResolved,
		CreatedAt: time.Date(2026, 2, 9, 18, 12, 1, 97e6, time.UTC), ResolvedAt: time.Date(2026, 2, 10, 0, 0, 0, 0, time.FixedZone("x", 3600)),
		SourceSession: "s1", ResolvedBySession: "s2", ResolutionNote: "n"}
	// encoding/json would escape <, > and U+2028 in what MarshalJSON
	// returns; MarshalJSON itself escapes as JSON.stringify does.
	b, err := it.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"t-0a0b0c0d","text":"a \"q\" <b> ` + "\u2028" + ` \u0001","status":"resolved","created_at":"2026-02-09T18:12:01.097Z",` +
		`"source_session":"s1","resolved_at":"2026-02-09T23:00:00.000Z","resolved_by_session":"s2","resolution_note":"n"}`
	if string(b) != want {
		t.Errorf("Marshal =\n%s\nwant\n%s", b, want)
	}
	var back Item
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if d := diffItems(it, back); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	if b, _ := json.Marshal(Item{ID: "t-1", Text: "x", Status: StatusOpen}); string(b) != `{"id":"t-1","text":"x","status":"open"}` {
		t.Errorf("empty fields: %s", b)
	}
	if b, _ := json.Marshal(Item{ID: "t-1", Text: "x", Status: StatusOpen, CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 123456789, time.UTC)}); !strings.Contains(string(b), `"2026-01-01T00:00:00.123456789Z"`) {
		t.Errorf("a time finer than milliseconds loses digits: %s", b)
	}
}
