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
    if kinds[i] ~= '' and (kind == '' or not last or ts >= last) then kind = kinds[i] end
    if not first or ts < first then first = ts end
    if not last or ts > last then last = ts end
    if target == '' then target = targets[i] end
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
    + """
local function variadic(command, key, args)
  for i = 1, #args, 1000 do
    redis.call(command, key, unpack(args, i, math.min(i + 999, #args)))
  end
end

local batch, events, ttl = ARGV[6], ARGV[1], tonumber(ARGV[3])
local now, limit, expires = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[4])
local entries = cmsgpack.unpack(ARGV[2])
local order, first_of, last_of, next_of, offsets, offset = {}, {}, {}, {}, {}, 0
for i = 1, #entries do
  local id = entries[i][1]
  offsets[i] = offset
  offset = offset + entries[i][6]
  local previous = last_of[id]
  if previous then
    next_of[previous] = i
  else
    first_of[id] = i
    order[#order + 1] = id
  end
  last_of[id] = i
end
local old = {}
for i = 1, #order, 1000 do
  local last = math.min(i + 999, #order)
  local found = redis.call('HMGET', KEYS[2], unpack(order, i, last))
  for j = i, last do old[j] = found[j - i + 1] end
end

local batches = string.match(batch, '^(.*:)')
local function number(v) return type(v) == 'number' end
local function count(v) return type(v) == 'number' and v >= 0 and v == math.floor(v) end
local function readable(s)
  if type(s) ~= 'table' or not (number(s[1]) and number(s[2]) and count(s[3])
      and number(s[4]) and type(s[5]) == 'string' and type(s[6]) == 'string') then
    return false
  end
  if s[7] == nil then return true end
  if not count(s[7]) or type(s[8]) ~= 'table' or #s[8] % 3 ~= 0 then return false end
  for j = 1, #s[8], 3 do
    local key = s[8][j]
    if type(key) ~= 'string' or string.sub(key, 1, #batches) ~= batches
        or not count(s[8][j + 1]) or not count(s[8][j + 2]) then
      return false
    end
  end
  return true
end

local kept, alive = {}, {}
for i = 1, #order do
  local ok, s = false, nil
  if old[i] then ok, s = pcall(cmsgpack.unpack, old[i]) end
  if ok and readable(s) and s[4] > now then
    if s[7] == nil then s[7], s[8] = s[3], {} end
    if s[7] > 0 then alive[entries[first_of[order[i]]][2]] = false end
    for j = 1, #s[8], 3 do alive[s[8][j]] = false end
    kept[i] = s
  end
end
for key, _ in pairs(alive) do
  local left = redis.call('PTTL', key)
  alive[key] = left ~= -2
  if left >= 0 and left < ttl then redis.call('PEXPIRE', key, ttl) end
end

local function move(list, head, pointers)
  if head > 0 then redis.call('LTRIM', list, 0, head - 1) else redis.call('DEL', list) end
  local moved = {}
  for j = 1, #pointers, 3 do
    local from, length = pointers[j + 1], pointers[j + 2]
    local event
    if pointers[j] == batch then
      event = string.sub(events, from + 1, from + length)
    else
      event = redis.call('GETRANGE', pointers[j], from, from + length - 1)
    end
    if event ~= '' then moved[#moved + 1] = event end
  end
  if #moved > 0 then push(list, moved, ttl) end
  return head + #moved
end

local summaries, by_ts, by_target = {}, {}, {}
for i = 1, #order do
  local id = order[i]
  local e = first_of[id]
  local list = entries[e][2]
  local first, last, n, kind, target, head, pointers = nil, nil, 0, '', '', 0, {}
  local s = kept[i]
  if s then
    head = s[7]
    if head > 0 and not alive[list] then head = 0 end
    for j = 1, #s[8], 3 do
      if alive[s[8][j]] then
        pointers[#pointers + 1] = s[8][j]
        pointers[#pointers + 1] = s[8][j + 1]
        pointers[#pointers + 1] = s[8][j + 2]
      end
    end
    n = head + #pointers / 3
    if n > 0 then first, last, kind, target = s[1], s[2], s[5], s[6] end
  end
  while e do
    local entry = entries[e]
    local ts = tonumber(entry[3])
    if entry[5] ~= '' and (kind == '' or not last or ts >= last) then kind = entry[5] end
    if not first or ts < first then first = ts end
    if not last or ts > last then last = ts end
    if target == '' then target = entry[4] end
    if #pointers >= 3 * limit then
      head = move(list, head, pointers)
      pointers = {}
    end
    pointers[#pointers + 1] = batch
    pointers[#pointers + 1] = offsets[e]
    pointers[#pointers + 1] = entry[6]
    e = next_of[e]
  end
  n = head + #pointers / 3
  summaries[#summaries + 1] = id
  summaries[#summaries + 1] = cmsgpack.pack({first, last, n, expires, kind, target, head, pointers})
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
redis.call('SET', batch, events, 'PX', ttl)
variadic('HSET', KEYS[2], summaries)
variadic('ZADD', KEYS[1], by_ts)
for target, members in pairs(by_target) do
  variadic('ZADD', ARGV[5] .. target, members)
end
return #entries
"""
)
"""Journal events on a single Redis, in one script per batch, which is kept whole as one string.

A call's summary in the calls hash is a msgpack array ``[first ts, last ts, events, expiry,
last kind or '', target or '', head, pointers]``: its events are the ``head`` events of its own
list, then those the pointers locate (``[batch key, offset, length]`` each, in order). So a call
of a few rounds costs no key of its own: its events are read from the batches they came in.
Each later event of a call extends its list and the batches it points into (never shortening
a batch: it is shared with other calls), so they live as long as its journal. An event past
``limit`` pointers first moves the pointed events to the end of the call's list, so that its
summary, rewritten at each event, stays small and a long call keeps few batches alive. A
summary of an older layout (six elements: every event in the list) goes on with ``head`` set
to its events; one that has expired, or that the store cannot read (a count that is not a whole
number, a pointer outside the journal's batches), or none of whose keys is left, starts the
call afresh (an id used again). Events whose key is gone are dropped from the count. The batch
is written last, so a script that fails halfway leaves none behind.

The calls are listed together, with one command per index (and per target), not one per call:
a command run from a script costs Redis far more than the members it adds.

KEYS: by-time zset, calls hash. ARGV: the batch (its events, concatenated), a msgpack array of
entries ``[call id, the call's list key, ts (a float, so no digit is lost), target or '', kind
or '', length]`` in batch order, ttl ms, expiry (epoch s), the prefix of target zset keys, the
batch key, now (epoch s), the pointer limit. The batch key, the list keys and the target zsets
are undeclared: valid on one Redis, where every key is on the node running the script.
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

_NOW_FUNCTION = """
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
"""
"""The Redis server's time in epoch seconds: what task due times are decided on, whatever the
clocks of the replicas that call the scripts. (Redis 5 and later replicate a script's effects,
not the script, so reading the time before writing is allowed.)"""

PUT_TASK = (
    _NOW_FUNCTION
    + """
