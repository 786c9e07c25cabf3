package thread

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/internal/jsonguard"
	"github.com/loomthreads/loom/message"
)

// The checks at the boundary: everything a caller hands in is checked here,
// before any store sees it.

func (db *DB) checkRecord(id string, kind Kind, title string, labels map[string]string) error {
	if !ids.Valid(id) {
		return fmt.Errorf("thread id %q: letters, digits, '_', '-', '.' only, at most %d bytes: %w", clip(id), ids.MaxLen, ErrInvalid)
	}
	if !validKind(kind) {
		return fmt.Errorf("kind %q: %w", clip(string(kind)), ErrInvalid)
	}
	if err := db.checkTitle(title); err != nil {
		return err
	}
	return db.checkLabels(labels)
}

func (db *DB) checkTitle(title string) error {
	if len(title) > db.limits.TitleBytes {
		return fmt.Errorf("title of %d bytes over the limit of %d: %w", len(title), db.limits.TitleBytes, ErrInvalid)
	}
	if !printable(title) {
		return fmt.Errorf("title: not printable UTF-8: %w", ErrInvalid)
	}
	return nil
}

func (db *DB) checkLabels(labels map[string]string) error {
	if len(labels) > db.limits.Labels {
		return fmt.Errorf("%d labels over the limit of %d: %w", len(labels), db.limits.Labels, ErrInvalid)
	}
	for k, v := range labels {
		if !ids.Valid(k) {
			return fmt.Errorf("label key %q: %w", clip(k), ErrInvalid)
		}
		if len(v) > db.limits.LabelBytes || !printable(v) {
			return fmt.Errorf("label %q: value not printable UTF-8 of at most %d bytes: %w", k, db.limits.LabelBytes, ErrInvalid)
		}
	}
	return nil
}

func (db *DB) checkMessages(msgs []message.Message) error {
	if len(msgs) > db.limits.MessagesPerCommit {
		return fmt.Errorf("%d messages in one commit over the limit of %d: %w", len(msgs), db.limits.MessagesPerCommit, ErrInvalid)
	}
	seen := make(map[string]bool, len(msgs))
	for i, m := range msgs {
		if err := m.Validate(); err != nil {
			return fmt.Errorf("message %d: %v: %w", i, err, ErrInvalid)
		}
		if n := m.Size(); n > db.limits.MessageBytes {
			return fmt.Errorf("message %d: %d bytes over the limit of %d: %w", i, n, db.limits.MessageBytes, ErrInvalid)
		}
		if err := db.checkMessageJSON(m); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		if m.ID != "" {
			if seen[m.ID] {
				return fmt.Errorf("message %d: id %q twice in one commit: %w", i, m.ID, ErrInvalid)
			}
			seen[m.ID] = true
		}
	}
	return nil
}

// checkMessageJSON checks the JSON a message carries as JSON: its metadata
// and the raw JSON of its unknown contents (see checkJSON).
func (db *DB) checkMessageJSON(m message.Message) error {
	for i, c := range m.Contents {
		if u, ok := c.(message.Unknown); ok {
			if err := db.checkJSON(u.Raw); err != nil {
				return fmt.Errorf("contents[%d]: %w", i, err)
			}
		}
	}
	if len(m.Metadata) > 0 && deeper(m.Metadata, db.limits.JSONDepth) {
		return fmt.Errorf("metadata: nested deeper than %d levels: %w", db.limits.JSONDepth, ErrTooDeep)
	}
	return nil
}

// deeper reports whether the metadata value v nests objects and arrays
// more than levels deep, as its JSON would. It walks v as it is: the
// message is valid (message.Validate), so v holds only JSON's values, all
// UTF-8, with no cycle, and encoding it to count would cost more than the
// commit.
func deeper(v any, levels int) bool {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return false // JSON null
		}
		if levels == 0 {
			return true
		}
		for _, x := range v {
			if deeper(x, levels-1) {
				return true
			}
		}
	case []any:
		if v == nil {
			return false
		}
		if levels == 0 {
			return true
		}
		for _, x := range v {
			if deeper(x, levels-1) {
				return true
			}
		}
	}
	return false
}

// checkJSON checks raw JSON that a thread would hold for what encoding/json
// lets through: bytes that are not UTF-8 and \u escapes of lone surrogates
// (read back as U+FFFD, so not what was sent) are ErrInvalid, and nesting
// deeper than Limits.JSONDepth is ErrTooDeep. Its syntax is checked where
// it is decoded or compacted.
func (db *DB) checkJSON(data []byte) error {
	err := jsonguard.Check(data, db.limits.JSONDepth)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jsonguard.ErrDepth):
		return fmt.Errorf("nested deeper than %d levels: %w", db.limits.JSONDepth, ErrTooDeep)
	default:
		return fmt.Errorf("%v: %w", err, ErrInvalid)
	}
}

