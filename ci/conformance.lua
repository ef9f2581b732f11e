-- conformance.lua - the same suite on two targets, side by side:
--
--   build/kvengine serve ci/conformance.lua [--targets local,kthena] [--runs N] [--jobs N] [PATH...]
--   (make conformance)
--
-- Runs the scenario files (default scenarios/*.lua) N times (default 2) per
-- target with KVENGINE_DECISIONS set (fixtures/kvcache/record.lua), then
-- prints, per test, the outcome on each target, and a decision diff for the
-- plugins whose scores are deterministic (kvcache-aware, prefix-cache):
-- requests are matched by file, test and sequence number in the test, and
-- a plugin's per-pod scores must be equal. A request whose scores differ
-- between runs of one target (an engine's announcement racing the next
-- request, a tie broken at random earlier in the test) depends on more
-- than the rules, so it is counted apart and not compared. Every difference must be explained: a
-- skip on one side (a capability that target lacks), or a row of the
-- deviations table in docs/kthena.md (`| DEV-n | file pattern | test
-- pattern | ... |`, Lua patterns). Exits 1 on an unexplained difference,
-- 3 when a run could not be made.

local fs = require("fs")
local json = require("json")
local proc = require("proc")
local tap = require("tests.lib.tap")

local BIN = os.getenv("KVENGINE_BIN")
local ROOT = debug.getinfo(1, "S").source:match("^@(.*)/ci/[^/]*$") or "."
local DETERMINISTIC = { "kvcache-aware", "prefix-cache" }

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
  if #o.paths == 0 then o.paths = { ROOT .. "/scenarios/*.lua" } end
  return o
end

-- Outcomes from the TAP lines of one run: {[key] = "pass" | "fail" | "skip: why" | "gap"}.
local function outcomes_of(text)
  local out, order = {}, {}
  for _, r in ipairs(tap.results(text)) do
    if not out[r.key] then order[#order + 1] = r.key end
    out[r.key] = r.outcome == "skip" and ("skip: " .. r.reason) or r.outcome
  end
  return out, order
end

-- One run of the files on a target: outcomes and the decision log.
local function run(target, o, dir, n)
  local log = dir .. "/" .. target .. "-" .. n .. ".jsonl"
  local argv = { BIN, "--tap", "--target", target, "--artifacts", dir .. "/artifacts-" .. target .. "-" .. n }
  if o.jobs then table.move({ "-j", o.jobs }, 1, 2, #argv + 1, argv) end
  table.move(o.paths, 1, #o.paths, #argv + 1, argv)
  io.stderr:write(string.format("conformance: run %d of %d on the %s target\n", n, o.runs, target))
  local code, out, err = proc.run { argv = argv, env = { KVENGINE_DECISIONS = log }, timeout = 3600 }
  if code == 2 or code == 3 or not out:find("\n1%.%.%d+") then
    die(string.format("the %s run did not complete (exit %s):\n%s%s", target, tostring(code), out, err), 3)
  end
  local decisions = {}
  for line in (fs.read(log) or ""):gmatch("[^\n]+") do
    local d = json.safe.decode(line)
    if d then decisions[d.file .. ": " .. d.test .. " #" .. d.seq] = d end
  end
  local outcomes, order = outcomes_of(out)
  return { outcomes = outcomes, order = order, decisions = decisions }
end

-- The deviations table of docs/kthena.md: {{id, file, test, text}}.
local function deviations()
  local out = {}
  for line in (fs.read(ROOT .. "/docs/kthena.md") or ""):gmatch("[^\n]+") do
    local id, file, test, what = line:match("^| (DEV%-%d+) | `([^`]*)` | `([^`]*)` | (.-) |")
    if id then out[#out + 1] = { id = id, file = file, test = test, what = what } end
  end
  return out
end

local function explained(devs, key)
  local file, test = key:match("^(.-): (.*)$")
  for _, d in ipairs(devs) do
    if file and file:find(d.file) and test:find(d.test) then return d.id end
  end
end

-- The per-pod scores of one plugin in a decision, as text ("p1=50 p2=-").
local function plugin_scores(d, plugin)
  local pods, parts = {}, {}
  for pod in pairs(d.scores or {}) do pods[#pods + 1] = pod end
  table.sort(pods)
  for _, pod in ipairs(pods) do parts[#parts + 1] = pod .. "=" .. tostring(d.scores[pod][plugin] or "-") end
  return table.concat(parts, " ")
end

-- How two decisions of one request differ in a deterministic plugin, or nil.
local function decision_diff(a, b)
  if not (a.scores and b.scores) then return nil end
  for _, plugin in ipairs(DETERMINISTIC) do
    local sa, sb = plugin_scores(a, plugin), plugin_scores(b, plugin)
    if sa ~= sb then return string.format("%s: %s vs %s", plugin, sa, sb) end
  end
end

-- The runs of one target, the first's outcomes, and the keys of requests
-- whose deterministic scores varied between its runs.
local function runs_of(target, o, dir)
  local first = run(target, o, dir, 1)
  first.varies = {}
  for n = 2, o.runs do
    local other = run(target, o, dir, n)
    for key, d in pairs(first.decisions) do
      local e = other.decisions[key]
      if not e or decision_diff(d, e) then first.varies[key] = true end
    end
  end
  return first
end

-- The outcome table; returns its unexplained differences.
local function outcome_table(A, B, ra, rb, devs)
  local unexplained, lines = 0, { string.format("%-8s %-8s %-8s %s", A, B, "", "test") }
  for _, key in ipairs(ra.order) do
    local oa, ob = ra.outcomes[key], rb.outcomes[key] or "absent"
    local note = ""
    if oa ~= ob then
      local skipped = oa:find("^skip") or ob:find("^skip")
      note = explained(devs, key) or (skipped and "capability") or "UNEXPLAINED"
      if note == "UNEXPLAINED" then unexplained = unexplained + 1 end
    end
    lines[#lines + 1] = string.format("%-8s %-8s %-8s %s", oa:match("^%a+"), ob:match("^%a+"), note, key)
  end
  print(table.concat(lines, "\n"))
  return unexplained
end

-- The decision diff; returns its unexplained differences.
local function decision_table(ra, rb, devs)
  local compared, varies, unexplained, differ = 0, 0, 0, {}
  for key, da in pairs(ra.decisions) do
    local db = rb.decisions[key]
    if db and da.scores and db.scores then
      if ra.varies[key] or rb.varies[key] then
        varies = varies + 1
      else
        compared = compared + 1
        local diff = decision_diff(da, db)
        if diff then
          local dev = explained(devs, (key:gsub(" #%d+$", "")))
          if not dev then unexplained = unexplained + 1 end
          differ[#differ + 1] = string.format("  %s  %s  [%s]", key, diff, dev or "UNEXPLAINED")
        end
      end
    end
  end
  table.sort(differ)
  print(string.format("\ndecisions compared (%s): %d; differing: %d; varying between runs of one target, "
    .. "not compared: %d", table.concat(DETERMINISTIC, ", "), compared, #differ, varies))
  if #differ > 0 then print(table.concat(differ, "\n")) end
  return unexplained
end

local opts = parse(arg)
local dir = fs.tmpdir()
local t0 = now()
local A, B = opts.targets[1], opts.targets[2]
local ra, rb = runs_of(A, opts, dir), runs_of(B, opts, dir)
local devs = deviations()
local unexplained = outcome_table(A, B, ra, rb, devs) + decision_table(ra, rb, devs)
print(string.format("\n%d unexplained difference(s) in %.0fs; logs in %s", unexplained, now() - t0, dir))
os.exit(unexplained == 0 and 0 or 1)
