-- A before_all that outlives the time limit fails every test of the file
-- with that reason, and says where in the library it was waiting; after_all
-- still runs, and the run ends normally.
local bring_up = dofile(debug.getinfo(1, "S").short_src:match("^(.*)/") .. "/lib/bring_up.lua")

before_all(function()
  spawn(function() sleep(100) end) -- a task it started goes with it
  bring_up.start()
end)

after_all(function()
  print("after_all ran")
end)

test("first", function() end)

test("second", function() end)
