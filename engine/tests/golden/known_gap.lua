-- A known gap passes only when it fails as documented.
local gap = { reason = "upstream keys LoRA blocks by base model. Adapter prompts never hit the cache, "
  .. "and their prefixes pull base-model requests", link = "https://example.org/issue/1",
  match = "LoRA prefix not scored" }

test("fails as documented", { known_gap = gap }, function()
  expect(0):eq(100, "LoRA prefix not scored")
end)

test("fails some other way", { known_gap = gap }, function()
  expect(1):eq(2, "wrong pod")
end)

test("unexpectedly passes", { known_gap = gap }, function()
  expect(100):eq(100, "LoRA prefix not scored")
end)
