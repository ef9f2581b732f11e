---@meta json
-- `local json = require("json")`: lua-cjson with its number and empty-array gaps closed
-- (engine/lua/json.lua; docs/api-modules.md).

---@class json
---@field null lightuserdata  JSON null: present but null, unlike a missing key (nil)
---@field safe json.safe
local json = {}

---JSON text of v; raises "json: ..." on what JSON cannot carry (integers over 14 digits:
---send them as strings, kv.u64).
---@param v any
---@return string
function json.encode(v) end

---The value of s; integral numbers up to 2^53 as integers. Raises "json: ..." on malformed text.
---@param s string
---@return any
function json.decode(s) end

---The same calls, returning nil, err instead of raising.
---@class json.safe
---@field null lightuserdata  json.null
json.safe = {}

---@param v any
---@return string?, string?
function json.safe.encode(v) end

---@param s string
---@return any, string?
function json.safe.decode(s) end

return json
