-- A spawned task's error fails its test even when nobody waits for it.
test("background task fails", function()
  spawn(function() error("lost connection") end)
  sleep(0.05)
end)

test("parallel gathers results in order", function()
  local r = parallel {
    function() sleep(0.02) return "a" end,
    function() return "b" end,
  }
  expect(r):eq({ "a", "b" })
end)
