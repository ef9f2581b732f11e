-- A syntax error fails the file, with its line.
test("never registered", function()
  local x = = 1
end)
