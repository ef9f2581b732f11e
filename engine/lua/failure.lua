-- failure.lua - the error objects a test raises on purpose.
--
-- kind "fail": an assertion did not hold (expect, eventually, fail());
-- kind "skip": skip(reason); kind "infra": the test's infrastructure would
-- not start.  Any other error value is a script error.  Each carries the
-- file:line in the scenario where it was raised, so reports can point at it.

local M = {}

local Failure = {}
Failure.__index = Failure
Failure.__tostring = function(f)
  return (f.where and f.where .. ": " or "") .. (f.message or f.reason or "")
end

-- Sources whose frames a failure never points at: helper libraries that
-- assert on a scenario's behalf (see engine.helper()).
local helpers = {}

function M.helper(source) helpers[source] = true end

-- The innermost frame that is scenario code: not the engine's own Lua, not
-- a helper library, not C.  Searched, not counted: tail calls make fixed
-- levels unreliable.
local function where(level)
  for l = level or 3, 60 do
    local info = debug.getinfo(l, "Sl")
    if not info then return nil end
    if info.currentline and info.currentline > 0 and not info.source:find("^@engine/lua/")
      and not helpers[info.source] then
      return info.short_src .. ":" .. info.currentline
    end
  end
end

-- file:line of the scenario line that led to the caller's caller, or nil.
function M.caller()
  local w = where(4) -- not a tail call: this frame counts
  return w
end

-- Raise a failure located at the scenario line that led here.
function M.raise(message, details)
  error(setmetatable({ kind = "fail", message = message, where = where(),
    details = details }, Failure), 0)
end

function M.skip(reason)
  error(setmetatable({ kind = "skip", reason = reason or "skipped" }, Failure), 0)
end

function M.infra(message)
  error(setmetatable({ kind = "infra", message = message, where = where() }, Failure), 0)
end

function M.kind(err)
  return getmetatable(err) == Failure and err.kind or nil
end

-- The message of any error value, without its location.
function M.text(err)
  if getmetatable(err) == Failure then return err.message or err.reason or "" end
  if type(err) == "string" then return (err:gsub("^[^:\n]+:%d+: ", "", 1)) end
  return tostring(err)
end

-- file:line of an error: the failure's own, a string's prefix, or the first
-- frame of `file` in the traceback.
function M.where(err, traceback, file)
  if getmetatable(err) == Failure and err.where then return err.where end
  if type(err) == "string" then
    local w = err:match("^([^:\n]+:%d+): ")
    if w then return w end
  end
  if traceback and file then
    local escaped = file:gsub("%p", "%%%0")
    return traceback:match("(" .. escaped .. ":%d+):")
  end
end

return M
