-- ci/expected.lua - a run of the suite held to its target's expected
-- outcomes (fixtures/expect/<target>.lua, fixtures/expectations.lua): the
-- verdict of `make e2e-kvcache-<peer>`, whose run is written as TAP.
--
--   kvengine serve ci/expected.lua TARGET TAPFILE
--
-- Prints what the run gave by outcome and each cause with how many of its
-- tests failed by it, then every drift as a sentence saying what to change.
-- Exit status: 0 the outcomes are those of the file, 1 they drift, 3 the
-- run did not complete (no TAP plan: the stack could not start, say), 2 a
-- usage error.

local driver = require("kvcache.driver")
local expectations = require("expectations")
local fs = require("fs")
local tap = require("tests.lib.tap")

local function die(code, fmt, ...)
  io.stderr:write("ci/expected.lua: ", string.format(fmt, ...), "\n")
  os.exit(code)
end

local target, tap_file = arg[1], arg[2]
if not target or not tap_file then die(2, "usage: kvengine serve ci/expected.lua TARGET TAPFILE") end
local path = expectations.file(target)
if not path then die(2, "the %s target has no expected outcomes (fixtures/expect/%s.lua)", target, target) end
local exp = expectations.load(path)
local text = fs.read(tap_file)
if not text then die(2, "no TAP file %s", tap_file) end
if not text:find("\n1%.%.%d+") then
  die(3, "the run in %s did not complete (no TAP plan): see its output above", tap_file)
end
local mod = assert(driver.load(target))

local results = tap.results(text)
local root = os.getenv("PWD") -- a run given absolute paths names its tests from here
local counts = { pass = 0, fail = 0, skip = 0, gap = 0 }
for _, r in ipairs(results) do counts[r.outcome] = (counts[r.outcome] or 0) + 1 end
print(string.format("%s: %d tests: %d passed, %d failed, %d skipped, %d known gaps", target, #results, counts.pass,
  counts.fail, counts.skip, counts.gap))
for _, c in ipairs(exp.causes) do print(string.format("  expected by cause %s: %d test(s)", c.name, #c.tests)) end

local drifts = expectations.drifts(exp, results, mod.capabilities, { root = root })
if #drifts == 0 then
  print(string.format("%s: every outcome is as %s lists it", target, path))
  os.exit(0)
end
print(string.format("%s: %d outcome(s) drift from %s:", target, #drifts, path))
for _, d in ipairs(drifts) do print("  " .. d) end
os.exit(1)
