-- ci/kthena/signatures.lua - each known cause of fixtures/stacks/kthena_causes.lua
-- observed directly on the router the run tests: its signature shows on the
-- Kthena versions the cause lists, and does not show on any other.
--
-- fixtures/tests/kthena_suite.lua runs this file with the scenarios on the
-- kthena target, so the Kthena that fails tests by a cause is the Kthena
-- that shows the cause; a cause fixed upstream (or a signature written
-- wrong) fails here, naming the observation. The observations, made once:
--
--   kvcache_scored            p1 owns all 4 blocks of a prompt: how many
--                             candidates get a kvcache-aware score for it
--   text_parts_tokens         a chat request whose content is two text parts:
--                             the prompt length the router read
--   body_error_worded         a body with a second JSON value after the
--                             first: refused 400 "invalid request body"
--   all_failed_status         both pods answer 503: the client's status
--   upstream_attempts_logged  ...and whether its access log line has
--                             upstream_attempts

local causes = require("stacks.kthena_causes")
local kvcache = require("kvcache")
local http = require("http")
local version = require("version")

local FAILING = { failure_injection_rate = 100, failure_types = { "server_error" } }

local observed

local function observe()
  local o = {}
  do
    local s <close> = kvcache.stack { pods = 3 }
    local prompt, tokens = s:prompt(4)
    s:inject("p1", kvcache.stored { tokens = tokens })
    s:expect_owner { tokens = tokens, pod = "p1" }
    local r = assert(s:complete { prompt = prompt, max_tokens = 1 })
    local scored = 0
    for _, row in pairs(s:scores(r)) do
      if row["kvcache-aware"] then scored = scored + 1 end
    end
    o.kvcache_scored = scored
    local a, b = s:text(20), s:text(20)
    local chat = assert(s:complete { max_tokens = 1,
      messages = { { role = "user", content = { { type = "text", text = a }, { type = "text", text = b } } } } })
    s:scores(chat)
    o.text_parts_tokens = chat.decision.prompt_tokens
    local bad = assert(http.request { method = "POST", url = s:endpoints().router .. "/v1/completions",
      body = string.format('{"model":"%s","prompt":"hi","max_tokens":1} {}', s.model),
      headers = { ["content-type"] = "application/json" } })
    o.body_error_worded = bad.status == 400 and bad.body:find("invalid request body", 1, true) ~= nil
  end
  do
    local s <close> = kvcache.stack { pods = 2, sim = FAILING }
    local r = assert(s:complete { prompt = s:prompt(2), max_tokens = 1 })
    o.all_failed_status = r.status
    o.upstream_attempts_logged = s:access_log(r.request_id).upstream_attempts ~= nil
  end
  for name in pairs(causes.observations) do
    expect(o[name]):not_nil("observation " .. name .. " was made")
  end
  return o
end

test("the observations the causes' signatures read", function()
  observed = observe()
  local parts = {}
  for name in pairs(causes.observations) do parts[#parts + 1] = name .. "=" .. tostring(observed[name]) end
  table.sort(parts)
  log("Kthena " .. tostring(version.declared("kthena")) .. ": " .. table.concat(parts, " "))
end)

for _, cause in ipairs(causes.causes) do
  test("cause " .. cause.name .. ": its signature shows exactly on Kthena " .. cause.versions, function()
    if not observed then fail("no observations: the test above failed") end
    local holds = version.satisfies("kthena", cause.versions)
    for name, value in pairs(cause.signature) do
      if not causes.observations[name] then
        fail(string.format("cause %s: its signature reads %s, which is no observation of this file", cause.name, name))
      end
      local what = string.format("cause %s (%s) on Kthena %s: %s (%s)", cause.name, cause.diagnosis,
        tostring(version.declared("kthena")), name, causes.observations[name])
      if holds then
        expect(observed[name]):eq(value, what .. ": the signature of a cause listed for this version")
      else
        expect(observed[name]):ne(value, what .. ": the signature of a cause not listed for this version "
          .. "(list the cause for it in fixtures/stacks/kthena_causes.lua, or fix what regressed)")
      end
    end
  end)
end
