-- ci/cluster/causes.lua - the whole suite on the cluster target, its
-- outcomes held to the known causes of the Kthena installed
-- (fixtures/stacks/kthena_causes.lua, through tests/lib/kthena_outcomes.lua,
-- as fixtures/tests/kthena_suite.lua holds the kthena target's): on a
-- release such as v1.0.0 each test a listed cause breaks fails and names
-- that cause, and nothing else fails; on a checkout with no listed cause
-- nothing fails. The cluster's router reports no decisions, so a test a
-- cause breaks may pass by a tie's chance: only failures are held (ties).
--
--   make cluster-causes [KTHENA_DIR=...] [CLUSTER_SUITE='scenarios/x.lua ...']
--
-- ci/cluster/run.sh brings up a cluster of its own (Kthena's chart and
-- commands of build/kthena, or KVENGINE_KTHENA_BIN) and runs the suite on
-- it; needs root and the builds, skipped (saying which) otherwise. The run's
-- TAP and the cluster's log are kept in the artifacts.

local engine = require("engine")
local outcomes = require("tests.lib.kthena_outcomes")
local proc = require("proc")
local tap = require("tests.lib.tap")

local ROOT = require("tests.lib.paths").REPO
local KVENGINE = os.getenv("KVENGINE_BIN")

-- The suite's files or globs (the engine expands globs itself).
local function files()
  local out = {}
  for word in (os.getenv("CLUSTER_SUITE") or "scenarios/*.lua"):gmatch("%S+") do out[#out + 1] = word end
  return out
end

local function cannot()
  local code, out = proc.run { argv = { "id", "-u" } }
  if code ~= 0 or not out:match("^0%s") then return "the cluster target needs root" end
end

test("the suite's outcomes on the cluster follow the known causes of the Kthena installed", { timeout = 7200 },
  function()
    local why = cannot()
    if why then skip(why) end
    local list = files()
    local needs = outcomes.needs(function(f, extra)
      -- the tags are the same on every target: listed on local, which needs no cluster
      local argv = { KVENGINE, "--tap", "--target", "local" }
      table.move(extra, 1, #extra, #argv + 1, argv)
      table.move(f, 1, #f, #argv + 1, argv)
      local _, out = proc.run { argv = argv, timeout = 120 }
      return out
    end, list)
    local code, out, err = proc.run { argv = { "sh", ROOT .. "/ci/cluster/run.sh" }, env = { KVENGINE = KVENGINE,
      SUITE = table.concat(list, " "), KVENGINE_ARGS = "--tap --artifacts " .. engine.artifacts_dir() .. "/suite" },
      timeout = 7000 }
    local text = tostring(out) .. tostring(err)
    artifact("suite.tap", text)
    local v = text:match("cluster ready: Kthena (%S+)")
    expect(v):not_nil("the cluster came up and named the Kthena installed (exit " .. tostring(code) .. "):\n"
      .. text:sub(-3000))
    outcomes.declare(v)
    local results = tap.results(text)
    expect(#results):gt(0, "the suite reported tests")
    local wrong = outcomes.wrong(results, needs, { ties = true })
    local counts = {}
    for _, r in ipairs(results) do counts[r.outcome] = (counts[r.outcome] or 0) + 1 end
    local summary = string.format("Kthena %s on the cluster: %d tests, %d passed, %d failed, %d skipped, %d known "
      .. "gaps", v, #results, counts.pass or 0, counts.fail or 0, counts.skip or 0, counts.gap or 0)
    log(summary)
    io.stderr:write("ci/cluster/causes.lua: ", summary, "\n")
    expect(#wrong):eq(0, string.format("%d of %d outcomes on the cluster (Kthena %s) do not follow its causes:\n%s",
      #wrong, #results, v, table.concat(wrong, "\n")))
  end)