local clock = now()
local held = redis.call('HMGET', KEYS[1], 'version', 'fence', 'due')
local version, fence = tonumber(ARGV[2]), tonumber(ARGV[9])
if held[1] then
  if tonumber(held[1]) ~= version - 1 then
    return 0
  end
  local stored = tonumber(held[2] or '0')
  if fence < stored or (fence > stored and held[3] and tonumber(held[3]) > clock) then
    return 0
  end
elseif version ~= 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'status', ARGV[3], 'target', ARGV[4],
  'created', ARGV[5], 'updated', ARGV[6], 'record', ARGV[7], 'fence', ARGV[9])
local due = ''
if ARGV[10] == '' then
  redis.call('HDEL', KEYS[1], 'due')
else
  due = string.format('%.6f', clock + tonumber(ARGV[10]))
  redis.call('HSET', KEYS[1], 'due', due)
end
redis.call('PEXPIRE', KEYS[1], ARGV[8])
if KEYS[2] then
  if due == '' then
    redis.call('ZREM', KEYS[2], ARGV[1])
  else
    redis.call('ZADD', KEYS[2], due, ARGV[1])
  end
  redis.call('ZADD', KEYS[3], string.format('%.6f', clock + tonumber(ARGV[8]) / 1000), ARGV[1])
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', string.format('%.6f', clock))
end
return {1, due}
"""
)
"""KEYS: the task's hash[, the due index, the listing index (a single Redis only: on a
cluster they live on another node and are written apart)]. ARGV: task id, version, status,
target, created, updated, record, ttl ms, fence, due in (seconds from now, '' for none).
Returns 0 when the stored version is not the one before ``version`` or the fence refuses the
write (`stores._fences`), else ``{1, due}``: when the task is due (epoch seconds on this
server's clock, '' for none), for a cluster's due index. The listing is scored by expiry, and
expired tasks leave it.
"""

RENEW_TASK = (
    _NOW_FUNCTION
    + """
local held = redis.call('HMGET', KEYS[1], 'fence', 'due')
if not held[2] or tonumber(held[1] or '0') ~= tonumber(ARGV[2]) then
  return 0
end
local due = string.format('%.6f', now() + tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], 'due', due)
if KEYS[2] then
  redis.call('ZADD', KEYS[2], due, ARGV[1])
end
return {1, due}
"""
)
"""KEYS: the task's hash[, the due index (a single Redis only)]. ARGV: task id, fence, lease
(seconds). Returns ``{1, due}`` when the task, held under ``fence``, is now due ``lease``
seconds from this server's now; 0 when it is not held under that fence (or not at all)."""

GET_TASK = (
    _NOW_FUNCTION
    + """
local found = redis.call('HMGET', KEYS[1], 'version', 'status', 'target', 'created', 'updated',
  'record', 'fence', 'due')
found[9] = string.format('%.6f', now())
return found
"""
)
"""KEYS: the task's hash. Returns its fields (all nil for none) and this server's time, so the
reader learns how long the task has until it is due: a script so that a serving store reads
tasks over its shared connection, as it writes them."""

DUE_TASKS = (
    _NOW_FUNCTION
    + """
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%.6f', now()), 'LIMIT', 0,
  tonumber(ARGV[1]))
"""
)
"""KEYS: the due index. ARGV: how many at most. The ids due by this server's time, earliest
first."""

CLOCK = _NOW_FUNCTION + "return string.format('%.6f', now())\n"
"""This server's time in epoch seconds (a string: a script's numbers come back as integers)."""

PUBLISH = """
return redis.call('PUBLISH', ARGV[1], ARGV[2])
"""
"""ARGV: channel, message. A script so that a serving store publishes over its shared
connection instead of a pooled one."""
