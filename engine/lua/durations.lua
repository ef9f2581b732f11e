-- durations.lua - how long each test file took the last time it ran on this
-- machine, so that a run with several workers starts the longest files
-- first (pool.c asks launch_order): a long file started last would hold the
-- run open alone after every other file ended.
--
-- The figures live in one file per user, $XDG_CACHE_HOME/kvengine/durations
-- (else ~/.cache/kvengine/durations), a line "<seconds>\t<target>\t<absolute
-- path>" per test file and --target (empty: none given), written whole and
-- renamed into place at the end of a run.
-- A hint, never a rule: without it files start in the order given, a file
-- it does not know starts before those it does (it may be long), and two
-- runs that end at once may lose each other's figures. KVENGINE_DURATIONS
-- names another file, or "off" to neither read nor write one.

local fs = require("fs")

local M = {}

local function cache_file()
  local named = os.getenv("KVENGINE_DURATIONS")
  if named == "off" then return nil end
  if named and named ~= "" then return named end
  local dir = os.getenv("XDG_CACHE_HOME")
  if not dir or dir == "" then
    local home = os.getenv("HOME")
    if not home or home == "" then return nil end
    dir = home .. "/.cache"
  end
  return dir .. "/kvengine/durations"
end

-- {["<target>\t<absolute path>"] = seconds} as last written; {} when there
-- is none.
local function load(file)
  local known = {}
  local text = file and fs.read(file)
  for secs, key in (text or ""):gmatch("([%d.]+)\t([^\n]*\t[^\n]+)") do known[key] = tonumber(secs) end
  return known
end

local function key_of(target, path) return (target or "") .. "\t" .. (__kv.realpath(path) or path) end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- The order to start `files` in on `target` (a list of 1-based indices into
-- files): those without a figure first, then the known ones longest first;
-- ties keep the order given.
function M.launch_order(files, target)
  local known = load(cache_file())
  local order, secs = {}, {}
  for i, f in ipairs(files) do
    order[i] = i
    secs[i] = known[key_of(target, f)] or math.huge
  end
  table.sort(order, function(a, b)
    if secs[a] ~= secs[b] then return secs[a] > secs[b] end
    return a < b
  end)
  return order
end

-- Keep `took` ({[path as given] = seconds}, on `target`) over the earlier
-- figures; the figures of files that no longer exist are dropped.
function M.record(took, target)
  local file = cache_file()
  if not file or next(took) == nil then return end
  local known = load(file)
  for path, secs in pairs(took) do known[key_of(target, path)] = secs end
  local lines = {}
  for key, secs in pairs(known) do
    if exists(key:match("\t(.*)$")) then lines[#lines + 1] = string.format("%.3f\t%s\n", secs, key) end
  end
  table.sort(lines)
  -- A cache that cannot be written costs the next run its order, nothing more.
  pcall(function()
    fs.mkdir_p(file:match("^(.*)/[^/]*$") or ".")
    local tmp = string.format("%s.%d-%d.tmp", file, os.time(), math.random(1, 1 << 30))
    fs.write(tmp, table.concat(lines))
    assert(os.rename(tmp, file))
  end)
end

return M
