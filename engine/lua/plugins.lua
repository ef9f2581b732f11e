-- plugins.lua - what fixture libraries add to the engine: commands of
-- `kvengine` and drawers of the HTML report.
--
-- The engine names no fixture: it knows where fixture libraries live, the
-- module path (KVENGINE_PATH, fixtures/ next to the binary in a checkout,
-- share/kvengine/fixtures once installed), and one name of its own
-- choosing.  Every file `kvengine_plugins.lua` on that path is a library's
-- registration: the engine runs each once, in path order, the first time
-- it needs one (`kvengine WORD`, --help, a report sent), and the file calls
--
--   engine.command{name=, usage=, summary=, script=}   kvengine NAME ARG...
--     runs the module `script` (found on the module path) as `kvengine
--     serve` would; --help prints "kvengine NAME USAGE" and the summary
--   engine.drawer(kind, module)   the HTML report draws engine.report(kind,
--     ...) with that module
--
-- A registration file must be side-effect free (it starts, opens and writes
-- nothing): the parent and --help run it.  The first registration of a name
-- stands, so a library earlier on the path (KVENGINE_PATH) overrides a later
-- one; one file naming a name twice is an error.
--
-- How a drawer reaches the parent: the HTML page is drawn in the parent,
-- which runs no scenario and loads no fixture code.  The worker looks the
-- kind up here when the fixture calls engine.report, and the event carries
-- the drawer's module name; the parent requires that module through the
-- same module path (report_html.lua).  So a drawing module is pure: it
-- draws from the report's data with report_svg, and needs nothing else.

local M = {}

M.FILE = "kvengine_plugins" -- the registration module's name, the engine's one fixed word

local BUILTIN = { serve = true, version = true } -- the engine's own commands (main.c)
local NAME = "^[a-z][a-z0-9_-]*$"
local MODULE = "^[%w_][%w_.-]*$"
M.COMMAND_KEYS = { "name", "usage", "summary", "script" } -- engine.options.command

local commands, order, drawers = {}, {}, {}
local loaded, loading = false, nil -- loading: the registration file being run

-- Who registers: the registration file being run, else code at run time.
local function origin() return loading or "code at run time" end

-- Record entry under name in `into`; false when an earlier library's
-- registration stands.  Raises on a name one file registers twice.
local function claim(into, what, name, entry)
  local old = into[name]
  if old and old.by == entry.by then
    error(string.format("%s %q is registered twice by %s", what, name, entry.by), 3)
  end
  if old then return false end
  into[name] = entry
  return true
end

-- Raise at the registering line unless v is a string matching pattern
-- (any string without one); `what` says what it should be.
local function check_string(fname, key, v, pattern, what)
  if type(v) ~= "string" or (pattern and not v:match(pattern)) then
    error(string.format("%s: %s is %s, not %s", fname, key, what or "a string", tostring(v)), 3)
  end
end

-- engine.command{name=, usage=, summary=, script=}: every key required,
-- no other taken (a misspelt one is named with the closest).
function M.command(spec)
  spec = __kv.check_options("engine.command", spec, M.COMMAND_KEYS, 2) or {}
  check_string("engine.command", "name", spec.name, NAME, "a name of a-z, 0-9, _ and -")
  check_string("engine.command", "usage", spec.usage)
  check_string("engine.command", "summary", spec.summary)
  check_string("engine.command", "script", spec.script, MODULE, "a module name")
  if BUILTIN[spec.name] then error("engine.command: `" .. spec.name .. "` is the engine's own command", 2) end
  local entry = { name = spec.name, usage = spec.usage, summary = spec.summary, script = spec.script,
    by = origin() }
  if claim(commands, "the command", spec.name, entry) then order[#order + 1] = spec.name end
end

-- engine.drawer(kind, module): module draws reports of kind (report_html.lua).
function M.drawer(kind, module)
  check_string("engine.drawer", "the kind", kind, "^[%w_%-]+$", "a name of letters, digits, _ and -")
  check_string("engine.drawer", "the module", module, MODULE, "a module name")
  claim(drawers, "the drawer of", kind, { module = module, by = origin() })
end

-- Every registration file on the module path, in path order, each once.
local function registration_files()
  local files, seen = {}, {}
  for template in package.path:gmatch("[^;]+") do
    local path = template:gsub("%?", M.FILE)
    local f = not seen[path] and io.open(path, "r")
    if f then
      f:close()
      files[#files + 1] = path
    end
    seen[path] = true
  end
  return files
end

-- Run the registration files, once; raises naming the file that failed.
function M.load()
  if loaded then return end
  loaded = true
  for _, path in ipairs(registration_files()) do
    local chunk, err = loadfile(path)
    if not chunk then error("a fixture library's registration does not load: " .. err, 0) end
    loading = path
    local ok, why = pcall(chunk)
    loading = nil
    if not ok then error("a fixture library's registration failed: " .. tostring(why), 0) end
  end
end

-- The module that draws reports of `kind`, or nil.
function M.drawer_of(kind)
  M.load()
  return drawers[kind] and drawers[kind].module
end

-- The registered command closest to word, as the strict option check
-- judges a slip (engine/strict_options.c), or nil.
local function closest(word)
  if #order == 0 then return nil end
  local _, err = pcall(__kv.check_options, "kvengine", { [word] = true }, order, 1)
  return tostring(err):match("did you mean `([^`]+)`%?")
end

-- kvengine WORD: the path of the registered command's script, or nil and
-- the registered command closest to word (nil when none is close).
function M.script(word)
  M.load()
  local c = commands[word]
  if not c then return nil, closest(word) end
  local path, err = package.searchpath(c.script, package.path)
  if not path then
    error(string.format("the %s command's script %s (registered by %s) is not on the module path:%s", word,
      c.script, c.by, err), 0)
  end
  return path
end

local COLUMN, WIDTH = 38, 88 -- as the engine's own lines in --help (options.c)

-- text in lines of at most WIDTH - COLUMN characters, the first after `head`.
local function wrapped(head, text)
  local lines, line = {}, head .. string.rep(" ", COLUMN - #head)
  if #head >= COLUMN - 1 then lines[1], line = head, string.rep(" ", COLUMN) end
  local empty = #line
  for word in text:gmatch("%S+") do
    if #line > empty and #line + 1 + #word > WIDTH then
      lines[#lines + 1], line = line, string.rep(" ", COLUMN)
    end
    line = line .. (#line > COLUMN and " " or "") .. word
  end
  lines[#lines + 1] = line
  return table.concat(lines, "\n")
end

-- The --help section of the registered commands ("" when there are none);
-- a registration that fails is named there, not fatal.
function M.usage()
  local ok, err = pcall(M.load)
  local out = {}
  for _, name in ipairs(order) do
    local c = commands[name]
    out[#out + 1] = wrapped("       kvengine " .. name .. (c.usage ~= "" and " " .. c.usage or ""), c.summary)
  end
  if not ok then out[#out + 1] = "       (" .. tostring(err) .. ")" end
  if #out == 0 then return "" end
  return "\ncommands of the fixture libraries (" .. M.FILE .. ".lua on the module path):\n"
    .. table.concat(out, "\n") .. "\n"
end

return M
