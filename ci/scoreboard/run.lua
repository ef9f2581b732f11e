-- ci/scoreboard/run.lua - the suite on every router that builds here, side by
-- side (make scoreboard; docs/scoreboard.md says how to read it):
--
--   build/kvengine serve ci/scoreboard/run.lua [--out DIR] [--only a,b] [PATH...]
--
-- The routers: local (the stand-in), kthena at the pinned release
-- (build/kthena), kthena main when KTHENA_DIR names a checkout (its binaries
-- in KVENGINE_KTHENA_MAIN_BIN, default build/kthena-main), and every other
-- target with a module in fixtures/targets/ but attached and kind (a stack
-- kept running, a cluster): dynamo, llmd, smg when present. A router whose
-- toolchain is missing (its module's available(), docs/drivers.md) is listed
-- with why; one named but absent from the checkout too. Kthena runs the
-- project's runtime (KTHENA_RUNTIME=local), as make test does.
--
-- For each router that can run: the suite (PATH..., default scenarios/*.lua)
-- as a child engine with --tap and --reports; load_prefix_sharing.lua's
-- figures from its "load_figures" reports (never from its log); and
-- fixtures/bench/router_decision.lua's `added` point on the same target.
-- A failing test is a finding, not an error: each is shown with the first
-- line of its message, and the cause that lists it (fixtures/expect/<target>.lua,
-- or Kthena's own "[cause name]" in the message). Exits 1 when a figure
-- that should be there is missing (the workload test passed without
-- reporting its figures, a bench ran without its rows), 3 when a run did not
-- complete; writes DIR/scoreboard.json and DIR/scoreboard.txt, and the page
-- DIR/scoreboard.html (ci/scoreboard/page.lua, drawn by the --html report).

local fs = require("fs")
local json = require("json")
local proc = require("proc")

local BIN = os.getenv("KVENGINE_BIN")
local ROOT = debug.getinfo(1, "S").source:match("^@(.*)/ci/scoreboard/[^/]*$") or "."
package.path = ROOT .. "/ci/?.lua;" .. package.path

local board = require("scoreboard.board")
local driver = require("kvcache.driver")
local expectations = require("expectations")
local tap = require("tests.lib.tap")

local NOT_ROUTERS = { attached = "a stack kept running elsewhere", kind = "a Kind cluster (make e2e-kvcache-kind)" }
local problems = {} -- figures that should be there and are not: exit 1

local function die(msg, code)
  io.stderr:write("scoreboard: ", msg, "\n")
  os.exit(code or 2)
end

local function say(...) io.stderr:write("scoreboard: ", string.format(...), "\n") end

local function parse(argv)
  local o = { out = ROOT .. "/build/scoreboard", paths = {} }
  local i = 1
  while argv[i] do
    local a = argv[i]
    if a == "--out" then
      i = i + 1
      o.out = argv[i] or die("--out needs a folder")
    elseif a == "--only" then
      i = i + 1
      o.only = {}
      for t in (argv[i] or die("--only needs a list")):gmatch("[^,]+") do o.only[t] = true end
    else
      o.paths[#o.paths + 1] = a
    end
    i = i + 1
  end
  if #o.paths == 0 then o.paths = { ROOT .. "/scenarios/*.lua" } end
  return o
end

-- ------------------------------------------------------------ routers

-- The kthena build in dir: its label and nil, or nil and why not.
local function kthena_build(dir, want_main)
  local v = fs.read(dir .. "/version")
  if not v then
    return nil, string.format("no Kthena build in %s: %s", dir, want_main
      and "KTHENA_DIR=<checkout> KTHENA_OUT=" .. dir .. " KTHENA_RUNTIME=local sh ci/kthena/build.sh builds it"
      or "make kthena-build builds it (it needs Go)")
  end
  local release = v:match("github%.com/volcano%-sh/kthena (v%d+%.%d+%.%d+)")
  if want_main and release then return nil, dir .. " holds Kthena " .. release .. ", not a checkout" end
  if not want_main and not release then return nil, dir .. " holds " .. v:gsub("%s+$", "") .. ", not a release" end
  return "kthena " .. (release or "main")
end

local function kthena_routers()
  local out = {}
  local pinned = ROOT .. "/build/kthena"
  local label, why = kthena_build(pinned, false)
  out[1] = { label = label or "kthena v1.0.0", target = "kthena", why = why,
    env = { KVENGINE_KTHENA_BIN = pinned, KTHENA_DIR = "", KTHENA_VERSION = "", KTHENA_RUNTIME = "local" } }
  local dir = os.getenv("KTHENA_DIR") or ""
  if dir == "" then
    out[2] = { label = "kthena main", target = "kthena", why = "KTHENA_DIR names no Kthena checkout (make "
      .. "scoreboard KTHENA_DIR=<checkout> adds it)" }
  else
    local bin = os.getenv("KVENGINE_KTHENA_MAIN_BIN") or (ROOT .. "/build/kthena-main")
    label, why = kthena_build(bin, true)
    out[2] = { label = label or "kthena main", target = "kthena", why = why,
      env = { KVENGINE_KTHENA_BIN = bin, KTHENA_DIR = dir, KTHENA_RUNTIME = "local" } }
  end
  return out
end

-- Every router: local, kthena (release, main), then the other targets.
local function routers()
  local list = { { label = "local", target = "local" } }
  table.move(kthena_routers(), 1, 2, 2, list)
  local names = { dynamo = true, llmd = true, smg = true }
  for _, f in ipairs(fs.list(ROOT .. "/fixtures/targets") or {}) do
    local name = f:match("^([%w_%-]+)%.lua$")
    if name and name ~= "local" and name ~= "kthena" and not NOT_ROUTERS[name] then names[name] = true end
  end
  local others = {}
  for name in pairs(names) do others[#others + 1] = name end
  table.sort(others)
  for _, name in ipairs(others) do list[#list + 1] = { label = name, target = name } end
  for _, rt in ipairs(list) do
    if not rt.why then
      local mod, err = driver.load(rt.target)
      if not mod then
        rt.why = fs.read(ROOT .. "/fixtures/targets/" .. rt.target .. ".lua") and err
          or ("no fixtures/targets/" .. rt.target .. ".lua in this checkout")
      elseif mod.available then
        local ok, why = mod.available()
        if not ok then rt.why = why end
      end
      rt.mod = mod
    end
  end
  return list
end

-- ------------------------------------------------------------ runs

local function run_suite(rt, o)
  local base = o.out .. "/" .. rt.label:gsub("%W", "-")
  rt.reports = base .. ".reports.jsonl"
  local argv = { BIN, "--tap", "-j", "2", "--target", rt.target, "--reports", rt.reports, "--artifacts",
    base .. "-artifacts" }
  table.move(o.paths, 1, #o.paths, #argv + 1, argv)
  say("the suite on %s", rt.label)
  local t0 = now()
  local env = rt.env or {}
  env.KVENGINE_DURATIONS = "off"
  local code, out, err = proc.run { argv = argv, env = env, timeout = 3600 }
  rt.seconds = now() - t0
  fs.write(base .. ".tap", out .. err)
  if code == 2 or code == 3 or not out:find("\n1%.%.%d+") then
    die(string.format("the run on %s did not complete (exit %s); its output is in %s.tap", rt.label, tostring(code),
      base), 3)
  end
  rt.results = tap.results(out)
  rt.counts = { pass = 0, fail = 0, skip = 0, gap = 0 }
  for _, r in ipairs(rt.results) do
    r.key = r.key:sub(1, #ROOT + 1) == ROOT .. "/" and r.key:sub(#ROOT + 2) or r.key
    rt.counts[r.outcome] = rt.counts[r.outcome] + 1
  end
end

-- The cause a failure is listed under: the target's expectations file,
-- or the "[cause name]" Kthena's known causes put in a message.
local function causes(rt)
  local path = expectations.file(rt.target)
  if rt.target == "kthena" then
    rt.causes = "fixtures/stacks/kthena_causes.lua, held by fixtures/tests/kthena_suite.lua"
    rt.cause_of = function(_, r) return (r.message or ""):match("%[cause ([%w_]+)%]") end
  elseif path then
    local exp = expectations.load(path)
    rt.expect, rt.drifts = exp.path, expectations.drifts(exp, rt.results, rt.mod.capabilities)
    rt.cause_of = function(key) return exp.by_test[key] and exp.by_test[key].name end
  end
end

-- load_prefix_sharing.lua's figures from its reports; missing ones say why.
local function workload(rt)
  local got = {}
  for line in (fs.read(rt.reports) or ""):gmatch("[^\n]+") do
    local r = json.decode(line)
    if r.kind == "load_figures" and r.file:sub(-#board.WORKLOAD_FILE) == board.WORKLOAD_FILE then
      got[r.data.policy] = r.data
    end
  end
  local test
  for _, r in ipairs(rt.results) do
    if r.key:find(board.WORKLOAD_FILE .. ": the workload", 1, true) == 1 or r.key == board.WORKLOAD_FILE then
      test = r
    end
  end
  if got["kvcache-aware"] and got.random then
    rt.workload = got
  elseif not test then
    rt.workload_why = "the run has no " .. board.WORKLOAD_FILE
  elseif test.outcome == "pass" then
    rt.workload_why = "MISSING: the workload test passed but did not report load_figures for kvcache-aware and random"
    problems[#problems + 1] = rt.label .. ": " .. rt.workload_why
  else
    rt.workload_why = string.format("the workload test's outcome is %s: %s", test.outcome,
      expectations.first_line(test.message or test.reason))
  end
end

-- router_decision.lua's added point on the router's target.
local function latency(rt, o)
  local dir = fs.mkdir_p(o.out .. "/bench-" .. rt.label:gsub("%W", "-"))
  local env = {}
  for k, v in pairs(rt.env or {}) do env[k] = v end
  env.KVENGINE_TARGET, env.KVENGINE_BENCH_OUT = rt.target, dir
  say("the added latency of %s", rt.label)
  local code, out, err = proc.run { argv = { BIN, "serve", ROOT .. "/fixtures/bench/router_decision.lua", "added" },
    env = env, timeout = 900 }
  fs.write(dir .. "/bench.txt", out .. err)
  local not_run = out:match("not run: ([^\n]*)")
  if not_run then
    rt.latency_why = not_run
    return
  end
  local doc = code == 0 and json.safe.decode(fs.read(dir .. "/scale-router-" .. rt.target .. ".json") or "")
  local rows = {} -- by token count, as a string: JSON keys
  for _, r in ipairs(type(doc) == "table" and doc.rows or {}) do rows[tostring(r.tokens)] = r end
  for _, n in ipairs(board.TOKENS) do
    if not rows[tostring(n)] then
      rt.latency_why = string.format("MISSING: no %d-token row (exit %s; %s/bench.txt)", n, tostring(code), dir)
      problems[#problems + 1] = rt.label .. ": " .. rt.latency_why
      return
    end
  end
  rt.latency = rows
end

-- The page: ci/scoreboard/page.lua reports the board, the --html report draws it.
local function page(o, path)
  local html = o.out .. "/scoreboard.html"
  local code, out, err = proc.run { argv = { BIN, "--html", html, "--artifacts", o.out .. "/page-artifacts",
    ROOT .. "/ci/scoreboard/page.lua" }, env = { SCOREBOARD_JSON = path }, timeout = 120 }
  if code ~= 0 then problems[#problems + 1] = "the page was not drawn:\n" .. out .. err end
  return html
end

local opts = parse(arg)
fs.mkdir_p(opts.out)
local t0 = now()
local list = routers()
for _, rt in ipairs(list) do
  if opts.only and not opts.only[rt.label] and not opts.only[rt.target] then
    rt.why = rt.why or "not asked for (--only)"
  end
  rt.status = rt.why and "missing" or "ran"
  if rt.status == "ran" then
    run_suite(rt, opts)
    causes(rt)
    workload(rt)
    latency(rt, opts)
  end
end
local b = { routers = list, files = board.files(list), suite = opts.paths, date = os.date("!%Y-%m-%d %H:%M UTC") }
local text = board.text(b)
print(text)
fs.write(opts.out .. "/scoreboard.txt", text .. "\n")
for _, rt in ipairs(list) do rt.mod, rt.cause_of, rt.results = nil, nil, nil end
local path = opts.out .. "/scoreboard.json"
fs.write(path, json.encode(b))
local html = page(opts, path)
print(string.format("\nscoreboard: %.0fs; %s, %s and %s", now() - t0, opts.out .. "/scoreboard.txt", path, html))
for _, p in ipairs(problems) do io.stderr:write("scoreboard: ", p, "\n") end
os.exit(#problems == 0 and 0 or 1)
