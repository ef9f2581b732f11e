-- artifacts.lua - which artifacts folders a run keeps (in the parent).
--
-- A worker gives each test a folder under --artifacts (<file>/<test>), and
-- the file one (<file>/, where a stack made in before_all writes its logs).
-- They exist for failures: once a file's worker is gone (so nothing writes
-- there any more), the folder of a file without failures is removed whole,
-- and in a file with failures the folders of the tests that did not fail
-- (passed, skipped, known gaps).  --keep-artifacts keeps them all.  The
-- root goes too at the end when this run made it and left it empty.

local fs = require("fs")
local M = {}
M.__index = M

local function failed(t) return t.status == "fail" or t.status == "error" or t.status == "timeout" end

local function remove(path)
  local ok, err = fs.remove_tree(path)
  if not ok then io.stderr:write("kvengine: cannot remove the artifacts of a passing test: ", err, "\n") end
end

function M.new(opts)
  return setmetatable({ root = opts.artifacts, keep = opts.keep_artifacts,
    made_root = not fs.is_dir(opts.artifacts), kept = false }, M)
end

-- job: the file's run as report.lua keeps it (dir, tests, failed).
function M:file_done(job)
  if not job.dir then return end -- the worker never started the file
  if not self.keep and not job.failed then
    remove(job.dir)
  elseif not self.keep then
    local keep = {}
    for _, t in ipairs(job.tests) do
      if failed(t) and t.dir then keep[t.dir] = true end
    end
    for _, t in ipairs(job.tests) do
      if t.dir and not keep[t.dir] then remove(t.dir) end
    end
  end
  self.kept = self.kept or fs.is_dir(job.dir)
end

-- The root, when the run left something in it; else nil.
function M:finish()
  if self.made_root then os.remove(self.root) end -- only an empty folder goes
  return self.kept and fs.is_dir(self.root) and self.root or nil
end

return M
