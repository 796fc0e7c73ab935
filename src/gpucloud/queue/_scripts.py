"""The queue's state changes that must be atomic, as Lua scripts run by Redis.

Each checks the task hash before it changes anything, so two workers (or a
worker and an operator) racing on one task cannot both win: a claim is
identified by (worker, attempts), and a stale one changes nothing.
"""

# KEYS: task, stream, dead, workers. ARGV: group, entry, worker, now, reclaimed, task_id, log_tail
TAKE = """
local st = redis.call('HGET', KEYS[1], 'state')
if (not st) or st == 'succeeded' or st == 'dead' or st == 'cancelled' then
  redis.call('XACK', KEYS[2], ARGV[1], ARGV[2]); redis.call('XDEL', KEYS[2], ARGV[2])
  return {'skip', '0'}
end
local attempts = tonumber(redis.call('HGET', KEYS[1], 'attempts') or '0')
local retries = tonumber(redis.call('HGET', KEYS[1], 'retries') or '0')
if ARGV[5] == '1' and st == 'running' and attempts > retries then
  local err = 'poison task: its worker stopped heart-beating during each of its ' ..
    attempts .. ' run(s) (killed, crashed or preempted)'
  redis.call('HSET', KEYS[1], 'state', 'dead', 'error', err, 'finished_at', ARGV[4])
  redis.call('XADD', KEYS[3], '*', 'task_id', ARGV[6], 'error', err, 'log_tail', ARGV[7],
             'dead_at', ARGV[4])
  redis.call('XACK', KEYS[2], ARGV[1], ARGV[2]); redis.call('XDEL', KEYS[2], ARGV[2])
  return {'dead', tostring(attempts)}
end
attempts = attempts + 1
redis.call('HSET', KEYS[1], 'state', 'running', 'worker', ARGV[3], 'started_at', ARGV[4],
           'heartbeat_at', ARGV[4], 'attempts', attempts, 'entry', ARGV[2])
redis.call('HDEL', KEYS[1], 'finished_at', 'exit_code')
redis.call('HSET', KEYS[4], ARGV[3], ARGV[4])
return {'run', tostring(attempts)}
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

# KEYS: task, stream, delayed, dead, workers.
# ARGV: group, entry, worker, attempt, action (succeed|retry|dead), now, exit_code, error,
#       not_before, log_tail, task_id
SETTLE = _MINE + """
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
             'log_tail', ARGV[10], 'dead_at', ARGV[6])
end
return 1
"""

# Retries whose backoff is over become deliveries again.
# KEYS: delayed, stream. ARGV: now, task key prefix
PROMOTE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 100)
for _, id in ipairs(due) do
  if redis.call('ZREM', KEYS[1], id) == 1
     and redis.call('HGET', ARGV[2] .. id, 'state') == 'failed' then
    redis.call('XADD', KEYS[2], '*', 'task_id', id)
  end
end
return #due
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
