package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomthreads/loom/internal/proctest"
	"github.com/loomthreads/loom/thread"
)

const envChild = "LOOM_CHAT_CHILD"

// TestChild is the chat program when the test binary is re-executed by
// TestKilledRunResumes; it skips otherwise.
func TestChild(t *testing.T) {
	raw := os.Getenv(envChild)
	if raw == "" {
		t.Skip("runs only as a child of TestKilledRunResumes")
	}
	var o struct{ Store, Say string }
	if err := json.Unmarshal([]byte(raw), &o); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), os.Stdout, options{store: o.Store, thread: "t", say: o.Say, crash: true}); err != nil {
		t.Fatal(err)
	}
}

func TestKilledRunResumes(t *testing.T) {
	store := "sqlite://" + filepath.Join(t.TempDir(), "chat.db")
	spec, _ := json.Marshal(map[string]string{"Store": store, "Say": "Weather in Lisbon?"})
	if out := proctest.Killed(t, "TestChild", envChild, string(spec)); !strings.Contains(out, `← {"city":"Lisbon"`) {
		t.Fatalf("child output:\n%s", out)
	}

	// The next start resumes from the committed tool step.
	var buf bytes.Buffer
	if err := run(t.Context(), &buf, options{store: store, thread: "t"}); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); !strings.Contains(got, "resuming t at version 3") || !strings.Contains(got, `The weather service said: {"city":"Lisbon"`) {
		t.Fatalf("resumed run:\n%s", got)
	}
	db, err := thread.Open(t.Context(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	th, err := db.Thread(t.Context(), "t")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := th.Messages(t.Context(), thread.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range msgs {
		roles = append(roles, string(m.Role))
	}
	if strings.Join(roles, ",") != "user,assistant,tool,assistant" || th.Kind() != thread.KindLocal {
		t.Fatalf("thread: %v, kind %s", roles, th.Kind())
	}

	// And the conversation goes on.
	buf.Reset()
	if err := run(t.Context(), &buf, options{store: store, thread: "t", say: "And in Oslo?"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `→ weather({"city":"Oslo"})`) {
		t.Fatalf("second question:\n%s", buf.String())
	}
}

func TestUnknownProviderIsAnError(t *testing.T) {
	err := run(t.Context(), new(bytes.Buffer), options{store: "memory://", thread: "t", say: "hi", provider: "nope"})
	if err == nil || !strings.Contains(err.Error(), "LOOM_PROVIDER") {
		t.Fatalf("err = %v", err)
	}
}