// checkMirror keeps DESIGN §2, "service-managed or local, never both": a
// thread that is (or becomes) of kind after a commit of n messages takes
// them only as a mirror of its service's conversation when it is a service
// thread, and a mirror only then (CommitOptions.Mirror).
func checkMirror(kind Kind, n int, mirror bool) error {
	switch {
	case kind == KindService && n > 0 && !mirror:
		return fmt.Errorf("a service-managed thread holds only a mirror of its service's conversation, not messages of its own: %w", ErrInvalid)
	case mirror && kind != KindService:
		return fmt.Errorf("a mirror of a service's conversation on a thread of kind %s: %w", kind, ErrInvalid)
	}
	return nil
}

// MaxStateKeyLen is the longest state key accepted.
const MaxStateKeyLen = 256

// applyPatch returns base with patch applied (a nil value deletes its key),
// checked against the limits.
func (db *DB) applyPatch(base, patch map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(base)+len(patch))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range patch {
		if k == "" || len(k) > MaxStateKeyLen || !printable(k) {
			return nil, fmt.Errorf("state key %q: printable UTF-8 of 1 to %d bytes: %w", clip(k), MaxStateKeyLen, ErrInvalid)
		}
		if v == nil {
			delete(out, k)
			continue
		}
		if err := db.checkJSON(v); err != nil {
			return nil, fmt.Errorf("state %q: %w", k, err)
		}
		c, err := compactJSON(v)
		if err != nil {
			return nil, fmt.Errorf("state %q: %v: %w", k, err, ErrInvalid)
		}
		out[k] = c
	}
	n := 0
	for k, v := range out {
		n += len(k) + len(v)
	}
	if n > db.limits.StateBytes {
		return nil, fmt.Errorf("state of %d bytes over the limit of %d: %w", n, db.limits.StateBytes, ErrInvalid)
	}
	return out, nil
}

func compactJSON(v json.RawMessage) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, v); err != nil {
		return nil, err
	}
	return json.RawMessage(buf.Bytes()), nil
}

// CheckpointNameMax is the longest checkpoint name accepted.
const CheckpointNameMax = 128

func checkCheckpointName(name string) error {
	if name == "" || len(name) > CheckpointNameMax || !printable(name) {
		return fmt.Errorf("checkpoint name %q: printable UTF-8 of 1 to %d bytes: %w", clip(name), CheckpointNameMax, ErrInvalid)
	}
	return nil
}

// printable reports whether s is UTF-8 without control characters.
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

// clip shortens untrusted input for error messages.
func clip(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return s
}

// checkOp accepts an op of 1 to 32 lowercase letters and '_': the ops loom
// writes, and room for new ones without letting arbitrary text in.
func checkOp(op Op) error {
	if len(op) == 0 || len(op) > 32 {
		return fmt.Errorf("op %q: %w", clip(string(op)), ErrInvalid)
	}
	for i := 0; i < len(op); i++ {
		if c := op[i]; (c < 'a' || c > 'z') && c != '_' {
			return fmt.Errorf("op %q: %w", clip(string(op)), ErrInvalid)
		}
	}
	return nil
}

// The caps on commit metadata.
const (
	maxMetaEntries  = 64
	maxMetaKeyLen   = 128
	maxMetaValueLen = 4096
)

func checkMeta(meta map[string]string) error {
	if len(meta) > maxMetaEntries {
		return fmt.Errorf("%d metadata entries over the limit of %d: %w", len(meta), maxMetaEntries, ErrInvalid)
	}
	for k, v := range meta {
		if k == "" || len(k) > maxMetaKeyLen || !printable(k) || len(v) > maxMetaValueLen || !utf8.ValidString(v) {
			return fmt.Errorf("metadata %q: keys of 1 to %d printable bytes, values of at most %d bytes of UTF-8: %w", clip(k), maxMetaKeyLen, maxMetaValueLen, ErrInvalid)
		}
	}
	return nil
}

// checkParts checks a new commit's messages, op and metadata, in the order
// that decides which error a commit with several faults gets.
func (db *DB) checkParts(msgs []message.Message, op Op, meta map[string]string) error {
	if err := db.checkMessages(msgs); err != nil {
		return err
	}
	if err := checkOp(op); err != nil {
		return err
	}
	return checkMeta(meta)
}

// Limits returns the limits the DB enforces, with defaults filled in.
func (db *DB) Limits() Limits { return db.limits }

// CheckCommit reports what Commit would refuse in opts for what they hold
// (messages, metadata, op, state keys and values), without writing: a
// caller about to do work that a refused commit would waste (run a tool,
// call a model) checks first. It cannot know of conflicts, nor of the total
// size of the state the patch is applied to.
func (db *DB) CheckCommit(opts CommitOptions) error {
	op := opts.Op
	if op == "" {
		op = OpAppend // Commit's default, which checkOp accepts
	}
	if err := db.checkParts(opts.Messages, op, opts.Metadata); err != nil {
		return err
	}
	if opts.State != nil {
		if _, err := db.applyPatch(nil, opts.State); err != nil {
			return err
		}
	}
	return nil
}
