-- ci/cluster/breaks.lua - what only a deployment shows, shown: three breaks
-- of a Kthena checkout that the kthena target cannot see (it builds the
-- router's packages into a harness of the project's, with no chart, no
-- RBAC, no webhook and no `cmd/`) and the cluster target must. Each break
-- is made at test time on a copy of KTHENA_DIR, built
-- (ci/kthena/build.sh into a folder of its own), run on the kthena
-- target, where its scenarios pass, then on the cluster target
-- (ci/cluster/run.sh: the copy's chart and binaries on a cluster of their
-- own), where they fail and the failure names the broken link.
--
--   make cluster-breaks KTHENA_DIR=../kthena    (root, Go; about 5 min a break)
--
-- Needs a checkout whose cache tests pass (Kthena main): on v1.0.0 they
-- fail by a known cause whatever the deployment, which would hide a break.

local fs = require("fs")
local proc = require("proc")
local tap = require("tests.lib.tap")

local ROOT = require("tests.lib.paths").REPO
local KVENGINE = os.getenv("KVENGINE_BIN")
local KTHENA_DIR = os.getenv("KTHENA_DIR")

local ROUTER = "charts/kthena/charts/networking/templates/kthena-router/component/"

-- Each break: the file of the checkout, the text replaced (found exactly
-- once) and its replacement, what that breaks, the scenario files run, and
-- what a failure on the cluster must say (plain text).
local BREAKS = {
  { name = "the router's Deployment taking no REDIS_HOST from ConfigMap redis-config",
    file = ROUTER .. "deployment.yaml", from = "- name: REDIS_HOST\n", to = "- name: REDIS_HOST_UNUSED\n",
    files = { "scenarios/datapath.lua" }, says = "REDIS_HOST is not set" },
  { name = "the ModelRoute webhook's path misspelt in the chart's ValidatingWebhookConfiguration",
    file = ROUTER .. "validating-webhook.yaml", from = 'path: "/validate/modelroute"',
    to = 'path: "/validate/modelroutes"', files = { "scenarios/datapath.lua" }, says = "validate-modelroute.volcano.sh" },
  { name = "the router's main passing its metrics port where the debug port goes, and the other way round",
    file = "cmd/kthena-router/main.go", from = "debugPort, metricsPort, exposeMetricsOnRouterPort",
    to = "metricsPort, debugPort, exposeMetricsOnRouterPort", files = { "scenarios/least_request_boundary.lua" },
    says = "GET /debug/config_dump/" },
}

local function cannot()
  if not KTHENA_DIR or KTHENA_DIR == "" then
    return "the breaks are made on a copy of a Kthena checkout whose cache tests pass: set KTHENA_DIR"
  end
  local code, out = proc.run { argv = { "id", "-u" } }
  if code ~= 0 or not out:match("^0%s") then return "the cluster target needs root" end
end

-- A copy of KTHENA_DIR with `b` applied, and its programs built: {dir, bin}.
local function broken_build(b, work)
  local copy = work .. "/kthena"
  local code, _, err = proc.run { argv = { "cp", "-a", KTHENA_DIR, copy }, timeout = 120 }
  expect(code):eq(0, "copying the checkout: " .. tostring(err))
  local path = copy .. "/" .. b.file
  local text = assert(fs.read(path), "the checkout has " .. b.file)
  local at = text:find(b.from, 1, true)
  expect(at):not_nil(string.format("%s holds %q, where the break is made (has the checkout moved on?)", b.file,
    b.from))
  expect(text:find(b.from, at + 1, true)):is_nil(string.format("%s holds %q once", b.file, b.from))
  fs.write(path, text:sub(1, at - 1) .. b.to .. text:sub(at + #b.from))
  local bin = work .. "/bin"
  local out
  code, out, err = proc.run { argv = { "sh", ROOT .. "/ci/kthena/build.sh" }, env = { KTHENA_DIR = copy,
    KTHENA_OUT = bin, KTHENA_DEPLOY = "1", KTHENA_RUNTIME = "local" }, timeout = 1200 }
  expect(code):eq(0, "building the broken copy:\n" .. tostring(out) .. tostring(err))
  return { dir = copy, bin = bin }
end

local function env_of(build)
  return { KVENGINE_KTHENA_BIN = build.bin, KTHENA_DIR = build.dir, KTHENA_RUNTIME = "local" }
end

local function paths(files)
  local out = {}
  for i, f in ipairs(files) do out[i] = ROOT .. "/" .. f end
  return out
end

local function failures(results)
  local out = {}
  for _, r in ipairs(results) do
    if r.outcome == "fail" then out[#out + 1] = r.key .. ": " .. tostring(r.message) end
  end
  return out
end

-- The files pass on the kthena target built from the broken copy.
local function passes_out_of_cluster(b, build, work)
  local argv = { KVENGINE, "--tap", "--target", "kthena", "--artifacts", work .. "/kthena-artifacts" }
  table.move(paths(b.files), 1, #b.files, #argv + 1, argv)
  local _, out, err = proc.run { argv = argv, env = env_of(build), timeout = 900 }
  local results = tap.results(out)
  expect(#results):gt(0, "the kthena target reported tests:\n" .. out .. err)
  local failed = failures(results)
  expect(#failed):eq(0, string.format("on the kthena target, which cannot see the break, %s pass:\n%s",
    table.concat(b.files, ", "), table.concat(failed, "\n")))
end

-- The files fail on the cluster target, and a failure names the link.
local function fails_on_cluster(b, build, work)
  local env = env_of(build)
  env.KVENGINE, env.SUITE, env.KVENGINE_ARGS = KVENGINE, table.concat(paths(b.files), " "),
    "--tap --artifacts " .. work .. "/cluster-artifacts"
  local code, out, err = proc.run { argv = { "sh", ROOT .. "/ci/cluster/run.sh" }, env = env, timeout = 1800 }
  local text = tostring(out) .. tostring(err)
  expect(code):ne(0, "the cluster target fails the broken deployment:\n" .. text)
  expect(text):contains("cluster up in", "the cluster came up to run it:\n" .. text)
  expect(code):eq(1, "the suite failed (exit 1), not its infrastructure (3):\n" .. text)
  local failed = failures(tap.results(text))
  expect(#failed):gt(0, "a test failed on the cluster:\n" .. text)
  local all = table.concat(failed, "\n")
  expect(all):contains(b.says, "a failure names the broken link (" .. b.name .. "):\n" .. all)
  io.stderr:write(string.format("break %q: on the cluster, %d failed; the first: %s\n", b.name, #failed, failed[1]))
end

for _, b in ipairs(BREAKS) do
  test("a deployment with " .. b.name .. " passes on the kthena target and fails on the cluster, naming the link",
    { timeout = 3600 }, function()
      local why = cannot()
      if why then skip(why) end
      local work = fs.tmpdir()
      local ok, err = pcall(function()
        local build = broken_build(b, work)
        passes_out_of_cluster(b, build, work)
        fails_on_cluster(b, build, work)
      end)
      if not ok then
        -- kept: the broken copy and both runs' artifacts, for whoever reads the failure
        if type(err) == "table" and err.message then err.message = err.message .. "\n(kept: " .. work .. ")" end
        error(err, 0)
      end
      fs.remove_tree(work)
    end)
end
