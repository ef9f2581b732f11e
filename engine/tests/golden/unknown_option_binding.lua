-- A misspelt option of a binding fails the test at the line that passed it,
-- naming the closest option, before anything is sent anywhere.
local redis = require("redis")

test("connects with a misspelt timeout", function()
  local c = redis.connect { port = 6379, tiemout = 1 }
  c:close()
end)

test("the next test runs", function()
  expect(true):is_true()
end)
