package redis

import goredis "github.com/redis/go-redis/v9"

// The Lua scripts. Each runs atomically on the server. The apply and
// ancestors scripts build their keys from the prefix and the families the
// client resolved (every commit id in them passed ids.Valid, every thread
// id or key ids.ValidKey); KEYS[1] is a key of the batch's family, so a
// cluster client routes the script to the node that holds the family's
// slot, where all the keys it touches live.

// luaCommon is shared by the scripts that walk commits.
const luaCommon = `
local P = ARGV[1]
local function K(f, s) return P .. ':{' .. f .. '}:' .. s end
-- a commit's meta: "depth \t parent \t parent's family ('' = the same)"
local function meta(v)
  local d, p, pf = string.match(v, '^([^\t]*)\t([^\t]*)\t(.*)$')
  return tonumber(d), p, pf
end
`

// applyScript writes a plan of store.PlanBatch, if the facts it was
// planned on still hold, and checks nothing else: the batch's rules are
// the planner's. It first repeats the reads the facts came from (the
// guard) and compares what it gets with what the client read; if any
// differs it writes nothing and returns {"STALE"}, and the client reads
// and plans again. Then it writes, in the plan's order: commits with their
// new references, references to stored commits, creations (first letting
// go of the expired records they replace, as a deletion would), moves,
// dropped checkpoints, new checkpoints, prunes, deletions, and the commits
// left without references. It returns {"OK", freed commits {id, family, ...},
// deleted threads' tenants, {id, tenant, ...} of the expired records
// creations replaced, {key, id, ...} of the index entries (fork and label
// sets) of deleted and replaced threads that the client is to remove}.
//
// A record's field s lists the fork and label sets it is in: a creation
// puts it in the set of the thread it was forked from (forkKey, "" for
// none) and in a set per label, P:b:<sha1 of tenant NUL key NUL value>; a
// move with relabel "1" leaves the label sets of its old labels for those
// of the new ones; a deletion leaves them all. Only with inline set does
// the script write the sets themselves; the field is written either way.
//
// With inline set (a single server, where a script may touch any key) the
// script also writes the index keys, listing entries and expiry scores of
// what it makes, moves and deletes, so that claiming an id and checking
// that it is free happen in one atomic step.
//
// ARGV: prefix, now (µs), inline (1 or 0), expires (µs, 0: no TTL), then
//
//	nguard, per read: kind key field value, where kind is
//	  r: a record, value = its fields v, h and x, each "=value" or "" (missing), joined by tabs
//	  e: HEXISTS key field, value "1" or "0"
//	  k: HGET key field, value "=value" or ""
//	  i: the index key of the object field ("t:id" or "c:id") points at
//	     nothing, or at one of the families in value ("\tF1\tF2\t"), or
//	     at a family that does not hold the object
//	ncommits, per commit: family id parent parentFamily depth blob references
//	nrefs, per stored commit: family id count
//	ncreations, per creation: family id tenantKey tenant forkKey nfields fields... first nentries values... npurge families... nlabels (k v)...
//	  (first is the version of the first history entry: 1, or above for a
//	  pruned thread's copy or load)
//	nmoves, per move: family thread from entry nfields fields... relabel nlabels (k v)...
//	ndrops, per drop: family thread name
//	ncheckpoints, per checkpoint: family thread name value
//	nprunes, per prune: family thread before (the history entries below
//	  before go, newest first, down to the first one missing: a pruned
//	  history is a contiguous run of versions, so what is below the first
//	  gap is gone already)
//	ndeletes, per delete: family thread
//	channel notice: once the batch is written, the script PUBLISHes notice
//	(the JSON of the batch's changes; "" for none) on channel
var applyScript = goredis.NewScript(luaCommon + `
local i = 2
local function nx() local v = ARGV[i]; i = i + 1; return v end
local now, inline, expires = tonumber(nx()), nx() == '1', tonumber(nx())

-- The guard: the facts the plan was made on.
local function raw(v) if v then return '=' .. v end return '' end
for _ = 1, tonumber(nx()) do
  local kind, key, field, want = nx(), nx(), nx(), nx()
  local got
  if kind == 'r' then
    local r = redis.call('HMGET', key, 'v', 'h', 'x')
    got = raw(r[1]) .. '\t' .. raw(r[2]) .. '\t' .. raw(r[3])
  elseif kind == 'e' then
    got = tostring(redis.call('HEXISTS', key, field))
  elseif kind == 'k' then
    got = raw(redis.call('HGET', key, field))
  else
    got = want
    local g = redis.call('GET', key)
    if g and not string.find(want, '\t' .. g .. '\t', 1, true) then
      local id = string.sub(field, 3)
      if string.sub(field, 1, 1) == 't' then
        if redis.call('EXISTS', K(g, 'r:' .. id)) == 1 then got = '' end
      elseif redis.call('HEXISTS', K(g, 'm'), id) == 1 then
        got = ''
      end
    end
  end
  if got ~= want then return {'STALE'} end
end

local freed, tenants, replaced, unlisted = {}, {}, {}, {}
local LP = P .. ':b:'
local function labelKeys(tenant, labels, out)
  for j = 1, #labels, 2 do
    out[#out + 1] = LP .. redis.sha1hex(tenant .. '\0' .. labels[j] .. '\0' .. labels[j + 1])
  end
  return out
end
-- unlist takes thread id out of the sets its record rk lists.
local function unlist(rk, id)
  for key in string.gmatch(redis.call('HGET', rk, 's') or '', '[^\t]+') do
    if inline then
      redis.call('ZREM', key, id)
    else
      unlisted[#unlisted + 1] = key
      unlisted[#unlisted + 1] = id
    end
  end
end
-- unref drops a reference and deletes the commits nothing reaches any
-- more, walking up the parents while that frees them.
local function unref(f, id)
  while id ~= '' do
    if redis.call('HINCRBY', K(f, 'n'), id, -1) > 0 then return end
    local m = redis.call('HGET', K(f, 'm'), id)
    redis.call('HDEL', K(f, 'n'), id)
    if not m then return end
    redis.call('HDEL', K(f, 'm'), id)
    redis.call('HDEL', K(f, 'c'), id)
    freed[#freed + 1] = id
    freed[#freed + 1] = f
    local _, p, pf = meta(m)
    id = p
    if pf ~= '' then f = pf end
  end
end
-- the family and commit of a history entry or checkpoint value
local function target(v, f)
  local c, cf = string.match(v, '^[^\t]*\t[^\t]*\t([^\t]*)\t(.*)$')
  if cf == '' then cf = f end
  return cf, c
end

-- 1, 2: commits and references.
for _ = 1, tonumber(nx()) do
  local f, id, p, pf, d, b, n = nx(), nx(), nx(), nx(), nx(), nx(), nx()
  if pf == f then pf = '' end
  redis.call('HSET', K(f, 'm'), id, d .. '\t' .. p .. '\t' .. pf)
  redis.call('HSET', K(f, 'c'), id, b)
  redis.call('HSET', K(f, 'n'), id, n)
  if inline then redis.call('SET', P .. ':c:' .. id, f) end
end
for _ = 1, tonumber(nx()) do
  local f, id, n = nx(), nx(), nx()
  redis.call('HINCRBY', K(f, 'n'), id, n)
end
-- 3: creations. The expired records they replace go now, their
-- references after the batch's new ones count.
local released = {}
for _ = 1, tonumber(nx()) do
  local f, id, tk, tenant, fk = nx(), nx(), nx(), nx(), nx()
  local fields, hist, labels = {}, {}, {}
  for k = 1, tonumber(nx()) * 2 do fields[k] = nx() end
  local first = tonumber(nx())
  for k = 1, tonumber(nx()) do hist[k] = nx() end
  local purge = {}
  for k = 1, tonumber(nx()) do purge[k] = nx() end
  for k = 1, tonumber(nx()) * 2 do labels[k] = nx() end
  for _, pf in ipairs(purge) do
    local rk, hk, kk = K(pf, 'r:' .. id), K(pf, 'h:' .. id), K(pf, 'k:' .. id)
    unlist(rk, id)
    replaced[#replaced + 1] = id
    replaced[#replaced + 1] = redis.call('HGET', rk, 't') or ''
    released[#released + 1] = {f = pf, vals = redis.call('HVALS', hk)}
    released[#released + 1] = {f = pf, vals = redis.call('HVALS', kk)}
    redis.call('DEL', rk, hk, kk)
  end
  local sets = {}
  if fk ~= '' then sets[1] = fk end
  labelKeys(tenant, labels, sets)
  if #sets > 0 then
    fields[#fields + 1] = 's'
    fields[#fields + 1] = table.concat(sets, '\t')
  end
  redis.call('HSET', K(f, 'r:' .. id), unpack(fields))
  if inline then
    for _, key in ipairs(sets) do redis.call('ZADD', key, 0, id) end
  end
  local hk = K(f, 'h:' .. id)
  for k, e in ipairs(hist) do redis.call('HSET', hk, first + k - 1, e) end
  if inline then
    redis.call('SET', P .. ':t:' .. id, f)
    redis.call('ZADD', P .. ':a', 0, id)
    redis.call('ZADD', tk, 0, id)
    if expires > 0 then redis.call('ZADD', P .. ':x', expires, id) else redis.call('ZREM', P .. ':x', id) end
  end
end
-- 4: moves.
for _ = 1, tonumber(nx()) do
  local f, t, from, e = nx(), nx(), tonumber(nx()), nx()
  local fields = {}
  for k = 1, tonumber(nx()) * 2 do fields[k] = nx() end
  local relabel, labels = nx() == '1', {}
  for k = 1, tonumber(nx()) * 2 do labels[k] = nx() end
  local rk = K(f, 'r:' .. t)
  if relabel then
    local r = redis.call('HMGET', rk, 's', 't')
    local sets = {}
    for key in string.gmatch(r[1] or '', '[^\t]+') do
      if string.sub(key, 1, #LP) == LP then
        if inline then redis.call('ZREM', key, t) end
      else
        sets[#sets + 1] = key
      end
    end
    local n = #sets
    labelKeys(r[2] or '', labels, sets)
    if inline then
      for j = n + 1, #sets do redis.call('ZADD', sets[j], 0, t) end
    end
    if #sets > 0 then
      fields[#fields + 1] = 's'
      fields[#fields + 1] = table.concat(sets, '\t')
    else
      redis.call('HDEL', rk, 's')
    end
  end
  redis.call('HSET', rk, unpack(fields))
  redis.call('HSET', K(f, 'h:' .. t), from + 1, e)
  if inline and expires > 0 then redis.call('ZADD', P .. ':x', expires, t) end
end
-- 5, 6: dropped and new checkpoints.
for _ = 1, tonumber(nx()) do
  local f, t, n = nx(), nx(), nx()
  local kk = K(f, 'k:' .. t)
  local v = redis.call('HGET', kk, n)
  redis.call('HDEL', kk, n)
  unref(target(v, f))
end
for _ = 1, tonumber(nx()) do
  local f, t, n, v = nx(), nx(), nx(), nx()
  redis.call('HSET', K(f, 'k:' .. t), n, v)
end
for _, r in ipairs(released) do
  for _, v in ipairs(r.vals) do unref(target(v, r.f)) end
end
-- 7: prunes, each entry letting go of its reference.
for _ = 1, tonumber(nx()) do
  local f, t, v = nx(), nx(), tonumber(nx()) - 1
  local hk = K(f, 'h:' .. t)
  while v >= 1 do
    local e = redis.call('HGET', hk, v)
    if not e then break end
    redis.call('HDEL', hk, v)
    unref(target(e, f))
    v = v - 1
  end
end
-- 8, 9: deletions, and the commits nothing reaches any more.
for _ = 1, tonumber(nx()) do
  local f, t = nx(), nx()
  local rk, hk, kk = K(f, 'r:' .. t), K(f, 'h:' .. t), K(f, 'k:' .. t)
  tenants[#tenants + 1] = redis.call('HGET', rk, 't') or ''
  unlist(rk, t)
  for _, v in ipairs(redis.call('HVALS', hk)) do unref(target(v, f)) end
  for _, v in ipairs(redis.call('HVALS', kk)) do unref(target(v, f)) end
  redis.call('DEL', rk, hk, kk)
  if inline then
    local ik = P .. ':t:' .. t
    if redis.call('GET', ik) == f then redis.call('DEL', ik) end
    redis.call('ZREM', P .. ':a', t)
    redis.call('ZREM', P .. ':x', t)
  end
end
if inline then
  for j = 1, #freed, 2 do
    local ik = P .. ':c:' .. freed[j]
    if redis.call('GET', ik) == freed[j + 1] then redis.call('DEL', ik) end
  end
end
local channel, notice = nx(), nx()
-- The notice goes out with the writes, so a crash cannot part them. A
-- PUBLISH that fails (an ACL user without the channel) loses the notice,
-- not the batch, which is written: pcall, so the script still says OK.
if notice ~= '' then redis.pcall('PUBLISH', channel, notice) end
return {'OK', freed, tenants, replaced, unlisted}
`)

