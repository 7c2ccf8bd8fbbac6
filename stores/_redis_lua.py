"""Lua scripts of `RedisStore`: each runs atomically on the server, so no half-written state.

Scripts touch only the keys they are given. Per-call scripts get keys of one call (one hash
tag, so one cluster slot); index scripts get only the global index keys (another tag). A round
is a hash: ``fp`` (the fingerprint of the request that holds it), ``owner`` (the token of the
claim that created it, when that claim had one) and, once done, ``response``.
"""

from __future__ import annotations

CLAIM = """
local fp = redis.call('HGET', KEYS[1], 'fp')
if not fp then
  redis.call('HSET', KEYS[1], 'fp', ARGV[1])
  if ARGV[3] and ARGV[3] ~= '' then
    redis.call('HSET', KEYS[1], 'owner', ARGV[3])
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {'fresh'}
end
if fp ~= ARGV[1] then
  return {'conflict'}
end
local response = redis.call('HGET', KEYS[1], 'response')
if response then
  return {'duplicate', response}
end
return {'in_progress'}
"""
"""KEYS: round. ARGV: fingerprint, ttl ms[, owner]. Returns {status[, response]}.

The owner is recorded only when the round is created; absent or empty means none.
"""

COMPLETE = """
local fp = redis.call('HGET', KEYS[1], 'fp')
if fp and (fp ~= ARGV[1] or redis.call('HEXISTS', KEYS[1], 'response') == 1) then
  return 0
end
redis.call('HSET', KEYS[1], 'fp', ARGV[1], 'response', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""
"""KEYS: round. ARGV: fingerprint, response, ttl ms. Returns 1 if recorded."""

RELEASE = """
if redis.call('HGET', KEYS[1], 'fp') ~= ARGV[1]
    or redis.call('HEXISTS', KEYS[1], 'response') == 1 then
  return 0
end
if ARGV[2] and ARGV[2] ~= '' and redis.call('HGET', KEYS[1], 'owner') ~= ARGV[2] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
"""
"""KEYS: round. ARGV: fingerprint[, owner]. Returns 1 if a claim was dropped.

With an owner (absent or empty means none), only a claim created with that owner is dropped.
"""

RENEW = """
if redis.call('HGET', KEYS[1], 'fp') ~= ARGV[1]
    or redis.call('HGET', KEYS[1], 'owner') ~= ARGV[2]
    or redis.call('HEXISTS', KEYS[1], 'response') == 1 then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""
"""KEYS: round. ARGV: fingerprint, owner, ttl ms. Returns 1 if our claim was extended."""

_APPEND_FUNCTION = """
local function changes(summary, n, ts_in, target_in, kind)
  local seen = redis.call('HMGET', summary, 'first_ts', 'last_ts', 'target')
  local first, last, target = tonumber(seen[1]), seen[2], seen[3] or ''
  local ts = tonumber(ts_in)
  local fields = {'events', n}
  if not first or ts < first then
    fields[#fields + 1] = 'first_ts'
    fields[#fields + 1] = ts_in
  end
  if not last or ts > tonumber(last) then
    last = ts_in
    fields[#fields + 1] = 'last_ts'
    fields[#fields + 1] = ts_in
  end
  if target == '' and target_in ~= '' then
    target = target_in
    fields[#fields + 1] = 'target'
    fields[#fields + 1] = target_in
  end
  if kind ~= '' then
    fields[#fields + 1] = 'last_kind'
    fields[#fields + 1] = kind
  end
  return fields, last, target
end

local function append(journal, summary, event, ttl, ts_in, target_in, kind)
  local n = redis.call('RPUSH', journal, event)
  local fields, last, target
  if n == 1 then
    -- Every field is written, '' for none: nothing of a summary that outlived its journal
    -- survives, without a DEL for every new call.
    fields = {'events', 1, 'first_ts', ts_in, 'last_ts', ts_in, 'target', target_in,
      'last_kind', kind}
    last, target = ts_in, target_in
  else
    fields, last, target = changes(summary, n, ts_in, target_in, kind)
  end
  redis.call('HSET', summary, unpack(fields))
  redis.call('PEXPIRE', journal, ttl)
  redis.call('PEXPIRE', summary, ttl)
  return {last, target}
end
"""

APPEND = (
    _APPEND_FUNCTION
    + "return append(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])\n"
)
"""KEYS: journal list, summary hash. ARGV: event, ttl ms, ts, target or '', kind or ''.

Returns {last_ts, target or ''} for the index. A new journal (first event) starts a new summary.
"""

INDEX = """
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
if KEYS[4] then
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[4])
  redis.call('ZADD', KEYS[4], ARGV[2], ARGV[1])
end
"""
"""KEYS: by-time zset, expiry zset, call->target hash[, target zset].

ARGV: call id, last ts, expiry (epoch s)[, target]. Lists the call under its latest activity.
"""

APPEND_MANY = (
    _APPEND_FUNCTION
    + """
local entries = cmsgpack.unpack(ARGV[1])
local listing, calls = {}, {}
for i = 1, #entries do
  local e = entries[i]
  local call = e[7]
  if not listing[call] then
    calls[#calls + 1] = call
  end
  listing[call] = append(e[1], e[2], e[3], ARGV[2], e[4], e[5], e[6])
end
for i = 1, #calls do
  local call = calls[i]
  local last, target = listing[call][1], listing[call][2]
  redis.call('ZADD', KEYS[1], last, call)
  redis.call('ZADD', KEYS[2], ARGV[3], call)
  if target ~= '' then
    redis.call('HSET', KEYS[3], call, target)
    redis.call('ZADD', ARGV[4] .. target, last, call)
  end
end
return #entries
"""
)
"""`APPEND` for many events in one script, then `INDEX` once per call, on a single Redis only.

KEYS: by-time zset, expiry zset, call->target hash. ARGV: a msgpack array of entries, ttl ms,
expiry (epoch s), the prefix of target zset keys. An entry is [journal list, summary hash,
event, ts (a float: Redis writes a Lua number with all its digits), target or '', kind or '',
call id]; the call is listed under its summary's target.
The per-call keys travel inside the array, undeclared: valid on one Redis, where every key is
on the node running the script, and the reason a batch costs the client one argument instead
of fifteen per event.
"""

PRUNE = """
local now = tonumber(ARGV[1])
local removed = 0
for i = 2, #ARGV, 2 do
  local member = ARGV[i]
  local expires = tonumber(redis.call('ZSCORE', KEYS[2], member))
  if expires and expires <= now then
    redis.call('ZREM', KEYS[1], member)
    redis.call('ZREM', KEYS[2], member)
    redis.call('HDEL', KEYS[3], member)
    local target_key = tonumber(ARGV[i + 1])
    if target_key > 0 then
      redis.call('ZREM', KEYS[target_key], member)
    end
    removed = removed + 1
  end
end
return removed
"""
"""KEYS: by-time zset, expiry zset, call->target hash, then target zsets.

ARGV: now (epoch s), then pairs (call id, index in KEYS of its target zset or 0). Re-checks the
expiry inside the script, so a call refreshed since it was read is left alone.
"""
