-- Artifacts stay for failures: the passing test's folder goes when the file
-- ends (unless --keep-artifacts), the failing test's stays and is named.
test("passes with an artifact", function()
  artifact("notes.txt", "a passing test's notes")
end)

test("fails with an artifact", function()
  artifact("notes.txt", "what the failure needs")
  fail("the failure keeps its folder")
end)
