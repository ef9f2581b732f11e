-- Skips carry their reason, whether declared or decided inside the test.
test("declared skip", { skip = "needs a GPU" }, function()
  error("never runs")
end)

test("skip at run time", function()
  if true then skip("redis-server is not installed") end
  error("never reached")
end)

test("runs", function() end)
