-- A misspelt method of the stack fails at the scenario's line, naming the
-- closest method.
local kvcache = require("kvcache")

local stack = kvcache.stack { pods = 1 }

test("a misspelt stack method", function()
  stack:expect_route { prompt = "one two three", pod = "p1" }
end)
