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

// applyScript checks every precondition of a batch, in the batch's order and
// against the state the batch's own earlier changes leave, and only then
// writes. A record whose expiry is at or before now counts as missing: it
// cannot be moved, checkpointed or deleted (except by the sweeper, whose
// deletions demand an expired record), and a creation of its id first
// lets it go as a deletion would. It returns {"OK", freed commits {id,
// family, ...}, deleted threads' tenants, {id, tenant, ...} of the expired
// records creations replaced} or {"ERR", kind, message}.
//
// With inline set (a single server, where a script may touch any key) the
// script also writes the index keys, listing entries and expiry scores of
// what it makes, moves and deletes, after checking that an index key that
// points at another family points at nothing live there: claiming and
// checking happen in one atomic step.
//
// ARGV: prefix, now (µs), inline (1 or 0), expires (µs, 0: no TTL), then
//
//	ncommits, per commit: family id parent parentFamily depth blob
//	ncreations, per creation: family id head headFamily tenantKey nfields fields... nentries (commit family value)...
//	nmoves, per move: family thread from head headFamily entry nfields fields...
//	ndrops, per drop: family thread name
//	ncheckpoints, per checkpoint: family thread name commit commitFamily value
//	ndeletes, per delete: family thread version sweep (1: the record must have expired)
//	channel notice: once the batch is written, the script PUBLISHes notice
//	(the JSON of the batch's changes; "" for none) on channel
var applyScript = goredis.NewScript(luaCommon + `
local i = 2
local function nx() local v = ARGV[i]; i = i + 1; return v end
local function fail(kind, msg) return {'ERR', kind, msg} end
local now, inline, expires = tonumber(nx()), nx() == '1', tonumber(nx())

local commits, creates, moves, drops, cps, dels = {}, {}, {}, {}, {}, {}
for j = 1, tonumber(nx()) do
  commits[j] = {f = nx(), id = nx(), p = nx(), pf = nx(), d = nx(), b = nx()}
end
for j = 1, tonumber(nx()) do
  local c = {f = nx(), id = nx(), h = nx(), hf = nx(), tk = nx(), fields = {}, hist = {}, purge = {}}
  for k = 1, tonumber(nx()) * 2 do c.fields[k] = nx() end
  for k = 1, tonumber(nx()) do c.hist[k] = {c = nx(), f = nx(), v = nx()} end
  creates[j] = c
end
for j = 1, tonumber(nx()) do
  local m = {f = nx(), t = nx(), from = tonumber(nx()), h = nx(), hf = nx(), e = nx(), fields = {}}
  for k = 1, tonumber(nx()) * 2 do m.fields[k] = nx() end
  moves[j] = m
end
for j = 1, tonumber(nx()) do drops[j] = {f = nx(), t = nx(), n = nx()} end
for j = 1, tonumber(nx()) do cps[j] = {f = nx(), t = nx(), n = nx(), c = nx(), cf = nx(), v = nx()} end
for j = 1, tonumber(nx()) do dels[j] = {f = nx(), t = nx(), v = tonumber(nx()), sweep = nx() == '1'} end
local channel, notice = nx(), nx()

-- Checks.
local new = {}
local function exists(f, id)
  return id == '' or new[id] or redis.call('HEXISTS', K(f, 'm'), id) == 1
end
for _, c in ipairs(commits) do
  if new[c.id] or redis.call('HEXISTS', K(c.f, 'm'), c.id) == 1 then
    return fail('conflict', 'commit ' .. c.id .. ' exists')
  end
  if inline then
    local g = redis.call('GET', P .. ':c:' .. c.id)
    if g and g ~= c.f and redis.call('HEXISTS', K(g, 'm'), c.id) == 1 then
      return fail('conflict', 'commit ' .. c.id .. ' exists')
    end
  end
  if not exists(c.pf, c.p) then
    return fail('notfound', 'commit ' .. c.id .. ': parent ' .. c.p)
  end
  new[c.id] = true
end
-- stored returns the version of a stored record, nil when there is none
-- or it has expired, and whether it exists at all.
local function stored(rk)
  local r = redis.call('HMGET', rk, 'v', 'x')
  if not r[1] then return nil, false end
  if r[2] and r[2] ~= '' and tonumber(r[2]) <= now then return nil, true end
  return tonumber(r[1]), true
end
-- Threads as the batch leaves them: record key -> version.
local version = {}
local function lookup(f, t)
  local rk = K(f, 'r:' .. t)
  if version[rk] then return version[rk] end
  return (stored(rk))
end
local making = {}
for _, c in ipairs(creates) do
  local rk = K(c.f, 'r:' .. c.id)
  if making[c.id] or version[rk] then return fail('conflict', 'thread ' .. c.id .. ' exists') end
  local v, any = stored(rk)
  if v then return fail('conflict', 'thread ' .. c.id .. ' exists') end
  if any then c.purge[#c.purge + 1] = c.f end
  if inline then
    local g = redis.call('GET', P .. ':t:' .. c.id)
    if g and g ~= c.f then
      local gv, gany = stored(K(g, 'r:' .. c.id))
      if gv then return fail('conflict', 'thread ' .. c.id .. ' exists') end
      if gany then c.purge[#c.purge + 1] = g end
    end
  end
  if not exists(c.hf, c.h) then return fail('notfound', 'thread ' .. c.id .. ': head ' .. c.h) end
  for _, e in ipairs(c.hist) do
    if not exists(e.f, e.c) then return fail('notfound', 'thread ' .. c.id .. ': history commit ' .. e.c) end
  end
  making[c.id] = true
  version[rk] = #c.hist
end
for _, m in ipairs(moves) do
  local v = lookup(m.f, m.t)
  if not v then return fail('notfound', 'thread ' .. m.t) end
  if v ~= m.from then
    return fail('conflict', 'thread ' .. m.t .. ' is at version ' .. v .. ', not ' .. m.from)
  end
  if not exists(m.hf, m.h) then return fail('notfound', 'thread ' .. m.t .. ': head ' .. m.h) end
  version[K(m.f, 'r:' .. m.t)] = m.from + 1
end
local dropped = {}
for _, d in ipairs(drops) do
  if making[d.t] or not stored(K(d.f, 'r:' .. d.t)) then return fail('notfound', 'thread ' .. d.t) end
  local kk = K(d.f, 'k:' .. d.t)
  if dropped[kk .. '\0' .. d.n] or redis.call('HEXISTS', kk, d.n) == 0 then
    return fail('notfound', 'checkpoint of thread ' .. d.t)
  end
  dropped[kk .. '\0' .. d.n] = true
end
local added = {}
for _, c in ipairs(cps) do
  if not lookup(c.f, c.t) then return fail('notfound', 'thread ' .. c.t) end
  if c.c == '' or not exists(c.cf, c.c) then return fail('notfound', 'checkpoint commit ' .. c.c) end
  local kk = K(c.f, 'k:' .. c.t)
  local key = kk .. '\0' .. c.n
  if added[key] or (not dropped[key] and redis.call('HEXISTS', kk, c.n) == 1) then
    return fail('conflict', 'checkpoint of thread ' .. c.t .. ' exists')
  end
  added[key] = true
end
local deleted = {}
for _, d in ipairs(dels) do
  local rk = K(d.f, 'r:' .. d.t)
  local v
  if d.sweep then
    -- The sweeper deletes what has expired, and nothing else.
    local live, any = stored(rk)
    if live or not any or making[d.t] then return fail('notfound', 'expired thread ' .. d.t) end
    v = tonumber(redis.call('HGET', rk, 'v'))
  else
    v = lookup(d.f, d.t)
    if making[d.t] or not stored(rk) then v = nil end
  end
  if not v or deleted[rk] then return fail('notfound', 'thread ' .. d.t) end
  deleted[rk] = true
  if d.v ~= 0 and v ~= d.v then
    return fail('conflict', 'thread ' .. d.t .. ' is at version ' .. v .. ', not ' .. d.v)
  end
end

-- Writes.
local freed, tenants, replaced = {}, {}, {}
local function ref(f, id)
  if id ~= '' then redis.call('HINCRBY', K(f, 'n'), id, 1) end
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
-- the commit and family of a history entry or checkpoint value
local function target(v, f)
  local c, cf = string.match(v, '^[^\t]*\t[^\t]*\t([^\t]*)\t(.*)$')
  if cf == '' then cf = f end
  return cf, c
end
for _, c in ipairs(commits) do
  local pf = c.pf
  if pf == c.f then pf = '' end
  redis.call('HSET', K(c.f, 'm'), c.id, c.d .. '\t' .. c.p .. '\t' .. pf)
  redis.call('HSET', K(c.f, 'c'), c.id, c.b)
  redis.call('HSET', K(c.f, 'n'), c.id, 0)
  ref(c.pf, c.p)
  if inline then redis.call('SET', P .. ':c:' .. c.id, c.f) end
end
-- Expired records that creations replace: their keys go now, their
-- references after the batch's new ones count.
local released = {}
for _, c in ipairs(creates) do
  for _, f in ipairs(c.purge) do
    local rk, hk, kk = K(f, 'r:' .. c.id), K(f, 'h:' .. c.id), K(f, 'k:' .. c.id)
    replaced[#replaced + 1] = c.id
    replaced[#replaced + 1] = redis.call('HGET', rk, 't') or ''
    released[#released + 1] = {f = f, vals = redis.call('HVALS', hk)}
    released[#released + 1] = {f = f, vals = redis.call('HVALS', kk)}
    redis.call('DEL', rk, hk, kk)
  end
  redis.call('HSET', K(c.f, 'r:' .. c.id), unpack(c.fields))
  local hk = K(c.f, 'h:' .. c.id)
  for v, e in ipairs(c.hist) do
    redis.call('HSET', hk, v, e.v)
    ref(e.f, e.c)
  end
  if inline then
    redis.call('SET', P .. ':t:' .. c.id, c.f)
    redis.call('ZADD', P .. ':a', 0, c.id)
    redis.call('ZADD', c.tk, 0, c.id)
    if expires > 0 then redis.call('ZADD', P .. ':x', expires, c.id) else redis.call('ZREM', P .. ':x', c.id) end
  end
end
for _, m in ipairs(moves) do
  redis.call('HSET', K(m.f, 'r:' .. m.t), unpack(m.fields))
  redis.call('HSET', K(m.f, 'h:' .. m.t), m.from + 1, m.e)
  ref(m.hf, m.h)
  if inline and expires > 0 then redis.call('ZADD', P .. ':x', expires, m.t) end
end
-- New references count before old ones are let go: a batch that replaces
-- a checkpoint never frees what the new one keeps.
for _, c in ipairs(cps) do ref(c.cf, c.c) end
for _, d in ipairs(drops) do
  local kk = K(d.f, 'k:' .. d.t)
  local v = redis.call('HGET', kk, d.n)
  redis.call('HDEL', kk, d.n)
  unref(target(v, d.f))
end
for _, c in ipairs(cps) do redis.call('HSET', K(c.f, 'k:' .. c.t), c.n, c.v) end
for _, r in ipairs(released) do
  for _, v in ipairs(r.vals) do unref(target(v, r.f)) end
end
for _, d in ipairs(dels) do
  local rk, hk, kk = K(d.f, 'r:' .. d.t), K(d.f, 'h:' .. d.t), K(d.f, 'k:' .. d.t)
  tenants[#tenants + 1] = redis.call('HGET', rk, 't') or ''
  for _, v in ipairs(redis.call('HVALS', hk)) do unref(target(v, d.f)) end
  for _, v in ipairs(redis.call('HVALS', kk)) do unref(target(v, d.f)) end
  redis.call('DEL', rk, hk, kk)
  if inline then
    local ik = P .. ':t:' .. d.t
    if redis.call('GET', ik) == d.f then redis.call('DEL', ik) end
    redis.call('ZREM', P .. ':a', d.t)
    redis.call('ZREM', P .. ':x', d.t)
  end
end
if inline then
  for j = 1, #freed, 2 do
    local ik = P .. ':c:' .. freed[j]
    if redis.call('GET', ik) == freed[j + 1] then redis.call('DEL', ik) end
  end
end
-- The notice goes out with the writes, so a crash cannot part them. A
-- PUBLISH that fails (an ACL user without the channel) loses the notice,
-- not the batch, which is written: pcall, so the script still says OK.
if notice ~= '' then redis.pcall('PUBLISH', channel, notice) end
return {'OK', freed, tenants, replaced}
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
// {top version, {values...}} for versions top, top-1, ..., or nil when the
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
return {top, redis.call('HMGET', KEYS[2], unpack(fields))}
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
