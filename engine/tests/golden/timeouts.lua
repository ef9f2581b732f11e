-- Time limits hold whatever the test does, and the next test still runs.
test("busy loop", { timeout = 0.5 }, function()
  while true do end
end)

test("busy loop inside pcall", { timeout = 0.5 }, function()
  pcall(function() while true do end end)
end)

test("busy loop inside a coroutine", { timeout = 0.5 }, function()
  coroutine.wrap(function() while true do end end)()
end)

test("sleep inside pcall", { timeout = 1 }, function()
  pcall(sleep, 100)
end)

test("eventually cannot outlive it", { timeout = 1 }, function()
  eventually(function() return false end, { timeout = 100 })
end)

test("next test runs", function()
  expect(1):eq(1)
end)

test("a coroutine that catches the limit", { timeout = 0.5 }, function()
  coroutine.wrap(function()
    while true do pcall(function() while true do end end) end
  end)()
end)

test("and the one after it runs too", function()
  expect(2):eq(2)
end)
