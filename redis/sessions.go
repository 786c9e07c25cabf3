package redis

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
)

func init() {
	open := func(ctx context.Context, u *url.URL) (worklog.SessionStore, error) {
		return OpenSessions(ctx, u.String(), nil)
	}
	worklog.RegisterSessions("redis", open)
	worklog.RegisterSessions("rediss", open)
}

// Sessions is a worklog.SessionStore in Redis, beside a Store's threads
// (under the same prefix) or on its own. It is safe for concurrent use, and
// several processes may share one Redis through their own Sessions.
//
// Each project's keys carry one hash tag, so a Redis Cluster keeps them in
// one slot and every operation touches that slot only:
//
//	P:s:{T}:r:<id>  hash: a session's record: p (project), s and c (start and
//	                close, Unix milliseconds, absent when zero), o (open_threads,
//	                a JSON array of the values as given, absent when none),
//	                q (the order in which the project's sessions were first
//	                recorded)
//	P:s:{T}:z       sorted set of the closed sessions' ids, scored by close
//	P:s:{T}:q       the counter q is taken from
//
// T is "=" and the project's name when it is a valid id of at most 64 bytes,
// else "~" and 32 hex digits of its SHA-256. Starts and closes are Lua
// scripts, so they apply whole or not at all, and concurrent closes, or a
// close racing a start, never lose or half-apply a record. Times are kept to
// the millisecond. Sessions never expire, whatever the store's TTL: like the
// other remote stores, Redis keeps every session.
//
// Session ids are per project: a close of id s1 in project q does not
// touch the session s1 of project p (the SQL stores' tables have one row
// per id, whatever its project).
type Sessions struct {
	st *Store
}

var _ worklog.SessionStore = (*Sessions)(nil)

// OpenSessions connects to the Redis that rawURL names, as Open does (the
// same URL and Options: prefix, cluster, the driver's parameters; TTL,
// SweepInterval and Logger do not apply), checks the schema version as Open
// does (setting it in a new database, which Open then takes as a store's)
// and returns the session store. opts may be nil.
func OpenSessions(ctx context.Context, rawURL string, opts *Options) (*Sessions, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.SweepInterval = -1 // sessions never expire; nor do threads need sweeping here
	st, err := Open(ctx, rawURL, &o)
	if err != nil {
		return nil, asInvalid(err)
	}
	return &Sessions{st: st}, nil
}

// Close closes the connection (unless it came in Options.Client).
func (s *Sessions) Close() error { return s.st.Close() }

// Client returns the Redis client the store uses.
func (s *Sessions) Client() goredis.UniversalClient { return s.st.rdb }

// Prefix returns the prefix of every key of the store.
func (s *Sessions) Prefix() string { return s.st.prefix }

// asInvalid makes a thread.ErrInvalid error (a bad URL or option) match
// worklog.ErrInvalid as well, as the callers of a SessionStore expect.
func asInvalid(err error) error {
	if errors.Is(err, thread.ErrInvalid) && !errors.Is(err, worklog.ErrInvalid) {
		return invalidError{err}
	}
	return err
}

type invalidError struct{ err error }

func (e invalidError) Error() string   { return e.err.Error() }
func (e invalidError) Unwrap() []error { return []error{e.err, worklog.ErrInvalid} }

// sessionKey is the key of kind ("r:<id>", "z", "q") of a project's
// sessions. Session ids hold no brace (worklog.CheckSession), and neither
// does the tag, so the tag is the key's hash tag.
func (s *Sessions) sessionKey(project, kind string) string {
	return s.st.prefix + ":s:{" + projectTag(project) + "}:" + kind
}

func projectTag(project string) string {
	if len(project) <= 64 && ids.Valid(project) {
		return "=" + project
	}
	sum := sha256.Sum256([]byte(project))
	return "~" + hex.EncodeToString(sum[:16])
}

// millis is t in Unix milliseconds, "" when t is zero.
func millis(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// startSessionScript records a session unless its record exists. KEYS:
// record, counter. ARGV: project, started (ms or "").
var startSessionScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'p', ARGV[1], 'q', redis.call('INCR', KEYS[2]))
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 's', ARGV[2]) end
return 1
`)

// closeSessionScript records a session's close, creating its record if
// missing and keeping a start it has. KEYS: record, counter, closed set.
// ARGV: id, project, started (ms or ""), closed (ms), open_threads (JSON
// array or "").
var closeSessionScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'p', ARGV[2], 'q', redis.call('INCR', KEYS[2]))
end
if ARGV[3] ~= '' then redis.call('HSETNX', KEYS[1], 's', ARGV[3]) end
redis.call('HSET', KEYS[1], 'c', ARGV[4])
if ARGV[5] == '' then redis.call('HDEL', KEYS[1], 'o') else redis.call('HSET', KEYS[1], 'o', ARGV[5]) end
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
return 1
`)

