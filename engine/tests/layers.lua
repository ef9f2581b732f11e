-- The engine's C files call each other in one direction only: no file
-- calls another that calls it back, directly or through others
-- (engine/internal.h lists them in their order); so do the files of each
-- binding (their private headers say in which).  Read from the objects
-- built next to the binary under test: a file depends on another when it
-- uses a symbol the other defines (nm), which is what the linker sees, so
-- no call is missed because of a macro or a header.

local fs = require("fs")
local proc = require("proc")

local KVENGINE = assert(os.getenv("KVENGINE_BIN"), "KVENGINE_BIN is set by the engine")
local OBJ = (KVENGINE:match("^(.*)/[^/]*$") or ".") .. "/obj/"

-- The object files under OBJ/dir, sorted; nil and why when there are none.
local function objects(dir)
  local names = fs.list(OBJ .. dir)
  if not names then return nil, "no objects next to the binary (" .. OBJ .. dir .. "): an installed engine" end
  local paths = {}
  for _, name in ipairs(names) do
    if name:match("%.o$") then paths[#paths + 1] = OBJ .. dir .. "/" .. name end
  end
  return paths
end

-- nm -A output -> {file = {defines = {sym = true}, uses = {sym = true}}}, by
-- the file's name without folder and ".o", and the names in the listing's
-- order (nm keeps the order of the files it was given, sorted here).
local function symbols(listing)
  local files, names = {}, {}
  for path, kind, sym in listing:gmatch("([^\n]-):%s*%x*%s+(%a)%s+(%S+)") do
    local name = path:match("([^/]*)%.o$")
    if not files[name] then
      files[name] = { defines = {}, uses = {} }
      names[#names + 1] = name
    end
    local f = files[name]
    if kind == "U" then f.uses[sym] = true else f.defines[sym] = true end
  end
  return files, names
end

-- {file = {other = the first symbol (by name) it uses from other}}.
local function dependencies(files)
  local definer = {}
  for name, f in pairs(files) do
    for sym in pairs(f.defines) do definer[sym] = name end
  end
  local deps = {}
  for name, f in pairs(files) do
    deps[name] = {}
    for sym in pairs(f.uses) do
      local other = definer[sym]
      if other and other ~= name and (not deps[name][other] or sym < deps[name][other]) then
        deps[name][other] = sym
      end
    end
  end
  return deps
end

-- The circle that closes when the last file of path calls `back`, one of
-- path's files: "a.c -> b.c (sym) -> a.c (sym)".
local function name_circle(deps, path, back)
  local first
  for i, p in ipairs(path) do
    if p == back then first = i end
  end
  local words = { back .. ".c" }
  for i = first, #path do
    local to = path[i + 1] or back
    words[#words + 1] = string.format("%s.c (%s)", to, deps[path[i]][to])
  end
  return table.concat(words, " -> ")
end

-- A circle of deps, named, or nil when there is none; files are visited in
-- the order of names, so the answer is stable.
local function find_cycle(deps, names)
  local state, path = {}, {}
  local function visit(name)
    state[name] = "open"
    path[#path + 1] = name
    for _, other in ipairs(names) do
      if deps[name][other] then
        if state[other] == "open" then return name_circle(deps, path, other) end
        if not state[other] then
          local cycle = visit(other)
          if cycle then return cycle end
        end
      end
    end
    path[#path] = nil
    state[name] = "done"
  end
  for _, name in ipairs(names) do
    if not state[name] then
      local cycle = visit(name)
      if cycle then return cycle end
    end
  end
end

-- The dependencies between the objects under OBJ/dir, and their names;
-- skips the test when there are none or nm cannot run.
local function read_objects(dir)
  local paths, why = objects(dir)
  if not paths then skip(why) end
  expect(#paths):gt(10, "the objects under " .. OBJ .. dir)
  local argv = { "nm", "-A", "-g" }
  for _, p in ipairs(paths) do argv[#argv + 1] = p end
  local status, out, err = proc.run { argv = argv, timeout = 30 }
  if not status then skip("nm cannot run: " .. tostring(out)) end
  expect(status):eq(0, "nm: " .. tostring(err))
  local files, names = symbols(out)
  return dependencies(files), names
end

test("no engine C file depends on one that depends on it, directly or through others", function()
  local deps, names = read_objects("engine")
  expect(deps.core and deps.core.task):eq("kv_task_abandon", "the reading sees core.c call task.c")
  local cycle = find_cycle(deps, names)
  if cycle then fail("the engine's C files call in a circle: " .. cycle) end
end)

test("no binding's C file depends on one that depends on it, directly or through others", function()
  local deps, names = read_objects("bindings")
  expect(deps.redis and deps.redis.redis_conn):not_nil("the reading sees redis.c call redis_conn.c")
  local cycle = find_cycle(deps, names)
  if cycle then fail("a binding's C files call in a circle: " .. cycle) end
end)

test("a circle is found and named, symbols and all", function()
  local listing = table.concat({
    "obj/engine/guard.o:0000000000000000 T kv_guard_start",
    "obj/engine/guard.o:                 U kv_task_abandon",
    "obj/engine/task.o:0000000000000010 T kv_task_abandon",
    "obj/engine/task.o:                 U kv_loop",
    "obj/engine/task.o:                 U kv_guard_start",
    "obj/engine/loop.o:0000000000000000 T kv_loop",
    "obj/engine/core.o:                 U kv_guard_start",
  }, "\n") .. "\n"
  local files, names = symbols(listing)
  local deps = dependencies(files)
  expect(find_cycle(deps, names)):eq("guard.c -> task.c (kv_task_abandon) -> guard.c (kv_guard_start)")
  deps.task.guard = nil
  expect(find_cycle(deps, names)):eq(nil, "one way only: no circle")
end)
