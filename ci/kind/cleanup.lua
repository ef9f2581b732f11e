-- ci/kind/cleanup.lua - delete kvengine's namespaces from a cluster that
-- other runs may share, by run id or by age (fixtures/kind/cleanup.lua):
--
--   build/kvengine serve ci/kind/cleanup.lua [--context kind-kvengine] --run ID
--   build/kvengine serve ci/kind/cleanup.lua [--context kind-kvengine] --older-than 6h
--
-- ci/kind/run.sh runs the first for its own run when the suite ends. Exit 0
-- when every deletion was issued, 1 when the API server refused or did not answer, 2 on bad usage.

local cleanup = require("kube.cleanup")
local cluster = require("kube.cluster")
local kube = require("kube")

local USAGE = "usage: kvengine serve ci/kind/cleanup.lua [--context CONTEXT] (--run ID | --older-than DURATION)"

local function usage(msg)
  io.stderr:write("cleanup: ", msg, "\n", USAGE, "\n")
  os.exit(2)
end

local o = { context = "kind-" .. (os.getenv("KVENGINE_KIND_CLUSTER") or "kvengine") }
local i = 1
while arg[i] do
  local flag, value = arg[i], arg[i + 1]
  if flag == "--context" then
    o.context = value
  elseif flag == "--run" then
    o.run = value
  elseif flag == "--older-than" then
    o.older_than = cluster.duration(value or "") or usage("--older-than takes a duration such as 6h, 45m, 3600s")
  else
    usage("unknown option " .. tostring(flag))
  end
  if not value then usage(flag .. " needs a value") end
  i = i + 2
end
if not o.run and not o.older_than then usage("say whose namespaces: --run or --older-than") end

local k, err = kube.client { context = o.context }
if not k then
  io.stderr:write("cleanup: ", tostring(err), "\n")
  os.exit(1)
end
local ok, deleted, kept = pcall(cleanup.sweep, k, { run = o.run, older_than = o.older_than })
if not ok then
  io.stderr:write("cleanup: ", tostring(deleted), "\n")
  os.exit(1)
end
for _, ns in ipairs(deleted) do print(string.format("deleted namespace %s (%s)", ns.name, ns.why)) end
print(string.format("cleanup: %d deleted, %d kept (other runs' or still young)", #deleted, #kept))
