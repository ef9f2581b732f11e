-- Hooks run in a fixed order around each test; after_each runs after a failure too.
local calls = {}
local function note(s) calls[#calls + 1] = s end

before_all(function() note("before_all") end)
after_all(function() log("order: " .. table.concat(calls, " ")) end)
before_each(function() note("before_each") end)
after_each(function() note("after_each") end)

test("one", function() note("one") end)
test("two fails", function() note("two"); fail("on purpose") end)
test("three", function()
  note("three")
  expect(calls):eq({ "before_all", "before_each", "one", "after_each", "before_each", "two",
    "after_each", "before_each", "three" })
end)
