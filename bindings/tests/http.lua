-- Tests of the http module: the client against the engine's own server, the
-- client against Python's stdlib http.server, and the server against raw
-- sockets from a Python peer (malformed input, limits, disconnects,
-- pipelining), always checking that the server still answers afterwards.

local fs = require("fs")
local http = require("http")
local json = require("json")
local has_proc, proc = pcall(require, "proc")

local PY = "/usr/bin/python3" -- Debian's; the python3 on PATH may be another one

-- A server on a free loopback port; returns it and its base URL.
local function serve(handler, opts)
  opts = opts or {}
  opts.port = 0
  opts.handler = handler
  local srv = assert(http.listen(opts))
  return srv, "http://127.0.0.1:" .. srv:port()
end

local function need_python()
  if not has_proc then skip("the proc module is not available") end
  local f = io.open(PY, "r")
  if not f then skip(PY .. " is not installed") end
  f:close()
end

-- Run a Python snippet with the given arguments; returns its stdout.
local function python(script, ...)
  need_python()
  local argv = { PY, "-c", script }
  for _, a in ipairs({ ... }) do argv[#argv + 1] = tostring(a) end
  local code, out, err = proc.run { argv = argv, timeout = 20 }
  expect(code):eq(0, "python peer failed: " .. tostring(out) .. " " .. tostring(err))
  return out
end

-- Start a long-running Python program that prints its port on its first
-- line; returns the process and the port.
local function python_server(argv)
  need_python()
  local logf = os.tmpname()
  local p = assert(proc.spawn { argv = argv, log = logf })
  local port
  eventually(function()
    local f = io.open(logf, "r")
    local text = f and f:read("a") or ""
    if f then f:close() end
    port = tonumber(text:match("port (%d+)") or text:match("^(%d+)"))
    return port
  end, { timeout = 10 })
  os.remove(logf)
  return p, port
end

-- Raw-socket helper for the Python peer: sends argv[2] bytes (Python
-- escapes) to 127.0.0.1:argv[1] and prints what comes back until EOF or a
-- quiet second.
local RAW = [[
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(sys.argv[2].encode().decode("unicode_escape").encode("latin-1"))
s.settimeout(1.0)
data = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
except (socket.timeout, ConnectionResetError):
    pass
sys.stdout.write(data.decode("latin-1"))
]]

-- Every server test ends by checking that the server still serves.
local function still_serves(base)
  local r, err = http.get(base .. "/alive", { timeout = 5 })
  expect(err):is_nil("the server stopped answering")
  expect(r.status):eq(200)
end

-- ------------------------------------------------ client against own server

local function echo(req, res)
  if req.path == "/status" then
    res:status(tonumber(req.query:match("code=(%d+)")))
    return res:finish("status")
  end
  res:header("X-Method", req.method)
  res:header("X-Query", req.query)
  res:header("Content-Type", "application/json")
  res:finish {
    method = req.method, path = req.path, query = req.query, headers = req.headers,
    body = req.body, peer = req.peer,
  }
end

test("methods, paths and queries reach the handler", function()
  local srv <close>, base = serve(echo)
  for _, m in ipairs { "GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS" } do
    local r = assert(http.request { method = m, url = base .. "/a/b?x=1&y=%20z" })
    expect(r.status):eq(200, m)
    local j = r:json()
    expect(j.method):eq(m)
    expect(j.path):eq("/a/b", "path without the query")
    expect(j.query):eq("x=1&y=%20z", "raw query string")
    expect(r.headers["x-method"]):eq(m, "response headers have lower-case keys")
  end
  local r = assert(http.request { method = "HEAD", url = base .. "/h" })
  expect(r.status):eq(200)
  expect(r.body):eq("", "HEAD has no body")
  expect(tonumber(r.headers["content-length"])):gt(0, "HEAD says how long the body would be")
end)

test("request headers arrive with lower-case names", function()
  local srv <close>, base = serve(echo)
  local r = assert(http.get(base .. "/", { headers = { ["X-Custom-Thing"] = "v1", Empty = "" } }))
  local j = r:json()
  expect(j.headers["x-custom-thing"]):eq("v1")
  expect(j.headers["empty"]):eq("", "an empty header value is still sent")
  expect(j.headers["host"]):eq("127.0.0.1:" .. srv:port())
end)

test("response headers: repeated lines, replacement, framing kept by the server", function()
  local srv <close>, base = serve(function(_, res)
    res:header("Set-Cookie", { "a=1", "b=2" })
    res:header("X-Twice", "first")
    res:header("x-twice", "second")
    res:header("X-Gone", "x")
    res:header("X-Gone", nil)
    res:header("Content-Length", "999")
    res:finish("abc")
  end)
  local r = assert(http.get(base .. "/"))
  expect(r.headers["set-cookie"]):eq("a=1, b=2", "repeated header lines are joined")
  expect(r.headers["x-twice"]):eq("second", "setting a header again replaces it")
  expect(r.headers["x-gone"]):is_nil()
  expect(r.headers["content-length"]):eq("3", "framing comes from the server")
  expect(r.body):eq("abc")
end)

test("bodies: binary and large, both ways", function()
  local srv <close>, base = serve(function(req, res) res:finish(req.body:reverse()) end)
  local bin = "a\0b\r\n\0\255"
  expect(assert(http.post(base .. "/", bin)).body):eq(bin:reverse(), "NUL bytes survive")
  local big = string.rep("0123456789abcdef", 256 * 1024) -- 4 MiB
  local r = assert(http.post(base .. "/", { body = big, timeout = 20 }))
  expect(#r.body):eq(#big)
  expect(r.body == big:reverse()):eq(true, "a 4 MiB body round-trips")
end)

test("json: request encoding, req:json(), res:finish(table), resp:json()", function()
  local srv <close>, base = serve(function(req, res)
    local t = req:json()
    res:finish { got = t, ctype = req.headers["content-type"] }
  end)
  local r = assert(http.request { url = base .. "/", json = { n = 42, list = { 1, 2, 3 }, s = "x" } })
  expect(r.headers["content-type"]):eq("application/json")
  local j = r:json()
  expect(j.ctype):eq("application/json", "json= sets the content type")
  expect(j.got.n):eq(42)
  expect(j.got.list):eq({ 1, 2, 3 })
  local r2 = assert(http.request { url = base .. "/", json = { a = 1 },
    headers = { ["Content-Type"] = "application/vnd.x+json" } })
  expect(r2:json().ctype):eq("application/vnd.x+json", "an explicit content type wins")
  local bad = assert(http.post(base .. "/", "not json"))
  expect(bad.status):eq(500, "the handler's req:json() raised")
end)

test("status codes pass through as responses, not errors", function()
  local srv <close>, base = serve(echo)
  for _, code in ipairs { 201, 204, 301, 404, 418, 503 } do
    local r, err = http.get(base .. "/status?code=" .. code)
    expect(err):is_nil()
    expect(r.status):eq(code)
    if code == 204 then expect(r.body):eq("", "204 has no body") end
  end
end)

test("a handler that raises gets a 500 carrying the error, and the server goes on", function()
  local srv <close>, base = serve(function(req, res)
    if req.path == "/boom" then error("kaboom") end
    res:finish("fine")
  end)
  local r = assert(http.get(base .. "/boom"))
  expect(r.status):eq(500)
  expect(r.body):contains("kaboom")
  expect(assert(http.get(base .. "/ok")).body):eq("fine")
end)

test("a handler that returns without finishing answers an empty 200", function()
  local srv <close>, base = serve(function(_, res) res:status(202) end)
  local r = assert(http.get(base .. "/"))
  expect(r.status):eq(202)
  expect(r.body):eq("")
end)

test("handlers run concurrently, each in its own task", function()
  local srv <close>, base = serve(function(_, res)
    sleep(0.3)
    res:finish("slow")
  end)
  local t0 = now()
  local results = http.batch({ base .. "/1", base .. "/2", base .. "/3", base .. "/4" },
    { concurrency = 4 })
  for i = 1, 4 do expect(results[i].body):eq("slow") end
  expect(now() - t0):lt(1.0, "four 0.3 s handlers overlap")
end)

test("keep-alive: sequential requests reuse one connection", function()
  local srv <close>, base = serve(echo)
  local peers = {}
  for i = 1, 5 do peers[i] = assert(http.get(base .. "/")):json().peer end
  for i = 2, 5 do expect(peers[i]):eq(peers[1], "request " .. i .. " came on the same connection") end
  local r = assert(http.get(base .. "/", { headers = { Connection = "close" } }))
  expect(r.headers["connection"]):eq("close", "a client asking to close is told so")
end)

test("streaming: res:write chunks reach stream= as they are written", function()
  local srv <close>, base = serve(function(_, res)
    res:header("Content-Type", "text/event-stream")
    for i = 1, 4 do
      assert(res:write("data: " .. i .. "\n\n"))
      sleep(0.15)
    end
    res:finish()
  end)
  local got, times = {}, {}
  local t0 = now()
  local r, err = http.request { url = base .. "/sse", stream = function(chunk)
    got[#got + 1] = chunk
    times[#times + 1] = now() - t0
  end }
  expect(err):is_nil()
  expect(r.status):eq(200)
  expect(r.headers["transfer-encoding"]):eq("chunked")
  expect(r.headers["content-type"]):eq("text/event-stream")
  expect(table.concat(got)):eq("data: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n")
  expect(#got):ge(3, "chunks come one by one")
  expect(times[1]):lt(0.3, "the first chunk arrives long before the stream ends")
  expect(now() - t0):ge(0.55)
end)

test("streaming: a stream function may wait, and its error propagates", function()
  local srv <close>, base = serve(function(_, res)
    for i = 1, 3 do res:write(tostring(i)) end
    res:finish("end")
  end)
  local got = {}
  local r = assert(http.request { url = base .. "/", stream = function(c)
    sleep(0.05)
    got[#got + 1] = c
  end })
  expect(table.concat(got)):eq("123end")
  expect(r.body):eq("", "streamed bytes are not kept in body")
  local ok, err = pcall(http.request, { url = base .. "/", stream = function() error("stop here") end })
  expect(ok):eq(false)
  expect(tostring(err)):contains("stop here")
  still_serves(base)
end)

test("batch: results in order, at most `concurrency` in flight", function()
  local inflight, max_inflight = 0, 0
  local srv <close>, base = serve(function(req, res)
    inflight = inflight + 1
    if inflight > max_inflight then max_inflight = inflight end
    sleep(0.02 + math.random() * 0.05)
    inflight = inflight - 1
    res:finish(req.path:sub(2))
  end)
  local reqs = {}
  for i = 1, 24 do reqs[i] = { url = base .. "/" .. i } end
  local results = http.batch(reqs, { concurrency = 5 })
  expect(#results):eq(24)
  for i = 1, 24 do expect(results[i].body):eq(tostring(i), "result " .. i .. " in its place") end
  expect(max_inflight):le(5, "never more than 5 at once")
  expect(max_inflight):ge(2, "they did overlap")
  -- an unreachable request is an {err = ...} in its slot, the rest unaffected
  local closed <close> = serve(echo)
  local dead = "http://127.0.0.1:" .. closed:port() .. "/"
  closed:close()
  local mixed = http.batch({ base .. "/a", dead, { url = base .. "/c", method = "POST" } })
  expect(mixed[1].body):eq("a")
  expect(mixed[2].err):matches("onnect")
  expect(mixed[2].status):is_nil()
  expect(mixed[3].body):eq("c")
  expect(http.batch({})):eq({}, "an empty batch")
end)

test("timeout: a slow server gives nil, \"timeout\" in about the time asked", function()
  local srv <close>, base = serve(function(_, res)
    sleep(3)
    res:finish("late")
  end)
  local t0 = now()
  local r, err = http.get(base .. "/", { timeout = 0.3 })
  expect(r):is_nil()
  expect(err):eq("timeout", "a request that ran out of time says only that")
  expect(now() - t0):lt(1.5)
end)

test("refused connection and unknown host are errors with curl's message", function()
  local srv, base = serve(echo)
  srv:close()
  local r, err = http.get(base .. "/")
  expect(r):is_nil()
  expect(err):matches("^http: .*[Cc]ouldn't connect")
  local r2, err2 = http.get("http://no-such-host.invalid/", { timeout = 5 })
  expect(r2):is_nil()
  expect(err2 == "timeout" or err2:find("^http: .*resolve") ~= nil):is_true(err2)
end)

test("bad request specs raise: they are the script's bug", function()
  expect(pcall(http.request, { url = 42 })):eq(false)
  expect(pcall(http.request, { url = "http://x/", headers = { ["Bad\r\nName"] = "v" } })):eq(false)
  expect(pcall(http.batch, {}, { concurrency = 0 })):eq(false)
end)

test("timeouts follow the one rule: an option in seconds, old forms refused by name", function()
  expect(function() http.get("http://x/", 5) end):raises("http%.get: a timeout is an option now: pass {timeout = 5}, not 5")
  expect(function() http.request { url = "http://x/", timeout = -1 } end)
    :raises("http: timeout = %-1: a timeout is a number of seconds >= 0 %(0: poll, nil: the default, 30 s")
  expect(function() http.get("http://x/", { timeout = "2" }) end):raises("timeout = 2: a timeout is a number")
  expect(function() http.batch({ { url = "http://x/", timeout = math.huge } }) end):raises("timeout = inf: a timeout is a number")
  expect(function() http.load { url = "http://127.0.0.1:1/", rate = 1, duration = 1, timeout = -2 } end)
    :raises("http%.load: timeout = %-2: a timeout is a number")
  local srv <close>, base = serve(function(_, res)
    sleep(1)
    res:finish("late")
  end)
  expect(select(2, http.get(base .. "/", { timeout = 0 }))):eq("timeout", "0 gives the server no time")
end)

test("unknown options raise, naming the closest valid one", function()
  expect(function() http.request { url = "http://x/", timout = 1 } end)
    :raises("http%.request: unknown option `timout`; did you mean `timeout`%?")
  expect(function() http.get("http://x/", { header = {} }) end)
    :raises("http%.get: unknown option `header`; did you mean `headers`%?")
  expect(function() http.post("http://x/", { jsno = {} }) end)
    :raises("http%.post: unknown option `jsno`; did you mean `json`%?")
  expect(function() http.batch({ "http://x/", { url = "http://x/", metod = "GET" } }) end)
    :raises("http%.batch: unknown option `metod`; did you mean `method`%?")
  expect(function() http.batch({}, { concurency = 2 }) end)
    :raises("http%.batch: unknown option `concurency`; did you mean `concurrency`%?")
  expect(function() http.listen { handler = function() end, max_bdy = 1 } end)
    :raises("http%.listen: unknown option `max_bdy`; did you mean `max_body`%?")
end)

test("a closed server refuses, its handlers' writes fail, nothing leaks", function()
  local release = false
  local write_result
  local srv, base = serve(function(_, res)
    res:write("first")
    while not release do sleep(0.02) end
    write_result = { res:write("after close") }
  end)
  local t = spawn(function() return http.get(base .. "/", { timeout = 5 }) end)
  sleep(0.1)
  srv:close()
  release = true
  eventually(function() return write_result ~= nil end)
  expect(write_result[1]):is_nil("a write after the server closed fails")
  expect(type(write_result[2])):eq("string")
  local r, err = t:wait()
  expect(r == nil or r.status == 200):eq(true, tostring(err))
  expect((http.get(base .. "/"))):is_nil("the port is closed")
end)

test("cancelling a waiting task stops its transfer; the server sees the client go", function()
  local finish_result
  local srv <close>, base = serve(function(_, res)
    sleep(0.4)
    finish_result = { res:finish("too late") }
  end)
  local t = spawn(function() return http.get(base .. "/") end)
  sleep(0.1)
  t:cancel()
  eventually(function() return finish_result end)
  expect(finish_result[1]):is_nil("the client is gone")
  -- the same while a stream function is itself waiting
  local srv2 <close>, base2 = serve(function(_, res)
    for _ = 1, 20 do
      if not res:write("tick") then return end
      sleep(0.05)
    end
  end)
  local started = false
  local t2 = spawn(function()
    return http.request { url = base2 .. "/", stream = function()
      started = true
      sleep(10)
    end }
  end)
  eventually(function() return started end)
  t2:cancel()
  still_serves(base)
  still_serves(base2)
end)

local left_open_port

test("an open server stays reachable without a reference to it", function()
  local port = serve(function(_, res) res:finish("still here") end):port()
  collectgarbage()
  collectgarbage()
  expect(assert(http.get("http://127.0.0.1:" .. port .. "/")).body):eq("still here")
  left_open_port = port
end)

test("a server left open is closed when its test ends", function()
  expect(left_open_port):ne(nil, "the previous test ran")
  local r, err = http.get("http://127.0.0.1:" .. left_open_port .. "/")
  expect(r):is_nil("the port was closed with the test's scope")
  expect(err):matches("[Cc]ouldn't connect")
end)

test("listen errors are nil, err; bad options raise", function()
  local srv <close> = serve(echo)
  local again, err = http.listen { port = srv:port(), handler = echo }
  expect(again):is_nil()
  expect(err):matches("^http: cannot listen on 127%.0%.0%.1:%d+: address already in use")
  expect(pcall(http.listen, { port = 0 })):eq(false, "a handler is required")
  expect(pcall(http.listen, { host = "localhost", handler = echo })):eq(false, "host is an IP address")
  local v6 = http.listen { host = "::1", port = 0, handler = echo }
  if v6 then -- where the machine has IPv6 loopback
    local r = assert(http.get("http://[::1]:" .. v6:port() .. "/v6"))
    expect(r:json().path):eq("/v6")
    expect(r:json().peer):matches("^%[::1%]:%d+$")
    v6:close()
  end
end)

test("backpressure: a large response waits for a slow reader", function()
  local finished_after
  local srv <close>, base = serve(function(req, res)
    if req.path == "/alive" then return res:finish("ok") end
    local t0 = now()
    assert(res:finish(string.rep("x", 48 << 20)))
    finished_after = now() - t0
  end)
  python([[
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
time.sleep(0.8)
n = 0
while n < 48 * 1024 * 1024:
    b = s.recv(1 << 20)
    if not b: break
    n += len(b)
]], srv:port())
  eventually(function() return finished_after end)
  expect(finished_after):ge(0.5, "finish waited until the peer read")
  still_serves(base)
end)

-- ------------------------------------------------ server against raw sockets

test("a malformed request line gets 400, and the server still answers", function()
  local srv <close>, base = serve(echo)
  local out = python(RAW, srv:port(), "THIS IS NOT HTTP\\r\\n\\r\\n")
  expect(out):matches("^HTTP/1.1 400 ")
  expect(out):contains("Connection: close")
  out = python(RAW, srv:port(), "GET /x HTTP/1.1\\r\\nBad Header\\r\\n\\r\\n")
  expect(out):matches("^HTTP/1.1 400 ")
  still_serves(base)
end)

-- A server that answers "ok" and notes whether its handler ever saw a
-- request other than still_serves' /alive (seen.called).
local function watched_server(opts)
  local seen = { called = false }
  local srv, base = serve(function(req, res)
    if req.path ~= "/alive" then seen.called = true end
    res:finish("ok")
  end, opts)
  return srv, base, seen
end

test("a body over max_body gets 413, and the server still answers", function()
  local srv <close>, base, seen = watched_server { max_body = 1000 }
  -- announced by Content-Length: answered before any body byte is sent
  local out = python(RAW, srv:port(), "POST /up HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 5000\\r\\n\\r\\n")
  expect(out):matches("^HTTP/1.1 413 ")
  -- chunked: noticed while the chunks arrive
  local chunk = string.rep("y", 600)
  out = python(RAW, srv:port(), "POST /up HTTP/1.1\\r\\nHost: x\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n"
    .. "258\\r\\n" .. chunk .. "\\r\\n258\\r\\n" .. chunk .. "\\r\\n0\\r\\n\\r\\n")
  expect(out):matches("^HTTP/1.1 413 ")
  -- through curl, which keeps sending the body: the server drains it and answers
  local r, err = http.post(base .. "/up", string.rep("z", 200000))
  expect(err):is_nil()
  expect(r.status):eq(413)
  expect(seen.called):eq(false, "the handler never saw an oversized request")
  local ok = assert(http.post(base .. "/small", string.rep("z", 1000)))
  expect(ok.status):eq(200, "max_body itself is allowed")
  still_serves(base)
end)

test("a client that disconnects mid-request is forgotten, and the server still answers", function()
  local srv <close>, base, seen = watched_server()
  python([[
import socket, sys
port = int(sys.argv[1])
for part in [b"GET /half HTTP/1.1\r\nHost:", b"POST /p HTTP/1.1\r\nContent-Length: 100\r\n\r\nabc", b"G"]:
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(part)
    s.close()
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"POST /p HTTP/1.1\r\nContent-Length: 100\r\n\r\nabc")
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
s.close()  # with a reset
]], srv:port())
  sleep(0.1)
  expect(seen.called):eq(false, "no handler ran for an incomplete request")
  still_serves(base)
end)

test("a client that disconnects mid-response: the handler's writes fail", function()
  local write_err
  local srv <close>, base = serve(function(req, res)
    if req.path == "/alive" then return res:finish("ok") end
    for _ = 1, 500 do
      local ok, err = res:write(string.rep("e", 4096))
      if not ok then
        write_err = err
        return
      end
      sleep(0.01)
    end
  end)
  python([[
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
s.recv(100)
s.close()
]], srv:port())
  eventually(function() return write_err end, { timeout = 5 })
  expect(type(write_err)):eq("string")
  still_serves(base)
end)

test("pipelined requests are answered in order", function()
  local srv <close>, base = serve(function(req, res)
    if req.path == "/slow" then sleep(0.1) end
    res:finish(req.path)
  end)
  local out = python(RAW, srv:port(),
    "GET /slow HTTP/1.1\\r\\nHost: x\\r\\n\\r\\nGET /fast HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"
    .. "POST /last HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\nhi")
  local bodies = {}
  for body in out:gmatch("\r\n\r\n(/%l+)") do bodies[#bodies + 1] = body end
  expect(bodies):eq({ "/slow", "/fast", "/last" })
  still_serves(base)
end)

test("Expect: 100-continue is honoured", function()
  local srv <close> = serve(function(req, res) res:finish("got " .. req.body) end)
  local out = python([[
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
first = s.recv(100)
s.sendall(b"hello")
rest = b""
while not rest.endswith(b"got hello"):
    rest += s.recv(100)
sys.stdout.write((first + rest).decode())
]], srv:port())
  expect(out):matches("^HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK")
  expect(out):contains("got hello")
end)

test("HTTP/1.0: no chunking, the connection ends the streamed body", function()
  local srv <close> = serve(function(_, res)
    res:write("part1 ")
    res:finish("part2")
  end)
  local out = python(RAW, srv:port(), "GET / HTTP/1.0\\r\\n\\r\\n")
  expect(out):matches("^HTTP/1.1 200 OK")
  expect(out):contains("Connection: close")
  expect(out:find("chunked", 1, true)):is_nil()
  expect(out):matches("\r\n\r\npart1 part2$")
end)

test("a chunked request body is reassembled", function()
  local srv <close> = serve(function(req, res) res:finish("[" .. req.body .. "]") end)
  local out = python(RAW, srv:port(), "POST / HTTP/1.1\\r\\nHost: x\\r\\nTransfer-Encoding: chunked\\r\\n"
    .. "Connection: close\\r\\n\\r\\n3\\r\\nabc\\r\\n4\\r\\ndefg\\r\\n0\\r\\n\\r\\n")
  expect(out):matches("%[abcdefg%]$")
end)

-- ------------------------------------------- client against Python's server

local PY_SERVER = [[
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def send(self, code, body, ctype="text/plain", extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra: self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD": self.wfile.write(body)
    def do_GET(self):
        if self.path == "/hello":
            self.send(200, b"hello from python", extra=[("X-Peer", "python"), ("X-Multi", "a"), ("X-Multi", "b")])
        elif self.path == "/sse":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(3):
                ev = ("data: %d\n\n" % i).encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev)); self.wfile.flush()
                time.sleep(0.15)
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/slow":
            time.sleep(2); self.send(200, b"late")
        elif self.path.startswith("/status/"):
            self.send(int(self.path[8:]), b"status")
        else:
            self.send(404, b"no such page")
    do_HEAD = do_GET
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        out = json.dumps({"body": body.decode("latin-1"), "ctype": self.headers.get("Content-Type"),
                          "custom": self.headers.get("X-Custom"), "method": self.command}).encode()
        self.send(200, out, "application/json")
    do_PUT = do_POST
    do_DELETE = do_POST

srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
print("port", srv.server_address[1], flush=True)
srv.serve_forever()
]]

test("client against Python's http.server: statuses, headers, bodies, json", function()
  local p <close>, port = python_server { PY, "-c", PY_SERVER }
  local base = "http://127.0.0.1:" .. port
  local r = assert(http.get(base .. "/hello"))
  expect(r.status):eq(200)
  expect(r.body):eq("hello from python")
  expect(r.headers["x-peer"]):eq("python")
  expect(r.headers["x-multi"]):eq("a, b")
  expect(r.headers["content-type"]):eq("text/plain")
  expect(assert(http.get(base .. "/nope")).status):eq(404)
  expect(assert(http.get(base .. "/status/503")).status):eq(503)
  local h = assert(http.request { method = "HEAD", url = base .. "/hello" })
  expect(h.body):eq("")
  expect(h.headers["content-length"]):eq("17")
  local j = assert(http.request { url = base .. "/echo", json = { k = "v" },
    headers = { ["X-Custom"] = "c" } }):json()
  expect(j.method):eq("POST")
  expect(j.ctype):eq("application/json")
  expect(json.decode(j.body)):eq({ k = "v" })
  expect(j.custom):eq("c")
  local put = assert(http.request { method = "PUT", url = base .. "/echo", body = "raw" }):json()
  expect(put.method):eq("PUT")
  expect(put.body):eq("raw")
  local del = assert(http.request { method = "DELETE", url = base .. "/echo" }):json()
  expect(del.method):eq("DELETE")
end)

test("client against Python's http.server: SSE stream, timeout, batch", function()
  local p <close>, port = python_server { PY, "-c", PY_SERVER }
  local base = "http://127.0.0.1:" .. port
  local chunks = {}
  local r = assert(http.request { url = base .. "/sse", stream = function(c) chunks[#chunks + 1] = c end })
  expect(r.status):eq(200)
  expect(table.concat(chunks)):eq("data: 0\n\ndata: 1\n\ndata: 2\n\n")
  expect(#chunks):ge(2, "events arrive separately")
  local t0 = now()
  local r2, err = http.get(base .. "/slow", { timeout = 0.3 })
  expect(r2):is_nil()
  expect(err):eq("timeout")
  expect(now() - t0):lt(1.5)
  local reqs = {}
  for i = 1, 10 do reqs[i] = i % 2 == 0 and base .. "/hello" or (base .. "/status/" .. (200 + i)) end
  local res = http.batch(reqs, { concurrency = 3 })
  for i = 1, 10 do
    expect(res[i].status):eq(i % 2 == 0 and 200 or 200 + i, "batch result " .. i)
  end
end)

test("client against python -m http.server (files, keep-alive off)", function()
  need_python()
  local dir = fs.tmpdir()
  fs.write(dir .. "/file.txt", "file contents\n")
  local p <close>, port = python_server { PY, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1",
    "--directory", dir }
  local base = "http://127.0.0.1:" .. port
  local r = assert(http.get(base .. "/file.txt"))
  expect(r.status):eq(200)
  expect(r.body):eq("file contents\n")
  expect(r.headers["content-length"]):eq("14")
  expect(assert(http.get(base .. "/missing")).status):eq(404)
  os.remove(dir .. "/file.txt")
  os.remove(dir)
end)

test("a stream function sees the status and headers before the first chunk", function()
  local srv <close> = assert(http.listen { handler = function(_, res)
    res:status(201)
    res:header("X-Inference-Pod", "pod-a")
    res:write("data: one\n\n")
    res:finish()
  end })
  local heads = {}
  local r = assert(http.request { url = "http://127.0.0.1:" .. srv:port() .. "/",
    stream = function(_, head) heads[#heads + 1] = head end })
  expect(r.status):eq(201)
  expect(#heads):ge(1, "at least one chunk")
  expect(heads[1].status):eq(201, "the status, with the first chunk")
  expect(heads[1].headers["x-inference-pod"]):eq("pod-a", "headers arrive before the body")
end)

-- An HTTPS peer that requires a client certificate of the CA argv[2] and
-- answers with the certificate's CN: a server of a test's own CA, as a
-- Kubernetes API server is.
local PY_TLS_SERVER = [[
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        cn = dict(x[0] for x in self.connection.getpeercert()["subject"])["commonName"]
        body = cn.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1] + "/server.crt", sys.argv[1] + "/server.key")
ctx.verify_mode = ssl.CERT_REQUIRED
ctx.load_verify_locations(sys.argv[1] + "/ca.crt")
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print("port", srv.server_address[1], flush=True)
srv.serve_forever()
]]

-- A CA, a serving certificate for 127.0.0.1 and kube.test and a client certificate
-- (CN "tester") in dir, made by openssl.
local function make_certs(dir)
  local function req(name, extra)
    local argv = { "openssl", "req", "-x509", "-config", "/dev/null", "-newkey", "ec", "-pkeyopt",
      "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-keyout", dir .. "/" .. name .. ".key",
      "-out", dir .. "/" .. name .. ".crt" }
    for _, a in ipairs(extra) do argv[#argv + 1] = a end
    local code, out, err = proc.run { argv = argv, timeout = 20 }
    if code == nil then skip("openssl is not installed: " .. tostring(out)) end
    expect(code):eq(0, "openssl failed: " .. tostring(err))
  end
  local signed = { "-CA", dir .. "/ca.crt", "-CAkey", dir .. "/ca.key", "-addext", "basicConstraints=CA:FALSE" }
  req("ca", { "-subj", "/CN=test-ca", "-addext", "basicConstraints=critical,CA:TRUE" })
  req("server", { "-subj", "/CN=server", "-addext", "subjectAltName=IP:127.0.0.1,DNS:kube.test",
    table.unpack(signed) })
  req("client", { "-subj", "/CN=tester", table.unpack(signed) })
end

test("tls: a server of a test's own CA, with a client certificate", function()
  need_python()
  local dir = fs.tmpdir()
  make_certs(dir)
  local p <close>, port = python_server { PY, "-c", PY_TLS_SERVER, dir }
  local url = "https://127.0.0.1:" .. port .. "/"
  local tls = { ca = dir .. "/ca.crt", cert = dir .. "/client.crt", key = dir .. "/client.key" }
  local r = assert(http.get(url, { tls = tls }))
  expect(r.status):eq(200)
  expect(r.body):eq("tester", "the server saw the client certificate")
  expect(assert(http.request { url = url, tls = tls }).body):eq("tester")
  local _, err = http.get(url, { tls = { cert = tls.cert, key = tls.key } })
  expect(err):matches("certificate", "without ca the system's store does not trust the test CA")
  local none, err2 = http.get(url, { tls = { ca = tls.ca } })
  expect(none):is_nil("no client certificate: " .. tostring(err2))
  expect(function() http.get(url, { tls = { cafile = tls.ca } }) end):raises("unknown option `cafile`")
  expect(function() http.get(url, { tls = tls.ca }) end):raises("tls must be a table")
  expect(function() http.batch({ { url = url, tls = tls } }, { summary = true }) end)
    :raises("summary mode does not speak TLS")
  fs.remove_tree(dir)
end)

-- The base64 text of a file, as a kubeconfig's *-data fields hold it: one
-- line, or (wrapped) broken every 64 characters.
local function base64_of(file, wrapped)
  local argv = { "openssl", "base64", "-in", file }
  if not wrapped then argv[#argv + 1] = "-A" end
  local code, out, err = proc.run { argv = argv, timeout = 20 }
  expect(code):eq(0, "openssl base64 failed: " .. tostring(err))
  return out
end

test("tls: the PEM text inline as base64, the server's name, no verification", function()
  need_python()
  local dir = fs.tmpdir()
  make_certs(dir)
  local p <close>, port = python_server { PY, "-c", PY_TLS_SERVER, dir }
  local url = "https://127.0.0.1:" .. port .. "/"
  local data = { ca_data = base64_of(dir .. "/ca.crt"), cert_data = base64_of(dir .. "/client.crt", true),
    key_data = base64_of(dir .. "/client.key", true) }
  expect(data.cert_data):contains("\n", "the wrapped form has line breaks")
  expect(assert(http.get(url, { tls = data })).body):eq("tester", "ca, cert and key from their base64 text")
  local mixed = { ca = dir .. "/ca.crt", cert_data = data.cert_data, key = dir .. "/client.key" }
  expect(assert(http.get(url, { tls = mixed })).body):eq("tester", "files and data mixed")
  local named = { ca_data = data.ca_data, cert_data = data.cert_data, key_data = data.key_data,
    server_name = "kube.test" }
  expect(assert(http.get(url, { tls = named })).body):eq("tester", "the certificate's DNS name, reached by address")
  named.server_name = "other.test"
  local none, err = http.get(url, { tls = named })
  expect(none):is_nil("a name the certificate does not carry is refused")
  expect(err):matches("other%.test", "curl names the name it checked")
  local insecure = { insecure = true, cert_data = data.cert_data, key_data = data.key_data }
  expect(assert(http.get(url, { tls = insecure })).body):eq("tester", "no CA needed without verification")
  insecure.server_name = "other.test"
  expect(assert(http.get(url, { tls = insecure })).body):eq("tester", "nor a matching name")
  local _, err2 = http.get(url, { tls = { cert_data = data.cert_data, key_data = data.key_data } })
  expect(err2):matches("certificate", "verification is still the default")
  fs.remove_tree(dir)
end)

test("tls: options over http:// are accepted and change nothing but the name", function()
  local srv <close>, base = serve(echo)
  local r = assert(http.get(base .. "/plain?x=1", { tls = { insecure = true, server_name = "kube.test" } }))
  expect(r.status):eq(200)
  local j = r:json()
  expect(j.path):eq("/plain")
  expect(j.query):eq("x=1")
  expect(j.headers.host):eq("kube.test:" .. srv:port(), "the URL's host is the name; the address is the URL's")
  local v6 = http.listen { host = "::1", port = 0, handler = echo }
  if v6 then -- where the machine has IPv6 loopback
    local r6 = assert(http.get("http://[::1]:" .. v6:port() .. "/v6", { tls = { server_name = "kube.test" } }))
    expect(r6:json().path):eq("/v6", "connected to [::1] by its bracketed address")
    v6:close()
  end
  local pem = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==" -- "-----BEGIN CERTIFICATE-----\n"
  expect(assert(http.get(base .. "/", { tls = { ca_data = pem } })).status):eq(200, "base64 accepted")
end)

test("tls: option errors raise, naming the field", function()
  local url = "https://127.0.0.1:1/"
  local good = "QUJD" -- "ABC"
  local cases = {
    { { ca = "/x", ca_data = good }, "http: tls%.ca and tls%.ca_data are both given" },
    { { cert = "/x", cert_data = good }, "tls%.cert and tls%.cert_data are both given" },
    { { key = "/x", key_data = good }, "tls%.key and tls%.key_data are both given" },
    { { ca_data = "not base64!" }, "http: tls%.ca_data is not base64" },
    { { cert_data = "-----BEGIN CERTIFICATE-----\nMIIB\n" }, "http: tls%.cert_data is not base64" },
    { { key_data = "QUJDRA" }, "http: tls%.key_data is not base64" },
    { { ca_data = "QU=JD" }, "http: tls%.ca_data is not base64" },
    { { ca_data = " \n" }, "http: tls%.ca_data is empty" },
    { { ca_data = 42 }, "tls%.ca_data must be base64 text" },
    { { insecure = "yes" }, "tls%.insecure must be a boolean" },
    { { server_name = "" }, "tls%.server_name must be a host name" },
    { { server_name = "bad name" }, "tls%.server_name bad name" },
    { { ca_dat = good }, "unknown option `ca_dat`; did you mean `ca_data`%?" },
    { { servername = "x" }, "unknown option `servername`; did you mean `server_name`%?" },
  }
  for _, c in ipairs(cases) do
    expect(function() http.get(url, { tls = c[1] }) end):raises(c[2])
  end
  expect(function() http.request { url = "no url at all", tls = { server_name = "x" } } end)
    :raises("tls%.server_name x with url no url at all")
  expect(function() http.batch({ { url = url, tls = { ca_data = "!" } } }) end):raises("tls%.ca_data is not base64")
end)

-- ------------------------------------------------------- lines and stopping

-- A server whose handler writes the pieces of ?case= one res:write each,
-- pausing between them so the client reads them apart.
local function pieces_server(cases)
  return serve(function(req, res)
    if req.path == "/alive" then return res:finish("ok") end
    for _, piece in ipairs(cases[req.query:match("case=(%w+)")]) do
      assert(res:write(piece))
      sleep(0.01)
    end
    res:finish()
  end)
end

-- GET url with lines = true; returns the lines, the heads and the result.
local function get_lines(url, opts)
  local lines, heads = {}, {}
  opts = opts or {}
  opts.lines = true
  opts.stream = function(line, head)
    lines[#lines + 1] = line
    heads[#heads + 1] = head
  end
  local r, err = http.get(url, opts)
  return lines, heads, r, err
end

test("lines: one call per line, however the body is split", function()
  local srv <close>, base = pieces_server {
    odd = { '{"a":', '1}\n{"b"', ':2}\r', '\n', '\n', 'x', 'y\nla', 'st' },
    ends = { "one\ntw", "o\n" },
    crlf = { "a\r\n", "\r\nb\r", "\r\n" },
    empty = {},
  }
  local lines, heads, r = get_lines(base .. "/?case=odd")
  expect(r.status):eq(200)
  expect(r.body):eq("")
  expect(r.stopped):is_nil("not stopped")
  expect(lines):eq({ '{"a":1}', '{"b":2}', "", "xy", "last" }, "the last unterminated piece comes too")
  expect(heads[1].status):eq(200)
  expect(heads[5].headers["transfer-encoding"]):eq("chunked")
  expect((get_lines(base .. "/?case=ends"))):eq({ "one", "two" }, "a final newline makes no empty line")
  expect((get_lines(base .. "/?case=crlf"))):eq({ "a", "", "b\r" }, "one \r before each \n is stripped")
  expect((get_lines(base .. "/?case=empty"))):eq({}, "an empty body: no call")
end)

test("lines: thousands of lines in arbitrary pieces, read by a slow reader", function()
  local want, body = {}, {}
  local seed = 12345
  local function rand(n) -- a fixed sequence: the test is the same every run
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed % n
  end
  for i = 1, 4000 do
    want[i] = ("%d:"):format(i) .. string.rep(string.char(97 + i % 26), rand(700))
    body[i] = want[i] .. (i % 3 == 0 and "\r\n" or "\n")
  end
  local text = table.concat(body) -- about 1.4 MiB: more than the client queues before it pauses curl
  local srv <close>, base = serve(function(_, res)
    local at = 1
    while at <= #text do
      local n = 1 + rand(3000)
      assert(res:write(text:sub(at, at + n - 1)))
      at = at + n
    end
    res:finish()
  end)
  local got, slow = {}, true
  local r = assert(http.request { url = base .. "/", lines = true, timeout = 60, stream = function(line)
    if slow then
      sleep(0.5) -- the server writes everything meanwhile: the client queues and pauses curl
      slow = false
    end
    got[#got + 1] = line
  end })
  expect(r.status):eq(200)
  expect(#got):eq(#want)
  for i = 1, #want do
    if got[i] ~= want[i] then expect(got[i]):eq(want[i], "line " .. i) end
  end
end)

test("lines: a line longer than the queue limit arrives whole; one past 16 MiB fails", function()
  local big = string.rep("z", 3 << 20)
  local released = false
  local srv <close>, base = serve(function(req, res)
    if req.path == "/alive" then return res:finish("ok") end
    if req.path == "/big" then return res:finish("a\n" .. big .. "\nb") end
    local chunk = string.rep("q", 1 << 20)
    for _ = 1, req.path == "/stall" and 16 or 18 do
      if not res:write(chunk) then return end
    end
    if req.path == "/stall" then -- 2 bytes past the limit, then nothing until the test ends
      res:write("qq")
      while not released do sleep(0.05) end
    end
    res:finish("\n")
  end)
  local lines = get_lines(base .. "/big")
  expect(#lines):eq(3, "a 3 MiB line, though the client pauses curl past 1 MiB queued")
  expect(lines[2] == big):is_true("the long line is whole")
  expect(lines[3]):eq("b")
  local too_long = "http: a line of the streamed body is longer than 16 MiB"
  local got, _, r, err = get_lines(base .. "/huge", { timeout = 60 })
  expect(r):is_nil()
  expect(err):eq(too_long)
  expect(#got):eq(0)
  local _, _, _, err2 = get_lines(base .. "/stall", { timeout = 20 })
  released = true
  expect(err2):eq(too_long, "known as soon as the bytes are there, not when the request times out")
  local res = http.batch { { url = base .. "/huge", lines = true, stream = function() end, timeout = 60 } }
  expect(res[1].err):eq(too_long, "a batch's result")
  still_serves(base)
end)

test("a stream function that returns false ends the transfer: stopped, no more calls", function()
  local write_failed
  local srv <close>, base = serve(function(req, res)
    if req.path == "/alive" then return res:finish("ok") end
    res:header("X-Watch", "yes")
    for i = 1, 200 do
      if not res:write(("event %d\n"):format(i)) then
        write_failed = i
        return
      end
      sleep(0.02)
    end
    res:finish()
  end)
  local calls = 0
  local r, err = http.request { url = base .. "/watch", lines = true, stream = function(line)
    calls = calls + 1
    if line == "event 3" then return false end
    return nil -- anything but false goes on
  end }
  expect(err):is_nil()
  expect(r.stopped):eq(true)
  expect(r.status):eq(200)
  expect(r.headers["x-watch"]):eq("yes")
  expect(r.body):eq("")
  expect(calls):eq(3, "no call after the one that returned false")
  eventually(function() return write_failed end, { timeout = 5 })
  expect(write_failed):lt(200, "the server saw the connection close")
  -- without lines, and from a stream function that waited first
  local chunks = 0
  local r2 = assert(http.request { url = base .. "/watch", stream = function()
    chunks = chunks + 1
    sleep(0.01)
    return false
  end })
  expect(r2.stopped):eq(true)
  expect(chunks):eq(1)
  -- in a batch, only that request stops
  local res = http.batch { { url = base .. "/watch", stream = function() return false end }, base .. "/alive" }
  expect(res[1].stopped):eq(true)
  expect(res[2].body):eq("ok")
  expect(res[2].stopped):is_nil()
  still_serves(base)
end)

test("lines: option errors raise", function()
  expect(function() http.request { url = "http://x/", lines = true } end)
    :raises("http: lines = true frames a streamed body: it needs stream = function")
  expect(function() http.get("http://x/", { lines = 1, stream = function() end }) end)
    :raises("http: lines must be a boolean")
  expect(function() http.get("http://x/", { line = true }) end)
    :raises("http%.get: unknown option `line`; did you mean `lines`%?")
  expect(function() http.batch({ { url = "http://127.0.0.1:1/", lines = true } }, { summary = true }) end)
    :raises("summary mode does not stream")
end)
