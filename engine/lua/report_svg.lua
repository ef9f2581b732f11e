-- report_svg.lua - the HTML report's drawing kit (report_html.lua), for the
-- drawers fixture libraries register (engine.drawer, plugins.lua): generic
-- marks only, no kind of report of its own.
--
--   svg.esc(s), svg.attrs{name = value}, svg.tag(name, attrs, body): text,
--     attributes and elements, escaped; svg.num(v): a coordinate
--   svg.figure(kind, attrs, caption, body): a report's figure in the page;
--     svg.where(report): " at file:line" for its caption; svg.count(n, word)
--   svg.bars{rows = {{label=, value=, tone=, note=, attrs=}}, max=, format=}
--     one horizontal bar per row, its value written after it; tone is a
--     CSS class the drawer's style colours
--   svg.svg(class, width, height, marks): a drawing of marks (strings)
--   svg.lane(marks, i, y, width, height, label): a band with its label
--   svg.time_axis(marks, {t0=, t1=, x=, width=, height=}) -> x_of(t): grid
--     lines and ticks in seconds under a plot of that height
--   svg.key(class, label): a legend entry, a swatch of CSS class `class`
--
-- Every mark a drawer makes should carry its numbers in data- attributes
-- and a <title>, so that the page can be checked by reading its DOM, and
-- read by hovering.  Sizes are fixed pixel sizes: the page lays out the
-- same in every browser.  The output is well-formed XML (self-closed empty
-- elements, escaped text).

local M = {}

local ESC = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&#39;" }

-- Text and attribute values, escaped; characters XML cannot carry dropped.
function M.esc(s)
  s = tostring(s == nil and "" or s):gsub("[%z\1-\8\11\12\14-\31]", "?")
  return (s:gsub("[&<>\"']", ESC))
end
local esc = M.esc

function M.num(v) return string.format("%.1f", v) end
local num = M.num

-- attrs: a table of name -> value, written sorted by name (stable output).
function M.attrs(attrs)
  local names = {}
  for k in pairs(attrs or {}) do names[#names + 1] = k end
  table.sort(names)
  local out = {}
  for _, k in ipairs(names) do out[#out + 1] = string.format(' %s="%s"', k, esc(attrs[k])) end
  return table.concat(out)
end
local attrs_text = M.attrs

function M.tag(name, attrs, body)
  return string.format("<%s%s>%s</%s>", name, attrs_text(attrs), body or "", name)
end
local tag = M.tag

function M.count(n, word) return string.format("%d %s%s", n, word, n == 1 and "" or "s") end

-- A report's figure: class "chart KIND", data-kind KIND, its caption first.
function M.figure(kind, attrs, caption, body)
  attrs.class = "chart " .. kind
  attrs["data-kind"] = kind
  return tag("figure", attrs, tag("figcaption", nil, caption) .. body)
end

function M.where(r) return r.where and (" at " .. tag("code", nil, esc(r.where))) or "" end

function M.svg(class, width, height, marks)
  return string.format('<svg class="%s" width="%d" height="%d" viewBox="0 0 %d %d" role="img">%s</svg>', esc(class),
    width, height, width, height, table.concat(marks))
end

-- ------------------------------------------------------------------ bars

local LABEL_W, BAR_W, VALUE_W, ROW_H, BAR_H = 130, 300, 150, 24, 16

function M.bars(spec)
  local rows = spec.rows
  local max = spec.max or 0
  for _, r in ipairs(rows) do max = math.max(max, r.value) end
  local fmt = spec.format or function(v) return tostring(v) end
  local out = {}
  for i, r in ipairs(rows) do
    local y = (i - 1) * ROW_H + 3
    local w = max > 0 and BAR_W * r.value / max or 0
    local tone = r.tone and (" " .. r.tone) or ""
    out[#out + 1] = string.format('<rect class="track" x="%d" y="%s" width="%d" height="%d"/>', LABEL_W,
      num(y + (ROW_H - BAR_H) / 2), BAR_W, BAR_H)
    out[#out + 1] = string.format('<rect class="bar%s" x="%d" y="%s" width="%s" height="%d"%s><title>%s: %s</title>'
      .. '</rect>', tone, LABEL_W, num(y + (ROW_H - BAR_H) / 2), num(w), BAR_H, attrs_text(r.attrs), esc(r.label),
      esc(fmt(r.value)))
    out[#out + 1] = string.format('<text class="label" x="%d" y="%s">%s</text>', LABEL_W - 8, num(y + ROW_H / 2 + 4),
      esc(r.label))
    out[#out + 1] = string.format('<text class="value" x="%s" y="%s">%s%s</text>', num(LABEL_W + w + 6),
      num(y + ROW_H / 2 + 4), esc(fmt(r.value)), r.note and (" " .. esc(r.note)) or "")
  end
  return M.svg("bars", LABEL_W + BAR_W + VALUE_W, #rows * ROW_H + 6, out)
end

-- ------------------------------------------------------------ time axis

-- A step of 1, 2 or 5 times a power of ten giving about six ticks over span.
local function tick_step(span)
  local raw = span / 6
  local p = 10 ^ math.floor(math.log(raw, 10))
  for _, m in ipairs({ 1, 2, 5, 10 }) do
    if m * p >= raw then return m * p end
  end
  return 10 * p
end

function M.time_axis(out, spec)
  local t0, t1 = spec.t0, math.max(spec.t1, spec.t0 + 0.001)
  local step = tick_step(t1 - t0)
  local first = math.ceil(t0 / step - 1e-9) * step
  local x_of = function(t) return spec.x + spec.width * (t - t0) / (t1 - t0) end
  local digits = math.max(0, -math.floor(math.log(step, 10)))
  for t = first, t1 + step * 1e-6, step do
    local x = num(x_of(t))
    out[#out + 1] = string.format('<line class="grid" x1="%s" y1="0" x2="%s" y2="%d"/>', x, x, spec.height)
    out[#out + 1] = string.format('<text class="tick" x="%s" y="%d">%.' .. digits .. 'fs</text>', x,
      spec.height + 16, t)
  end
  return x_of
end

-- Bands alternate in shade by i.
function M.lane(out, i, y, width, height, label)
  out[#out + 1] = string.format('<rect class="lane%d" x="0" y="%d" width="%d" height="%d"/>', i % 2, y, width, height)
  out[#out + 1] = string.format('<text class="lane-label" x="8" y="%d">%s</text>', y + 17, esc(label))
end

function M.key(class, label)
  return string.format('<span class="key"><span class="swatch %s"></span>%s</span>', esc(class), esc(label))
end

return M