// closedSessionsScript reads the newest closes of a project: the ids of
// the closed set from +inf down to ARGV[1], at most ARGV[2] of them, and
// every other session closed at the same instant as the last of those (the
// caller orders ties by first record and cuts), each followed by its
// record's p, s, c, o and q. Record keys are ARGV[3] and the id: in the
// closed set's slot. KEYS: closed set.
var closedSessionsScript = goredis.NewScript(`
local limit = tonumber(ARGV[2])
local z = redis.call('ZREVRANGEBYSCORE', KEYS[1], '+inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, ARGV[2])
local ids = {}
for i = 1, #z, 2 do ids[#ids + 1] = z[i] end
if #ids > 0 and #ids == limit then
  local last = z[#z]
  local n = #ids
  while n > 0 and tonumber(z[2 * n]) == tonumber(last) do ids[n] = nil; n = n - 1 end
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], last, last)) do ids[#ids + 1] = id end
end
local out = {}
for _, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HMGET', ARGV[3] .. id, 'p', 's', 'c', 'o', 'q')
end
return out
`)

// StartSession implements worklog.SessionStore.
func (s *Sessions) StartSession(ctx context.Context, ses worklog.Session) error {
	if err := worklog.CheckSession(ses); err != nil {
		return err
	}
	keys := []string{s.sessionKey(ses.Project, "r:"+ses.ID), s.sessionKey(ses.Project, "q")}
	if err := startSessionScript.Run(ctx, s.st.rdb, keys, ses.Project, millis(ses.StartedAt)).Err(); err != nil {
		return fmt.Errorf("redis sessions: start session %s: %w", ses.ID, err)
	}
	return nil
}

// CloseSession implements worklog.SessionStore.
func (s *Sessions) CloseSession(ctx context.Context, ses worklog.Session) error {
	if err := worklog.CheckSession(ses); err != nil {
		return err
	}
	if !ses.Closed() {
		return fmt.Errorf("redis sessions: close of session %s without a close time: %w", ses.ID, worklog.ErrInvalid)
	}
	keys := []string{
		s.sessionKey(ses.Project, "r:"+ses.ID),
		s.sessionKey(ses.Project, "q"),
		s.sessionKey(ses.Project, "z"),
	}
	err := closeSessionScript.Run(ctx, s.st.rdb, keys,
		ses.ID, ses.Project, millis(ses.StartedAt), millis(ses.ClosedAt), encodeThreads(ses.OpenThreads)).Err()
	if err != nil {
		return fmt.Errorf("redis sessions: close session %s: %w", ses.ID, err)
	}
	return nil
}

// encodeThreads is the JSON array of the values, each as given (they are
// valid JSON: worklog.CheckSession), "" when there are none.
func encodeThreads(ts []json.RawMessage) string {
	if len(ts) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, t := range ts {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(t)
	}
	b.WriteByte(']')
	return b.String()
}

// ClosedSessions implements worklog.SessionStore. Sessions closed at the
// same millisecond come in the order they were first recorded.
func (s *Sessions) ClosedSessions(ctx context.Context, opts worklog.ClosedOptions) ([]worklog.Session, error) {
	limit := opts.Limit
	if limit <= 0 {
		limit = worklog.DefaultMaxSessions
	}
	from := "-inf"
	if !opts.Since.IsZero() {
		// Closes are kept to the millisecond: the first one at or after
		// Since is at Since rounded up.
		ms := opts.Since.UnixMilli()
		if opts.Since.Nanosecond()%int(time.Millisecond) != 0 {
			ms++
		}
		from = strconv.FormatInt(ms, 10)
	}
	res, err := closedSessionsScript.Run(ctx, s.st.rdb, []string{s.sessionKey(opts.Project, "z")},
		from, limit, s.sessionKey(opts.Project, "r:")).Slice()
	if err != nil {
		return nil, fmt.Errorf("redis sessions: closed sessions: %w", err)
	}
	type row struct {
		ses worklog.Session
		seq int64
	}
	rows := make([]row, 0, len(res)/2)
	for i := 0; i+1 < len(res); i += 2 {
		id, _ := res[i].(string)
		f, _ := res[i+1].([]any)
		if len(f) != 5 {
			return nil, fmt.Errorf("redis sessions: closed sessions: unexpected reply %T", res[i+1])
		}
		project, _ := f[0].(string)
		closed, _ := f[2].(string)
		if project != opts.Project || closed == "" {
			continue // another project's tag, or a record gone (never, short of a hand edit)
		}
		r := row{ses: worklog.Session{ID: id, Project: project}}
		var errs []error
		r.ses.ClosedAt, err = fromMillis(closed)
		errs = append(errs, err)
		if started, _ := f[1].(string); started != "" {
			r.ses.StartedAt, err = fromMillis(started)
			errs = append(errs, err)
		}
		if threads, _ := f[3].(string); threads != "" {
			err := json.Unmarshal([]byte(threads), &r.ses.OpenThreads)
			errs = append(errs, err)
			if len(r.ses.OpenThreads) == 0 {
				r.ses.OpenThreads = nil
			}
		}
		seq, _ := f[4].(string)
		r.seq, err = strconv.ParseInt(seq, 10, 64)
		errs = append(errs, err)
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("redis sessions: session %s: %w", id, err)
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b row) int {
		return cmp.Or(b.ses.ClosedAt.Compare(a.ses.ClosedAt), cmp.Compare(a.seq, b.seq))
	})
	var out []worklog.Session
	for _, r := range rows[:min(len(rows), limit)] {
		out = append(out, r.ses)
	}
	return out, nil
}

func fromMillis(v string) (time.Time, error) {
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(ms).UTC(), nil
}
