-- ci/html-check/browser.lua - an HTML report as headless Chromium shows it,
-- for the checks that read a page back (ci/html-check/check.lua, make
-- html-check; ci/scoreboard/html_check.lua, make scoreboard).
--
--   local browser = require("html-check.browser")
--   browser.render(page, out, width) -> dom, png   the page laid out at width:
--     its DOM (each chart's, bar's and timeline mark's box and fill in
--     data-box and data-fill, the page's height in /html/@data-height) and
--     a screenshot of the whole page, both in folder out
--   browser.xpath(file, expr) -> a number for count(), else the string value
--   browser.box_of(dom, path) -> {x, y, w, h}
--   browser.convert(png, args) -> ImageMagick convert's output on the screenshot
--   browser.pixel(png, x, y) -> {r, g, b}, 0-255
--   browser.blank(png, box) -> the standard deviation of the box's pixels
--     (about 0: nothing drawn there); browser.blanks(png, boxes): each box's, in one pass
--
-- Only the copy Chromium renders gets a script; the report itself has
-- none. Each call fails the test it runs in when its tool fails. Needs
-- chromium, ImageMagick (ci/html-check/install.sh) and xmllint.

local fs = require("fs")
local proc = require("proc")

local M = {}

-- Run once the page has laid out: the box (page coordinates) and fill of
-- each chart, bar and timeline mark, and the page's height.
local MEASURE = [[
<script>
for (const el of document.querySelectorAll("figure.chart, rect.bar, figure.timeline [data-kind]")) {
  const b = el.getBoundingClientRect();
  el.setAttribute("data-box", [b.left + scrollX, b.top + scrollY, b.width, b.height].map(Math.round).join(","));
  el.setAttribute("data-fill", getComputedStyle(el).fill);
}
document.documentElement.setAttribute("data-height", document.documentElement.scrollHeight);
</script>
]]

-- Run a tool: its own argv head, then args; returns its stdout, or fails
-- the test.
local function tool(head, args, timeout, env)
  local argv = table.move(args, 1, #args, #head + 1, table.move(head, 1, #head, 1, {}))
  local status, out, err = proc.run { argv = argv, timeout = timeout, env = env }
  expect(status):eq(0, table.concat(argv, " ") .. ": " .. tostring(err))
  return out
end

local function url(path)
  local cwd = os.getenv("PWD")
  return "file://" .. (path:sub(1, 1) == "/" and path or (assert(cwd, "PWD is set") .. "/" .. path))
end

local function chromium(out, args)
  return tool({ "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
    "--force-device-scale-factor=1", "--user-data-dir=" .. out .. "/chromium-profile" }, args, 90)
end

function M.xpath(file, expr)
  local out = tool({ "xmllint", "--html", "--xpath", expr, file }, {}, 10):gsub("\n$", "")
  return tonumber(out) or out
end

function M.box_of(dom, path)
  local text = M.xpath(dom, "string(" .. path .. "/@data-box)")
  local x, y, w, h = tostring(text):match("^(%-?%d+),(%-?%d+),(%d+),(%d+)$")
  expect(x):not_nil("the measured DOM gives " .. path .. " a box, not " .. tostring(text))
  return { x = tonumber(x), y = tonumber(y), w = tonumber(w), h = tonumber(h) }
end

function M.render(page, out, width)
  local name = page:match("([^/]*)%.html$") or "page"
  local measured = out .. "/" .. name .. ".measured.html"
  fs.write(measured, (assert(fs.read(page), "the page is at " .. page):gsub("</body>", MEASURE .. "</body>")))
  local dom = out .. "/" .. name .. ".dom.html"
  fs.write(dom, chromium(out, { "--window-size=" .. width .. ",900", "--dump-dom", url(measured) }))
  local height = M.xpath(dom, "string(/html/@data-height)")
  expect(height):type("number", "the page's height was measured")
  local png = out .. "/" .. name .. ".png"
  chromium(out, { "--window-size=" .. width .. "," .. height, "--screenshot=" .. png, url(measured) })
  return dom, png
end

-- This folder, whose policy.xml lets convert read a screenshot taller than
-- Debian's ImageMagick policy allows (16,384 px).
local HERE = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "."

function M.convert(png, args) return tool({ "convert", png }, args, 30, { MAGICK_CONFIGURE_PATH = HERE }) end

function M.pixel(png, x, y)
  local fx = {}
  for i, c in ipairs({ "r", "g", "b" }) do fx[i] = string.format("%%[fx:int(255*p{%d,%d}.%s+0.5)]", x, y, c) end
  local out = M.convert(png, { "-format", table.concat(fx, ","), "info:" })
  local r, g, b = out:match("^(%d+),(%d+),(%d+)")
  return { tonumber(r), tonumber(g), tonumber(b) }
end

-- The standard deviation of each box's pixels, read in one pass over the
-- screenshot (a tall page's PNG takes a second to decode).
function M.blanks(png, boxes)
  local args = {}
  for _, b in ipairs(boxes) do
    table.move({ "(", "-clone", "0", "-crop", string.format("%dx%d+%d+%d", b.w, b.h, b.x, b.y), "+repage", ")" }, 1, 7,
      #args + 1, args)
  end
  table.move({ "-delete", "0", "-format", "%[fx:standard_deviation]\n", "info:" }, 1, 5, #args + 1, args)
  local out = {}
  for v in M.convert(png, args):gmatch("[^\n]+") do out[#out + 1] = tonumber(v) end
  expect(#out):eq(#boxes, "a figure per box")
  return out
end

function M.blank(png, b) return M.blanks(png, { b })[1] end

return M
