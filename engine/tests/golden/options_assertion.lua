-- A misspelt option of an assertion fails at the scenario's line instead
-- of checking something else.
local kvcache = require("kvcache")

local stack = kvcache.stack { pods = 1 }

test("an assertion with a misspelt option", function()
  stack:expect_owner { prompt = "one two three", pod = "p1", block = 1 }
end)
