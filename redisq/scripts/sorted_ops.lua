-- The operations of the sorted queue (the head is sorted.lua).
do
  local seen = {}
  local bad = need(op, seen) or (op ~= 'publish' and held(op, seen))
  if bad then return bad end
end
local result
if op == 'publish' then
  -- 8 key, 9 sortpart, 10 body. A key of the wrong type (see need), or
  -- a counter of stats that is no count, fails the first command on it;
  -- the writes before it are taken back, in reverse, so that a publish is
  -- whole or not at all without a check.
  -- The placeholders (held): those of val, vinfo, vreason and batch are
  -- read first; all there, that of stats is told by the reply of the
  -- count of publishes (at 1: none before, or 0; then it is read). Else
  -- held looks at all five, as every other operation does.
  local fast = true
  for _, k in ipairs({K_VAL, K_VINFO, K_VREASON, K_BATCH}) do
    if redis.pcall('HGET', k, '') ~= KEEP then fast = false end
  end
  -- seqmend says how to mend the counter holding no count (seqerr,
  -- checks.lua); local here: the head is at the limit of upvalues.
  local function seqmend()
    return 'set it (SET ' .. K_SEQ .. ') to at least the largest field of ' .. K_VAL ..
      ' and the count of values published (' .. K_STATS .. ' published)'
  end
  if not fast then
    -- held may write the placeholders (a queue's first publish), which
    -- the INCR below, refused, would leave behind: a counter that INCR
    -- refuses (no integer, or one it cannot add 1 to) is refused first,
    -- having written nothing. Digit strings of one length compare as
    -- their numbers; INCR takes -9223372036854775808 up to one below
    -- 9223372036854775807.
    local bad = checks({1}, CALLKEYS, TYPES, COUNTERS) -- its type
    if not bad then
      local s = redis.call('GET', K_SEQ)
      local minus, digits = string.match(s or '', '^(%-?)([1-9]%d*)$')
      local ok = not s or s == '0' or (digits and (#digits < 19 or (#digits == 19 and
        ((minus == '' and digits < '9223372036854775807') or (minus == '-' and digits <= '9223372036854775808')))))
      if not ok then bad = nocount(K_SEQ, s, seqmend()) end
    end
    bad = bad or held(op, {})
    if bad then return bad end
  end
  local seq = redis.pcall('INCR', K_SEQ)
  if type(seq) ~= 'number' then return seqerr(K_SEQ, seq, seqmend()) end
  -- A counter that starts again while stats counts publishes was
  -- deleted (DEL, an EXPIRE that ran out): its seqs would be those of
  -- live values, written over. Refused, the counter left at 0, until the
  -- operator restores it.
  if seq == 1 then
    local n = redis.pcall('HGET', K_STATS, 'published')
    if type(n) == 'string' and n ~= '0' then
      redis.call('DECR', K_SEQ)
      return redis.error_reply('LOSTSEQ queue key ' .. K_SEQ .. ' was deleted, but ' .. n ..
        ' values were published (key ' .. K_STATS .. '): a publish would reuse their seqs; restore it with SET ' ..
        'to at least ' .. n .. ' and the largest field of ' .. K_VAL .. ' (or delete every key of the queue)')
    end
  end
  local m = keyprefix(ARGV[8]) .. ARGV[9] .. seq8(seq)
  local undo = {{'DECR', K_SEQ}}
  local counted -- the reply of the count of publishes
  local function step(cmd, key, a, b, back, x)
    local r = redis.pcall(cmd, key, a, b)
    if type(r) == 'table' then return r end
    undo[#undo + 1] = {back, key, x}
    counted = r
    return nil
  end
  local am = ageMember(seq, ARGV[10])
  local bad = step('ZADD', K_PEND, 0, m, 'ZREM', m) or step('HSET', K_VAL, seq, ARGV[10], 'HDEL', seq) or
    step('ZADD', K_AGE, 0, am, 'ZREM', am) or
    step('HSET', K_VINFO, seq, 0, 'HDEL', seq) or step('HINCRBY', K_STATS, 'published', 1, 'HINCRBY', 'published')
  -- A count of publishes at 1 with the placeholder of stats gone: stats
  -- was deleted; the count is taken back whole, as a deleted stats had
  -- none (0 and none read the same).
  if not bad and fast and counted == 1 and redis.call('HGET', K_STATS, '') ~= KEEP then
    undo[#undo] = nil -- the last step, stats'
    redis.call('HDEL', K_STATS, 'published')
    bad = lostkey(K_STATS)
  end
  if not bad then
    local ok, e = pcall(place, ARGV[8])
    if not ok then bad = type(e) == 'table' and e or redis.error_reply(tostring(e)) end
  end
  if bad then
    for i = #undo, 1, -1 do
      local u = undo[i]
      if u[1] == 'HINCRBY' then
        redis.call(u[1], u[2], u[3], -1)
      elseif u[3] then
        redis.call(u[1], u[2], u[3])
      else
        redis.call(u[1], u[2])
      end
    end
    woke = false
    if bad.err and string.find(bad.err, 'not an integer', 1, true) then
      return checks({13}, CALLKEYS, TYPES, COUNTERS) or bad -- the counter, by name
    end
    return bad
  end
  result = seq
elseif op == 'pull' then
  -- 8 max, 9 bound ('' for none), 10.. lease tokens. Returns {batches,
  -- earliest hold end or -1, sortpart of the first key or '', again}.
  -- Every step of the loop takes a member off the order (a key, or a
  -- stray), and a batch takes a token: it ends however the stored data
  -- reads. A step that leases nothing (a stray, a key whose pending
  -- values are gone) counts as idle: at IDLE of them the call stops and
  -- returns again = 1, "call again", so that no stored data makes one
  -- call run long and a pull does not report empty while a key behind
  -- them is pullable; when it leased something it wakes the other
  -- handles' waiting pulls too, since its caller then may not call again.
  release()
  local max, bound = tonumber(ARGV[8]), ARGV[9]
  local tokens = #ARGV - 9
  local out, n, idle, again = {}, 0, 0, 0
  local minlen = fixed and 16 or 10 -- sort part and seq after the key's prefix
  while n < max and #out < tokens do
    if idle == IDLE then
      again = 1
      -- Keys may be pullable behind: the other handles' waiters look
      -- again, as this caller, having leased something, may not.
      if #out > 0 then woke = true end
      break
    end
    local m = redis.call('ZRANGE', K_ORDER, 0, 0)[1]
    if not m or (bound ~= '' and bytesGreater(string.sub(m, 1, #bound), bound)) then break end
    local key, other = placed(m)
    if other then -- published with another sort key type: touch nothing
      if #out == 0 then
        return redis.error_reply('KEYTYPE the queue holds sort keys of another type than this handle\'s')
      end
      break
    end
    if not key then -- a stray names no values: dropped
      redis.call('ZREM', K_ORDER, m)
      idle = idle + 1
    elseif singleFlight() and leased(redis.call('HGET', K_FLIGHT, key)) then
      -- Placed with a batch out by a handle whose library follows its own
      -- setting (an earlier version's, without SingleFlight): unplaced,
      -- not leased twice; the batch's settle or expiry places it again.
      unplace(key)
      idle = idle + 1
    else
      local p = keyprefix(key)
      local found = redis.call('ZRANGEBYLEX', K_PEND, '[' .. p, '(' .. prefixEnd(p))
      if killPastLimit(key, found, p, minlen) then
        idle = idle + 1 -- the key is met again at its new place, if any
      else
        redis.call('ZREM', K_ORDER, m) -- unplace, its place known
        redis.call('HDEL', K_POS, key)
        zremAll(K_PEND, found)
        -- A pending member too short to end in a seq (written by hand) is a
        -- stray too: dropped, not leased.
        local members, vals = {}, {}
        for _, pm in ipairs(found) do
          if #pm >= #p + minlen then
            local seq = unseq8(string.sub(pm, -8))
            members[#members + 1] = pm
            vals[#vals + 1] = {seq, delivered(seq), redis.call('HGET', K_VAL, seq)}
          end
        end
        if #members > 0 then
          local tok = ARGV[10 + #out]
          if #out == 0 then earlier(K_BDUE, now + ackto) end
          local rec = cmsgpack.pack({key, members, now})
          redis.call('HSET', K_BATCH, tok, rec, 'c' .. tok, rec, 'k' .. tok, #members .. ':' .. key)
          redis.call('ZADD', K_BDUE, now + ackto, tok)
          flights(key, 1)
          redis.call('HINCRBY', K_STATS, 'pulled', 1)
          redis.call('HINCRBY', K_STATS, 'leased', #members)
          out[#out + 1] = {tok, key, vals}
          n = n + #members
        else
          idle = idle + 1
        end
      end
    end
  end
  local head = redis.call('ZRANGE', K_ORDER, 0, 0)[1]
  if head then
    if fixed then head = string.sub(head, 1, 8) else head = '' end
  else
    head = ''
  end
  result = {out, first(K_HOLD), head, again}
elseif op == 'ack' or op == 'nack' or op == 'extend' or op == 'dead' then
  -- 8 lease token, 9 argument. Returns 0, or 1 when the lease is lost.
  local tok = ARGV[8]
  local b = fence(tok)
  if not b then return 1 end
  if op == 'ack' then
    drop(tok, b)
    for _, m in ipairs(b[2]) do
      local seq = unseq8(string.sub(m, -8))
      ageDel(seq)
      redis.call('HDEL', K_VAL, seq)
      redis.call('HDEL', K_VINFO, seq)
    end
    redis.call('HINCRBY', K_STATS, 'acked', 1)
    place(b[1])
  elseif op == 'nack' then
    giveback(tok, b, tonumber(ARGV[9]), 'nacked')
  elseif op == 'extend' then
    earlier(K_BDUE, now + tonumber(ARGV[9]))
    redis.call('ZADD', K_BDUE, now + tonumber(ARGV[9]), tok)
  else
    drop(tok, b)
    for _, m in ipairs(b[2]) do toDead(unseq8(string.sub(m, -8)), ARGV[9], m) end
    place(b[1])
  end
  result = 0
elseif op == 'housekeep' then
  -- 8 end expired leases (1/0). Returns {batches returned, earliest
  -- lease deadline, earliest hold end, unread}: unread lists the lease
  -- token and key (false when unknown) of each batch ended unread.
  release()
  pruneAge()
  local n, unread = 0, {}
  if ARGV[8] == '1' then
    local due = redis.call('ZRANGEBYSCORE', K_BDUE, '-inf', now, 'LIMIT', 0, 1000)
    for _, tok in ipairs(due) do
      -- A batch record that does not decode is read from its copy; when
      -- neither does (both gone or garbled), nothing names its values:
      -- its lease alone ends, so that it stops no pass, and its key, as
      -- its lease field tells it, is pullable again.
      local b, l = batchOf(tok)
      if b then
        giveback(tok, b, 0, 'ack timeout')
      else
        local key = drop(tok, nil, l)
        if key then place(key) end
        unread[#unread + 1], unread[#unread + 2] = tok, key or false
      end
      n = n + 1
    end
  end
  result = {n, first(K_BDUE), first(K_HOLD), unread}
elseif op == 'stats' then
  local c = redis.call('HMGET', K_STATS, 'published', 'pulled', 'acked', 'leased')
  -- Keys whose nack delay has passed count as pullable, as the embedded
  -- queue counts them, though no pull or housekeeping released them yet.
  -- The oldest value by publish time comes from the age set (oldest).
  local pend = redis.call('ZCARD', K_PEND)
  result = {pend, redis.call('ZCARD', K_ORDER) + ended(), redis.call('ZCARD', K_BDUE),
    redis.call('ZCARD', K_DEAD), tonumber(c[1] or 0), tonumber(c[2] or 0), tonumber(c[3] or 0), tonumber(c[4] or 0),
    oldest(pend + (tonumber(c[4]) or 0))}
elseif op == 'deadlist' then
  -- 8 first seq, 9 max. Returns, for each dead value from the first seq
  -- on, in seq order: seq, pend member, reason, deliveries, stored value
  -- (each false when absent).
  local out = {}
  for _, seq in ipairs(redis.call('ZRANGEBYSCORE', K_DEAD, ARGV[8], '+inf', 'LIMIT', 0, tonumber(ARGV[9]))) do
    local r = redis.call('HMGET', K_VREASON, seq, 'm' .. seq)
    local n = #out
    out[n + 1], out[n + 2], out[n + 3] = seq, r[2], r[1]
    out[n + 4], out[n + 5] = redis.call('HGET', K_VINFO, seq), redis.call('HGET', K_VAL, seq)
  end
  result = out
elseif op == 'revive' or op == 'purge' then
  -- 8 seq, 9 publish time (8 bytes) or ''. Returns changeDead's code.
  result = changeDead(op, ARGV[8], ARGV[9])
elseif op == 'reviveall' or op == 'purgeall' then
  -- 8 first seq. Requeues or purges up to 1000 dead values from it on;
  -- returns {how many, the seq to go on from or '' when none is left,
  -- the seqs left dead (reviveall: their key was not recorded)}.
  local seqs = redis.call('ZRANGEBYSCORE', K_DEAD, ARGV[8], '+inf', 'LIMIT', 0, 1001)
  local one = op == 'reviveall' and 'revive' or 'purge'
  local n, left = 0, {}
  for i = 1, math.min(#seqs, 1000) do
    local c = changeDead(one, seqs[i], '')
    if c == 0 then n = n + 1 elseif c == -4 then left[#left + 1] = seqs[i] end
  end
  result = {n, seqs[1001] or '', left}
elseif op == 'held' then
  result = 0 -- Open's look at the placeholders (held), before its first write
else
  return redis.error_reply('unknown operation ' .. op)
end
wake()
return result
