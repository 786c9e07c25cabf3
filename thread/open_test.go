package thread_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/loomthreads/loom/thread"
)

// TestOpenStoreUnknownScheme checks that a store URL of a scheme no store
// has is refused with a sentence for the person who typed it — the
// schemes there are — and not a hint about Go imports.
func TestOpenStoreUnknownScheme(t *testing.T) {
	_, err := thread.OpenStore(t.Context(), "nope://x")
	if !errors.Is(err, thread.ErrUnsupported) {
		t.Fatalf("err %v, want ErrUnsupported", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "package") || strings.Contains(msg, "[") {
		t.Errorf("the error speaks Go: %s", msg)
	}
	if !strings.Contains(msg, `"nope"`) || !strings.Contains(msg, "memory") {
		t.Errorf("the error does not name the scheme and the known ones: %s", msg)
	}
}
