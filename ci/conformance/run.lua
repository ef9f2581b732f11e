-- ci/conformance/run.lua - the same suite on two targets, side by side:
--
--   build/kvengine serve ci/conformance/run.lua [--targets local,kthena] [--runs N] [--jobs N] [PATH...]
--   (make conformance)
--
-- Runs the scenario files (default scenarios/*.lua) N times (default 2) per
-- target with KVENGINE_DECISIONS set (fixtures/kvcache/record.lua), each
-- target at the -j its own make target uses (local 2, kthena 1; --jobs N
-- for both), then compares them (ci/conformance/compare.lua, whose header
-- says what explains a difference): per test, the outcome on each target
-- over every run; per request (matched by file, test and sequence number in
-- the test), the per-pod scores of the deterministic plugins. A skip
-- explains an outcome difference only when its reason names a capability
-- its target declares absent (the target module's capabilities table, or
-- its unsupported(spec)); a row of the deviations table in docs/kthena.md
-- (`| DEV-n | file | tests | kinds | why |`, exact names) explains the
-- kinds of difference it names in the tests it names. Prints the tests, the
-- decisions compared, differing, varying between runs and missing on a
-- side. Exits 1 on an unexplained difference (or an unreadable deviation
-- row), 3 when a run could not be made.

local fs = require("fs")
local proc = require("proc")

local BIN = os.getenv("KVENGINE_BIN")
local ROOT = debug.getinfo(1, "S").source:match("^@(.*)/ci/conformance/[^/]*$") or "."
package.path = ROOT .. "/ci/?.lua;" .. package.path

local compare = require("conformance.compare")
local driver = require("kvcache.driver")

-- The -j each target's own make target runs the suite at.
local JOBS = { ["local"] = "2", kthena = "1" }

local function die(msg, code)
  io.stderr:write("conformance: ", msg, "\n")
  os.exit(code or 2)
end

local function parse(argv)
  local o = { targets = { "local", "kthena" }, jobs = nil, runs = 2, paths = {} }
  local i = 1
  while argv[i] do
    local a = argv[i]
    if a == "--targets" then
      i = i + 1
      o.targets = {}
      for t in (argv[i] or die("--targets needs a list")):gmatch("[^,]+") do o.targets[#o.targets + 1] = t end
    elseif a == "--runs" then
      i = i + 1
      o.runs = math.tointeger(tonumber(argv[i] or "")) or die("--runs needs a number")
    elseif a == "--jobs" then
      i = i + 1
      o.jobs = argv[i] or die("--jobs needs a number")
    else
      o.paths[#o.paths + 1] = a
    end
    i = i + 1
  end
  if #o.targets ~= 2 then die("--targets names two targets") end
  if o.runs < 1 then die("--runs is 1 or more") end
  if #o.paths == 0 then o.paths = { ROOT .. "/scenarios/*.lua" } end
  return o
end

-- One run of the files on a target; its TAP and decision log stay in dir.
local function run(target, o, dir, n)
  local base = dir .. "/" .. target .. "-" .. n
  local argv = { BIN, "--tap", "--target", target, "--artifacts", dir .. "/artifacts-" .. target .. "-" .. n }
  local jobs = o.jobs or JOBS[target]
  if jobs then table.move({ "-j", jobs }, 1, 2, #argv + 1, argv) end
  table.move(o.paths, 1, #o.paths, #argv + 1, argv)
  io.stderr:write(string.format("conformance: run %d of %d on the %s target\n", n, o.runs, target))
  local code, out, err = proc.run { argv = argv, env = { KVENGINE_DECISIONS = base .. ".jsonl" }, timeout = 3600 }
  fs.write(base .. ".tap", out)
  if code == 2 or code == 3 or not out:find("\n1%.%.%d+") then
    die(string.format("the %s run did not complete (exit %s):\n%s%s", target, tostring(code), out, err), 3)
  end
  return compare.run(out, fs.read(base .. ".jsonl"))
end

local function view_of(target, o, dir)
  local runs = {}
  for n = 1, o.runs do runs[n] = run(target, o, dir, n) end
  return compare.merge(runs)
end

local function capabilities(target)
  local mod, err = driver.load(target)
  if not mod then die(err, 3) end
  return mod.capabilities
end

local opts = parse(arg)
local dir = fs.tmpdir()
local t0 = now()
local A, B = opts.targets[1], opts.targets[2]
local caps = { [A] = capabilities(A), [B] = capabilities(B) }
local devs, problems = compare.deviations(fs.read(ROOT .. "/docs/kthena.md"))
for _, p in ipairs(problems) do io.stderr:write("conformance: docs/kthena.md deviations: ", p, "\n") end
local va, vb = view_of(A, opts, dir), view_of(B, opts, dir)
local result = compare.compare { targets = { A, B }, views = { va, vb }, capabilities = caps, deviations = devs }
print(compare.report(result))
local unexplained = result.unexplained + #problems
print(string.format("\n%d unexplained difference(s) in %.0fs; logs in %s", unexplained, now() - t0, dir))
os.exit(unexplained == 0 and 0 or 1)
