-- A misspelt test option fails the file at the line that registers the test:
-- no test runs with a default in its place.
test("waits a while", { timout = 5 }, function()
  sleep(0.01)
end)
