-- scenarios/upstream_retry.lua - a pod that fails a request before answering
-- it costs the client nothing: the router tries the next of its best pods
-- (RETRY-1 in docs/kthena.md), and its access log says so (RETRY-2).
--
-- Kthena keeps the five best pods of a request; when the pod it sends the
-- request to cannot be reached or answers outside 2xx before any byte went
-- to the client, it moves on to the next. Only when every one failed does
-- the client get 503 "request to all pods failed". The client cannot tell a
-- retried request from another (the serving pod answers 200), so a router
-- that stopped retrying, or retried without saying so, shows only in the
-- access log: selected_pod stays the pod scheduled first, upstream_attempts
-- counts the pods tried.
--
-- The failing pod is an engine with failure injection at 100% and type
-- server_error (503), an llm-d-inference-sim flag; it holds the prompt's
-- blocks, so the router schedules it first every time.

local kvcache = require("kvcache")

local FAILING = { failure_injection_rate = 100, failure_types = { "server_error" } }

test("the best pod answering 503 is retried once on the next pod; the access log shows both attempts",
  { tags = { "needs:kvcache_score", "needs:attempts_logged" } }, function()
  local s <close> = kvcache.stack { pods = { { sim = FAILING }, {}, {} } }
  s:requires("kthena_surface") -- Kthena's retry on the next of its best pods
  for _, stream in ipairs({ false, true }) do
    -- A prompt of its own: the pod that served the last one announced it.
    local prompt, tokens = s:prompt(4)
    s:inject("p1", kvcache.stored { tokens = tokens })
    s:expect_owner { tokens = tokens, pod = "p1" }
    local kind = stream and "a streamed request" or "a request"
    local r = assert(s:complete { prompt = prompt, max_tokens = 1, stream = stream })
    if s:can("decisions") then
      s:expect_scored(r, "p1", 100, "p1 holds the prompt, so the router schedules it first")
    end
    expect(r.status):eq(200, string.format("RETRY-1: p1, scheduled first for %s (it holds the prompt), answers "
      .. "503 before any byte; the router must try the next pod instead of failing the client (request %s: %s)",
      kind, r.request_id, r.body))
    expect(r.pod ~= nil and r.pod ~= "p1"):is_true(string.format("RETRY-1: %s %s should be served by p2 or p3, "
      .. "was by %s", kind, r.request_id, tostring(r.pod)))
    local entry = s:access_log(r.request_id)
    expect(entry.selected_pod):eq("p1", string.format("RETRY-2: the access log's selected_pod is the pod "
      .. "scheduled first, p1, even though %s served %s; access log: %s", tostring(r.pod), r.request_id, entry.line))
    expect(entry.upstream_attempts):eq(2, string.format("RETRY-1/RETRY-2: one failed upstream (p1's 503) and one "
      .. "retry that succeeded make 2 attempts for %s; access log: %s%s", r.request_id, entry.line,
      s:cause_note("attempts_logged")))
    expect(entry.status):eq(200, "the access log records the client's status, 200: " .. entry.line)
    if r.decision then
      expect(r.decision.attempts):eq(2, "RETRY-1: the router's decision counts 2 attempts for " .. r.request_id)
      expect(r.decision.chosen):eq(r.pod, "the decision names the pod that answered " .. r.request_id)
    end
  end
end)

test("when every pod fails, the client gets 503 request to all pods failed, after each pod was tried",
  { tags = { "needs:attempts_logged", "needs:all_failed_503" } }, function()
  local s <close> = kvcache.stack { pods = 2, sim = FAILING }
  s:requires("kthena_surface") -- Kthena's retry and its wording
  local r = assert(s:complete { prompt = s:prompt(2), max_tokens = 1 })
  expect(r.status):eq(503, string.format("RETRY-1: both pods answer 503, so the request fails (request %s: %s)%s",
    r.request_id, r.body, s:cause_note("all_failed_503")))
  expect(r.body):contains("request to all pods failed", "RETRY-1: Kthena's error once every pod failed")
  local entry = s:access_log(r.request_id)
  expect(entry.upstream_attempts):eq(2, string.format("RETRY-1/RETRY-2: both pods were tried before the 503; "
    .. "access log: %s%s", entry.line, s:cause_note("attempts_logged")))
  expect(entry.status):eq(503, "the access log records the client's status: " .. entry.line)
end)
