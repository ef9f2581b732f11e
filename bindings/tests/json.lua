-- Tests of the json module: lua-cjson with integers, null and empty arrays
-- handled as the project's Lua surface promises.

local json = require("json")

test("decode returns integral numbers as integers, at any depth", function()
  local v = json.decode('{"a": 1, "b": [2, 3.5, {"c": -4}], "d": 1e3, "e": 0.0, "f": -0}')
  expect(math.type(v.a)):eq("integer")
  expect(math.type(v.b[1])):eq("integer")
  expect(math.type(v.b[2])):eq("float")
  expect(v.b[2]):eq(3.5)
  expect(math.type(v.b[3].c)):eq("integer")
  expect(v.b[3].c):eq(-4)
  expect(math.type(v.d)):eq("integer", "1e3 is integral")
  expect(v.d):eq(1000)
  expect(math.type(v.e)):eq("integer")
  expect(math.type(v.f)):eq("integer")
  expect(math.type(json.decode("7"))):eq("integer", "a bare number too")
end)

test("decode keeps numbers beyond 2^53 as floats: they may already be rounded", function()
  expect(math.type(json.decode("[9007199254740991]")[1])):eq("integer")
  expect(json.decode("[9007199254740991]")[1]):eq(9007199254740991)
  expect(math.type(json.decode("[9007199254740993]")[1])):eq("float")
  expect(math.type(json.decode("[1e300]")[1])):eq("float")
  expect(json.decode('{"h": "10457977653291284360"}').h):eq("10457977653291284360",
    "hashes travel as strings")
end)

test("null is json.null, distinct from a missing key", function()
  local v = json.decode('{"a": null, "l": [1, null, 3]}')
  expect(v.a):eq(json.null)
  expect(v.a ~= nil):is_true()
  expect(v.missing):is_nil()
  expect(v.l[2]):eq(json.null)
  expect(#v.l):eq(3)
  expect(json.encode({ a = json.null })):eq('{"a":null}')
  expect(json.encode({ 1, json.null, 3 })):eq("[1,null,3]")
  expect(json.safe.null):eq(json.null)
end)

test("encode writes integers of up to 14 digits exactly", function()
  expect(json.encode({ 99999999999999, -99999999999999, 0, 42 }))
    :eq("[99999999999999,-99999999999999,0,42]")
  expect(json.decode(json.encode({ n = 12345678901234 })).n):eq(12345678901234)
  expect(json.encode({ x = 1.5 })):eq('{"x":1.5}')
end)

test("encode refuses integers that 14 significant digits would round", function()
  for _, n in ipairs({ 100000000000000, -100000000000000, math.maxinteger, math.mininteger,
    0x9122334455667788 }) do
    expect(function() json.encode({ h = n }) end):raises("send it as a string", tostring(n))
  end
  expect(function() json.encode({ list = { 1, 123456789012345 } }) end):raises("%$%.list%[2%]")
  expect(function() json.encode({ [123456789012345] = "v", x = 1 }) end):raises("14 digits")
end)

test("empty member tables are omitted; empty arrays cannot be nested in arrays", function()
  expect(json.encode({ a = 1, tokens = {} })):eq('{"a":1}')
  expect(json.decode(json.encode({ a = { b = {}, c = 2 } }))):eq({ a = { c = 2 } })
  expect(json.encode({})):eq("{}", "the top level stays {}")
  expect(function() json.encode({ {}, { 1 } }) end):raises("empty table inside an array")
end)

test("round trip of nested structures", function()
  local v = { model = "m", messages = { { role = "user", content = "hi" } }, n = 3, t = 0.25,
    ok = true, s = "\"quoted\"\n\u{e9}" }
  expect(json.decode(json.encode(v))):eq(v)
end)

test("errors: json.* raise, json.safe.* return nil, err", function()
  expect(function() json.decode("[1,") end):raises("^.*json: ")
  expect(function() json.decode("NaN") end):raises("json: ")
  expect(function() json.encode({ f = print }) end):raises("json: .*function")
  expect(function() json.encode({ x = 0 / 0 }) end):raises("json: ")
  local t = {}
  t.self = t
  expect(function() json.encode(t) end):raises("json: ")
  local v, err = json.safe.decode("{bad")
  expect(v):is_nil()
  expect(err):matches("^json: ")
  v, err = json.safe.encode({ n = 1 << 62 })
  expect(v):is_nil()
  expect(err):matches("^json: %$%.n: integer")
  expect(json.safe.decode("[1]")):eq({ 1 })
  expect(json.safe.encode({ 1 })):eq("[1]")
end)

test("an error raised by json.encode points at the caller", function()
  local ok, err = pcall(function() json.encode({ n = math.maxinteger }) end)
  expect(ok):is_false()
  expect(err):matches("tests/json%.lua:%d+: json: ", "the test line, not json.lua")
end)
