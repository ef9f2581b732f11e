-- 1,000 trivial tests: the per-test cost.
for i = 1, 1000 do
  test("trivial " .. i, function() expect(i):eq(i) end)
end
