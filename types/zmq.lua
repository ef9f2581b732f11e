---@meta zmq
-- `local zmq = require("zmq")`: ZeroMQ publishers (XPUB) and subscribers on the loop
-- (bindings/zmq.c; docs/api-modules.md). Option classes are checked against zmq.options.

---The options of zmq.pub.
---@class zmq.options.pub
---@field bind? string|string[]  e.g. "tcp://127.0.0.1:0"
---@field connect? string|string[]
---@field hwm? integer  high-water mark (messages); zmq.event_hwm for event publishers

---The options of zmq.sub.
---@class zmq.options.sub
---@field bind? string|string[]
---@field connect? string|string[]
---@field subscribe? string|string[]  topic prefixes; default none
---@field hwm? integer

---The options of sub:recv and pub:wait_subscribed (engine.h's timeout rule).
---@class zmq.options.recv
---@field timeout? number  seconds; default 5 times engine.time_scale(); 0 polls

---@class zmq.options.wait_subscribed: zmq.options.recv

---A pub or a sub socket.
---@class ZmqSocket
local ZmqSocket = {}

---Send one message of frames (byte strings); never blocks (drops at the high-water mark).
---@param frames string[]
---@return true?, string?
function ZmqSocket:send(frames) end

---The next message (sub), within the timeout.
---@param opts? zmq.options.recv
---@return string[]?, string?  frames | nil, "timeout"
function ZmqSocket:recv(opts) end

---True once a live subscription is a prefix of topic (pub), within the timeout.
---@param topic string
---@param opts? zmq.options.wait_subscribed
---@return true?, string?  true | nil, "timeout"
function ZmqSocket:wait_subscribed(topic, opts) end

---The i-th bound endpoint (default 1), port 0 resolved; nil when none.
---@param i? integer
---@return string?
function ZmqSocket:endpoint(i) end

function ZmqSocket:close() end

---@class zmq
---@field version string  libzmq's
---@field event_hwm integer  the high-water mark event publishers use (100,000)
---@field options {pub: string[], sub: string[], recv: string[], wait_subscribed: string[]}  the keys the option checks take
local zmq = {}

---An XPUB socket.
---@param opts zmq.options.pub
---@return ZmqSocket?, string?
function zmq.pub(opts) end

---@param opts zmq.options.sub
---@return ZmqSocket?, string?
function zmq.sub(opts) end

---The context's socket limit (libzmq's 1,023 by default); n raises it, before the process's first socket only.
---@param n? integer  1 to 65,535
---@return integer
function zmq.max_sockets(n) end

return zmq
