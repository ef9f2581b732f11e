-- A before_all that outlives the time limit fails every test of the file
-- with that reason; after_all still runs, and the run ends normally.
before_all(function()
  spawn(function() sleep(100) end) -- a task it started goes with it
  sleep(100)
end)

after_all(function()
  print("after_all ran")
end)

test("first", function() end)

test("second", function() end)
