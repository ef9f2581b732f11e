---@meta prometheus
-- `local prometheus = require("prometheus")` (also kvcache.prometheus): reads the
-- Prometheus text format (fixtures/prometheus.lua), for stack:metrics().

---@class KvSample
---@field name string
---@field labels table<string, string>
---@field value number

---@class KvMetrics
---@field list KvSample[]  every sample, in the order of the text
local KvMetrics = {}

---The sum of the samples of name whose labels include labels (0 when none match).
---@param name string
---@param labels? table<string, string|number>
---@return number
function KvMetrics:get(name, labels) end

---Whether any sample has this name (and labels): tells 0 from absent.
---@param name string
---@param labels? table<string, string|number>
---@return boolean
function KvMetrics:has(name, labels) end

---@param name string
---@param labels? table<string, string|number>
---@return KvSample[]
function KvMetrics:samples(name, labels) end

---@class prometheus
local prometheus = {}

---Lines that do not parse are skipped.
---@param text string
---@return KvMetrics
function prometheus.parse(text) end

return prometheus
