-- A script error inside a test fails that test only.
test("indexes nil", function()
  local pod = nil
  return pod.name
end)

test("still runs", function()
  expect(true):is_true()
end)
