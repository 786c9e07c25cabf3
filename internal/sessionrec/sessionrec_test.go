package sessionrec

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/message"
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
