-- With -j 2, two files that each sleep 2 s run side by side.
test("sleeps two seconds", function() sleep(2) end)
