package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomthreads/loom/internal/foundrytest"
)

// The example adopts a Foundry thread that has a history, goes on with it,
// and the second run finds the loom thread it made.
func TestAdoptAndContinue(t *testing.T) {
	srv, ts := foundrytest.NewClassic(t)
	srv.APIKey = "key-1"
	old := srv.CreateThread("we talked about Lisbon")
	o := options{store: "sqlite://" + filepath.Join(t.TempDir(), "f.db"), protocol: "classic", thread: old, say: "Where were we?",
		endpoint: ts.URL, agent: "asst_1", key: "key-1"}
	var out bytes.Buffer
	if err := run(t.Context(), &out, o); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"adopted " + old + " as loom thread foundry-" + old, "agent: You said: Where were we?", "kind service"} {
		if !strings.Contains(got, want) {
			t.Fatalf("lacks %q:\n%s", want, got)
		}
	}
	out.Reset()
	o.say = "And then?"
	if err := run(t.Context(), &out, o); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); strings.Contains(got, "adopted") || !strings.Contains(got, "You said: And then?") || !strings.Contains(got, "mirrors 4 messages") {
		t.Fatalf("second run:\n%s", got)
	}
	if n := srv.ThreadLen(old); n != 5 {
		t.Fatalf("the Foundry thread holds %d messages, want its 1 and our 4", n)
	}

	// The current protocol: a conversation.
	cur, cts := foundrytest.NewCurrent(t)
	cur.APIKey = "key-1"
	conv := cur.CreateConversation()
	out.Reset()
	if err := run(t.Context(), &out, options{store: o.store, protocol: "current", thread: conv, say: "hi", endpoint: cts.URL, agent: "trip-planner", key: "key-1"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "agent: You said: hi") {
		t.Fatalf("current:\n%s", out.String())
	}
}
