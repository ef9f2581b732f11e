-- target.lua - what the parent reads from a target before any file runs.
--
-- The engine names no target.  A target is the fixture layer's module
-- `targets.<name>` (fixtures/targets/<name>.lua on the module path), which
-- the fixtures find by the name --target or KVENGINE_TARGET gives.  The
-- contract between that module and the engine: requiring it has no side
-- effects (it starts, opens and writes nothing), so the parent may require
-- it to read one field,
--
--   max_files = N   -- files that may run against the target at once (-j cap)
--
-- A name with no module is not an error here: the fixture layer reports an
-- unknown target when a file starts a stack on it.

local M = {}

-- The target's max_files, or nil when it sets none or has no module.
-- Raises when the module is there but does not load or sets a bad value.
function M.max_files(name)
  local modname = "targets." .. name
  if not package.searchpath(modname, package.path) then return nil end
  local ok, mod = pcall(require, modname)
  if not ok then error(string.format("the %s target's module does not load: %s", name, tostring(mod)), 0) end
  local n = type(mod) == "table" and mod.max_files or nil
  if n ~= nil and (math.type(n) ~= "integer" or n < 1) then
    error(string.format("%s: max_files is a whole number >= 1, not %s", modname, tostring(n)), 0)
  end
  return n
end

return M
