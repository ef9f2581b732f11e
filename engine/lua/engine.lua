-- engine.lua - what fixture libraries need from the engine beyond the test
-- API: `local engine = require "engine"`.
--
--   engine.scope() -> the scope the caller runs in (its test's, or the
--     file's); engine.spawn_in(scope, fn, ...) -> task: fn runs in that
--     scope, so what it opens lives as long as that scope, not as long as the
--     caller's test (a stack made in before_all restarting a pod in a test);
--     scope:open() tells whether it still runs.
--   engine.helper() marks the calling file as a helper library: failures
--     raised through it (expect, fail, eventually) point at the scenario's
--     line that called it, not at the library.
--   engine.artifacts_dir() -> the running test's artifacts folder (created);
--     engine.test_name() -> its name ("" outside a test).
--   engine.check_options(fname, t, keys, level) raises when the table t has
--     a key outside keys (a list or a set), naming fname, the key and the
--     closest valid key, at the caller `level` (as error's level).

local failure = require "failure"
local testapi = require "testapi"

local engine = {}

function engine.scope() return __kv.scope_current() end

function engine.spawn_in(scope, fn, ...) return __kv.spawn_in(scope, fn, ...) end

function engine.helper()
  failure.helper(debug.getinfo(2, "S").source)
end

function engine.artifacts_dir()
  local reg = testapi.current
  if not reg then error("engine.artifacts_dir: no test runs in this process", 2) end
  return reg.artifacts_dir()
end

function engine.test_name()
  local reg = testapi.current
  return reg and reg.current and reg.current.name or ""
end

-- Edit distance between two short strings (option names), a swap of two
-- neighbours counting as one edit ("tial" is one from "tail").
local function distance(a, b)
  local d = {}
  for i = 0, #a do d[i] = { [0] = i } end
  for j = 0, #b do d[0][j] = j end
  for i = 1, #a do
    for j = 1, #b do
      local cost = a:byte(i) == b:byte(j) and 0 or 1
      d[i][j] = math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
      if i > 1 and j > 1 and a:byte(i) == b:byte(j - 1) and a:byte(i - 1) == b:byte(j) then
        d[i][j] = math.min(d[i][j], d[i - 2][j - 2] + 1)
      end
    end
  end
  return d[#a][#b]
end

function engine.check_options(fname, t, keys, level)
  local valid = {}
  for k, v in pairs(keys) do
    if type(k) == "number" then valid[v] = true else valid[k] = true end
  end
  for k in pairs(t) do
    if not valid[k] then
      local best, best_d
      for name in pairs(valid) do
        local d = type(k) == "string" and distance(k, name) or math.huge
        if not best_d or d < best_d or (d == best_d and name < best) then best, best_d = name, d end
      end
      local hint = (best and best_d <= math.max(2, #tostring(k) // 3)) and string.format("; did you mean `%s`?", best)
        or ""
      error(string.format("%s: unknown option `%s`%s", fname, tostring(k), hint), (level or 1) + 1)
    end
  end
end

return engine
