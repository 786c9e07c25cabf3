package redis

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// TestDecodeCorruptCounts checks that a commit whose metadata or state
// count exceeds its bytes is refused at once, not looped over.
func TestDecodeCorruptCounts(t *testing.T) {
	head := func() []byte {
		b := appendStr(nil, "")       // parent
		b = binary.AppendVarint(b, 1) // depth
		b = appendStr(b, "")          // stateFrom
		b = appendStr(b, "append")    // op
		return binary.AppendVarint(b, 0)
	}
	for name, blob := range map[string][]byte{
		"metadata": binary.AppendUvarint(head(), 1<<40),
		"state":    binary.AppendUvarint(binary.AppendUvarint(head(), 0), 1<<40),
		"labels":   nil,
	} {
		done := make(chan error, 1)
		go func() {
			if name == "labels" {
				_, err := decodeLabels(string(binary.AppendUvarint(nil, 1<<40)))
				done <- err
				return
			}
			_, err := decodeCommit("c", blob)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, errCorrupt) {
				t.Errorf("%s: %v, want errCorrupt", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: decoding a corrupt count did not return", name)
		}
	}
}
