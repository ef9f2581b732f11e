-- A file may skip itself at the top level, for a capability it lacks.
skip("needs the kind target")
test("never listed", function() end)
