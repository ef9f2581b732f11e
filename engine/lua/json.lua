-- json.lua - JSON for scenarios: Debian's lua-cjson 2.1.0 with its number
-- and empty-array gaps closed the way the project's Lua surface promises.
--
--   json.encode(v) -> string        raises "json: ..." on what JSON cannot carry
--   json.decode(s) -> v             raises "json: ..." on malformed text
--   json.null                       JSON null (cjson.null): present-but-null,
--                                   distinct from a missing key (nil)
--   json.safe.encode / json.safe.decode   the same, returning nil, err
--
-- cjson decodes every number as a float and writes at most 14 significant
-- digits.  So:
--   * decode returns integral numbers as Lua integers, at any depth, while
--     their magnitude is at most 2^53 (where a double is still exact); larger
--     or fractional numbers stay floats;
--   * encode refuses an integer of more than 14 digits (it would be rounded):
--     send it as a string (64-bit hashes travel as kv.u64 decimal strings).
--     Floats are written with 14 significant digits.
-- cjson cannot write `[]` (an empty table is written `{}`), so an empty table
-- that is the value of an object member is omitted: readers treat a missing
-- list as an empty one.  An empty table inside an array cannot be omitted and
-- raises.  At the top level {} is written as `{}`.

local cjson = require("cjson").new()

cjson.decode_invalid_numbers(false) -- no NaN, Infinity or hex: plain JSON only
cjson.encode_invalid_numbers(false)

local json = { null = cjson.null }

local MAX_DIGITS = 99999999999999 -- the largest integer %.14g writes exactly
local EXACT = 2 ^ 53 -- beyond it a decoded float may already be rounded
local MAX_DEPTH = 1000 -- cjson's own nesting limit

-- cjson writes a table as an array when every key is a positive integer.
local function is_array(t)
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 then return false end
  end
  return true
end

local function check_integer(n, path)
  if math.type(n) == "integer" and (n > MAX_DIGITS or n < -MAX_DIGITS) then
    error(string.format("json: %s: integer %d has more than 14 digits and would be rounded; "
      .. "send it as a string (for a uint64, kv.u64(x))", path, n), 0)
  end
end

-- A copy of v that cjson writes faithfully: numbers checked, empty member
-- tables dropped.  Raises a "json: <path>: ..." message.
local function prepare(v, path, depth)
  if type(v) == "number" then
    check_integer(v, path)
    return v
  end
  if type(v) ~= "table" then return v end
  if depth > MAX_DEPTH then error("json: " .. path .. ": nested too deeply (a cycle?)", 0) end
  local out = {}
  if is_array(v) then
    for k, x in pairs(v) do
      local p = path .. "[" .. k .. "]"
      if type(x) == "table" and next(x) == nil then
        error("json: " .. p .. ": an empty table inside an array cannot be written "
          .. "([] and {} look alike to cjson)", 0)
      end
      out[k] = prepare(x, p, depth + 1)
    end
  else
    for k, x in pairs(v) do
      check_integer(k, path)
      if not (type(x) == "table" and next(x) == nil) then
        out[k] = prepare(x, path .. "." .. tostring(k), depth + 1)
      end
    end
  end
  return out
end

-- Integral floats become integers, recursively (in place: the tree is fresh).
local function integers(v)
  if math.type(v) == "float" then
    if v == math.floor(v) and v > -EXACT and v < EXACT then return math.tointeger(v) end
    return v
  end
  if type(v) == "table" then
    for k, x in pairs(v) do
      if type(x) == "number" or type(x) == "table" then v[k] = integers(x) end
    end
  end
  return v
end

local function raise(err)
  err = tostring(err)
  if not err:find("^json: ") then err = "json: " .. err end
  error(err, 3) -- at the caller of json.encode / json.decode
end

function json.encode(v)
  local ok, out = pcall(function() return cjson.encode(prepare(v, "$", 0)) end)
  if not ok then raise(out) end
  return out
end

function json.decode(s)
  if type(s) ~= "string" then error("json.decode: expected a string, got " .. type(s), 2) end
  local ok, out = pcall(cjson.decode, s)
  if not ok then raise(out) end
  return integers(out)
end

local function safe(fn)
  return function(...)
    local ok, out = pcall(fn, ...)
    if not ok then
      local msg = tostring(out)
      return nil, msg:match("^[^\n]-:%d+: (json.*)$") or msg
    end
    return out
  end
end

json.safe = { null = json.null, encode = safe(json.encode), decode = safe(json.decode) }

return json
