-- ci/mutation/run.lua - `make mutation`: does the suite catch every broken
-- rule? Each mutant of ci/mutation/catalogue.lua breaks one rule of
-- docs/kthena.md in the stand-ins (or in the bindings they share); the
-- suite must fail on it. With --target kthena (`make mutation TARGET=kthena
-- KTHENA_DIR=<checkout>`) the mutants are those of ci/mutation/kthena.lua,
-- each one line of a copy of Kthena's own router source, built through
-- KTHENA_DIR and killed by its scenarios on the kthena target.
--
--   kvengine serve ci/mutation/run.lua [--target kthena] [-j N] [--check] [--list] [--keep] [NAME | RULE | PREFIX ...]
--
-- Run from the repository root, after `make all`. Every mutant's find-text
-- must occur exactly once in its file (else it is stale, and the run
-- fails), and every rule id of the doc's rule index must have a mutant.
-- Arguments pick mutants by name, rule id (FILTER-1) or rule family
-- (FILTER); none picks all. --check stops after those checks, --list
-- prints the catalogue, --keep leaves the temporary trees.
--
-- How: the working tree (git ls-files, uncommitted edits included) and the
-- build are copied into temporary trees: one stays clean, N (-j, default
-- 2) take mutants one at a time. A mutant is applied as exact text, its
-- tree rebuilt when it touches C (make all there: only what changed), and
-- the suite's files run one by one, the mutant's own `tests` first, each
-- stopping at its first failure. A failing test kills the mutant only when
-- it fails again in two more runs of that test alone (3 runs of 3) and
-- passes in the clean tree: no kill by a flake or by timing. The file is
-- then restored. A table of every mutant, its rule, the Kthena source it
-- mirrors and the test that killed it (or SURVIVED) follows, with the kill
-- ratio and the wall time; the run fails on any survivor, stale or broken
-- entry.
--
-- The kthena target differs where Kthena's source does: the clean tree is
-- the checkout (KTHENA_DIR) built as it is; each worker mutates a copy of
-- it and rebuilds its harness (ci/kthena/build.sh, KTHENA_OUT in the
-- worker's folder); only the mutant's own `tests` are run, on the kthena
-- target, with the project's runtime unless KTHENA_RUNTIME says otherwise.
-- A mutant whose line is no longer found once in the checkout is reported
-- STALE (the others still run); one that `needs` a capability the kthena
-- driver declares absent is reported as not runnable on this build.

local fs = require("fs")
local proc = require("proc")

io.stdout:setvbuf("line")

local SUITE = { "scenarios", "fixtures/tests" }
local SUITE_FILES = { "bindings/tests/kv.lua", "bindings/tests/kv_interop.lua" }
local RUN_TIMEOUT = 600   -- seconds for one kvengine run
local BUILD_TIMEOUT = 600
local CONFIRMATIONS = 2   -- runs of the killing test alone, after the one that found it

local t_start = now()

local function say(fmt, ...) io.stdout:write(string.format(fmt, ...), "\n") end

local function die(msg)
  io.stderr:write("mutation: ", msg, "\n")
  os.exit(2)
end

-- ------------------------------------------------------------ arguments

local function parse_args(argv)
  local o = { jobs = 2, picks = {} }
  local i = 1
  while argv[i] do
    local a = argv[i]
    if a == "-j" or a == "--jobs" then
      o.jobs = math.tointeger(tonumber(argv[i + 1] or "")) or die("-j needs a number")
      i = i + 1
    elseif a:match("^%-j%d+$") then
      o.jobs = math.tointeger(tonumber(a:sub(3)))
    elseif a == "--check" then o.check = true
    elseif a == "--list" then o.list = true
    elseif a == "--keep" then o.keep = true
    elseif a == "--target" then
      o.target = argv[i + 1] or die("--target needs a name: local or kthena")
      i = i + 1
    elseif a:match("^%-") then die("unknown option " .. a .. " (--target T, -j N, --check, --list, --keep)")
    else o.picks[#o.picks + 1] = a end
    i = i + 1
  end
  if o.jobs < 1 then die("-j must be at least 1") end
  o.target = o.target or "local"
  if o.target ~= "local" and o.target ~= "kthena" then die("--target " .. o.target .. ": local or kthena") end
  return o
end

local opts = parse_args({ table.unpack(arg, 1) })

local function run(argv, o)
  o = o or {}
  local code, out, err = proc.run { argv = argv, cwd = o.cwd, timeout = o.timeout, env = o.env }
  return code, out or "", err or ""
end

local ROOT = select(2, run({ "pwd" })):gsub("%s+$", "")
local HERE = ROOT .. "/ci/mutation"
local KTHENA = opts.target == "kthena"
local KTHENA_DIR = os.getenv("KTHENA_DIR") or ""
local KTHENA_RUNTIME = os.getenv("KTHENA_RUNTIME") or ""
if KTHENA_RUNTIME == "" then KTHENA_RUNTIME = "local" end
if KTHENA then
  if KTHENA_DIR == "" then die("--target kthena mutates a Kthena checkout: set KTHENA_DIR=<checkout>") end
  KTHENA_DIR = select(2, run({ "sh", "-c", 'cd "$0" && pwd', KTHENA_DIR })):gsub("%s+$", "")
  if not fs.read(KTHENA_DIR .. "/go.mod") then die("KTHENA_DIR=" .. KTHENA_DIR .. " has no go.mod: give a Kthena checkout") end
end

-- ------------------------------------------------------------ the catalogue and the rules

local function read(path)
  local text, err = fs.read(path)
  if not text then die("cannot read " .. path .. ": " .. tostring(err)) end
  return text
end

-- The rule ids of docs/kthena.md's rule index (its "## Rule index"
-- section; other tables, such as the deviations between targets, are not
-- rules), in order; for the kthena target only the rules whose Kthena
-- source names a Go file (the others live in the Python runtime).
local function doc_rules()
  local ids, seen, inside = {}, {}, false
  for line in read(ROOT .. "/docs/kthena.md"):gmatch("[^\n]+") do
    if line:match("^## ") then inside = line == "## Rule index" end
    local id = inside and line:match("^| ([A-Z]+%-%d+) |")
    local source = id and line:match("|([^|]*)|%s*$") or ""
    if id and not seen[id] and (not KTHENA or source:find("%.go:")) then ids[#ids + 1], seen[id] = id, true end
  end
  if #ids == 0 then die("docs/kthena.md has no rule index (rows starting with | KEY-1 | ...)") end
  return ids, seen
end

-- How many times `find` occurs in `text` (plain text, overlaps not counted).
local function occurrences(text, find)
  return select(2, text:gsub(find:gsub("%p", "%%%0"), ""))
end

local catalogue = dofile(HERE .. (KTHENA and "/kthena.lua" or "/catalogue.lua"))
local rules, is_rule = doc_rules()
local SOURCE_ROOT = KTHENA and KTHENA_DIR or ROOT -- where a mutant's file is

-- The capabilities the kthena driver lacks: name -> why (its reason, or
-- that it does not declare the capability at all).
local function absent_capabilities()
  if not KTHENA then return {} end
  local ok, driver = pcall(require, "targets.kthena")
  if not ok then die("cannot load the kthena driver: " .. tostring(driver)) end
  return setmetatable({}, { __index = function(_, name)
    local v = driver.capabilities[name]
    if v == nil then return "the kthena driver does not declare it" end
    if v ~= true then return type(v) == "string" and v or "declared absent" end
  end })
end
local absent = absent_capabilities()

-- Every entry well formed and current: problems as lines; stale ones apart.
local function check_catalogue()
  local problems, stale, names, covered = {}, {}, {}, {}
  for i, m in ipairs(catalogue) do
    local where = string.format("catalogue entry %d (%s)", i, tostring(m.name))
    local function bad(msg) problems[#problems + 1] = where .. ": " .. msg end
    if type(m.name) ~= "string" or not m.name:match("^[a-z0-9][a-z0-9-]*$") then bad("name must be lowercase words with -") end
    if names[m.name] then bad("a second mutant with this name") end
    names[m.name] = true
    if not is_rule[m.rule] then bad("rule " .. tostring(m.rule) .. " is not in docs/kthena.md's rule index") end
    covered[m.rule] = true
    if KTHENA then
      m.kthena = m.kthena or m.file
      if type(m.find) == "string" and m.find:find("\n") then bad("find must be one line of Kthena's source") end
      if type(m.replace) == "string" and m.replace:find("\n") then bad("replace must be one line") end
      if type(m.tests) ~= "table" or #m.tests == 0 then bad("tests must name the scenarios that kill it") end
      if m.filter ~= nil and type(m.filter) ~= "string" then bad("filter must be a test-name pattern") end
      for _, c in ipairs(m.needs or {}) do
        if type(c) ~= "string" then bad("needs lists capability names") end
      end
    end
    if not KTHENA and (type(m.kthena) ~= "string" or not m.kthena:match(":%d")) then
      bad("kthena must name a file:line")
    end
    if type(m.find) ~= "string" or m.find == "" then bad("find must be the exact text to replace") end
    if type(m.replace) ~= "string" or m.replace == m.find then bad("replace must differ from find") end
    for _, t in ipairs(m.tests or {}) do
      if not io.open(ROOT .. "/" .. t) then bad("its test " .. t .. " does not exist") end
    end
    local text = type(m.file) == "string" and fs.read(SOURCE_ROOT .. "/" .. m.file)
    if not text and not KTHENA then
      bad("file " .. tostring(m.file) .. " does not exist")
    elseif type(m.find) == "string" and m.find ~= "" then
      local n = text and occurrences(text, m.find) or 0
      if n ~= 1 then
        m.stale = string.format("its line occurs %d times in %s, not once", n, text and m.file or
          (tostring(m.file) .. " (no such file)"))
        stale[#stale + 1] = string.format("%s (%s): %s", m.name, m.rule, m.stale)
      end
    end
  end
  for _, id in ipairs(rules) do
    if not covered[id] then problems[#problems + 1] = "rule " .. id .. " of docs/kthena.md has no mutant" end
  end
  return problems, stale
end

-- The mutants the arguments pick: by name, rule id or rule family.
local function selected()
  if #opts.picks == 0 then return catalogue end
  local out = {}
  for _, m in ipairs(catalogue) do
    for _, p in ipairs(opts.picks) do
      if m.name == p or m.rule == p or m.rule:match("^(%u+)%-") == p then
        out[#out + 1] = m
        break
      end
    end
  end
  if #out == 0 then die("no mutant matches " .. table.concat(opts.picks, " ")) end
  return out
end

-- ------------------------------------------------------------ trees

local PARENT -- every tree, under one folder

-- A copy of the working tree (tracked and untracked files, not ignored
-- ones) and of its build, as PARENT/<name>, with a tmp/ of its own: its
-- runs get it as TMPDIR, so that nothing two trees run at once (a lock
-- folder, a temporary file) meets. A tree is {dir =}.
local function make_project_tree(name)
  local dir = fs.mkdir_p(PARENT .. "/" .. name)
  fs.mkdir_p(dir .. "/tmp")
  local code, out, err = run({ "git", "ls-files", "-co", "--exclude-standard", "-z" }, { cwd = ROOT })
  if code ~= 0 then die("git ls-files failed: " .. err) end
  local files = { "cp", "-a", "--parents" }
  for f in out:gmatch("[^%z]+") do
    local h = io.open(ROOT .. "/" .. f)
    if h then
      h:close()
      files[#files + 1] = f
    end
  end
  files[#files + 1] = dir
  code, _, err = run(files, { cwd = ROOT })
  if code ~= 0 then die("copying the tree failed: " .. err) end
  code, _, err = run({ "cp", "-a", ROOT .. "/build", dir .. "/build" })
  if code ~= 0 then die("copying build/ failed (run make first): " .. err) end
  return { dir = dir }
end

-- The kthena target's tree: {dir =, src = the Kthena source, out = its
-- build (KTHENA_OUT)}. The clean one builds the checkout as it is; a
-- worker's mutates a copy of it (.git left out).
local function make_kthena_tree(name)
  local dir = fs.mkdir_p(PARENT .. "/" .. name)
  fs.mkdir_p(dir .. "/tmp")
  local tree = { dir = dir, src = KTHENA_DIR, out = dir .. "/out" }
  if name ~= "clean" then
    tree.src = fs.mkdir_p(dir .. "/kthena")
    local code, _, err = run({ "sh", "-c", 'tar -C "$0" --exclude=./.git -cf - . | tar -C "$1" -xf -', KTHENA_DIR,
      tree.src })
    if code ~= 0 then die("copying " .. KTHENA_DIR .. " failed: " .. err) end
  end
  return tree
end

local function make_tree(name) return (KTHENA and make_kthena_tree or make_project_tree)(name) end

local function build(tree)
  local argv, env = { "make", "-s", "all" }, nil
  if KTHENA then
    argv = { "sh", ROOT .. "/ci/kthena/build.sh" }
    env = { KTHENA_DIR = tree.src, KTHENA_OUT = tree.out, KTHENA_RUNTIME = KTHENA_RUNTIME, KTHENA_VERSION = false }
  end
  local code, out, err = run(argv, { cwd = tree.dir, timeout = BUILD_TIMEOUT, env = env })
  if code ~= 0 then return nil, (out .. err):sub(-2000) end
  return true
end

local function needs_build(m) return KTHENA or m.file:match("%.[ch]$") or m.file:match("^engine/lua/") end

-- ------------------------------------------------------------ running tests


-- A Lua pattern matching exactly `name` (as the runner's --filter takes it).
local function exact(name)
  return "^" .. name:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0") .. "$"
end

-- One TAP result line: passed (a known gap holding counts as passed: TODO),
-- file, name; nil for any other line. Names escape "#" and "\\".
local function tap_line(line)
  local neg, rest = line:match("^(n?o?t? ?)ok %d+ %- (.*)$")
  if not rest then return nil end
  local body, directive = rest:match("^(.-) # (.*)$")
  body = body or rest
  local file, name = body:match("^(.-): (.*)$")
  if not file then return nil end
  return neg == "" or (directive or ""):match("^TODO") ~= nil, file, (name:gsub("\\(.)", "%1"))
end

-- The first failing test of a TAP report: file, name, message; or nil.
local function first_failure(out)
  local file, name, message
  for line in out:gmatch("[^\n]+") do
    if not file then
      local passed, f, n = tap_line(line)
      if passed == false then file, name = f, n end
    elseif not message then
      message = line:match('^  message: "(.*)"$')
      if line:match("^  %.%.%.$") then break end
    end
  end
  if file then return file, name, message or "" end
end

-- Did `name` of `file` pass (true), fail (false), or not run (nil)?
local function outcome(out, file, name)
  for line in out:gmatch("[^\n]+") do
    local passed, f, n = tap_line(line)
    if f == file and n == name then return passed end
  end
end

-- One kvengine run in `tree`: the TAP text. On the kthena target the
-- project's own engine runs the scenarios against the tree's build.
local function kvengine(tree, args)
  local dir = tree.dir
  local argv = { dir .. "/build/kvengine", "--tap", "--no-color" }
  local env = { KVENGINE_TARGET = false, KVENGINE_PATH = false, KVENGINE_ATTACH = false, TMPDIR = dir .. "/tmp" }
  if KTHENA then
    argv = { ROOT .. "/build/kvengine", "--tap", "--no-color", "--target", "kthena", "--artifacts",
      dir .. "/artifacts" }
    env.KVENGINE_KTHENA_BIN, env.KTHENA_DIR, env.KTHENA_RUNTIME = tree.out, tree.src, KTHENA_RUNTIME
    dir = ROOT
  end
  table.move(args, 1, #args, #argv + 1, argv)
  local code, out, err = run(argv, { cwd = dir, timeout = RUN_TIMEOUT, env = env })
  if code == nil then out = out .. "\nnot ok 0 - (run): " .. tostring(err) end
  return out
end

local function rerun_fails(tree, file, name)
  local args = name == "(file)" and { file } or { "--filter", exact(name), file }
  return outcome(kvengine(tree, args), file, name) == false
end

-- The suite's files in the clean tree, in order (on the kthena target a
-- mutant runs its own tests only).
local function suite_files(dir)
  local files = {}
  if KTHENA then return files end
  for _, folder in ipairs(SUITE) do
    local code, out = run({ "find", folder, "-maxdepth", "1", "-name", "*.lua", "-type", "f" }, { cwd = dir })
    local list = {}
    if code == 0 then for f in out:gmatch("[^\n]+") do list[#list + 1] = f end end
    table.sort(list)
    table.move(list, 1, #list, #files + 1, files)
  end
  for _, f in ipairs(SUITE_FILES) do
    if io.open(dir .. "/" .. f) then files[#files + 1] = f end
  end
  return files
end

-- ------------------------------------------------------------ one mutant

local clean_tree
local clean_cache = {} -- "file\0name" -> task of a clean run, true when the test passed there

-- Does the test pass in the clean tree? One run per test, shared by workers.
local function passes_clean(file, name)
  local key = file .. "\0" .. name
  if not clean_cache[key] then
    clean_cache[key] = spawn(function()
      local args = name == "(file)" and { file } or { "--filter", exact(name), file }
      return outcome(kvengine(clean_tree, args), file, name) == true
    end)
  end
  return clean_cache[key]:wait()
end

-- The capability mutant m needs that the target lacks, as words; or nil.
local function missing_capability(m)
  for _, c in ipairs(m.needs or {}) do
    if absent[c] then return string.format("capability %s absent (%s)", c, absent[c]) end
  end
end

-- Search the suite for a test that kills mutant m in `tree`; the result
-- {killed = {file, name, message} | nil, error =, runs =, seconds =}.
local function try_mutant(tree, m, files)
  local t0 = now()
  local result = { runs = 0 }
  local path = (tree.src or tree.dir) .. "/" .. m.file
  local original = fs.read(path)
  local s, e = original:find(m.find, 1, true)
  fs.write(path, original:sub(1, s - 1) .. m.replace .. original:sub(e + 1))
  local built, berr = true, nil
  if needs_build(m) then built, berr = build(tree) end
  if not built then
    result.error = "the mutant does not build: " .. berr
  else
    local order, seen = {}, {}
    for _, f in ipairs(m.tests or {}) do order[#order + 1], seen[f] = f, true end
    for _, f in ipairs(files) do
      if not seen[f] then order[#order + 1] = f end
    end
    for _, f in ipairs(order) do
      local args = m.filter and seen[f] and { "--fail-fast", "--filter", m.filter, f } or { "--fail-fast", f }
      local out = kvengine(tree, args)
      result.runs = result.runs + 1
      local file, name, message = first_failure(out)
      if file then
        local confirmed = true
        for _ = 1, CONFIRMATIONS do
          result.runs = result.runs + 1
          if not rerun_fails(tree, file, name) then confirmed = false break end
        end
        if confirmed and passes_clean(file, name) then
          result.killed = { file = file, name = name, message = message }
          break
        end
        result.flaky = (result.flaky and result.flaky .. "; " or "") .. file .. ": " .. name
          .. (confirmed and " [fails against the clean tree too]" or " [passed in a rerun]")
      end
    end
  end
  fs.write(path, original)
  if needs_build(m) and not KTHENA then -- a kthena tree is rebuilt by its next mutant
    local ok, err = build(tree)
    if not ok then result.error = (result.error and result.error .. "; " or "") .. "restoring: " .. err end
  end
  result.seconds = now() - t0
  return result
end

-- ------------------------------------------------------------ report

local function pad(s, n)
  s = tostring(s)
  return #s >= n and s or s .. string.rep(" ", n - #s)
end

local function verdict(r)
  if r.stale then return "STALE: " .. r.stale end
  if r.absent then return "not runnable on this build: " .. r.absent end
  if r.error then
    local e = r.error:gsub("\n", " ")
    return "ERROR: " .. (#e > 300 and (e:sub(1, 60) .. " ... " .. e:sub(-240)) or e)
  end
  if r.killed then return string.format("%s: %s", r.killed.file, r.killed.name) end
  return "SURVIVED" .. (r.flaky and (" (failed only by flakes: " .. r.flaky .. ")") or "")
end

local function table_report(list, results)
  local wn, wr, wk = 6, 4, 14
  for _, m in ipairs(list) do
    wn, wr, wk = math.max(wn, #m.name), math.max(wr, #m.rule), math.max(wk, #m.kthena)
  end
  say("%s  %s  %s  %s", pad("mutant", wn), pad("rule", wr), pad("Kthena source", wk), "killed by")
  for _, m in ipairs(list) do
    say("%s  %s  %s  %s", pad(m.name, wn), pad(m.rule, wr), pad(m.kthena, wk), verdict(results[m.name]))
  end
end

-- ------------------------------------------------------------ main

local problems, stale = check_catalogue()
local catalogue_file = KTHENA and "ci/mutation/kthena.lua" or "ci/mutation/catalogue.lua"
if opts.list then
  for _, m in ipairs(catalogue) do say("%-34s %-9s %-40s %s", m.name, m.rule, m.file, KTHENA and "" or m.kthena) end
end
for _, p in ipairs(problems) do say("catalogue: %s", p) end
for _, st in ipairs(stale) do say("STALE: %s", st) end
-- A stale mutant of the stand-ins is the project's own error; one of a
-- Kthena checkout is Kthena's code having moved: reported, the rest run.
if #problems > 0 or (#stale > 0 and (not KTHENA or opts.check)) then
  say("mutation: %d catalogue problems, %d stale mutants: fix the catalogue (%s)", #problems, #stale, catalogue_file)
  os.exit(1)
end
local list = selected()
say("mutation: %d mutants of %d (%d rules%s), %d at a time; %d stale", #list, #catalogue, #rules,
  KTHENA and (" in Kthena's Go code, checkout " .. KTHENA_DIR .. ", runtime " .. KTHENA_RUNTIME) or "", opts.jobs,
  #stale)
if opts.check or opts.list then os.exit(0) end

local results, next_i, done = {}, 1, 0
local function report(m, r)
  results[m.name] = r
  done = done + 1
  say("[%d/%d] %s (%s): %s (%d runs, %.1fs)%s", done, #list, m.name, m.rule, verdict(r), r.runs, r.seconds,
    r.killed and r.killed.message ~= "" and ("\n        " .. r.killed.message:sub(1, 240)) or "")
end
local runnable = {}
for _, m in ipairs(list) do
  local why = missing_capability(m)
  if m.stale then report(m, { stale = m.stale, runs = 0, seconds = 0 })
  elseif why then report(m, { absent = why, runs = 0, seconds = 0 })
  else runnable[#runnable + 1] = m end
end

PARENT = fs.tmpdir()
clean_tree = make_tree("clean")
if KTHENA and #runnable > 0 then
  local ok, err = build(clean_tree)
  if not ok then die("the clean checkout does not build:\n" .. err) end
end
local files = suite_files(clean_tree.dir)
say("mutation: the suite is %s; the clean tree and %d for mutants in %s",
  KTHENA and "each mutant's own tests on the kthena target" or (#files .. " files"), math.min(opts.jobs, #runnable),
  PARENT)
local function worker(w)
  local tree = make_tree("mutants-" .. w)
  while next_i <= #runnable do
    local m = runnable[next_i]
    next_i = next_i + 1
    report(m, try_mutant(tree, m, files))
  end
end
local workers = {}
for w = 1, math.min(opts.jobs, #runnable) do workers[w] = spawn(worker, w) end
for _, w in ipairs(workers) do w:wait() end

say("")
table_report(list, results)
local killed, survived, errors, stales, absents = 0, 0, 0, 0, 0
for _, m in ipairs(list) do
  local r = results[m.name]
  if r.stale then stales = stales + 1
  elseif r.absent then absents = absents + 1
  elseif r.error then errors = errors + 1
  elseif r.killed then killed = killed + 1
  else survived = survived + 1 end
end
say("")
say("killed %d of %d mutants (%.0f%%); %d survived, %d errors, %d stale, %d not runnable on this build; "
  .. "wall time %.0fs (%dm%02ds)", killed, #list - absents, 100 * killed / math.max(#list - absents, 1), survived,
  errors, stales, absents, now() - t_start, math.floor((now() - t_start) / 60), math.floor(now() - t_start) % 60)
if opts.keep then say("trees kept in %s", PARENT) else fs.remove_tree(PARENT) end
os.exit((survived == 0 and errors == 0 and stales == 0) and 0 or 1)
