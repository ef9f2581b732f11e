-- Strict option tables: engine.check_options is the check every binding
-- runs on its options, and test() and eventually() on theirs.

local engine = require("engine")

local THIS = debug.getinfo(1, "S").short_src

-- What fn raises, and the line it was raised from.
local function raised(fn)
  local ok, err = pcall(fn)
  expect(ok):is_false("it raises")
  return err
end

-- A library function whose options are checked the way a fixture checks them.
local function stack(opts)
  return engine.check_options("kvcache.stack", opts, { "model", "pods", "router" })
end

test("an unknown key names the function, the key and the closest valid key, at the caller's line", function()
  local line = debug.getinfo(1, "l").currentline + 1
  local err = raised(function() stack { modle = "m" } end)
  expect(err):eq(THIS .. ":" .. line .. ": kvcache.stack: unknown option `modle`; did you mean `model`?")
end)

test("a key far from every valid one gets the list instead of a guess", function()
  expect(raised(function() stack { zzz = 1 } end))
    :matches("kvcache%.stack: unknown option `zzz` %(options: model, pods, router%)$")
end)

test("valid keys, an empty table and nil pass; the table comes back", function()
  local opts = { model = "m", pods = 2 }
  expect(stack(opts)):eq(opts)
  expect(stack {}):eq({})
  expect(stack(nil)):is_nil()
end)

test("keys may be a set; level points elsewhere; a non-table and a positional key raise", function()
  expect(raised(function() engine.check_options("f", { intervall = 1 }, { timeout = true, interval = true }) end))
    :matches("f: unknown option `intervall`; did you mean `interval`%?$")
  expect(raised(function() engine.check_options("f", { x = 1 }, { timeout = true, interval = true }) end))
    :matches("f: unknown option `x` %(options: interval, timeout%)$", "a set's names are listed sorted")
  local line = debug.getinfo(1, "l").currentline + 1
  local err = raised(function() engine.check_options("f", { x = 1 }, {}, 1) end)
  expect(err):matches("^" .. THIS:gsub("%p", "%%%0") .. ":" .. line .. ": f: unknown option `x` %(it takes none%)$",
    "level 1 is the function that called check_options")
  expect(raised(function() engine.check_options("f", 5, { "a" }) end)):matches("f: options must be a table, not number")
  expect(raised(function() engine.check_options("f", { "a" }, { "a" }) end)):matches("f: unknown option `1`")
end)

test("of several unknown keys the first in byte order is named", function()
  expect(raised(function() stack { zeta = 1, alpha = 2, beta = 3 } end)):matches("unknown option `alpha`")
end)

test("eventually refuses an option it does not know", function()
  expect(raised(function() eventually(function() return true end, { intreval = 0.1 }) end))
    :matches("eventually: unknown option `intreval`; did you mean `interval`%?$")
end)
