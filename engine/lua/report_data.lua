-- report_data.lua - what fixtures sent with engine.report, for --reports
-- FILE: one JSON object a line, {file, test, kind, data, run} (test absent
-- for a report sent outside a test), in the order the files ended. For a
-- tool that runs the engine and reads figures a scenario measured (make
-- scoreboard reads load_prefix_sharing.lua's), so that it never parses a
-- log. Written when the run ends, interrupted runs too.

local json = require("json")

local Data = {}
Data.__index = Data

function Data.new(opts)
  return setmetatable({ path = opts.reports, lines = {} }, Data)
end

function Data:add(job, test, r)
  self.lines[#self.lines + 1] = json.encode { file = job.file, run = job.run, test = test, kind = r.kind,
    data = r.data }
end

function Data:file_done(job)
  for _, r in ipairs(job.reports) do self:add(job, nil, r) end
  for _, t in ipairs(job.tests) do
    for _, r in ipairs(t.reports or {}) do self:add(job, t.name, r) end
  end
end

function Data:finish()
  local f, err = io.open(self.path, "w")
  if not f then
    io.stderr:write("kvengine: --reports: ", tostring(err), "\n")
    return
  end
  f:write(table.concat(self.lines, "\n"), #self.lines > 0 and "\n" or "")
  f:close()
end

return Data
