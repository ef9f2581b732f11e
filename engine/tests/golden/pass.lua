-- Two passing tests: every outcome is "ok".
test("adds", function()
  expect(1 + 1):eq(2, "arithmetic")
end)

test("compares tables deeply", function()
  expect({ pods = { "p1", "p2" }, score = 100 }):eq({ pods = { "p1", "p2" }, score = 100 })
end)
