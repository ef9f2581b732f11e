-- A misspelt option of kvcache.stack fails at the scenario's line, naming
-- the closest valid key; nothing starts.
local kvcache = require("kvcache")

test("a stack with a misspelt option", function()
  kvcache.stack { pod = 1 }
end)
