package langgraph

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/loomthreads/loom/internal/ids"
)

// Labels on the loom threads that keep LangGraph threads.
const (
	// LabelKind marks every such thread (value "checkpoints").
	LabelKind = "langgraph"
	// LabelThread holds the LangGraph thread_id (see labelValue).
	LabelThread = "langgraph.thread"
	// LabelNS holds the checkpoint_ns of a subgraph's thread; the root
	// namespace has none.
	LabelNS = "langgraph.ns"
)

const kindValue = "checkpoints"

// Limits on what a client names.
const (
	maxThreadID     = 1024
	maxNS           = 1024
	maxCheckpointID = 128 // a loom checkpoint name
	maxChannel      = 200 // a state key is lg/ch/ + the channel
)

// ThreadKey returns the id of the loom thread that keeps the LangGraph
// thread threadID's namespace ns: "lg." and the two names with every byte
// but letters, digits and '-' written _XX, or, when that would pass loom's
// id limit, "lg.h" and a hash of both.
func ThreadKey(threadID, ns string) string {
	id := "lg." + escape(threadID)
	if ns != "" {
		id += "." + escape(ns)
	}
	if len(id) <= ids.MaxLen {
		return id
	}
	sum := sha256.Sum256([]byte(threadID + "\x00" + ns))
	return "lg.h" + hex.EncodeToString(sum[:20])
}

func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "_%02X", c)
	}
	return b.String()
}

// labelValue is s as a label value: itself when it is printable and short
// enough, its hash otherwise (such a thread is found by its id, and listed
// across threads under the hash).
func labelValue(s string) string {
	if len(s) <= 200 && printable(s) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return hashPrefix + hex.EncodeToString(sum[:16])
}

// hashPrefix begins a label value that is a name's hash.
const hashPrefix = "sha256:"

func labels(threadID, ns string) map[string]string {
	l := map[string]string{LabelKind: kindValue, LabelThread: labelValue(threadID)}
	if ns != "" {
		l[LabelNS] = labelValue(ns)
	}
	return l
}

func title(threadID, ns string) string {
	t := threadID
	if ns != "" {
		t += " · " + ns
	}
	if len(t) > 512 {
		t = t[:512]
		for !utf8.ValidString(t) {
			t = t[:len(t)-1]
		}
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, t)
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// checkConfig checks the names a request gives; wantID says whether the
// checkpoint id is required.
func checkConfig(c Config, wantID bool) error {
	switch {
	case c.ThreadID == "" || len(c.ThreadID) > maxThreadID || !utf8.ValidString(c.ThreadID):
		return invalidf("thread_id: 1 to %d bytes of UTF-8", maxThreadID)
	case len(c.CheckpointNS) > maxNS || !utf8.ValidString(c.CheckpointNS):
		return invalidf("checkpoint_ns: at most %d bytes of UTF-8", maxNS)
	case wantID && c.CheckpointID == "":
		return invalidf("checkpoint_id: required")
	case c.CheckpointID != "":
		return checkCheckpointID(c.CheckpointID, "checkpoint_id")
	}
	return nil
}

func checkCheckpointID(id, what string) error {
	if id == "" || len(id) > maxCheckpointID || !printable(id) {
		return invalidf("%s: 1 to %d printable bytes", what, maxCheckpointID)
	}
	return nil
}
