---@meta report_svg
-- `local svg = require("report_svg")`: the HTML report's drawing kit, for the drawers
-- a fixture library registers with engine.drawer (engine/lua/report_svg.lua;
-- docs/api.md, "Drawers"). Every function returns markup (well-formed XML).

---A report as a drawer gets it.
---@class ReportOfKind
---@field kind string
---@field data table  what engine.report sent
---@field where? string  the scenario line that led to the call

---One bar of svg.bars.
---@class report_svg.bar
---@field label string
---@field value number
---@field tone? string  a CSS class for the bar (the drawer's style colours it)
---@field note? string  written after the value
---@field attrs? table<string, any>  data- attributes of the bar

---@class report_svg
local report_svg = {}

---Text or an attribute value, escaped; characters XML cannot carry replaced.
---@param s any
---@return string
function report_svg.esc(s) end

---A coordinate, to a tenth.
---@param v number
---@return string
function report_svg.num(v) end

---Attributes, sorted by name, values escaped (nil values left out).
---@param attrs table<string, any>?
---@return string
function report_svg.attrs(attrs) end

---An element: its attributes escaped, its body as given.
---@param name string
---@param attrs table<string, any>?
---@param body string?
---@return string
function report_svg.tag(name, attrs, body) end

---"N word" or "N words".
---@param n integer
---@param word string
---@return string
function report_svg.count(n, word) end

---A report's figure in the page: class "chart KIND", data-kind KIND, caption first.
---@param kind string
---@param attrs table<string, any>
---@param caption string  markup
---@param body string  markup
---@return string
function report_svg.figure(kind, attrs, caption, body) end

---" at file:line" for a caption ("" when the report has no line).
---@param report ReportOfKind
---@return string
function report_svg.where(report) end

---Horizontal bars, each value written after its bar; max defaults to the largest value.
---@param spec {rows: report_svg.bar[], max?: number, format?: fun(v: number): string}
---@return string
function report_svg.bars(spec) end

---An <svg> of that class and size holding the marks.
---@param class string
---@param width integer
---@param height integer
---@param marks string[]
---@return string
function report_svg.svg(class, width, height, marks) end

---A band with its label, appended to marks; its shade alternates with i.
---@param marks string[]
---@param i integer
---@param y integer
---@param width integer
---@param height integer
---@param label string
function report_svg.lane(marks, i, y, width, height, label) end

---Grid lines and ticks in seconds from t0 to t1 over x .. x + width, under a plot of
---that height, appended to marks; returns the x of a time.
---@param marks string[]
---@param spec {t0: number, t1: number, x: number, width: number, height: integer}
---@return fun(t: number): number
function report_svg.time_axis(marks, spec) end

---A legend entry: a swatch of the CSS class, then the label.
---@param class string
---@param label string
---@return string
function report_svg.key(class, label) end

return report_svg
