-- model_server_groups.lua - pods of different namespaces or engines serve
-- the same model from ModelServers of their own: a request is routed among
-- its group's pods by its group's cache, and never to another group.
--
-- What it proves: Kthena picks one ModelRoute for a request, one target
-- ModelServer of the route's matching rule, and weighs only that
-- ModelServer's pods; a ModelServer has one engine and selects pods of its
-- namespace. With two namespaces (or two engines) serving one model, each
-- group its own ModelServer and the route sending a request to a group by a
-- header (stacks/kthena_objects.lua), the cache decides within the group: a
-- prompt cached on one of its pods is routed there; and a prompt cached
-- whole on another group's pod does not pull the request across: the pod
-- of the request's group holding part of it wins.
--
-- Why it matters: teams deploy the same model in their own namespaces, and
-- a cluster may run a model on vLLM and on SGLang side by side. Their
-- runtimes write the same Redis keys (same model, same blocks), told apart
-- only by the owner field <pod>.<namespace>; a request must still stay with
-- the pods its route chose.
--
-- Requests name their group with group = <a pod of it> (the library sends
-- the route's group header); expect_routed sends to its pod's group.

local kvcache = require("kvcache")

-- The claims on one stack whose pods form two groups: {a1, a2} and {b1, b2}.
local function claims(s)
  local here, here_tokens = s:prompt(4, { tag = "here", pod = "a2" })
  s:inject("a2", kvcache.stored { tokens = here_tokens })
  s:expect_owner { tokens = here_tokens, pod = "a2", blocks = 4 }
  s:expect_routed { prompt = here, pod = "a2", n = 3, max_tokens = 1 }

  local there, there_tokens = s:prompt(4, { tag = "there", pod = "b2" })
  s:inject("b2", kvcache.stored { tokens = there_tokens })
  s:expect_owner { tokens = there_tokens, pod = "b2", blocks = 4 }
  s:expect_routed { prompt = there, pod = "b2", n = 3, max_tokens = 1 }

  -- b2 holds every block of `there`, a1 only its first: a request for a1's
  -- group stays in it and follows a1's one block (so no tie decides).
  s:inject("a1", kvcache.stored { tokens = kvcache.prefix(there_tokens, 1) })
  s:expect_owner { tokens = there_tokens, pod = "a1", blocks = 1 }
  local t = s:route { prompt = there, group = "a1", n = 6, max_tokens = 1 }
  expect(t.errors):eq(0, "every request to a1's group should be served by a1 or a2: " .. tostring(t))
  expect(t:count("a1")):eq(6, string.format("b2 caches the whole prompt, yet it is not of a1's group: its "
    .. "ModelServer's pods a1 and a2 only should compete, and a1, holding the first block, should win (%s)",
    tostring(t)))
  for _, r in ipairs(t.results) do
    if r.decision then
      for _, c in ipairs(r.decision.candidates or {}) do
        expect(c == "a1" or c == "a2"):eq(true, string.format("request %s to a1's group had %s among its "
          .. "candidates: the router should weigh only the pods of the one ModelServer its route picked",
          r.request_id, c))
      end
    end
  end
end

-- The two ways pods of one model form groups: b1 and b2 take `b_pods`
-- (another namespace, or another engine) over a1 and a2's defaults.
local groupings = {
  { name = "pods of two namespaces: each namespace's requests follow its own pods' cache",
    b_pods = { namespace = "team-b" } },
  { name = "vLLM and SGLang pods of one namespace: each engine's requests follow its own pods' cache",
    b_pods = { engine = "sglang" } },
}

for _, g in ipairs(groupings) do
  test(g.name, { tags = { "needs:kvcache_score" } }, function()
    local pods = { { name = "a1" }, { name = "a2" } }
    for _, name in ipairs({ "b1", "b2" }) do
      local pod = { name = name }
      for k, v in pairs(g.b_pods) do pod[k] = v end
      pods[#pods + 1] = pod
    end
    local s <close> = kvcache.stack { pods = pods }
    claims(s)
  end)
end
