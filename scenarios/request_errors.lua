-- scenarios/request_errors.lua - requests the router refuses, with the
-- status and message each gets: a body it cannot read, a blank model, no
-- prompt, a model without a route (ERR-1 to ERR-4 in docs/kthena.md), no
-- pod left by the filters (FILTER-3); and an empty prompt, which costs the
-- kvcache-aware plugin nothing (ERR-9): it is not tokenized, so no tokenize
-- error is counted.
--
-- The bodies are sent as raw bytes, not through stack:complete, which only
-- writes well-formed requests.

local kvcache = require("kvcache")
local http = require("http")

local ERRORS = "kthena_router_kvcache_aware_errors_total"

-- POST `body` (raw text) to the stack's router: the reply.
local function post(s, body)
  local r = assert(http.request { method = "POST", url = s:endpoints().router .. "/v1/completions", body = body,
    headers = { ["content-type"] = "application/json" }, timeout = 10 })
  return r
end

-- The reply is `status` with `message` in its body, for the rule `rule`.
local function refused(r, status, message, rule, what)
  expect(r.status):eq(status, string.format("%s: %s is answered %d %q; got %d %s", rule, what, status, message,
    r.status, r.body))
  expect(r.body):contains(message, string.format("%s: %s is answered %q", rule, what, message))
end

test("a body with a second JSON value after the first is refused as an invalid request body",
  { tags = { "needs:body_error_worded" } }, function()
  local s <close> = kvcache.stack { pods = 1 }
  refused(post(s, string.format('{"model":"%s","prompt":"hi","max_tokens":1} {}', s.model)), 400,
    "invalid request body", "ERR-1", "a body with a second JSON value after the first" .. s:cause_note("body_error_worded"))
end)

test("malformed requests are refused with Kthena's status and message", function()
  local s <close> = kvcache.stack { pods = 1 }
  s:requires("kthena_surface") -- Kthena's statuses and wording
  local m = s.model
  refused(post(s, '{"model":"   ","prompt":"hi","max_tokens":1}'), 404, "model not found", "ERR-2",
    "a blank model")
  refused(post(s, string.format('{"model":"%s","max_tokens":1}', m)), 404, "prompt not found", "ERR-3",
    "a request with neither prompt nor messages")
  refused(post(s, '{"model":"no-such-model","prompt":"hi","max_tokens":1}'), 404, "route not found", "ERR-4",
    "a model no route serves")
end)

-- What the engine answers to an empty prompt is the engine's affair (the
-- real sim refuses it, and the router then fails the request with 503).
test("an empty prompt is scheduled without a kvcache-aware score and counts no kvcache-aware error", function()
  local s <close> = kvcache.stack { pods = 1 }
  post(s, string.format('{"model":"%s","prompt":"","max_tokens":1}', s.model))
  local m = assert(s:metrics())
  for _, stage in ipairs({ "tokenize", "redis" }) do
    expect(m:get(ERRORS, { model = s.model, stage = stage }) or 0):eq(0, string.format("ERR-9: an empty prompt "
      .. "is not tokenized and counts no error; %s{stage=%q} moved", ERRORS, stage))
  end
end)

test("a filter that leaves no pod fails the request with 400 can't schedule", function()
  local s <close> = kvcache.stack {
    pods = { { sim = { fake_metrics = { waiting_requests = 5 } } } },
    router = { scheduler = {
      pluginConfig = { { name = "least-request", args = { maxWaitingRequests = 2 } } },
      plugins = { Filter = { enabled = { "least-request" } },
        Score = { enabled = { { name = "least-request", weight = 1 } } } },
    } },
  }
  eventually(function()
    local waiting = s:router_view("p1").waiting
    if waiting ~= 5 then error("the router sees p1 with " .. tostring(waiting) .. " waiting requests, not yet 5") end
    return true
  end)
  refused(post(s, string.format('{"model":"%s","prompt":"hi","max_tokens":1}', s.model)), 400,
    "can't schedule to target pod", "FILTER-3", "a request whose one pod least-request filters out (5 waiting, "
    .. "maxWaitingRequests 2)")
end)
