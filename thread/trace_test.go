package thread_test

import (
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// TestSpans checks the spans of a DB's operations and their attributes,
// and that a DB without a provider makes none.
func TestSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	db := thread.New(thread.NewMemoryStore(), nil)
	ctx := t.Context()
	if _, err := db.Create(ctx, thread.CreateOptions{ID: "untraced"}); err != nil {
		t.Fatal(err)
	}
	tdb := db.WithTracerProvider(tp).WithTenant("acme")
	th, err := tdb.Create(ctx, thread.CreateOptions{ID: "th"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.Append(ctx, message.User("hi")); err != nil {
		t.Fatal(err)
	}
	if _, err := th.Messages(ctx, thread.ReadOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := th.View(ctx, thread.ViewOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := th.Fork(ctx, thread.ForkOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tdb.Thread(ctx, "missing"); err == nil {
		t.Fatal("no error opening a missing thread")
	}
	var names []string
	for _, sp := range exp.GetSpans() {
		names = append(names, sp.Name)
		attrs := map[string]string{}
		for _, kv := range sp.Attributes {
			attrs[string(kv.Key)] = kv.Value.Emit()
		}
		if attrs["loom.store"] != "memory" || attrs["loom.tenant"] != "acme" {
			t.Errorf("%s: attributes %v", sp.Name, attrs)
		}
		if sp.Name == "thread.open" && sp.Status.Code.String() != "Error" {
			t.Errorf("open of a missing thread: status %v", sp.Status)
		}
	}
	want := "thread.create thread.commit thread.messages thread.view thread.fork thread.open"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("spans %q, want %q", got, want)
	}
}
