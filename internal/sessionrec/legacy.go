package sessionrec

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// Legacy is a row of the session tables that the stores kept for package
// worklog before session records lived in threads, as the table held it:
// other tenants' sessions as "tenant:id" in project "tenant/project".
type Legacy struct {
	ID, Project         string
	StartedAt, ClosedAt time.Time
	// OpenThreads is the JSON array of the items the session carried when
	// it closed; empty when it did not close.
	OpenThreads []byte
}

// legacyMessageBytes bounds the data of one message the migration writes,
// well under a thread's default limit of a message (1 MiB).
const legacyMessageBytes = 256 << 10

// LegacyBatch returns the batch that carries rows, in the order the table
// recorded them (which breaks ties between sessions closed at the same
// instant), into threads: one per tenant and project, made at now, holding
// the rows' records as ThreadSessions of package worklog reads them. A
// store's migration applies it and then drops its table; a batch that
// fails with thread.ErrConflict was applied by another process migrating
// the same store. A row that does not decode is an error: nothing is
// carried, and the table stays for a person to look at.
func LegacyBatch(rows []Legacy, now time.Time) (*store.Batch, error) {
	type group struct {
		tenant, project string
		recs            []Record
	}
	var groups []*group
	byKey := map[[2]string]*group{}
	for _, row := range rows {
		tenant, sid, project := SplitLegacy(row.ID, row.Project)
		r := Record{ID: sid, Project: project, StartedAt: row.StartedAt.UTC(), ClosedAt: row.ClosedAt.UTC()}
		if len(row.OpenThreads) > 0 && string(row.OpenThreads) != "null" {
			if err := json.Unmarshal(row.OpenThreads, &r.OpenThreads); err != nil {
				return nil, fmt.Errorf("session %q: open_threads: %v: %w", row.ID, err, thread.ErrInvalid)
			}
		}
		k := [2]string{tenant, project}
		g := byKey[k]
		if g == nil {
			g = &group{tenant: tenant, project: project}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.recs = append(g.recs, r)
	}
	now = now.UTC().Truncate(time.Microsecond)
	b := &store.Batch{}
	for _, g := range groups {
		var msgs []message.Message
		for _, r := range g.recs {
			ms, err := Messages(r, legacyMessageBytes)
			if err != nil {
				return nil, fmt.Errorf("session %q: %w", r.ID, err)
			}
			msgs = append(msgs, ms...)
		}
		for i := range msgs {
			msgs[i].ID, msgs[i].CreatedAt = message.NewIDAt(now), now
		}
		c := &thread.Commit{ID: ids.NewAt("c_", now), Depth: int64(len(msgs)), Messages: msgs, Op: thread.OpAppend, Time: now}
		// A label's and a title's limits; the records keep the whole name.
		project, title := cut(g.project, 256), cut("sessions: "+g.project, 1024)
		b.Commits = append(b.Commits, c)
		b.Create = append(b.Create, store.Creation{Op: thread.OpCreate, Record: &thread.Record{
			ID: thread.Key(g.tenant, ThreadID(g.project)), Tenant: g.tenant, Kind: thread.KindLocal, Title: title,
			Labels: map[string]string{LabelProject: project}, Head: c.ID, Version: 1, CreatedAt: now, UpdatedAt: now,
		}})
	}
	return b, nil
}

// cut returns s cut to at most n bytes on a character boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
