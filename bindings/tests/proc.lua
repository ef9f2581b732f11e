-- Tests of the proc module: spawn, wait, kill and signals, the environment,
-- cwd, logs, proc.run's capture, input and timeout, start failures, and the
-- guarantee that no child or grandchild outlives the test, the file, or the
-- engine that started it (a failed test, a timed-out test, SIGINT, SIGKILL).
--
-- The orphan tests run a second engine ($KVENGINE_BIN) on small scripts
-- written to a temporary folder.  Every process signalled here was started
-- here: through a proc handle, whose kill reaches only its own group.

local fs = require("fs")
local proc = require("proc")
local procfs = require("tests.lib.procfs")

local ENGINE = os.getenv("KVENGINE_BIN")

-- ------------------------------------------------------------- helpers

local base -- a temporary folder for the whole file

before_all(function() base = fs.tmpdir() end)

after_all(function()
  if base then proc.run { argv = { "rm", "-rf", base } } end
end)

local dirs = 0
local function tmpdir()
  dirs = dirs + 1
  return fs.mkdir_p(base .. "/" .. dirs)
end

local read_file, write_file = fs.read, fs.write

-- A process that exists and is not a zombie.  An orphan whose new parent
-- has not reaped it yet is a zombie: it runs no more.
local function alive(pid) return not procfs.gone(pid) end

local function all_gone(pids)
  for _, pid in ipairs(pids) do
    if alive(pid) then return false end
  end
  return true
end

-- A shell that starts a grandchild (sleep) and writes "<shell pid> <sleep pid>"
-- to pidfile, then waits.  `trap` = "" makes both ignore SIGTERM.
local function family_argv(pidfile, ignore_term)
  local script = (ignore_term and 'trap "" TERM; ' or "")
    .. 'sleep 300 & echo $$ $! > "$1.tmp" && mv "$1.tmp" "$1"; wait'
  return { "/bin/sh", "-c", script, "sh", pidfile }
end

local function read_pids(pidfile)
  local s = eventually(function() return read_file(pidfile) end)
  local sh, sl = s:match("^(%d+) (%d+)")
  return math.tointeger(sh), math.tointeger(sl)
end

-- Start the family; returns the handle and {shell, sleep} once both run.
local function family(dir, opts)
  opts = opts or {}
  local pidfile = dir .. "/pids"
  local p = assert(proc.spawn { argv = family_argv(pidfile, opts.ignore_term) })
  local sh, sl = read_pids(pidfile)
  expect(alive(sh)):is_true("the shell runs")
  expect(alive(sl)):is_true("the grandchild runs")
  return p, { sh, sl }
end

