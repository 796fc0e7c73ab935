"""The queue's state changes that must be atomic, as Lua scripts run by Redis.

Each checks the task hash before it changes anything, so two workers (or a
worker and an operator) racing on one task cannot both win: a claim is
identified by (worker, attempts), and a stale one changes nothing.
"""

# The last lines of a task's log (field 'line'), oldest first, joined by newlines.
_TAIL = """
local function log_tail(key, count)
  local rows = redis.call('XREVRANGE', key, '+', '-', 'COUNT', count)
  local lines = {}
  for i = #rows, 1, -1 do
    local f = rows[i][2]
    local line = ''
    for j = 1, #f, 2 do if f[j] == 'line' then line = f[j + 1] end end
    lines[#lines + 1] = line
  end
  return table.concat(lines, '\\n')
end
"""

# One claim in one round trip: retries whose backoff is over become deliveries,
# then the entry the caller's blocking read was handed (if any), else one whose
# worker stopped heart-beating (idle past the visibility timeout: XAUTOCLAIM),
# else a new delivery; finished or cancelled tasks are acknowledged and skipped,
# and a re-claimed task whose worker died during more runs than its retries is
# a dead letter. The task's hash and log keys are named by prefix + task id:
# they share the queue's hash tag, so they live in the stream's slot.
# KEYS: stream, delayed, dead, workers.
# ARGV: group, worker, now, min_idle_ms, task key prefix, log key prefix, log tail lines,
#       given entry id ('' for none), given entry's task id
# Returns {'run', task_id, entry, attempt, spec, params}, {'again'} (only skipped
# entries so far: call again), or {'none', seconds until the next retry is due}.
CLAIM = _TAIL + """
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[3], 'LIMIT', 0, 100)
for _, id in ipairs(due) do
  if redis.call('ZREM', KEYS[2], id) == 1
     and redis.call('HGET', ARGV[5] .. id, 'state') == 'failed' then
    redis.call('XADD', KEYS[1], '*', 'task_id', id)
  end
end
local function task_of(fields)
  for j = 1, #fields, 2 do if fields[j] == 'task_id' then return fields[j + 1] end end
  return ''
end
local function drop(entry)
  redis.call('XACK', KEYS[1], ARGV[1], entry); redis.call('XDEL', KEYS[1], entry)
end
local given = ARGV[8]
for _ = 1, 50 do
  local entry, task_id, reclaimed
  if given ~= '' then
    entry, task_id, reclaimed = given, ARGV[9], false
    given = ''
  else
    local auto = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[4], '0-0',
                            'COUNT', 1)
    if type(auto[2][1]) == 'table' then
      entry, task_id, reclaimed = auto[2][1][1], task_of(auto[2][1][2]), true
    else
      local read = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', 1,
                              'STREAMS', KEYS[1], '>')
      if not read then
        local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
        if first[2] then return {'none', tostring(tonumber(first[2]) - tonumber(ARGV[3]))} end
        return {'none', '3600'}
      end
      local row = read[1][2][1]
      entry, task_id, reclaimed = row[1], task_of(row[2]), false
    end
  end
  local key = ARGV[5] .. task_id
  local st = redis.call('HGET', key, 'state')
  if (not st) or st == 'succeeded' or st == 'dead' or st == 'cancelled' then
    drop(entry)
  else
    local attempts = tonumber(redis.call('HGET', key, 'attempts') or '0')
    local retries = tonumber(redis.call('HGET', key, 'retries') or '0')
    if reclaimed and st == 'running' and attempts > retries then
      local err = 'poison task: its worker stopped heart-beating during each of its ' ..
        attempts .. ' run(s) (killed, crashed or preempted)'
      redis.call('HSET', key, 'state', 'dead', 'error', err, 'finished_at', ARGV[3])
      redis.call('XADD', KEYS[3], '*', 'task_id', task_id, 'error', err,
                 'log_tail', log_tail(ARGV[6] .. task_id, ARGV[7]), 'dead_at', ARGV[3])
      drop(entry)
    else
      attempts = attempts + 1
      redis.call('HSET', key, 'state', 'running', 'worker', ARGV[2], 'started_at', ARGV[3],
                 'heartbeat_at', ARGV[3], 'attempts', attempts, 'entry', entry)
      redis.call('HDEL', key, 'finished_at', 'exit_code')
      redis.call('HSET', KEYS[4], ARGV[2], ARGV[3])
      local data = redis.call('HMGET', key, 'spec', 'params')
      return {'run', task_id, entry, tostring(attempts), data[1] or '', data[2] or ''}
    end
  end
end
return {'again'}
"""

