-- expect.lua - assertions with messages a stranger can act on.
--
-- expect(actual):eq(expected, "why it matters") and friends.  A failed
-- assertion raises a failure object (see failure.lua) that carries the
-- message, the expected and actual values rendered readably, for tables the
-- paths where they differ, and the file:line of the assertion in the test.

local failure = require("failure")

local show -- forward

local function is_array(t)
  local n = #t
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 or k > n then return false end
  end
  return true
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    local ta, tb = type(a), type(b)
    if ta ~= tb then return ta < tb end
    if ta == "number" or ta == "string" then return a < b end
    return tostring(a) < tostring(b)
  end)
  return keys
end

local function show_key(k)
  if type(k) == "string" and k:match("^[%a_][%w_]*$") then return k end
  return "[" .. show(k) .. "]"
end

-- show(v): a one-line rendering of any value; tables sorted, cycles marked.
function show(v, seen)
  local t = type(v)
  if t == "string" then return string.format("%q", v):gsub("\\\n", "\\n") end
  if t ~= "table" then return tostring(v) end
  seen = seen or {}
  if seen[v] then return "<cycle>" end
  seen[v] = true
  local mt = getmetatable(v)
  if mt and mt.__tostring then return tostring(v) end
  local parts = {}
  if is_array(v) then
    for i = 1, #v do parts[i] = show(v[i], seen) end
  else
    for _, k in ipairs(sorted_keys(v)) do
      parts[#parts + 1] = show_key(k) .. " = " .. show(v[k], seen)
    end
  end
  seen[v] = nil
  return "{" .. table.concat(parts, ", ") .. "}"
end

local function path_of(path, k)
  if type(k) == "string" and k:match("^[%a_][%w_]*$") then return path .. "." .. k end
  return path .. "[" .. show(k) .. "]"
end

-- Collect up to `limit` differences between two values as "path: ..." lines.
local function diff(a, b, path, out, limit)
  if #out >= limit then return end
  if type(a) ~= "table" or type(b) ~= "table" then
    if a ~= b then
      out[#out + 1] = string.format("%s: expected %s, got %s", path, show(a), show(b))
    end
    return
  end
  for _, k in ipairs(sorted_keys(a)) do
    if b[k] == nil then
      out[#out + 1] = string.format("%s: missing (expected %s)", path_of(path, k), show(a[k]))
    else
      diff(a[k], b[k], path_of(path, k), out, limit)
    end
    if #out >= limit then return end
  end
  for _, k in ipairs(sorted_keys(b)) do
    if a[k] == nil then
      out[#out + 1] = string.format("%s: unexpected %s", path_of(path, k), show(b[k]))
      if #out >= limit then return end
    end
  end
end

local function deep_equal(a, b)
  local out = {}
  diff(a, b, "", out, 1)
  return #out == 0
end

local Expect = {}
Expect.__index = Expect

-- Raise a failure at the line of the assertion (level 3: fail <- matcher <- test).
local function fail(_, why, message, details)
  local text = why
  if message then text = message .. ": " .. why end
  failure.raise(text, details)
end

local function check(self, ok, why, message, details)
  if not ok then fail(self, why, message, details) end
  return self
end

function Expect:eq(expected, message)
  if deep_equal(expected, self.actual) then return self end
  local details
  if type(expected) == "table" and type(self.actual) == "table" then
    local out = {}
    diff(expected, self.actual, "", out, 8)
    details = "expected: " .. show(expected) .. "\nactual:   " .. show(self.actual) ..
      "\ndifferences:\n  " .. table.concat(out, "\n  ")
    return fail(self, "tables differ: " .. out[1], message, details)
  end
  return fail(self, string.format("expected %s, got %s", show(expected), show(self.actual)), message)
end

function Expect:ne(unexpected, message)
  return check(self, not deep_equal(unexpected, self.actual),
    string.format("expected anything but %s", show(unexpected)), message)
end

local ORDER = {
  gt = { ">", function(a, b) return a > b end },
  ge = { ">=", function(a, b) return a >= b end },
  lt = { "<", function(a, b) return a < b end },
  le = { "<=", function(a, b) return a <= b end },
}
for name, o in pairs(ORDER) do
  Expect[name] = function(self, bound, message)
    local a = self.actual
    local comparable = type(a) == type(bound) and (type(a) == "number" or type(a) == "string")
    return check(self, comparable and o[2](a, bound),
      string.format("expected a value %s %s, got %s", o[1], show(bound), show(a)), message)
  end
end

function Expect:near(x, tol, message)
  local a = self.actual
  return check(self, type(a) == "number" and math.abs(a - x) <= tol,
    string.format("expected %s within %s of %s", show(a), show(tol), show(x)), message)
end

-- contains: a substring of a string, or an element (deep-equal) of a list.
function Expect:contains(x, message)
  local a = self.actual
  local ok = false
  if type(a) == "string" and type(x) == "string" then
    ok = a:find(x, 1, true) ~= nil
  elseif type(a) == "table" then
    for _, v in pairs(a) do
      if deep_equal(x, v) then ok = true break end
    end
  end
  return check(self, ok, string.format("expected %s to contain %s", show(a), show(x)), message)
end

function Expect:matches(pattern, message)
  local a = self.actual
  return check(self, type(a) == "string" and a:find(pattern) ~= nil,
    string.format("expected %s to match %s", show(a), show(pattern)), message)
end

function Expect:is_nil(message)
  return check(self, self.actual == nil, "expected nil, got " .. show(self.actual), message)
end

function Expect:not_nil(message)
  return check(self, self.actual ~= nil, "expected a value, got nil", message)
end

function Expect:is_true(message)
  return check(self, self.actual == true, "expected true, got " .. show(self.actual), message)
end

function Expect:is_false(message)
  return check(self, self.actual == false, "expected false, got " .. show(self.actual), message)
end

function Expect:truthy(message)
  return check(self, self.actual, "expected a truthy value, got " .. show(self.actual), message)
end

function Expect:falsy(message)
  return check(self, not self.actual, "expected a falsy value, got " .. show(self.actual), message)
end

function Expect:type(name, message)
  return check(self, type(self.actual) == name,
    string.format("expected a %s, got %s", name, show(self.actual)), message)
end

function Expect:len(n, message)
  local a = self.actual
  local ok = (type(a) == "table" or type(a) == "string") and #a == n
  return check(self, ok, string.format("expected length %d, got %s", n,
    (type(a) == "table" or type(a) == "string") and #a or show(a)), message)
end

-- expect(fn):raises(pattern): fn() must raise an error matching pattern.
function Expect:raises(pattern, message)
  local ok, err = pcall(self.actual)
  if ok then return fail(self, "expected an error, but the call succeeded", message) end
  local text = failure.text(err)
  return check(self, not pattern or text:find(pattern) ~= nil,
    string.format("expected an error matching %s, got %s", show(pattern), show(text)), message)
end

local function expect(actual)
  return setmetatable({ actual = actual }, Expect)
end

return { expect = expect, show = show, deep_equal = deep_equal }
