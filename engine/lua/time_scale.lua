-- time_scale.lua - the one reading of KVENGINE_TIME_SCALE, the factor for
-- default waits: engine.time_scale() (engine.lua), engine.timeout's
-- defaults (timeout.c), and the parent's check before any file runs
-- (pool.c), which requires this module alone: the engine module would
-- load the test API, which the parent never runs.

local M = {}

-- Unset or empty is 1, a number > 0 is itself, anything else an error
-- naming the variable (raised at the caller's caller, as engine.time_scale
-- raises at its caller).
function M.read()
  local raw = os.getenv("KVENGINE_TIME_SCALE")
  if raw == nil or raw == "" then return 1 end
  local scale = tonumber(raw)
  if not scale or scale <= 0 or scale == math.huge then
    error(string.format("KVENGINE_TIME_SCALE=%s: the time scale is a number > 0 that multiplies "
      .. "default waits (e.g. 4 on a slow machine)", raw), 2)
  end
  return scale
end

return M
