-- report_svg.lua - the inline SVG charts of the HTML report (report_html.lua).
--
--   svg.bars{rows = {{label=, value=, tone=, note=, attrs=}}, max=, format=}
--     one horizontal bar per row, its value written after it; tone is a
--     CSS class (bar-expected, bar-stray, bar-error)
--   svg.timeline(entries) -> the entries of a kvcache timeline (kind
--     "publish", "fence", "completion", time t in seconds) on one time axis,
--     a lane each for events published, fences seen and completions
--
-- Every mark carries its numbers in data- attributes and a <title>, so that
-- the page can be checked by reading its DOM, and read by hovering.  Sizes
-- are fixed pixel sizes: the page lays out the same in every browser.  The
-- output is well-formed XML (self-closed empty elements, escaped text).

local M = {}

local ESC = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&#39;" }

-- Text and attribute values, escaped; characters XML cannot carry dropped.
function M.esc(s)
  s = tostring(s == nil and "" or s):gsub("[%z\1-\8\11\12\14-\31]", "?")
  return (s:gsub("[&<>\"']", ESC))
end
local esc = M.esc

local function num(v) return string.format("%.1f", v) end

-- attrs: a table of name -> value, written sorted by name (stable output).
local function attrs_text(attrs)
  local names = {}
  for k in pairs(attrs or {}) do names[#names + 1] = k end
  table.sort(names)
  local out = {}
  for _, k in ipairs(names) do out[#out + 1] = string.format(' %s="%s"', k, esc(attrs[k])) end
  return table.concat(out)
end

-- ------------------------------------------------------------------ bars

local LABEL_W, BAR_W, VALUE_W, ROW_H, BAR_H = 130, 300, 150, 24, 16

function M.bars(spec)
  local rows = spec.rows
  local max = spec.max or 0
  for _, r in ipairs(rows) do max = math.max(max, r.value) end
  local fmt = spec.format or function(v) return tostring(v) end
  local width, height = LABEL_W + BAR_W + VALUE_W, #rows * ROW_H + 6
  local out = { string.format('<svg class="bars" width="%d" height="%d" viewBox="0 0 %d %d" role="img">', width,
    height, width, height) }
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
  out[#out + 1] = "</svg>"
  return table.concat(out)
end

-- -------------------------------------------------------------- timeline

local PLOT_X, PLOT_W, LANE_H, AXIS_H = 130, 820, 26, 28
local MAX_REQUEST_ROWS = 6

-- A step of 1, 2 or 5 times a power of ten giving about six ticks over span.
local function tick_step(span)
  local raw = span / 6
  local p = 10 ^ math.floor(math.log(raw, 10))
  for _, m in ipairs({ 1, 2, 5, 10 }) do
    if m * p >= raw then return m * p end
  end
  return 10 * p
end

-- The start of a completion: its end less the time it took.
local function started(e) return e.t - (tonumber(e.took) or 0) end

-- Completions overlap (concurrency): each goes on the first row free at its
-- start, past the last row they pile up on it.
local function request_rows(list)
  local row_end, rows = {}, {}
  table.sort(list, function(a, b) return started(a) < started(b) end)
  for _, e in ipairs(list) do
    local r = 1
    while row_end[r] and row_end[r] > started(e) and r < MAX_REQUEST_ROWS do r = r + 1 end
    row_end[r] = math.max(row_end[r] or -math.huge, e.t)
    rows[e] = r
  end
  return rows, math.max(1, #row_end)
end

-- Pods are told apart by colour: p1 the first, and so on.
local function pod_tone(pods, pod)
  return "pod" .. ((pods[pod] or 0) % 8)
end

local function describe(e)
  if e.kind == "publish" then
    return string.format("+%.3fs published to %s%s", e.t, tostring(e.pod),
      e.events and (": " .. tostring(e.events)) or "")
  elseif e.kind == "fence" then
    return string.format("+%.3fs fence of %s %s after %.3fs", e.t, tostring(e.pod),
      e.seen and "seen in the store" or "NOT seen", tonumber(e.waited) or 0)
  end
  if e.err then
    return string.format("+%.3fs completion %s failed after %.3fs: %s", e.t, tostring(e.id), tonumber(e.took) or 0,
      tostring(e.err))
  end
  return string.format("+%.3fs completion %s: status %s, served by %s%s (took %.3fs)", e.t, tostring(e.id),
    tostring(e.status), tostring(e.pod or "no pod"), e.chosen and (", the router chose " .. tostring(e.chosen)) or "",
    tonumber(e.took) or 0)
end
M.describe = describe

local function timeline_axis(out, t0, t1, height)
  local step = tick_step(math.max(t1 - t0, 0.001))
  local first = math.ceil(t0 / step - 1e-9) * step
  local x_of = function(t) return PLOT_X + PLOT_W * (t - t0) / (t1 - t0) end
  local digits = math.max(0, -math.floor(math.log(step, 10)))
  for t = first, t1 + step * 1e-6, step do
    local x = num(x_of(t))
    out[#out + 1] = string.format('<line class="grid" x1="%s" y1="0" x2="%s" y2="%d"/>', x, x, height - AXIS_H)
    out[#out + 1] = string.format('<text class="tick" x="%s" y="%d">%.' .. digits .. 'fs</text>', x,
      height - AXIS_H + 16, t)
  end
  return x_of
end

-- entries: as kvcache's timeline report holds them; pods: names in order.
function M.timeline(entries, pod_names)
  local pods = {}
  for i, p in ipairs(pod_names or {}) do pods[p] = i end
  local t0, t1, completions = math.huge, -math.huge, {}
  for _, e in ipairs(entries) do
    local s = e.kind == "completion" and started(e) or e.t
    t0, t1 = math.min(t0, s), math.max(t1, e.t)
    if e.kind == "completion" then completions[#completions + 1] = e end
  end
  if t0 == math.huge then t0, t1 = 0, 1 end
  if t1 - t0 < 0.001 then t1 = t0 + 0.001 end
  local pad = (t1 - t0) * 0.02
  t0, t1 = t0 - pad, t1 + pad
  local rows, nrows = request_rows(completions)
  local lanes = { publish = 0, fence = 1, completion = 2 }
  local height = (2 + nrows) * LANE_H + AXIS_H
  local width = PLOT_X + PLOT_W + 10
  local out = { string.format('<svg class="timeline" width="%d" height="%d" viewBox="0 0 %d %d" role="img">', width,
    height, width, height) }
  for i, name in ipairs({ "events published", "fences seen", "completions" }) do
    local y = (i - 1) * LANE_H
    out[#out + 1] = string.format('<rect class="lane%d" x="0" y="%d" width="%d" height="%d"/>', i % 2, y, width,
      i == 3 and nrows * LANE_H or LANE_H)
    out[#out + 1] = string.format('<text class="lane-label" x="8" y="%d">%s</text>', y + 17, name)
  end
  local x_of = timeline_axis(out, t0, t1, height)
  for _, e in ipairs(entries) do
    local a = attrs_text { ["data-kind"] = e.kind, ["data-t"] = string.format("%.3f", e.t), ["data-pod"] = e.pod,
      ["data-status"] = e.status, ["data-id"] = e.id, ["data-seen"] = e.kind == "fence" and tostring(e.seen) or nil }
    local title = "<title>" .. esc(describe(e)) .. "</title>"
    local x, tone = x_of(e.t), pod_tone(pods, e.pod)
    if e.kind == "publish" then
      local y = lanes.publish * LANE_H + 5
      out[#out + 1] = string.format('<rect class="ev %s" x="%s" y="%d" width="5" height="16"%s>%s</rect>', tone,
        num(x - 2.5), y, a, title)
    elseif e.kind == "fence" then
      local cy = lanes.fence * LANE_H + 13
      out[#out + 1] = string.format('<circle class="ev fence %s" cx="%s" cy="%d" r="5"%s>%s</circle>',
        e.seen and "seen" or "unseen", num(x), cy, a, title)
    elseif e.kind == "completion" then
      local y = (lanes.completion + rows[e] - 1) * LANE_H + 5
      local x0 = x_of(started(e))
      local bad = (e.err or e.status ~= 200) and " failed" or ""
      out[#out + 1] = string.format('<rect class="ev %s%s" x="%s" y="%d" width="%s" height="16"%s>%s</rect>',
        tone, bad, num(x0), y, num(math.max(3, x - x0)), a, title)
    end
  end
  out[#out + 1] = "</svg>"
  return table.concat(out)
end

-- The colour key of the pods, as spans the page's CSS colours alike.
function M.pod_key(pod_names)
  local out = {}
  for i, p in ipairs(pod_names or {}) do
    out[#out + 1] = string.format('<span class="key"><span class="swatch pod%d"></span>%s</span>', i % 8, esc(p))
  end
  return table.concat(out, " ")
end

return M
