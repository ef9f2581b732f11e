---@meta redis
-- `local redis = require("redis")`: Redis over hiredis on the loop (bindings/redis.c;
-- docs/api-modules.md). Option classes are checked against redis.options.

---The options of redis.connect.
---@class redis.options.connect
---@field host? string  default "127.0.0.1"
---@field port? integer  default 6379
---@field db? integer  default 0 (SELECT when not 0)
---@field password? string  AUTH when given
---@field timeout? number  seconds for the handshake and every call; default 5 times engine.time_scale(); 0 polls

---The options of c:pipeline(fn_or_batch, opts).
---@class redis.options.pipeline
---@field replies? "all"|"errors"  "errors": only the count of error replies and the first one

---A connection: every call waits for its reply, with the connection's timeout.
---@class RedisConnection
local RedisConnection = {}

---The reply (arrays as tables, nil elements as redis.null, error elements as {err = msg});
---raises "redis: <error>" and "redis: timeout".
---@param command string
---@param ... string|number
---@return any
function RedisConnection:call(command, ...) end

---As call, but returns nil, "redis: <error>" or nil, "timeout".
---@param command string
---@param ... string|number
---@return any, string?
function RedisConnection:pcall(command, ...) end

---HGETALL as {field = value}.
---@param key string
---@return table<string, string>
function RedisConnection:hgetall(key) end

---Commands in one round trip: fn(p) collects them with p:call(...), or a batch built ahead
---(redis.batch()). Returns {reply, ...}, or with replies = "errors" the count of error
---replies and the first one.
---@param fn_or_batch fun(p: RedisBatch)|RedisBatch
---@param opts? redis.options.pipeline
---@return any
function RedisConnection:pipeline(fn_or_batch, opts) end

function RedisConnection:close() end

---Commands for c:pipeline, kept after sending: sendable again, on any connection.
---@class RedisBatch
local RedisBatch = {}

---@param command string
---@param ... string|number
function RedisBatch:call(command, ...) end

---A command in hiredis's format (%s %d %u %%): "HGETALL %s%u", prefix, n.
---@param format string
---@param ... string|integer
function RedisBatch:callf(format, ...) end

---@class redis
---@field version string  hiredis's
---@field null userdata  a nil element of an array reply
---@field options {connect: string[], pipeline: string[]}  the keys the option checks take
local redis = {}

---Connects and waits for AUTH, SELECT and a PING.
---@param opts? redis.options.connect
---@return RedisConnection?, string?  c | nil, "redis: ..." | nil, "timeout"
function redis.connect(opts) end

---An empty batch, for c:pipeline(b).
---@return RedisBatch
function redis.batch() end

return redis
