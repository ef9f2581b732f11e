-- command.lua - command lines a reader can paste into a shell: the one that
-- started the run (printed first) and the one that re-runs a failed test
-- with its seed (printed under it).

local M = {}

function M.quote(s)
  if s:match("^[%w%-_./=:,]+$") then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- argv, quoted and joined.
function M.line(argv)
  local out = {}
  for i, a in ipairs(argv) do out[i] = M.quote(a) end
  return table.concat(out, " ")
end

-- kvengine --seed S [--target T] [--filter '^name$'] FILE: `name` alone,
-- with the same seed and target.  The target only when the run named one.
function M.rerun(opts, name)
  local argv = { "kvengine", "--seed", tostring(opts.seed) }
  if opts.target then
    argv[#argv + 1] = "--target"
    argv[#argv + 1] = opts.target
  end
  if name then
    argv[#argv + 1] = "--filter"
    argv[#argv + 1] = "^" .. name:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0") .. "$"
  end
  argv[#argv + 1] = opts.file
  return M.line(argv)
end

return M
