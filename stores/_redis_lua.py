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
  if ARGV[3] and ARGV[3] ~= '' then
    redis.call('HSET', KEYS[1], 'fp', ARGV[1], 'owner', ARGV[3])
  else
    redis.call('HSET', KEYS[1], 'fp', ARGV[1])
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
local held = redis.call('HMGET', KEYS[1], 'fp', 'response')
if held[1] and (held[1] ~= ARGV[1] or held[2]) then
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

_SUMMARY_FUNCTION = """
local function summary(old, ts_list, targets, kinds)
  local first, last, kind, target = nil, nil, '', ''
  if old then
    local s = cmsgpack.unpack(old)
    first, last, kind, target = s[1], s[2], s[5], s[6]
  end
  for i = 1, #ts_list do
    local ts = tonumber(ts_list[i])
    if not first or ts < first then first = ts end
    if not last or ts > last then last = ts end
    if target == '' then target = targets[i] end
    if kinds[i] ~= '' then kind = kinds[i] end
  end
  return first, last, kind, target
end
"""
"""A call's listing after ``#ts_list`` new events, from its summary before them (``old``, or
nil when the journal holds only the new events: a new life, whatever summary is left).

The summary is a msgpack array ``[first ts, last ts, events, expiry, last kind or '', target or
'']`` in the calls hash."""

_LISTING_FUNCTION = (
    _SUMMARY_FUNCTION
    + """
local function listing(keys, call, n, ts_list, targets, kinds, expiry, target_prefix)
  local old = nil
  if n > #ts_list then old = redis.call('HGET', keys[2], call) end
  local first, last, kind, target = summary(old, ts_list, targets, kinds)
  redis.call('HSET', keys[2], call, cmsgpack.pack({first, last, n, tonumber(expiry), kind, target}))
  redis.call('ZADD', keys[1], last, call)
  if target ~= '' then
    redis.call('ZADD', target_prefix .. target, last, call)
  end
end
"""
)
"""Lists one call after ``#ts_list`` new events (``n`` in its journal now)."""

_LISTINGS_FUNCTION = (
    _SUMMARY_FUNCTION
    + """
local function variadic(command, key, args)
  for i = 1, #args, 1000 do
    redis.call(command, key, unpack(args, i, math.min(i + 999, #args)))
  end
end

local function listings(keys, order, calls, expiry, target_prefix)
  local continuing = {}
  for i = 1, #order do
    local call = calls[order[i]]
    if call.n > #call.ts then continuing[#continuing + 1] = order[i] end
  end
  local old = {}
  for i = 1, #continuing, 1000 do
    local last = math.min(i + 999, #continuing)
    local found = redis.call('HMGET', keys[2], unpack(continuing, i, last))
    for j = i, last do
      if found[j - i + 1] then old[continuing[j]] = found[j - i + 1] end
    end
  end
  local summaries, by_ts, by_target = {}, {}, {}
  local expires = tonumber(expiry)
  for i = 1, #order do
    local id = order[i]
    local call = calls[id]
    local first, last, kind, target = summary(old[id], call.ts, call.targets, call.kinds)
    summaries[#summaries + 1] = id
    summaries[#summaries + 1] = cmsgpack.pack({first, last, call.n, expires, kind, target})
    by_ts[#by_ts + 1] = last
    by_ts[#by_ts + 1] = id
    if target ~= '' then
      local members = by_target[target]
      if not members then
        members = {}
        by_target[target] = members
      end
      members[#members + 1] = last
      members[#members + 1] = id
    end
  end
  variadic('HSET', keys[2], summaries)
  variadic('ZADD', keys[1], by_ts)
  for target, members in pairs(by_target) do
    variadic('ZADD', target_prefix .. target, members)
  end
end
"""
)
"""Lists every call of a batch with one command per index (and per target), not one per call:
a command run from a script costs Redis far more than the members it adds. ``calls[id].n`` is
the number of events in that call's journal now."""

_PUSH_FUNCTION = """
local function push(journal, events, ttl)
  local n = 0
  for i = 1, #events, 1000 do
    n = redis.call('RPUSH', journal, unpack(events, i, math.min(i + 999, #events)))
  end
  redis.call('PEXPIRE', journal, ttl)
  return n
end
"""

