// Package worklog keeps work items that carry across an agent's sessions.
// Sessions end, work does not: an item is something open — unresolved,
// blocked, to follow up — with an id ("t-" and 8 hex digits), a status
// (open or resolved) and a resolution trail (when, by which session, with
// what note). It is seed 004's threads, under the name "items" so as not
// to be confused with loom's conversation threads.
//
// The smallest use:
//
//	log, err := worklog.Open(".gitmem", nil)
//	if err != nil { … }
//	start, err := log.SessionStart(ctx, worklog.StartOptions{}) // carries items forward
//	_, err = log.Create(ctx, worklog.CreateOptions{Text: "Release notes still to write"})
//	_, err = log.Resolve(ctx, worklog.ResolveOptions{TextMatch: "release notes", Note: "written"})
//	_, err = log.SessionClose(ctx, worklog.CloseOptions{})
//
// # Storage
//
// A Log keeps its items in dir/threads.json, the seed's file: a JSON array
// of item objects, two-space indented, as JSON.stringify(items, null, 2)
// writes it. An existing file is read as it is and written back in its
// own form: items that did not change keep their bytes (field order,
// unknown fields, escapes), a changed item gets its changed fields
// rewritten in place and new ones at the end, as the seed's code would,
// and a file the seed wrote is written back byte for byte. Values in older
// formats (plain strings, JSON strings, {"item", "context"}…) are
// normalized (Normalize) and the file is written again once, so that the
// ids given to them stay.
//
// Writes are atomic (a temporary file, fsync, rename, fsync of the
// directory) and made under an flock of dir/.threads.json.lock, re-reading
// the file under the lock, so that processes sharing the directory never
// lose one another's items; the lock file counts the writes, so that a
// Log notices another's write without reading the file. Reads take no
// lock, and parse the file only when it changed.
//
// A Log made by OpenDB keeps its items in a loom thread instead (in any
// thread store: SQLite, PostgreSQL, Redis, files, memory): each change is
// one appended message that names the items it puts and drops, so a write
// costs one append whatever the number of items, writers of several
// processes serialize on the thread's version (a conflict is read and
// tried again, never lost), and a reader folds only the messages appended
// since it last read. The work log is a thread like any other: its
// history, checkpoints and time travel apply. A server hands out such Logs
// per tenant and project through Logs, each tenant's in its own namespace
// of thread ids.
//
// Session records go to a SessionStore: for Open, by default a
// FileSessions, dir/sessions.json (the seed keeps them only in its
// database); for OpenDB and Logs, by default the DB's own threads
// (ThreadSessions: one thread per project, one appended commit per change
// of a session), which carries items between machines and containers
// through any store — SQLite, PostgreSQL, Redis, files — with no code of
// the store's. The seed's "sessions table with an open_threads column" is
// that thread: the stores keep threads and nothing else.
// worklog/sessiontest is the contract every store passes.
//
// # Sessions
//
// SessionStart aggregates (Aggregate) the local file with the items the
// project's last 5 sessions closed within 14 days carry, newest first,
// and writes the merged list back. Items are deduplicated by id and by
// normalized text (NormalizeText), the first seen wins and a resolution
// wins over open; items whose text starts with "PROJECT STATE:" are kept
// apart. SessionClose adds the closing payload's open_threads to the file
// and records the session with the project's open items.
//
// # Tools
//
// List, Create, Resolve, SessionStart and SessionClose return the seed's
// tool results (list_threads, create_thread, resolve_thread,
// session_start, session_close), each with its Performance; the MCP tools,
// the HTTP API (/v1/items, /v1/sessions) and the CLI (loom items …) are
// thin layers on them. Instructions formats the open items for a model;
// package worklog/worklogagent puts them into an agent's instructions.
package worklog
