// Package sessionrec is the format in which a work log's session records
// are kept in a loom thread: one thread per project (of a tenant's
// namespace), one message per change of a session, the session's whole
// record after the change in a data part. Package worklog reads and writes
// it; the stores' migrations use it once, to carry the rows of the session
// tables they used to keep into threads, without importing worklog.
package sessionrec

import (
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

// Message returns the message that records r as it is now. Its text line
// is for people reading the thread.
func Message(r Record) (message.Message, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return message.Message{}, err
	}
	line := "session " + r.ID + " started"
	if !r.ClosedAt.IsZero() {
		line = "session " + r.ID + " closed"
	}
	return message.New(Role, message.Text{Text: line}, message.Data{MediaType: MediaType, Data: data}), nil
}

// Decode returns the record that m holds, or false when m holds none (a
// message of another kind, or one whose data does not decode).
func Decode(m message.Message) (Record, bool) {
	if m.Role != Role {
		return Record{}, false
	}
	for _, c := range m.Contents {
		d, ok := c.(message.Data)
		if !ok || d.MediaType != MediaType {
			continue
		}
		var r Record
		if err := json.Unmarshal(d.Data, &r); err != nil || r.ID == "" {
			return Record{}, false
		}
		return r, true
	}
	return Record{}, false
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
