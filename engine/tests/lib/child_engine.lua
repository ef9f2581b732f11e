-- child_engine.lua - the engine's own tests run kvengine as a child on
-- scenario files they write: `local child = require("child_engine")` after
-- adding engine/tests/lib to package.path.
--
--   child.files{["a.lua"] = text, ...} -> dir    a new folder holding them
--   child.run(args, env) -> status, out, err     kvengine ARGS..., without
--     KVENGINE_TARGET or KVENGINE_TIME_SCALE unless env sets them, and
--     without the durations cache (engine/lua/durations.lua)
--   child.remove(dir)

local fs = require("fs")
local proc = require("proc")

local M = {}

M.BIN = assert(os.getenv("KVENGINE_BIN"), "KVENGINE_BIN is set by the engine")

function M.files(files)
  local dir = fs.tmpdir()
  for name, text in pairs(files) do
    if name:find("/") then fs.mkdir_p(dir .. "/" .. name:match("^(.*)/")) end
    fs.write(dir .. "/" .. name, text)
  end
  return dir
end

function M.run(args, env)
  local argv = { M.BIN }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  local merged = { KVENGINE_TARGET = false, KVENGINE_TIME_SCALE = false, KVENGINE_DURATIONS = "off" }
  for k, v in pairs(env or {}) do merged[k] = v end
  local status, out, err = proc.run { argv = argv, env = merged, timeout = 60 }
  return status, out or "", err or ""
end

function M.remove(dir) proc.run { argv = { "rm", "-rf", dir } } end

return M