_MINE = """
if redis.call('HGET', KEYS[1], 'worker') ~= ARGV[3]
   or redis.call('HGET', KEYS[1], 'attempts') ~= ARGV[4]
   or redis.call('HGET', KEYS[1], 'state') ~= 'running' then
  return 0
end
"""

# KEYS: task, stream, workers. ARGV: group, entry, worker, attempt, now
HEARTBEAT = _MINE + """
redis.call('XCLAIM', KEYS[2], ARGV[1], ARGV[3], 0, ARGV[2], 'JUSTID')
redis.call('HSET', KEYS[1], 'heartbeat_at', ARGV[5])
redis.call('HSET', KEYS[3], ARGV[3], ARGV[5])
return 1
"""

# KEYS: task, stream, delayed, dead, workers, log.
# ARGV: group, entry, worker, attempt, action (succeed|retry|dead), now, exit_code, error,
#       not_before, log tail lines, task_id
SETTLE = _TAIL + _MINE + """
redis.call('XACK', KEYS[2], ARGV[1], ARGV[2]); redis.call('XDEL', KEYS[2], ARGV[2])
redis.call('HSET', KEYS[5], ARGV[3], ARGV[6])
if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'exit_code', ARGV[7])
else redis.call('HDEL', KEYS[1], 'exit_code') end
redis.call('HSET', KEYS[1], 'finished_at', ARGV[6])
if ARGV[5] == 'succeed' then
  redis.call('HSET', KEYS[1], 'state', 'succeeded')
elseif ARGV[5] == 'retry' then
  redis.call('HSET', KEYS[1], 'state', 'failed', 'error', ARGV[8], 'not_before', ARGV[9])
  redis.call('ZADD', KEYS[3], ARGV[9], ARGV[11])
else
  redis.call('HSET', KEYS[1], 'state', 'dead', 'error', ARGV[8])
  redis.call('XADD', KEYS[4], '*', 'task_id', ARGV[11], 'error', ARGV[8],
             'log_tail', log_tail(KEYS[6], ARGV[10]), 'dead_at', ARGV[6])
end
return 1
"""

# KEYS: task, stream, delayed. ARGV: group, now, task_id
CANCEL = """
local st = redis.call('HGET', KEYS[1], 'state')
if not st then return '' end
if st ~= 'pending' and st ~= 'failed' and st ~= 'running' then return st end
if st == 'running' then
  local entry = redis.call('HGET', KEYS[1], 'entry')
  if entry then redis.call('XACK', KEYS[2], ARGV[1], entry); redis.call('XDEL', KEYS[2], entry) end
end
redis.call('ZREM', KEYS[3], ARGV[3])
redis.call('HSET', KEYS[1], 'state', 'cancelled', 'finished_at', ARGV[2])
return 'ok'
"""

# KEYS: task, stream. ARGV: task_id
REQUEUE = """
local st = redis.call('HGET', KEYS[1], 'state')
if not st then return '' end
if st ~= 'dead' and st ~= 'cancelled' then return st end
redis.call('HSET', KEYS[1], 'state', 'pending', 'attempts', 0, 'worker', '')
redis.call('HDEL', KEYS[1], 'error', 'not_before', 'started_at', 'finished_at', 'exit_code',
           'entry')
redis.call('XADD', KEYS[2], '*', 'task_id', ARGV[1])
return 'ok'
"""
