-- Every function declared in engine/*.h and bindings/*.h has its contract:
-- a comment right above the declaration (what it requires, what it returns
-- or guarantees, who owns what), as SQLite's headers have.  One comment may
-- cover a few declarations written right under it, without a blank line
-- between, when it names each of them.

local fs = require("fs")

local HERE = debug.getinfo(1, "S").short_src:match("^(.*)/[^/]*$") or "."
local ROOT = HERE .. "/../.."

-- Each line of C text classified: "blank", "comment", "pre" (preprocessor)
-- or "code", with the code of the line, comments removed.
local function classify(text)
  local lines, in_comment, continued = {}, false, false
  for raw in (text .. "\n"):gmatch("(.-)\n") do
    local code, rest = {}, raw
    while #rest > 0 do
      if in_comment then
        local close = rest:find("*/", 1, true)
        if not close then break end
        in_comment, rest = false, rest:sub(close + 2)
      else
        local open = rest:find("/*", 1, true)
        local line_comment = rest:find("//", 1, true)
        if line_comment and (not open or line_comment < open) then
          code[#code + 1] = rest:sub(1, line_comment - 1)
          break
        end
        if not open then
          code[#code + 1] = rest
          break
        end
        code[#code + 1] = rest:sub(1, open - 1)
        in_comment, rest = true, rest:sub(open + 2)
      end
    end
    local c = table.concat(code)
    local kind
    if continued or c:match("^%s*#") then
      kind, continued = "pre", raw:match("\\%s*$") ~= nil
    elseif c:match("%S") then
      kind = "code"
    elseif raw:match("%S") then
      kind = "comment"
    else
      kind = "blank"
    end
    lines[#lines + 1] = { kind = kind, code = c, raw = raw }
  end
  return lines
end

-- The functions declared at the top level: {name =, first =, last =} (lines).
local function declarations(lines)
  local decls, depth, start, buf = {}, 0, nil, {}
  for i, l in ipairs(lines) do
    if l.kind == "code" then
      start = start or i
      buf[#buf + 1] = l.code
      for ch in l.code:gmatch("[{};]") do
        if ch == "{" then
          depth = depth + 1
        elseif ch == "}" then
          depth = depth - 1
        elseif depth == 0 then
          local stmt = table.concat(buf, " ")
          local head, name = stmt:match("^%s*([^%(]-)([%a_][%w_]*)%s*%(")
          if name and not stmt:find("{", 1, true) and not head:match("^typedef")
            and not head:find("=", 1, true) and head:match("%S") then
            decls[#decls + 1] = { name = name, first = start, last = i }
          end
          start, buf = nil, {}
        end
      end
    end
  end
  return decls
end

-- The declarations of a header with no contract: {{line =, name =}, ...}.
local function uncommented(text)
  local lines = classify(text)
  local decls = declarations(lines)
  local missing = {}
  for _, d in ipairs(decls) do
    -- Up through the code written right above it, to the comment there.
    local i = d.first - 1
    while i >= 1 and lines[i].kind == "code" do i = i - 1 end
    local ok = false
    if i >= 1 and lines[i].kind == "comment" then
      local j = i
      while j > 1 and lines[j - 1].kind == "comment" do j = j - 1 end
      local comment = {}
      for k = j, i do comment[#comment + 1] = lines[k].raw end
      comment = table.concat(comment, "\n")
      -- The declarations under the same comment, up to a blank line.
      local group = 0
      for _, other in ipairs(decls) do
        local k = other.first - 1
        while k >= 1 and lines[k].kind == "code" do k = k - 1 end
        if k == i then group = group + 1 end
      end
      ok = group == 1 or comment:find("%f[%w_]" .. d.name .. "%f[^%w_]") ~= nil
    end
    if not ok then missing[#missing + 1] = { line = d.first, name = d.name } end
  end
  return missing
end

local function headers()
  local paths = {}
  for _, dir in ipairs { "engine", "bindings" } do
    for _, name in ipairs(assert(fs.list(ROOT .. "/" .. dir))) do
      if name:match("%.h$") then paths[#paths + 1] = dir .. "/" .. name end
    end
  end
  return paths
end

test("every function declared in engine/*.h and bindings/*.h has its contract above it", function()
  local paths = headers()
  expect(#paths):gt(5, "the headers under " .. ROOT)
  local missing, count = {}, 0
  for _, path in ipairs(paths) do
    local text = assert(fs.read(ROOT .. "/" .. path))
    count = count + #declarations(classify(text))
    for _, m in ipairs(uncommented(text)) do
      missing[#missing + 1] = string.format("%s:%d %s", path, m.line, m.name)
    end
  end
  expect(count):gt(100, "the declarations read from the headers")
  if #missing > 0 then
    fail("declared functions without a contract comment (" .. #missing .. "):\n  " .. table.concat(missing, "\n  "))
  end
end)

test("a declaration without a comment, or one a group's comment does not name, is found", function()
  local text = [[
/* Returns 1. */
int one(void);

int bare(void);

/* first() and second() are a pair. */
int first(void);
int second(void);
int third(void); /* a trailing remark is no contract */

/* A watcher of the scheduler, and how to set it. */
typedef struct w {
  void (*ended)(int t);
} w;
void watch(const w *x);

typedef void (*callback)(int);
#define MACRO(x) f(x)
extern const char *const names[];
]]
  local found = {}
  for _, m in ipairs(uncommented(text)) do found[#found + 1] = m.name .. ":" .. m.line end
  expect(found):eq { "bare:4", "third:9" }
end)
