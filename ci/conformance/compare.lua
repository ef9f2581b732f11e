-- ci/conformance/compare.lua - the comparison `make conformance` makes
-- (ci/conformance/run.lua runs the suite; this module only reads its runs),
-- kept apart so that fixtures/tests/conformance.lua can feed it synthetic
-- runs.
--
--   local compare = require("conformance.compare")
--   compare.run(tap_text, decisions_text) -> run
--   compare.merge({run, ...}) -> view           every run of one target
--   compare.deviations(markdown) -> devs, problems
--   compare.compare{targets = {A, B}, views = {va, vb},
--     capabilities = {[A] = caps, [B] = caps}, deviations = devs} -> result
--   compare.report(result) -> text
--
-- A run: {outcomes = {[key] = {outcome, reason}}, order = {key...},
-- decisions = {[key .. " #" .. seq] = decision}} (key is "<file>: <test>",
-- a decision is a line of kvcache/record.lua's log). A view merges a
-- target's runs: every run's tests and requests count, a test's outcome is
-- the set of its outcomes over the runs ("fail|pass" when they differ), and
-- a request sent in only some runs, or whose deterministic scores differ
-- between runs, varies: it depends on more than the rules and is not
-- compared, nor are its test's later requests (the router's state in the
-- runs has parted).
--
-- Differences between the targets, and what explains each:
--   outcome   a skip on one side, when its reason names a capability that
--             target declares absent (its capabilities table, or its
--             unsupported(spec) for that stack: kvcache.driver's messages);
--             else a deviation of kind `outcome` naming that test
--   decision  a deviation of kind `decision` naming that test
-- Anything else is unexplained. A request one side sent and the other did
-- not is counted and listed (apart from the tests the other side skipped),
-- not compared.

local driver = require("kvcache.driver")
local json = require("json")
local tap = require("tests.lib.tap")
local sorted_keys = require("kvcache.util").sorted_keys

local M = {}

-- The plugins whose scores follow from the rules alone.
M.DETERMINISTIC = { "kvcache-aware", "prefix-cache" }

M.KINDS = { decision = true, outcome = true }

-- ------------------------------------------------------------ runs

-- One run from the TAP the engine printed and the decision log's text.
function M.run(tap_text, decisions_text)
  local r = { outcomes = {}, order = {}, decisions = {} }
  for _, t in ipairs(tap.results(tap_text)) do
    if not r.outcomes[t.key] then r.order[#r.order + 1] = t.key end
    r.outcomes[t.key] = { outcome = t.outcome, reason = t.reason }
  end
  for line in (decisions_text or ""):gmatch("[^\n]+") do
    local d = json.safe.decode(line)
    if type(d) == "table" and d.file and d.test and d.seq then
      r.decisions[string.format("%s: %s #%s", d.file, d.test, tostring(d.seq))] = d
    end
  end
  return r
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
function M.decision_diff(a, b)
  for _, plugin in ipairs(M.DETERMINISTIC) do
    local sa, sb = plugin_scores(a, plugin), plugin_scores(b, plugin)
    if sa ~= sb then return string.format("%s: %s vs %s", plugin, sa, sb) end
  end
end

local function test_of(key) return (key:gsub(" #%d+$", "")) end
local function seq_of(key) return tonumber(key:match(" #(%d+)$")) end

-- Once a request of a test varied between runs, the router's state in the
-- runs differs: the test's later requests vary too.
local function taint_later(v)
  local first = {}
  for key in pairs(v.varies) do
    local test, seq = test_of(key), seq_of(key)
    if not first[test] or seq < first[test] then first[test] = seq end
  end
  for key in pairs(v.decisions) do
    local since = first[test_of(key)]
    if since and not v.varies[key] and seq_of(key) > since then
      v.varies[key] = string.format("after #%d of its test varied", since)
    end
  end
end

-- Every run of one target, merged (see the header).
--   view.order            every test, in the order first seen
--   view.outcome[key]     "pass", or the runs' outcomes joined ("fail|pass";
--                         "absent" for a run without the test)
--   view.reason[key]      the first skip reason seen
--   view.decisions[key]   the first run's decision that has the request
--   view.varies[key]      "sent in N of M runs" | the scores' difference |
--                         "after #N of its test varied"
function M.merge(runs)
  local v = { runs = #runs, order = {}, outcome = {}, reason = {}, decisions = {}, varies = {} }
  local seen = {}
  for _, r in ipairs(runs) do
    for _, key in ipairs(r.order) do
      local o = r.outcomes[key]
      if not seen[key] then
        seen[key] = {}
        v.order[#v.order + 1] = key
      end
      seen[key][o.outcome] = true
      v.reason[key] = v.reason[key] or o.reason
    end
  end
  for key, set in pairs(seen) do
    for _, r in ipairs(runs) do
      if not r.outcomes[key] then set.absent = true end
    end
    v.outcome[key] = table.concat(sorted_keys(set), "|")
  end
  local sent = {}
  for _, r in ipairs(runs) do
    for key, d in pairs(r.decisions) do
      sent[key] = (sent[key] or 0) + 1
      local first = v.decisions[key]
      if not first then
        v.decisions[key] = d
      elseif not v.varies[key] and first.scores and d.scores then
        v.varies[key] = M.decision_diff(first, d)
      elseif not v.varies[key] and (first.scores == nil) ~= (d.scores == nil) then
        v.varies[key] = "scored in some runs only"
      end
    end
  end
  for key, n in pairs(sent) do
    if n < #runs then v.varies[key] = string.format("sent in %d of %d runs", n, #runs) end
  end
  taint_later(v)
  return v
end

-- ------------------------------------------------------------ deviations

-- The deviations table of a page (docs/kthena.md):
--   | DEV-n | `file` | `test`, `test` | decision, outcome | why |
-- file and tests are exact names. Returns {{id, file, tests = {[name] =
-- true}, kinds = {[kind] = true}, line}}, and the rows it could not read.
function M.deviations(text)
  local out, problems, n = {}, {}, 0
  for line in (text or ""):gmatch("[^\n]*") do
    n = n + 1
    local id, file, tests, kinds = line:match("^| (DEV%-%d+) | `([^`]*)` | (.-) | ([%w, ]-) | .* |$")
    if id then
      local d = { id = id, file = file, tests = {}, kinds = {}, line = n }
      for t in tests:gmatch("`([^`]+)`") do d.tests[t] = true end
      for k in kinds:gmatch("[%w]+") do
        if not M.KINDS[k] then problems[#problems + 1] = string.format("%s: kind %q is neither decision nor outcome", id, k) end
        d.kinds[k] = true
      end
      if not next(d.tests) then problems[#problems + 1] = id .. ": names no test (`exact name`, ...)" end
      if not next(d.kinds) then problems[#problems + 1] = id .. ": names no kind (decision, outcome)" end
      out[#out + 1] = d
    elseif line:match("^| DEV%-") then
      problems[#problems + 1] = string.format("line %d: not a deviation row (| DEV-n | `file` | `test`, ... | "
        .. "kinds | why |): %s", n, line)
    end
  end
  return out, problems
end

-- The deviation covering a difference of `kind` in test `key`, or nil.
local function deviation_for(devs, key, kind)
  local file, test = key:match("^(.-): (.*)$")
  for _, d in ipairs(devs) do
    if d.kinds[kind] and file == d.file and d.tests[test] then return d end
  end
end

-- ------------------------------------------------------------ comparison

-- Does a skip on `target` explain a difference? (kvcache/driver.lua)
M.skip_explains = driver.skip_explained

local function outcome_row(o, key)
  local A, B = o.targets[1], o.targets[2]
  local va, vb = o.views[1], o.views[2]
  local oa, ob = va.outcome[key] or "absent", vb.outcome[key] or "absent"
  local row = { key = key, a = oa, b = ob }
  if oa == ob then return row end
  for _, side in ipairs({ { target = A, view = va, outcome = oa }, { target = B, view = vb, outcome = ob } }) do
    if side.outcome == "skip" then
      local cap, how = M.skip_explains(side.target, o.capabilities[side.target] or {}, side.view.reason[key])
      if cap then
        row.note = how == "stack" and (cap .. " (stack)") or cap
        return row
      end
      row.why = how
    end
  end
  local dev = deviation_for(o.deviations, key, "outcome")
  if dev then
    row.note, dev.used = dev.id, (dev.used or 0) + 1
  else
    row.note, row.unexplained = "UNEXPLAINED", true
  end
  return row
end

local function outcomes(o, result)
  local keys, seen = {}, {}
  for _, v in ipairs(o.views) do
    for _, key in ipairs(v.order) do
      if not seen[key] then
        seen[key] = true
        keys[#keys + 1] = key
      end
    end
  end
  for _, key in ipairs(keys) do
    local row = outcome_row(o, key)
    result.rows[#result.rows + 1] = row
    if row.unexplained then result.unexplained = result.unexplained + 1 end
    if row.a ~= row.b then result.outcome_differ = result.outcome_differ + 1 end
    if row.a:find("|", 1, true) or row.b:find("|", 1, true) then result.outcome_varies = result.outcome_varies + 1 end
  end
end

local function decisions(o, result)
  local A, B = o.targets[1], o.targets[2]
  local va, vb = o.views[1], o.views[2]
  local dec = result.decisions
  local keys = {}
  for key in pairs(va.decisions) do keys[key] = true end
  for key in pairs(vb.decisions) do keys[key] = true end
  for _, key in ipairs(sorted_keys(keys)) do
    local da, db = va.decisions[key], vb.decisions[key]
    if not (da and db) then
      local absent, view = da and B or A, da and vb or va
      local test = test_of(key)
      if view.outcome[test] == "skip" then
        dec.missing_skipped[absent] = dec.missing_skipped[absent] + 1
      else
        dec.missing[absent] = dec.missing[absent] + 1
        dec.missing_tests[absent][test] = (dec.missing_tests[absent][test] or 0) + 1
      end
    elseif va.varies[key] or vb.varies[key] then
      dec.varying = dec.varying + 1
    elseif not (da.scores and db.scores) then
      dec.unscored = dec.unscored + 1
    else
      dec.compared = dec.compared + 1
      local diff = M.decision_diff(da, db)
      if diff then
        local dev = deviation_for(o.deviations, test_of(key), "decision")
        if dev then
          dev.used = (dev.used or 0) + 1
        else
          result.unexplained = result.unexplained + 1
        end
        dec.differ[#dec.differ + 1] = { key = key, diff = diff, note = dev and dev.id or "UNEXPLAINED" }
      end
    end
  end
end

-- Deviations naming a test no run of their file has: renamed or gone.
local function stale(o, result)
  local files, tests = {}, {}
  for _, v in ipairs(o.views) do
    for _, key in ipairs(v.order) do
      local file, test = key:match("^(.-): (.*)$")
      if file then
        files[file] = true
        tests[key] = true
      else
        files[key] = true
      end
    end
  end
  for _, d in ipairs(o.deviations) do
    if files[d.file] then
      for _, t in ipairs(sorted_keys(d.tests)) do
        if not tests[d.file .. ": " .. t] then
          result.stale[#result.stale + 1] = string.format("%s names %s: %s, which no run has", d.id, d.file, t)
        end
      end
    end
  end
  result.unexplained = result.unexplained + #result.stale
end

-- Compares two targets' views (see the header); o = {targets = {A, B},
-- views = {va, vb}, capabilities = {[A] = caps, [B] = caps}, deviations}.
function M.compare(o)
  local A, B = o.targets[1], o.targets[2]
  for _, d in ipairs(o.deviations) do d.used = nil end
  local result = {
    targets = o.targets, rows = {}, unexplained = 0, outcome_differ = 0, outcome_varies = 0, stale = {},
    deviations = o.deviations,
    decisions = { compared = 0, varying = 0, unscored = 0, differ = {}, missing = { [A] = 0, [B] = 0 },
      missing_skipped = { [A] = 0, [B] = 0 }, missing_tests = { [A] = {}, [B] = {} } },
  }
  outcomes(o, result)
  decisions(o, result)
  stale(o, result)
  return result
end

-- ------------------------------------------------------------ report

local function first_word(outcome) return outcome:match("^[%a|]+") end

function M.report(r)
  local A, B = r.targets[1], r.targets[2]
  local lines = { string.format("%-10s %-10s %-12s %s", A, B, "", "test") }
  for _, row in ipairs(r.rows) do
    lines[#lines + 1] = string.format("%-10s %-10s %-12s %s", first_word(row.a), first_word(row.b), row.note or "",
      row.key)
    if row.unexplained and row.why then lines[#lines + 1] = "           (the skip does not explain: " .. row.why .. ")" end
  end
  lines[#lines + 1] = string.format("\noutcomes: %d tests; differing: %d; varying between runs of one target: %d",
    #r.rows, r.outcome_differ, r.outcome_varies)
  local d = r.decisions
  lines[#lines + 1] = string.format("decisions compared (%s): %d; differing: %d; varying between runs of one "
    .. "target, not compared: %d; unscored on a side: %d", table.concat(M.DETERMINISTIC, ", "), d.compared,
    #d.differ, d.varying, d.unscored)
  for _, x in ipairs(d.differ) do lines[#lines + 1] = string.format("  %s  %s  [%s]", x.key, x.diff, x.note) end
  for _, t in ipairs({ A, B }) do
    lines[#lines + 1] = string.format("decisions missing on %s: %d (and %d in tests %s skipped)", t, d.missing[t],
      d.missing_skipped[t], t)
    for _, test in ipairs(sorted_keys(d.missing_tests[t])) do
      lines[#lines + 1] = string.format("  %d  %s", d.missing_tests[t][test], test)
    end
  end
  for _, dev in ipairs(r.deviations) do
    lines[#lines + 1] = string.format("%s (%s): %d difference(s) explained", dev.id, dev.file, dev.used or 0)
  end
  for _, s in ipairs(r.stale) do lines[#lines + 1] = "stale deviation: " .. s end
  return table.concat(lines, "\n")
end

return M
