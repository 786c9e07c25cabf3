// Package sessionrec is the format in which a work log's session records
// are kept in a loom thread: one thread per project (of a tenant's
// namespace), one message per change of a session, the session's whole
// record after the change in a data part. Package worklog reads and writes
// it; the stores' migrations use it once, to carry the rows of the session
// tables they used to keep into threads, without importing worklog.
package sessionrec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/message"
)

// MediaType is the media type of the data part that holds a record.
const MediaType = "application/vnd.loom.worklog-session+json"

// Role is the role of the messages that hold records (the work log's).
const Role message.Role = "worklog"

// LabelProject labels a thread of session records with its project.
const LabelProject = "loom.worklog.sessions"

// ThreadID returns the id of the thread that keeps the session records of
// a project: "wls_" and 32 hex digits of a hash of the name, since project
// names are free text. The thread lives in the namespace of the tenant
// whose sessions it keeps.
func ThreadID(project string) string {
	h := sha256.Sum256([]byte(project))
	return "wls_" + hex.EncodeToString(h[:16])
}

// Record is a session's record, with the JSON names of the seed's
// sessions table.
type Record struct {
	ID          string            `json:"id"`
	Project     string            `json:"project"`
	StartedAt   time.Time         `json:"started_at,omitzero"`
	ClosedAt    time.Time         `json:"closed_at,omitzero"`
	OpenThreads []json.RawMessage `json:"open_threads,omitzero"`
}

// Messages returns the messages of one commit that record r as it is now,
// each of at most about maxBytes of data: the first holds the record with
// as many of its open threads as fit, each next one more of them, marked
// as the continuation of the record (Decode's more). An open thread larger
// than maxBytes is a message of its own.
func Messages(r Record, maxBytes int) ([]message.Message, error) {
	var out []message.Message
	rest := r.OpenThreads
	for first := true; first || len(rest) > 0; first = false {
		part := r
		n, size := 0, 256+len(r.ID)+len(r.Project)
		for n < len(rest) && (n == 0 || size+len(rest[n])+1 <= maxBytes) {
			size += len(rest[n]) + 1
			n++
		}
		part.OpenThreads, rest = rest[:n], rest[n:]
		data, err := encode(part, !first)
		if err != nil {
			return nil, err
		}
		out = append(out, newMessage(r, data))
	}
	return out, nil
}

// wire is a record as a message holds it: More marks a continuation, whose
// open threads join those of the record before it.
type wire struct {
	Record
	More bool `json:"more,omitzero"`
}

// encode marshals without escaping '<', '>' and '&' for HTML, so that a
// record's size is what was measured.
func encode(r Record, more bool) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(wire{r, more}); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func newMessage(r Record, data []byte) message.Message {
	line := "session " + r.ID + " started"
	if !r.ClosedAt.IsZero() {
		line = "session " + r.ID + " closed"
	}
	return message.New(Role, message.Text{Text: line}, message.Data{MediaType: MediaType, Data: data})
}

// Decode returns the record that m holds, and whether it continues the
// record of the message before it (its open threads are more of that
// record's), or false when m holds none (a message of another kind, or
// one whose data does not decode).
func Decode(m message.Message) (r Record, more, ok bool) {
	if m.Role != Role {
		return Record{}, false, false
	}
	for _, c := range m.Contents {
		d, isData := c.(message.Data)
		if !isData || d.MediaType != MediaType {
			continue
		}
		var w wire
		if err := json.Unmarshal(d.Data, &w); err != nil || w.ID == "" {
			return Record{}, false, false
		}
		return w.Record, w.More, true
	}
	return Record{}, false, false
}

// SplitLegacy undoes the prefixes under which a shared session table kept
// the sessions of a tenant other than the default one ("tenant:id" and
// "tenant/project"): it returns the tenant and the session's own id and
// project. A record of the default tenant comes back as it is, with tenant
// "" (that tenant could not use ids of the form "tenant:…").
func SplitLegacy(id, project string) (tenant, sid, proj string) {
	t, rest, ok := strings.Cut(id, ":")
	if !ok || !ids.Valid(t) || !strings.HasPrefix(project, t+"/") {
		return "", id, project
	}
	return t, rest, project[len(t)+1:]
}
