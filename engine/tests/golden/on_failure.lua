-- on_failure handlers run for failures and timeouts, before cleanup, file-level first.
on_failure(function(name, dir)
  log("file handler: " .. name .. " " .. (dir:match("[^/]+/[^/]+$") or dir))
end)

after_each(function() log("after_each") end)

test("passes: no handler", function() end)

test("fails", function()
  on_failure(function(name) log("test handler: " .. name) end)
  fail("broken link")
end)

test("times out", { timeout = 0.3 }, function()
  sleep(10)
end)
