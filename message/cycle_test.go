package message_test

import (
	"testing"

	"github.com/loomthreads/loom/message"
)

// Metadata that JSON cannot hold — a map that holds itself, or maps shared
// so that the tree they make is exponentially large — is refused by
// Validate, counted as too large by Size and copied by Clone, each in
// bounded time, never followed for ever.
func TestMetadataCyclesAndBlowUps(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	cyclic["list"] = []any{cyclic, cyclic}

	shared := map[string]any{"leaf": "x"}
	for range 80 { // 2^80 paths
		shared = map[string]any{"a": shared, "b": shared}
	}
	for name, md := range map[string]map[string]any{"cyclic": cyclic, "shared": shared} {
		m := message.User("hi")
		m.Metadata = map[string]any{"v": md}
		if err := m.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
		if n := m.Size(); n < 1<<30 {
			t.Errorf("%s: Size %d, want more than any limit", name, n)
		}
		c := m.Clone()
		if _, ok := c.Metadata["v"].(map[string]any); !ok {
			t.Errorf("%s: Clone lost the value", name)
		}
	}
	// Deep but finite and small: fine.
	deep := map[string]any{}
	for range 500 {
		deep = map[string]any{"d": deep}
	}
	m := message.User("hi")
	m.Metadata = map[string]any{"deep": deep}
	if err := m.Validate(); err != nil {
		t.Errorf("500 levels: %v", err)
	}
}
