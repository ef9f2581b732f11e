-- --filter and --tags select tests by name and tag.
test("routing: owner wins", { tags = { "routing" } }, function() end)
test("routing: cold prompt spreads", { tags = { "routing", "slow" } }, function() end)
test("redis: keys", { tags = { "redis" } }, function() end)