APPEND = _PUSH_FUNCTION + "return push(KEYS[1], {ARGV[1]}, ARGV[2])\n"
"""KEYS: journal list. ARGV: event, ttl ms. Returns the number of events in the journal."""

INDEX = (
    _LISTING_FUNCTION
    + "listing(KEYS, ARGV[1], tonumber(ARGV[2]), {ARGV[3]}, {ARGV[4]}, {ARGV[5]}, ARGV[6], "
    + "ARGV[7])\n"
)
"""KEYS: by-time zset, calls hash. ARGV: call id, events in its journal, ts, target or '', kind
or '', expiry (epoch s), the prefix of target zset keys.

The call's target zset is named inside the script, since only the summary there knows the
call's target; it shares the index keys' hash tag, so it is on the node running the script."""

APPEND_MANY = (
    _PUSH_FUNCTION
    + _LISTINGS_FUNCTION
    + """
local entries = cmsgpack.unpack(ARGV[1])
local calls, order = {}, {}
for i = 1, #entries do
  local e = entries[i]
  local call = calls[e[6]]
  if not call then
    call = {journal = e[1], events = {}, ts = {}, targets = {}, kinds = {}}
    calls[e[6]] = call
    order[#order + 1] = e[6]
  end
  local k = #call.events + 1
  call.events[k], call.ts[k], call.targets[k], call.kinds[k] = e[2], e[3], e[4], e[5]
end
for i = 1, #order do
  local call = calls[order[i]]
  call.n = push(call.journal, call.events, ARGV[2])
end
listings(KEYS, order, calls, ARGV[3], ARGV[4])
return #entries
"""
)
"""`APPEND` then `INDEX` for many events in one script, on a single Redis only; each call's
events are pushed together, and the calls are listed together (after every push: a script that
fails halfway, on a key of another type say, leaves the batch's events pushed but not listed).

KEYS: by-time zset, calls hash. ARGV: a msgpack array of entries, ttl ms, expiry (epoch s), the
prefix of target zset keys. An entry is [journal list, event, ts (a float, so no
digit is lost), target or '', kind or '', call id].
The journal keys travel inside the array, undeclared: valid on one Redis, where every key is on
the node running the script, and the reason a batch costs the client one argument instead of
several per event.
"""

PRUNE = """
local now = tonumber(ARGV[1])
local start, size = tonumber(ARGV[2]), tonumber(ARGV[3])
if size < 1 then
  return {0, 0}
end
local window = redis.call('ZRANGE', KEYS[1], start, start + size - 1)
if #window == 0 then
  return {0, 0}
end
local summaries = redis.call('HMGET', KEYS[2], unpack(window))
local removed = 0
for i = 1, #window do
  local call, packed = window[i], summaries[i]
  local expiry, target = nil, nil
  if packed then
    local ok, s = pcall(cmsgpack.unpack, packed)
    if ok and type(s) == 'table' then
      expiry = tonumber(s[4])
      if type(s[6]) == 'string' and s[6] ~= '' then target = s[6] end
    end
    if not expiry then
      expiry = tonumber(redis.call('ZSCORE', KEYS[3], call))
    end
  end
  if not packed or (expiry and expiry <= now) then
    redis.call('ZREM', KEYS[1], call)
    redis.call('HDEL', KEYS[2], call)
    redis.call('ZREM', KEYS[3], call)
    if target then
      redis.call('ZREM', ARGV[4] .. target, call)
    end
    removed = removed + 1
  end
end
return {removed, #window}
"""
"""KEYS: by-time zset, calls hash, the expiry zset older versions of the store kept. ARGV: now
(epoch s), where in the by-time zset to start, how many calls to look at, the prefix of target
zset keys. Returns {calls dropped, calls looked at}.

Looks at a window of calls in order of last activity and drops from every index those whose
journal has expired: by the expiry their summary records or, for a summary the store cannot
read, by the expiry older versions kept for it (without either, the entry is left to the
listing, which skips it with a warning); and those left without a summary. Target zsets are
named inside the script, as in `INDEX`.
"""
