-- zmq_bench.lua - pub -> sub throughput of 200-byte messages over loopback TCP.
--
--   kvengine serve bindings/bench/zmq_bench.lua [messages] [size]
--
-- Defaults: 500000 messages of 200 bytes.  Publisher and subscriber are
-- engine sockets in this process (both at zmq.event_hwm); the publisher
-- yields to the loop every 1000 messages so the subscriber keeps up (with
-- sleep(0.001): a 0 s timer started from a timer callback fires again in the
-- same libuv timer pass, before any I/O is polled).
-- Prints one line: zmq_pubsub_<size>B <messages per second> msg/s
-- (received messages over the time from the first send to the last recv).

local zmq = require("zmq")

local n = math.tointeger(tonumber(arg[1] or "500000"))
local size = math.tointeger(tonumber(arg[2] or "200"))
assert(n and size and n > 0 and size >= 0, "bad arguments")

local pub <close> = assert(zmq.pub { bind = "tcp://127.0.0.1:0", hwm = zmq.event_hwm })
local sub <close> = assert(zmq.sub { connect = pub:endpoint(), hwm = zmq.event_hwm })
assert(pub:wait_subscribed("", { timeout = 5 }), "the subscriber did not subscribe")

local frame = string.rep("x", size)
local received = 0
local receiver = spawn(function()
  while received < n and sub:recv { timeout = 2 } do received = received + 1 end
  return now()
end)

local t0 = now()
for i = 1, n do
  pub:send { frame }
  if i % 1000 == 0 then sleep(0.001) end
end
local t1 = receiver:wait()
if received < n then
  io.stderr:write(string.format("zmq_bench: %d of %d messages arrived\n", received, n))
end
print(string.format("zmq_pubsub_%dB %.0f msg/s", size, received / (t1 - t0)))