local function lines(s)
  local t = {}
  for l in s:gmatch("[^\n]+") do t[#t + 1] = l end
  table.sort(t)
  return t
end

-- ---------------------------------------------------------------- proc.run

test("run captures stdout, stderr and the exit code", function()
  local st, out, err = proc.run { argv = { "sh", "-c", "echo out; echo err >&2; exit 3" } }
  expect(st):eq(3)
  expect(out):eq("out\n")
  expect(err):eq("err\n")
end)

test("run writes input to stdin and closes it", function()
  local st, out = proc.run { argv = { "cat" }, input = "a\nb\0c\n" }
  expect(st):eq(0)
  expect(out):eq("a\nb\0c\n")
  st, out = proc.run { argv = { "wc", "-c" }, input = "" }
  expect(st):eq(0)
  expect(out:match("%d+")):eq("0")
end)

test("run without input gives /dev/null as stdin", function()
  local st, out = proc.run { argv = { "cat" }, timeout = 5 }
  expect(st):eq(0, "cat must see EOF at once")
  expect(out):eq("")
end)

test("run captures large output", function()
  local st, out, err = proc.run { argv = { "head", "-c", "3000000", "/dev/zero" } }
  expect(st):eq(0)
  expect(#out):eq(3000000)
  expect(err):eq("")
end)

test("run takes an input larger than a pipe buffer", function()
  local input = string.rep("0123456789abcdef", 65536) -- 1 MiB
  local st, out = proc.run { argv = { "wc", "-c" }, input = input }
  expect(st):eq(0)
  expect(tonumber(out:match("%d+"))):eq(#input)
end)

test("run reports a signal death", function()
  local st, why, out, err, sig = proc.run { argv = { "sh", "-c", "echo bye; kill -TERM $$" } }
  expect(st):is_nil()
  expect(why):eq("signal")
  expect(out):eq("bye\n")
  expect(err):eq("")
  expect(sig):eq(15)
end)

test("run timeout kills the group and returns what was captured", function()
  local t0 = now()
  local st, why, out, err = proc.run {
    argv = { "sh", "-c", "sleep 300 & echo $$ $!; wait" }, timeout = 0.5,
  }
  expect(now() - t0):lt(3, "returns at the timeout")
  expect(st):is_nil()
  expect(why):eq("timeout")
  expect(err):eq("")
  local sh, sl = out:match("^(%d+) (%d+)\n$")
  expect(sh):not_nil("the output so far: " .. out)
  eventually(function() return all_gone { sh, sl } end)
end)

test("run leaves nothing behind when the command exits", function()
  local st, out = proc.run { argv = { "sh", "-c", "sleep 300 & echo $!" }, timeout = 10 }
  expect(st):eq(0)
  expect(alive(out:match("%d+"))):is_false("the grandchild is reaped before run returns")
end)

test("run leaves nothing behind that left the group", function()
  local st, out = proc.run { argv = { "sh", "-c", "setsid sleep 300 & echo $!" }, timeout = 10 }
  expect(st):eq(0, "the session leader held stdout: it was killed, so run could end")
  expect(alive(out:match("%d+"))):is_false()
end)

test("run applies env, env_clear and cwd", function()
  local dir = tmpdir()
  local st, out = proc.run { argv = { "pwd" }, cwd = dir }
  expect(st):eq(0)
  expect(out):eq(dir .. "\n")
  st, out = proc.run { argv = { "/usr/bin/env" }, env = { A = "1", B = "two words" }, env_clear = true }
  expect(st):eq(0)
  expect(lines(out)):eq { "A=1", "B=two words" }
end)

-- ---------------------------------------------------------- start failures

test("a program that cannot be executed is nil, err", function()
  local p, err = proc.spawn { argv = { "/nonexistent/prog", "x" } }
  expect(p):is_nil()
  expect(err):eq("proc: exec: /nonexistent/prog: No such file or directory")
  p, err = proc.spawn { argv = { "kvengine-no-such-program" } }
  expect(err):eq("proc: exec: kvengine-no-such-program: No such file or directory")
  local plain = tmpdir() .. "/plain"
  write_file(plain, "not a program\n") -- mode 0644: no execute bit, even for root
  p, err = proc.spawn { argv = { plain } }
  expect(err):eq("proc: exec: " .. plain .. ": Permission denied")
  local st, why = proc.run { argv = { "/nonexistent/prog" } }
  expect(st):is_nil()
  expect(why):eq("proc: exec: /nonexistent/prog: No such file or directory")
end)

test("a cwd that does not exist is nil, err", function()
  local p, err = proc.spawn { argv = { "true" }, cwd = "/nonexistent/dir" }
  expect(p):is_nil()
  expect(err):eq("proc: chdir: /nonexistent/dir: No such file or directory")
end)

test("a log that cannot be opened is nil, err", function()
  local p, err = proc.spawn { argv = { "true" }, log = "/nonexistent/dir/log" }
  expect(p):is_nil()
  expect(err):eq("proc: log: /nonexistent/dir/log: No such file or directory")
end)

test("wrong arguments raise", function()
  expect(function() proc.spawn() end):raises("table expected")
  expect(function() proc.spawn {} end):raises("argv must be a table")
  expect(function() proc.spawn { argv = "ls" } end):raises("argv must be a table")
  expect(function() proc.spawn { argv = {} } end):raises("argv must hold")
  expect(function() proc.spawn { argv = { "ls", {} } } end):raises("must be a string")
  expect(function() proc.spawn { argv = { "ls" }, env = "A=1" } end):raises("env must be a table")
  expect(function() proc.spawn { argv = { "ls" }, env = { A = {} } } end):raises("must be a string")
  expect(function() proc.spawn { argv = { "ls" }, env = { ["A=B"] = "1" } } end)
    :raises("bad environment variable name")
  expect(function() proc.spawn { argv = { "ls" }, cwd = {} } end):raises("cwd must be a string")
  expect(function() proc.spawn { argv = { "ls" }, cwd = "/tmp\0x" } end):raises("NUL")
  expect(function() proc.spawn { argv = { "ls", "a\0b" } } end):raises("NUL")
  expect(function() proc.spawn { argv = { "ls" }, args = {} } end):raises("proc.spawn: unknown option `args`; did you mean `argv`")
  expect(function() proc.spawn { argv = { "ls" }, input = "x" } end):raises("proc.spawn: unknown option `input` %(options: argv, env, env_clear, cwd, log%)")
  expect(function() proc.run { argv = { "ls" }, log = "x" } end):raises("proc.run: unknown option `log`")
  expect(function() proc.run { argv = { "ls" }, timeout = -1 } end)
    :raises("proc%.run: timeout = %-1: a timeout is a number of seconds >= 0 %(0: poll, nil: the default, 60 s")
  local p <close> = assert(proc.spawn { argv = { "sleep", "30" } })
  expect(function() p:kill("NOSUCH") end):raises("unknown signal")
  expect(function() p:kill(1000) end):raises("not a signal number")
  expect(function() p:wait(-1) end):raises("p:wait: a timeout is an option now: pass {timeout = %-1}, not %-1")
  expect(function() p:wait(5) end):raises("p:wait: a timeout is an option now: pass {timeout = 5}, not 5")
  expect(function() p:wait { timeout = -1 } end):raises("p:wait: timeout = %-1: a timeout is a number of seconds >= 0")
  expect(function() p:wait { timeout = "5" } end):raises("p:wait: timeout = 5: a timeout is a number")
  expect(function() p:wait { timout = 5 } end):raises("p:wait: unknown option `timout`; did you mean `timeout`%?")
  expect(select(2, p:wait { timeout = 0 })):eq("timeout", "0 only asks whether it has ended")
  expect(function() coroutine.wrap(function() return p:wait() end)() end):raises("cannot wait here")
end)

-- ------------------------------------------------------- spawn and handles

test("spawn, wait and the exit code", function()
  local p = assert(proc.spawn { argv = { "sh", "-c", "exit 7" } })
  expect(math.type(p:pid())):eq("integer")
  expect(p:wait()):eq(7)
  expect(p:running()):is_false()
  expect(p:wait()):eq(7, "wait again gives the same status")
  expect(tostring(p)):matches("^proc %(pid %d+, exited%)$")
end)

test("pid is the target's; the group is the supervisor's", function()
  local p <close> = assert(proc.spawn { argv = { "sleep", "30" } })
  expect(p:running()):is_true()
  expect(read_file("/proc/" .. p:pid() .. "/comm")):eq("sleep\n")
  expect(p:pgid()):ne(p:pid())
  expect(read_file("/proc/" .. p:pgid() .. "/comm")):eq("kv-supervise\n")
  local pgrp = read_file("/proc/" .. p:pid() .. "/stat"):match(".*%) %a %d+ (%d+)")
  expect(math.tointeger(pgrp)):eq(p:pgid(), "the target runs in the supervisor's group")
end)

test("the target gets stdio only, stdin from /dev/null", function()
  local keep = assert(io.open("/etc/hostname")) -- a descriptor without CLOEXEC
  local p <close> = assert(proc.spawn { argv = { "sleep", "30" } })
  local st, out = proc.run { argv = { "ls", "/proc/" .. p:pid() .. "/fd" } }
  keep:close()
  expect(st):eq(0)
  expect(lines(out)):eq { "0", "1", "2" }
  st, out = proc.run { argv = { "readlink", "/proc/" .. p:pid() .. "/fd/0" } }
  expect(out):eq("/dev/null\n")
end)

-- Signals 32 and 33 are glibc's own (its sigaction refuses them), so a
-- disposition inherited from whoever started the engine stays: mask them out.
local GLIBC_SIGNALS = (1 << 31) | (1 << 32)

test("the target starts with default signal dispositions and no blocked signals", function()
  local st, out = proc.run { argv = { "grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status" } }
  expect(st):eq(0)
  local blocked, ignored = out:match("SigBlk:%s*(%x+)\nSigIgn:%s*(%x+)")
  expect(tonumber(blocked, 16) & ~GLIBC_SIGNALS):eq(0, "no signal blocked in the target")
  expect(tonumber(ignored, 16) & ~GLIBC_SIGNALS):eq(0, "no signal ignored in the target")
end)

test("wait with a timeout", function()
  local p <close> = assert(proc.spawn { argv = { "sleep", "30" } })
  local t0 = now()
  local st, why = p:wait { timeout = 0.2 }
  expect(st):is_nil()
  expect(why):eq("timeout")
  expect(now() - t0):ge(0.15)
  expect(p:running()):is_true()
end)

test("several tasks wait for the same child", function()
  local p <close> = assert(proc.spawn { argv = { "sh", "-c", "sleep 0.3; exit 4" } })
  local r = parallel {
    function() return p:wait() end,
    function() return p:wait { timeout = 10 } end,
    function() return (p:wait { timeout = 0.05 }) == nil end,
  }
  expect(r):eq { 4, 4, true }
end)

test("kill by name and by number; signal death", function()
  local p = assert(proc.spawn { argv = { "sleep", "30" } })
  expect(p:kill()):is_true()
  local st, why, sig = p:wait { timeout = 5 }
  expect(st):is_nil()
  expect(why):eq("signal")
  expect(sig):eq(15, "TERM by default")
  local st2, err = p:kill("KILL")
  expect(st2):is_nil()
  expect(err):matches("exited")
  p = assert(proc.spawn { argv = { "sleep", "30" } })
  expect(p:kill(9)):is_true()
  expect(table.pack(p:wait { timeout = 5 })):eq { n = 3, nil, "signal", 9 }
  p = assert(proc.spawn { argv = { "sleep", "30" } })
  expect(p:kill("SIGKILL")):is_true()
  expect(select(3, p:wait { timeout = 5 })):eq(9)
end)

test("the target decides what a signal does", function()
  local dir = tmpdir()
  local script = 'trap "exit 42" INT; touch "$1"; while :; do sleep 0.05; done'
  local p <close> = assert(proc.spawn { argv = { "sh", "-c", script, "sh", dir .. "/ready" } })
  eventually(function() return read_file(dir .. "/ready") end)
  expect(p:kill("INT")):is_true()
  expect(p:wait { timeout = 5 }):eq(42)
end)

test("kill reaches the whole group", function()
  local p <close>, pids = family(tmpdir())
  expect(p:kill("TERM")):is_true()
  expect(select(3, p:wait { timeout = 5 })):eq(15)
  expect(all_gone(pids)):is_true("the grandchild is gone when wait returns")
end)

test("when the target exits, what it left behind is killed", function()
  local dir = tmpdir()
  local p = assert(proc.spawn { argv = { "sh", "-c", 'sleep 300 & echo $! > "$1"', "sh", dir .. "/pid" } })
  expect(p:wait { timeout = 10 }):eq(0)
  local pid = read_file(dir .. "/pid"):match("%d+")
  expect(alive(pid)):is_false("reaped by the supervisor before it exited")
end)

test("env is merged onto the engine's; false removes a variable", function()
  local path = os.getenv("PATH")
  local st, out = proc.run {
    argv = { "sh", "-c", 'printf "%s|%s|%s" "$KV_A" "$KV_N" "$PATH"' },
    env = { KV_A = "x y", KV_N = 42 },
  }
  expect(st):eq(0)
  expect(out):eq("x y|42|" .. path)
  st, out = proc.run { argv = { "/usr/bin/env" }, env = { PATH = false } }
  expect(st):eq(0)
  expect(("\n" .. out):find("\nPATH=")):is_nil("PATH = false removes it")
  expect(out):contains("KVENGINE_BIN=", "the rest is inherited")
  expect(out:find("KV_A=")):is_nil("nothing is left from the previous call")
end)

test("env_clear starts from an empty environment; PATH falls back to the default", function()
  local st, out = proc.run { argv = { "env" }, env_clear = true }
  expect(st):eq(0, "execvp's default path finds env")
  expect(out):eq("")
  local p = assert(proc.spawn { argv = { "sh", "-c", '[ "$ONLY" = 1 ] && [ -z "$HOME" ]' },
    env = { ONLY = "1" }, env_clear = true })
  expect(p:wait { timeout = 5 }):eq(0)
end)

test("cwd", function()
  local dir = tmpdir()
  local p = assert(proc.spawn { argv = { "sh", "-c", "pwd > where" }, cwd = dir })
  expect(p:wait { timeout = 5 }):eq(0)
  expect(read_file(dir .. "/where")):eq(dir .. "\n")
end)

test("log appends stdout and stderr to the file", function()
  local log = tmpdir() .. "/child.log"
  local p = assert(proc.spawn { argv = { "sh", "-c", "echo out; echo err >&2" }, log = log })
  expect(p:wait { timeout = 5 }):eq(0)
  p = assert(proc.spawn { argv = { "sh", "-c", "echo again" }, log = log })
  expect(p:wait { timeout = 5 }):eq(0)
  expect(read_file(log)):eq("out\nerr\nagain\n")
  local st, out = proc.run { argv = { "stat", "-c", "%a", log } }
  expect(out):eq("644\n")
end)

-- ------------------------------------------------------------- cleanup

test("close terminates the group and releases the handle", function()
  local p, pids = family(tmpdir())
  local pid = p:pid()
  p:close()
  expect(p:running()):is_false()
  expect(p:pid()):eq(pid, "pid still answers")
  expect(function() p:wait() end):raises("closed")
  expect(function() p:kill() end):raises("closed")
  p:close() -- idempotent
  eventually(function() return all_gone(pids) end)
end)

test("a <close> variable terminates the group at the end of its block", function()
  local pids
  do
    local p <close>, ps = family(tmpdir())
    pids = ps
  end
  eventually(function() return all_gone(pids) end)
end)

test("a handle that is garbage-collected terminates the group", function()
  local p, pids = family(tmpdir())
  p = nil -- luacheck: ignore
  collectgarbage("collect")
  collectgarbage("collect")
  eventually(function() return all_gone(pids) end)
end)

test("children that ignore SIGTERM get SIGKILL after the grace", { timeout = 15 }, function()
  local p, pids = family(tmpdir(), { ignore_term = true })
  p:close()
  sleep(0.5)
  expect(alive(pids[2])):is_true("still in its grace")
  eventually(function() return all_gone(pids) end, { timeout = 8 })
end)

local left_by_previous_test

test("a test's children ...", function()
  local p, pids = family(tmpdir())
  left_by_previous_test = { p:pgid(), table.unpack(pids) }
  -- neither closed nor waited for: the end of the test terminates them
end)

test("... are gone, reaped, before the next test starts", function()
  expect(left_by_previous_test):not_nil("runs after the test above")
  for _, pid in ipairs(left_by_previous_test) do
    expect(read_file("/proc/" .. pid .. "/stat") == nil):is_true("process " .. pid .. " of the test before still "
      .. "exists: a server it left could answer on this test's address")
  end
end)

-- ------------------------------------------------ a second engine: orphans

-- The inner file: each test leaves a family running and ends badly; the test
-- after it checks that the family is gone and writes a mark.
local INNER_FILE = [=[
local proc = require("proc")
local dir = os.getenv("PROC_TEST_DIR")
local read_file = require("fs").read
local gone = require("tests.lib.procfs").gone
local function family(name)
  local pidfile = dir .. "/" .. name
  local script = 'sleep 300 & echo $$ $! > "$1.tmp" && mv "$1.tmp" "$1"; wait'
  local p = assert(proc.spawn { argv = { "/bin/sh", "-c", script, "sh", pidfile } })
  eventually(function() return read_file(pidfile) end)
  return p
end
local function check(name)
  local sh, sl = read_file(dir .. "/" .. name):match("^(%d+) (%d+)")
  eventually(function() return gone(sh) and gone(sl) end)
  local f = assert(io.open(dir .. "/" .. name .. ".gone", "w"))
  f:close()
end

family("file") -- the file's own: gone when the file ends

test("fails", function()
  family("failed")
  error("boom")
end)
test("after fails", function() check("failed") end)

test("times out spinning", { timeout = 1 }, function()
  family("spun")
  while true do end
end)
test("after times out spinning", function() check("spun") end)

test("times out waiting", { timeout = 1 }, function()
  local p = family("waited")
  p:wait()
end)
test("after times out waiting", function() check("waited") end)

test("times out in proc.run", { timeout = 1 }, function()
  local script = 'sleep 300 & echo $$ $! > "$1.tmp" && mv "$1.tmp" "$1"; wait'
  proc.run { argv = { "/bin/sh", "-c", script, "sh", dir .. "/ran" } }
end)
test("after times out in proc.run", function() check("ran") end)
]=]

local function inner_pids(dir, name)
  local s = read_file(dir .. "/" .. name)
  expect(s):not_nil("the inner file wrote " .. name)
  local sh, sl = s:match("^(%d+) (%d+)")
  return { math.tointeger(sh), math.tointeger(sl) }
end

test("no child outlives a failed or timed-out test, nor the file", { timeout = 90 }, function()
  if not ENGINE then skip("KVENGINE_BIN is not set") end
  local dir = tmpdir()
  write_file(dir .. "/inner.lua", INNER_FILE)
  local st, out, err = proc.run {
    argv = { ENGINE, "--artifacts", dir .. "/artifacts", "--no-color", dir .. "/inner.lua" },
    env = { PROC_TEST_DIR = dir }, cwd = dir, timeout = 80,
  }
  local report = "inner engine said:\n" .. tostring(out) .. tostring(err)
  expect(st):eq(1, "four tests fail; " .. report)
  expect(out):contains("4 passed, 4 failed", report)
  expect(err):eq("", "nothing on stderr (no sanitizer report either)")
  for _, name in ipairs { "failed", "spun", "waited", "ran" } do
    expect(read_file(dir .. "/" .. name .. ".gone")):not_nil(name .. ": checked gone; " .. report)
    expect(all_gone(inner_pids(dir, name))):is_true(name)
  end
  local file_pids = inner_pids(dir, "file")
  eventually(function() return all_gone(file_pids) end)
end)

-- The served program: starts a family, writes its pids, waits forever.
local SERVED = [=[
local proc = require("proc")
local dir = ...
local script = 'sleep 300 & echo $$ $! > "$1.tmp" && mv "$1.tmp" "$1"; wait'
local p = assert(proc.spawn { argv = { "/bin/sh", "-c", script, "sh", dir .. "/pids" } })
local f = assert(io.open(dir .. "/pgid", "w"))
f:write(p:pgid())
f:close()
sleep(600)
]=]

-- Serve SERVED in a second engine; returns its handle and every pid it made.
local function served_engine()
  if not ENGINE then skip("KVENGINE_BIN is not set") end
  local dir = tmpdir()
  write_file(dir .. "/served.lua", SERVED)
  local e = assert(proc.spawn { argv = { ENGINE, "serve", dir .. "/served.lua", dir } })
  local sh, sl = read_pids(dir .. "/pids")
  -- read once it is whole: the file exists, empty, before the pgid is written
  local pgid = eventually(function() return math.tointeger(tonumber((read_file(dir .. "/pgid") or ""):match("^%d+$"))) end)
  local pids = { pgid, sh, sl }
  for _, pid in ipairs(pids) do expect(alive(pid)):is_true("running before the signal") end
  return e, pids
end

test("no child outlives an engine stopped by SIGINT", { timeout = 30 }, function()
  local e <close>, pids = served_engine()
  expect(e:kill("INT")):is_true()
  local st, why = e:wait { timeout = 15 }
  expect(why):ne("timeout", "the engine ends on SIGINT")
  expect(all_gone(pids)):is_true("its children are reaped before it exits")
end)

test("no child outlives an engine killed by SIGKILL", { timeout = 30 }, function()
  local e <close>, pids = served_engine()
  expect(e:kill("KILL")):is_true()
  expect(select(3, e:wait { timeout = 5 })):eq(9)
  eventually(function() return all_gone(pids) end, { timeout = 10 })
end)
