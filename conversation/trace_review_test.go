package conversation

// Found by the review of issue 17: each test failed before its fix.

import (
	"strings"
	"testing"

	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
)

// A call of a tool the conversation does not have gets no span, as in
// package agent: the name is the model's invention, and a span per
// invented name would let a model mint span names.
func TestReviewInventedToolNamesNoSpan(t *testing.T) {
	tp, exp, db := traced(t)
	client := scripted.New(
		scripted.Calls(message.FunctionCall{CallID: "c1", Name: "invented_by_the_model_42", Arguments: `{}`}),
		scripted.Step{Text: "Done."})
	c, err := New(t.Context(), db, Options{Client: client, Model: "m", TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Send("go"); err != nil {
		t.Fatal(err)
	}
	idle(t, c)
	for _, sp := range exp.GetSpans() {
		if strings.Contains(sp.Name, "invented_by_the_model_42") {
			t.Errorf("a call of a tool the conversation does not have made the span %q", sp.Name)
		}
	}
}
