-- A fixture that cannot start is an infrastructure error: exit status 3.
test("stack comes up", function()
  infra_error("redis-server would not start: port in use")
end)
