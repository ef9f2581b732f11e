-- A misspelt field of a known_gap mark fails the file, naming the field,
-- the one it was meant to be, and the line of the test.
test("misspelt", { known_gap = { reason = "upstream bug", lnik = "https://example.org/issue/3" } }, function()
end)
