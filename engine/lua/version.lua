-- version.lua - the versions of the components a run tests, and the
-- constraints a known_gap mark puts on them.
--
-- The fixture layer declares what it started (engine.declare_version, once
-- per worker, the last declaration counting); a constraint such as
-- "<=v1.0.0" holds when the declared version satisfies it, and never for a
-- component nobody declared.  Releases compare as vMAJOR.MINOR.PATCH (a
-- missing MINOR or PATCH is 0; "+build" metadata is ignored); a pre-release
-- or Go pseudo-version (v1.2.0-rc.1, v0.0.0-20250101120000-abcdef123456) and
-- "main" are development builds, newer than every release.

local M = {}

local declared = {}

local OPS = {
  ["<"] = function(c) return c < 0 end,
  ["<="] = function(c) return c <= 0 end,
  [">"] = function(c) return c > 0 end,
  [">="] = function(c) return c >= 0 end,
  ["="] = function(c) return c == 0 end,
}

local DEV = "development build"

-- A release as {major, minor, patch}, or nil.
local function release(s)
  local major, minor, patch = s:match("^v(%d+)%.?(%d*)%.?(%d*)$")
  if not major or (minor == "" and patch ~= "") or (s:find("%.$")) then return nil end
  return { tonumber(major), tonumber(minor) or 0, tonumber(patch) or 0 }
end

-- A declared version: a release, DEV, or nil with what is accepted.
local function parse(v)
  if v == "main" then return DEV end
  local core, pre = v:gsub("%+.*$", ""):match("^(v%d+%.%d+%.%d+)(.*)$")
  if core and pre == "" then return release(core) end
  if core and pre:match("^%-[%w.%-]+$") then return DEV end
  return nil, "a version is vMAJOR.MINOR.PATCH, a pre-release or pseudo-version of one, or main"
end

local function compare(a, b)
  for i = 1, 3 do
    if a[i] ~= b[i] then return a[i] < b[i] and -1 or 1 end
  end
  return 0
end

-- declare(component, version): the version of a component this run tests.
-- Raises on a version that is none of the accepted forms.
function M.declare(component, version)
  if type(component) ~= "string" or component == "" then
    error("declare_version: the component is a name, e.g. \"kthena\"", 3)
  end
  local parsed, why = nil, "the version is a string such as \"v1.0.0\""
  if type(version) == "string" then parsed, why = parse(version) end
  if not parsed then
    error(string.format("declare_version(%q, %q): %s", component, tostring(version), why), 3)
  end
  declared[component] = version
end

function M.declared(component) return declared[component] end

-- The operator and release of a constraint such as "<=v1.0.0", or nil and why.
function M.constraint(s)
  local op, v = tostring(s):match("^([<>=]=?)%s*(v[%d.]+)$")
  local r = v and release(v)
  if not OPS[op] or not r then
    return nil, "a constraint is <, <=, >, >= or = and a release such as v1.0.0 (e.g. \"<=v1.0.0\")"
  end
  return op, r
end

-- Whether the declared version of `component` satisfies `constraint` (already
-- checked by M.constraint); false when it was never declared.
function M.satisfies(component, constraint)
  local v = declared[component]
  if not v then return false end
  local op, bound = M.constraint(constraint)
  local parsed = parse(v)
  if parsed == DEV then return op == ">" or op == ">=" end
  return OPS[op](compare(parsed, bound))
end

return M
