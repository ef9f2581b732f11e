-- Two passing tests and one failing: exit 1, one failure naming file:line.
test("first passes", function()
  expect("kv@127.0.0.1@m"):matches("^kv@")
end)

test("second fails", function()
  local owners = { b0 = { "p1", "p2" }, b1 = { "p1" } }
  expect(owners):eq({ b0 = { "p1", "p2" }, b1 = { "p2" } }, "block owners")
end)

test("third passes", function()
  expect(3):gt(2)
end)
