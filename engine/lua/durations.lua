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
--
-- The file is shared by every checkout the user runs (a thousand lines is
-- common) and a run of one file is the engine's whole start, so a run whose
-- figures hardly moved leaves it alone: it finds its own lines by a plain
-- search and writes nothing, where a rewrite would parse every line and
-- look up every file it names.  A figure moves when it changes by more
-- than SETTLED seconds and more than SETTLED_PART of itself: less never
-- changes which file should start first.

local fs = require("fs")

local M = {}

local SETTLED, SETTLED_PART = 0.1, 0.2

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

-- {["<target>\t<absolute path>"] = seconds} from the cache's text.  A
-- target's name has no tab, so the key's first tab ends it: the pattern
-- never backtracks (the cache may hold thousands of lines).
local function parse(text)
  local known = {}
  for secs, key in text:gmatch("([%d.]+)\t([^\t\n]*\t[^\n]+)") do known[key] = tonumber(secs) end
  return known
end

-- The cache's text; "" when there is none.
local function read(file) return file and fs.read(file) or "" end

local function key_of(target, path) return (target or "") .. "\t" .. (__kv.realpath(path) or path) end

-- The seconds the line "<seconds>\t<key>\n" of text holds, or nil.
local function figure_of(text, key)
  local at = text:find("\t" .. key .. "\n", 1, true)
  if not at then return nil end
  local from = at
  while from > 1 and text:byte(from - 1) ~= 10 do from = from - 1 end
  return tonumber(text:sub(from, at - 1))
end

-- Whether a figure of `took` is new to text or moved (see SETTLED).
local function moved(text, took, target)
  for path, secs in pairs(took) do
    local old = figure_of(text, key_of(target, path))
    if not old or math.abs(secs - old) > math.max(SETTLED, SETTLED_PART * old) then return true end
  end
  return false
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- The order to start `files` in on `target` (a list of 1-based indices into
-- files): those without a figure first, then the known ones longest first;
-- ties keep the order given.
function M.launch_order(files, target)
  local known = parse(read(cache_file()))
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
-- figures when one of them moved; the figures of files that no longer exist
-- are dropped then.
function M.record(took, target)
  local file = cache_file()
  if not file or next(took) == nil then return end
  local text = read(file)
  if not moved(text, took, target) then return end
  local known = parse(text)
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
