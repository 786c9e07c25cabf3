package sessionrec

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// A record too big for one message is split across several, and folding
// them back gives the record, open threads in order, bytes unchanged.
func TestMessagesSplitAndFoldBack(t *testing.T) {
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	r := Record{ID: "s-1", Project: "p", StartedAt: at, ClosedAt: at.Add(time.Hour)}
	for i := range 50 {
		r.OpenThreads = append(r.OpenThreads, json.RawMessage(fmt.Sprintf(`"item %d %s"`, i, strings.Repeat("<&>", 100))))
	}
	for _, max := range []int{1, 500, 4000, 1 << 20} {
		msgs, err := Messages(r, max)
		if err != nil {
			t.Fatal(err)
		}
		if max == 1<<20 && len(msgs) != 1 || max == 1 && len(msgs) != 50 {
			t.Errorf("max %d: %d messages", max, len(msgs))
		}
		var got Record
		for i, m := range msgs {
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			d, more, ok := Decode(m)
			if !ok || more != (i > 0) {
				t.Fatalf("max %d: message %d: ok %v more %v", max, i, ok, more)
			}
			if i == 0 {
				got = d
			} else {
				got.OpenThreads = append(got.OpenThreads, d.OpenThreads...)
			}
			if strings.Contains(string(m.Contents[1].(message.Data).Data), `\u003c`) {
				t.Fatalf("the data escapes '<' for HTML")
			}
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(r)
		if string(a) != string(b) {
			t.Errorf("max %d: folded back\n%s\nwant\n%s", max, a, b)
		}
	}
}

func TestDecodeSkipsOtherMessages(t *testing.T) {
	for _, m := range []message.Message{
		message.User("hi"),
		message.New(Role, message.Text{Text: "no data"}),
		message.New(Role, message.Data{MediaType: MediaType, Data: []byte("{not json")}),
		message.New(Role, message.Data{MediaType: MediaType, Data: []byte(`{"project":"p"}`)}), // no id
	} {
		if _, _, ok := Decode(m); ok {
			t.Errorf("Decode(%+v) ok", m)
		}
	}
}

func TestSplitLegacy(t *testing.T) {
	for _, c := range []struct{ id, project, tenant, sid, proj string }{
		{"acme:s1", "acme/default", "acme", "s1", "default"},
		{"acme:s1", "acme/org/repo", "acme", "s1", "org/repo"},
		{"s1", "default", "", "s1", "default"},
		{"s1", "acme/default", "", "s1", "acme/default"},             // the default tenant's project with a '/'
		{":x", "/p", "", ":x", "/p"},                                 // no tenant before the ':'
		{"acme:s1", "other/default", "", "acme:s1", "other/default"}, // id and project disagree
		{"a b:s1", "a b/p", "", "a b:s1", "a b/p"},                   // not a tenant's name
	} {
		tenant, sid, proj := SplitLegacy(c.id, c.project)
		if tenant != c.tenant || sid != c.sid || proj != c.proj {
			t.Errorf("SplitLegacy(%q, %q) = %q %q %q", c.id, c.project, tenant, sid, proj)
		}
	}
}

func TestThreadIDIsAnIDPerProject(t *testing.T) {
	a, b := ThreadID("p"), ThreadID("q")
	if a == b || !strings.HasPrefix(a, "wls_") || len(a) != 36 || ThreadID("p") != a {
		t.Errorf("ThreadID: %q %q", a, b)
	}
}

// LegacyBatch carries a shared table's rows into one thread per tenant
// and project, each record as the table had it, in the table's order.
func TestLegacyBatch(t *testing.T) {
	at := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
	rows := []Legacy{
		{ID: "acme:s1", Project: "acme/site", StartedAt: at, ClosedAt: at.Add(time.Hour), OpenThreads: []byte(`["a",{"id":"t-00000001","text":"b","status":"open"}]`)},
		{ID: "s1", Project: "site", StartedAt: at},
		{ID: "acme:s2", Project: "acme/site", StartedAt: at, ClosedAt: at.Add(time.Hour), OpenThreads: []byte(`null`)},
		{ID: "acme:s3", Project: "acme/" + strings.Repeat("é", 300), StartedAt: at},
	}
	b, err := LegacyBatch(rows, at.Add(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	s := thread.NewMemoryStore()
	if err := s.Apply(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	read := func(tenant, project string) []Record {
		db := thread.New(s, &thread.Options{Tenant: tenant})
		th, err := db.Thread(t.Context(), ThreadID(project))
		if err != nil {
			t.Fatal(err)
		}
		if th.Record().Labels[LabelProject] == "" || th.Record().Kind != thread.KindLocal {
			t.Errorf("%s/%s: record %+v", tenant, project, th.Record())
		}
		msgs, err := th.Messages(t.Context(), thread.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []Record
		for _, m := range msgs {
			r, _, ok := Decode(m)
			if !ok {
				t.Fatalf("message %+v holds no record", m)
			}
			out = append(out, r)
		}
		return out
	}
	got := read("acme", "site")
	if len(got) != 2 || got[0].ID != "s1" || got[1].ID != "s2" || len(got[0].OpenThreads) != 2 || string(got[0].OpenThreads[1]) != `{"id":"t-00000001","text":"b","status":"open"}` ||
		!got[0].ClosedAt.Equal(at.Add(time.Hour)) || got[1].OpenThreads != nil {
		t.Errorf("acme's site: %+v", got)
	}
	if got := read("", "site"); len(got) != 1 || got[0].ID != "s1" || !got[0].ClosedAt.IsZero() {
		t.Errorf("the default tenant's site: %+v", got)
	}
	if got := read("acme", strings.Repeat("é", 300)); len(got) != 1 {
		t.Errorf("a long project: %+v", got)
	}
	// A row that does not decode carries nothing.
	if _, err := LegacyBatch([]Legacy{{ID: "x", Project: "p", OpenThreads: []byte("{")}}, at); !errors.Is(err, thread.ErrInvalid) {
		t.Errorf("bad open_threads: %v", err)
	}
}
