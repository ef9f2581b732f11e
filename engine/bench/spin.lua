-- A pure-Lua loop, timed by the program itself: run by kvengine (with its
-- standing deadline hook) and by lua5.4 (without) to measure the hook's cost.
local t0 = os.clock()
local x = 0
for i = 1, 30000000 do x = x + (i & 7) end
io.write(string.format("%.4f\n", os.clock() - t0))
