-- testapi.lua - the globals a scenario file sees.
--
--   test(name, [opts], fn)      opts: timeout, tags, skip = "reason",
--                               known_gap = {reason =, link =, match =,
--                                 targets =, versions =} (known_gap.lua)
--   skip(reason)  fail(message)  infra_error(message)
--   expect(v):eq(x, "why") ...  eventually(fn, {timeout=, interval=})
--   parallel{fn, ...}  log(...)  artifact(name, data)  on_failure(fn)
--   before_all / after_all / before_each / after_each (fn)
--   (sleep, spawn and now come from the C core)
--
-- install(file) returns the file's registry, which the runner reads.

local failure = require("failure")
local expect = require("expect")
local known_gap = require("known_gap")
local time_scale = require("time_scale").read

local M = {}

-- The registry of the file this worker runs (see install), for engine.lua.
M.current = nil

local DEFAULT_EVENTUALLY = 5
local DEFAULT_INTERVAL = 0.05

-- The keys test() and eventually() take (known_gap's own fields are its own).
local TEST_OPTIONS = { "timeout", "tags", "skip", "known_gap" }
local EVENTUALLY_OPTIONS = { "timeout", "interval" }
M.OPTIONS = { test = TEST_OPTIONS, eventually = EVENTUALLY_OPTIONS }

local function caller_where(level)
  local info = debug.getinfo(level + 1, "Sl")
  return info and (info.short_src .. ":" .. (info.currentline or 0)) or "?"
end

local function check_opts(name, opts)
  if opts.timeout ~= nil and (type(opts.timeout) ~= "number" or opts.timeout <= 0) then
    error(string.format("test %q: timeout must be a positive number of seconds", name), 3)
  end
  if opts.skip ~= nil and type(opts.skip) ~= "string" then
    error(string.format("test %q: skip must be a reason (a string)", name), 3)
  end
  local gap, why = known_gap.check(opts.known_gap)
  if why then error(string.format("test %q: %s", name, why), 3) end
  opts.known_gap = gap
  if opts.tags ~= nil and type(opts.tags) ~= "table" then
    error(string.format("test %q: tags must be a list of strings", name), 3)
  end
end

local function eventually(fn, opts)
  __kv.check_options("eventually", opts, EVENTUALLY_OPTIONS, 2)
  opts = opts or {}
  local timeout = opts.timeout or DEFAULT_EVENTUALLY * time_scale()
  local interval = opts.interval or DEFAULT_INTERVAL
  local deadline = now() + timeout
  local tries, last_ok, last = 0, true, nil
  while true do
    tries = tries + 1
    local r = table.pack(pcall(fn))
    if r[1] and r[2] then return table.unpack(r, 2, r.n) end
    last_ok, last = r[1], r[2]
    local kind = not last_ok and failure.kind(last)
    if kind == "skip" or kind == "infra" then error(last, 0) end
    local left = deadline - now()
    if left <= 0 then
      local what = last_ok and ("last returned " .. expect.show(last))
        or ("last error: " .. failure.text(last))
      failure.raise(string.format("eventually gave up after %gs (%d tries); %s", timeout, tries, what),
        not last_ok and failure.where(last) and ("the last error was raised at " .. failure.where(last)) or nil)
    end
    sleep(math.min(interval, left))
  end
end

local function parallel(fns)
  local tasks = {}
  for i, fn in ipairs(fns) do tasks[i] = spawn(fn) end
  local results, first_err = {}, nil
  for i, t in ipairs(tasks) do
    local ok, v = pcall(t.wait, t)
    if ok then results[i] = v elseif first_err == nil then first_err = v end
  end
  if first_err ~= nil then error(first_err, 0) end
  return results
end

local function mkdir_p(path)
  local ok, err = __kv.mkdir_p(path)
  if not ok then error("cannot create " .. path .. ": " .. err, 3) end
end

-- A new registry for file; emit sends a report event to the parent.
local function new_registry(file, emit)
  local reg = {
    file = file, tests = {}, names = {},
    hooks = { before_all = {}, after_all = {}, before_each = {}, after_each = {} },
    on_failure = {}, current = nil, -- current = {name=, dir=, on_failure = {}}
    emit = emit, -- a report event to the parent (engine.report)
  }
  -- The running test's folder, or the file's between tests; created.
  function reg.artifacts_dir()
    local dir = reg.current and reg.current.dir or reg.file_dir
    mkdir_p(dir)
    return dir
  end
  return reg
end

-- test(), the hooks and on_failure(): what registers into reg.
local function install_registration(reg)
  _G.test = function(name, opts, fn)
    if type(opts) == "function" then opts, fn = {}, opts end
    if type(name) ~= "string" or type(fn) ~= "function" or type(opts) ~= "table" then
      error("usage: test(name, [opts], fn)", 2)
    end
    if reg.names[name] then error(string.format("test %q is defined twice", name), 2) end
    __kv.check_options(string.format("test %q", name), opts, TEST_OPTIONS, 2)
    check_opts(name, opts)
    reg.names[name] = true
    reg.tests[#reg.tests + 1] = { name = name, opts = opts, fn = fn, where = caller_where(2) }
  end

  for hook in pairs(reg.hooks) do
    _G[hook] = function(fn)
      if type(fn) ~= "function" then error(hook .. " takes a function", 2) end
      table.insert(reg.hooks[hook], fn)
    end
  end

  -- Within a test, a handler for that test alone; outside, for every test.
  _G.on_failure = function(fn)
    if type(fn) ~= "function" then error("on_failure takes a function", 2) end
    table.insert(reg.current and reg.current.on_failure or reg.on_failure, fn)
  end
end

-- The verdicts and waits a test body uses; they keep no state of the file.
local function install_checks()
  _G.skip = failure.skip
  _G.fail = function(message, details) failure.raise(tostring(message), details) end
  _G.infra_error = failure.infra
  _G.expect = expect.expect
  _G.eventually = eventually
  _G.parallel = parallel
end

-- log() and artifact(): what a test tells the report, marked with the
-- running test of reg.
local function install_output(reg)
  _G.log = function(...)
    local parts = table.pack(...)
    for i = 1, parts.n do parts[i] = tostring(parts[i]) end
    reg.emit { ev = "log", test = reg.current and reg.current.name, msg = table.concat(parts, "\t", 1, parts.n) }
  end

  _G.artifact = function(name, data)
    if type(name) ~= "string" or name:find("/") or name:find("^%.") then
      error("artifact: name must be a plain file name", 2)
    end
    local path = reg.artifacts_dir() .. "/" .. name
    local f = assert(io.open(path, "wb"))
    f:write(tostring(data))
    f:close()
    reg.emit { ev = "artifact", test = reg.current and reg.current.name, name = name, path = path }
    return path
  end
end

-- Install the globals for one file; returns the registry the runner reads.
-- emit(event) sends a report event to the parent.
function M.install(file, emit)
  local reg = new_registry(file, emit)
  M.current = reg
  install_registration(reg)
  install_checks()
  install_output(reg)
  return reg
end

return M
