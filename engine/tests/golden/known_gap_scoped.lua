-- A known gap scoped to targets: router-a still has it, router-b fixed it,
-- and where the run names neither the mark does not apply at all.
local engine = require("engine")

local gap = { reason = "the router looks adapter blocks up under the base model (fixed in v1.1.0)",
  link = "https://example.org/issue/2", match = "cache miss", targets = { "router-a", "router-b" } }

test("adapter prompts hit the cache", { known_gap = gap }, function()
  local served_from = engine.target() == "router-a" and "a cache miss" or "the cache"
  expect(served_from):eq("the cache", "cache miss for an adapter prompt")
end)
