-- known_gap.lua - the known_gap mark of a test: what upstream gets wrong,
-- where it is tracked, how the test fails because of it, and where.
--
--   known_gap = {
--     reason = "what upstream does and why the test fails",  -- required
--     link = "https://...",               -- the issue or code that tracks it
--     match = "Lua pattern",              -- the failure message it produces
--     targets = {"kind", "kthena"},       -- only on these targets
--     versions = {kthena = "<=v1.0.0"},   -- only for these component versions
--   }
--
-- A mark whose targets or versions do not hold for the run does not apply:
-- the test is an ordinary test there.  The runner asks when the test ends,
-- after its stack started: the run's target (engine.target()) and the
-- versions the fixture layer declared (version.lua) are known by then.

local version = require("version")

local M = {}

local FIELDS = { reason = "string", link = "string", match = "string", targets = "table", versions = "table" }

-- The mark's field names, sorted (engine.options.known_gap).
M.FIELD_NAMES = {}
for name in pairs(FIELDS) do M.FIELD_NAMES[#M.FIELD_NAMES + 1] = name end
table.sort(M.FIELD_NAMES)

local SHORT_MAX = 100

-- Edit distance, for naming the field a misspelt key was meant to be.
local function distance(a, b)
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur = { [0] = i }
    for j = 1, #b do
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a:byte(i) == b:byte(j) and 0 or 1))
    end
    prev = cur
  end
  return prev[#b]
end

-- Check that every key of t is in `fields` (name -> type) with the right
-- type; returns nil or the first problem, naming the closest valid key.
-- (The same contract as a generic option check, so it can take its place.)
local function check_fields(t, fields)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local want = fields[k]
    if not want then
      local best, best_d
      for name in pairs(fields) do
        local d = distance(k, name)
        if not best_d or d < best_d or (d == best_d and name < best) then best, best_d = name, d end
      end
      return string.format("unknown field %q (did you mean %q?)", k, best)
    elseif type(t[k]) ~= want then
      return string.format("%s must be a %s, not a %s", k, want, type(t[k]))
    end
  end
end

local function check_targets(list)
  if #list == 0 then return "targets is a list of target names, e.g. {\"kind\"}" end
  for k, name in pairs(list) do
    if math.type(k) ~= "integer" or k < 1 or k > #list then return "targets is a list, not a map" end
    if type(name) ~= "string" or not name:match("^[a-z0-9_%-]+$") then
      return string.format("targets[%d]: a target's name is made of a-z, 0-9, _ and -", k)
    end
  end
end

local function check_versions(map)
  for component, constraint in pairs(map) do
    if type(component) ~= "string" then return "versions maps a component's name to a constraint" end
    local ok, why = version.constraint(constraint)
    if not ok then return string.format("versions.%s = %s: %s", component, tostring(constraint), why) end
  end
end

-- The mark as given to test(): nil, a string (the reason) or a table.
-- Returns the mark as a table, or nil and what is wrong with it.
function M.check(gap)
  if gap == nil then return nil end
  if type(gap) == "string" then gap = { reason = gap } end
  if type(gap) ~= "table" then return nil, "known_gap is a table {reason = \"...\", link =, match =, ...}" end
  local why = check_fields(gap, FIELDS)
    or (gap.reason == nil and "reason is required: what upstream gets wrong")
    or (gap.match and not pcall(string.find, "", gap.match) and "match is not a valid Lua pattern")
    or (gap.targets and check_targets(gap.targets))
    or (gap.versions and check_versions(gap.versions))
  if why then return nil, "known_gap: " .. why end
  return gap
end

local function contains(list, x)
  for _, v in ipairs(list) do if v == x then return true end end
  return false
end

-- Whether the mark applies to a run on `target` (nil: none known).
function M.applies(gap, target)
  if not gap then return false end
  if gap.targets and not (target and contains(gap.targets, target)) then return false end
  for component, constraint in pairs(gap.versions or {}) do
    if not version.satisfies(component, constraint) then return false end
  end
  return true
end

-- Whether an outcome is the failure the mark documents.
function M.expected(gap, o)
  return o.status == "fail" and (not gap.match or (o.message or ""):find(gap.match) ~= nil)
end

-- The reason's first clause (up to the first sentence end, "(" or ";"),
-- at most SHORT_MAX characters, then the link: one line for the console.
function M.summary(gap)
  local text = gap.reason:match("^%s*(.-)%s*$")
  local cut = #text + 1
  for _, sep in ipairs { "%. ", "%.$", " %(", ";", "\n" } do
    local at = text:find(sep)
    if at and at < cut then cut = at end
  end
  text = text:sub(1, cut - 1)
  if #text > SHORT_MAX then
    text = text:sub(1, SHORT_MAX):gsub("%s+%S*$", "") .. "..."
  end
  return gap.link and (text .. "; see " .. gap.link) or text
end

-- The whole reason and the link: for JUnit, TAP and the failure message.
function M.full(gap)
  return gap.link and (gap.reason .. " (" .. gap.link .. ")") or gap.reason
end

return M
