-- golden.lua stops the engine with SIGTERM once the first test's line is
-- out, while the second test sleeps: that line is in the output, then the
-- closing line.
test("reported before the signal", function() end)

test("sleeps until the signal", function() sleep(30) end)

test("never runs", function() end)