// ancestorsScript walks from a commit towards the root while the depth is
// above the floor, returning at most a count or a byte budget of commits:
// {"C", next id (” when done), next family, {id, blob, ...}} or {"N"} when
// the first commit does not exist.
//
// ARGV: prefix, family, id, floor, max commits, max bytes.
var ancestorsScript = goredis.NewScript(luaCommon + `
local f, id, floor = ARGV[2], ARGV[3], tonumber(ARGV[4])
local maxn, maxb = tonumber(ARGV[5]), tonumber(ARGV[6])
local out, n, bytes = {}, 0, 0
while id ~= '' and n < maxn and bytes < maxb do
  local m = redis.call('HGET', K(f, 'm'), id)
  if not m then
    if n == 0 then return {'N'} end
    return {'E', id}
  end
  local d, p, pf = meta(m)
  if d <= floor then id = '' break end
  local b = redis.call('HGET', K(f, 'c'), id)
  out[#out + 1] = id
  out[#out + 1] = b
  n = n + 1
  bytes = bytes + #b
  id = p
  if pf ~= '' then f = pf end
end
return {'C', id, f, out}
`)

// historyScript reads a page of a thread's history, newest first:
// {top version, {values...}} for versions top, top-1, ..., down to the
// oldest entry a prune left (fewer values than asked for end the
// history), or nil when the
// thread does not exist or has expired. KEYS: record, history. ARGV:
// before, limit, now (µs).
var historyScript = goredis.NewScript(`
local r = redis.call('HMGET', KEYS[1], 'v', 'x')
if not r[1] then return nil end
if r[2] and r[2] ~= '' and tonumber(r[2]) <= tonumber(ARGV[3]) then return nil end
local top = tonumber(r[1])
local before, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
if before > 0 and before - 1 < top then top = before - 1 end
local fields = {}
for x = top, math.max(1, top - limit + 1), -1 do fields[#fields + 1] = x end
if #fields == 0 then return {top, {}} end
local vals = redis.call('HMGET', KEYS[2], unpack(fields))
-- A pruned history (retention) ends at its first missing entry.
local out = {}
for k = 1, #vals do
  if not vals[k] then break end
  out[k] = vals[k]
end
return {top, out}
`)

// claimScript points an index key at a family: 1 when it was free, 0 when
// it already pointed there, the other family otherwise.
var claimScript = goredis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then redis.call('SET', KEYS[1], ARGV[1]) return 1 end
if v == ARGV[1] then return 0 end
return v
`)

// takeoverScript points an index key at the family ARGV[1] if it still
// points at the family ARGV[2], as claim found it.
var takeoverScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[2] then redis.call('SET', KEYS[1], ARGV[1]) return 1 end
return 0
`)

// delistScript removes thread ARGV[2] from the tenant listing KEYS[1]
// unless a live thread of that id and tenant (ARGV[3]) exists now. It
// reads the index and record keys, so it runs only on a single server.
// ARGV: prefix, id, tenant, now (µs).
var delistScript = goredis.NewScript(`
local f = redis.call('GET', ARGV[1] .. ':t:' .. ARGV[2])
if f then
  local r = redis.call('HMGET', ARGV[1] .. ':{' .. f .. '}:r:' .. ARGV[2], 't', 'x')
  local live = r[1] and not (r[2] and r[2] ~= '' and tonumber(r[2]) <= tonumber(ARGV[4]))
  if live and r[1] == ARGV[3] then return 0 end
end
return redis.call('ZREM', KEYS[1], ARGV[2])
`)

// unclaimScript deletes an index key if it still points at the family.
var unclaimScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// migrateScript moves the schema version from ARGV[1] to ARGV[2].
var migrateScript = goredis.NewScript(`
local v = tonumber(redis.call('GET', KEYS[1]) or '0')
if v == tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[2]) return 1 end
return 0
`)
