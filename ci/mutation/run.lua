-- ci/mutation/run.lua - `make mutation`: does the suite catch every broken
-- rule? Each mutant of ci/mutation/catalogue.lua breaks one rule of
-- docs/kthena.md in the stand-ins (or in the bindings they share); the
-- suite must fail on it.
--
--   kvengine serve ci/mutation/run.lua [-j N] [--check] [--list] [--keep] [NAME | RULE | PREFIX ...]
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
    elseif a:match("^%-") then die("unknown option " .. a .. " (-j N, --check, --list, --keep)")
    else o.picks[#o.picks + 1] = a end
    i = i + 1
  end
  if o.jobs < 1 then die("-j must be at least 1") end
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

-- ------------------------------------------------------------ the catalogue and the rules

local function read(path)
  local text, err = fs.read(path)
  if not text then die("cannot read " .. path .. ": " .. tostring(err)) end
  return text
end

-- The rule ids of docs/kthena.md's rule index (its "## Rule index"
-- section; other tables, such as the deviations between targets, are not
-- rules), in order.
local function doc_rules()
  local ids, seen, inside = {}, {}, false
  for line in read(ROOT .. "/docs/kthena.md"):gmatch("[^\n]+") do
    if line:match("^## ") then inside = line == "## Rule index" end
    local id = inside and line:match("^| ([A-Z]+%-%d+) |")
    if id and not seen[id] then ids[#ids + 1], seen[id] = id, true end
  end
  if #ids == 0 then die("docs/kthena.md has no rule index (rows starting with | KEY-1 | ...)") end
  return ids, seen
end

-- How many times `find` occurs in `text` (plain text, overlaps not counted).
local function occurrences(text, find)
  return select(2, text:gsub(find:gsub("%p", "%%%0"), ""))
end

local catalogue = dofile(HERE .. "/catalogue.lua")
local rules, is_rule = doc_rules()

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
    if type(m.kthena) ~= "string" or not m.kthena:match(":%d") then bad("kthena must name a file:line") end
    if type(m.find) ~= "string" or m.find == "" then bad("find must be the exact text to replace") end
    if type(m.replace) ~= "string" or m.replace == m.find then bad("replace must differ from find") end
    for _, t in ipairs(m.tests or {}) do
      if not io.open(ROOT .. "/" .. t) then bad("its test " .. t .. " does not exist") end
    end
    local text = type(m.file) == "string" and fs.read(ROOT .. "/" .. m.file)
    if not text then
      bad("file " .. tostring(m.file) .. " does not exist")
    elseif type(m.find) == "string" and m.find ~= "" then
      local n = occurrences(text, m.find)
      if n ~= 1 then
        stale[#stale + 1] = string.format("%s (%s): its find-text occurs %d times in %s, not once", m.name, m.rule,
          n, m.file)
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
-- folder, a temporary file) meets.
local function make_tree(name)
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
  return dir
end

local function build(dir)
  local code, out, err = run({ "make", "-s", "all" }, { cwd = dir, timeout = BUILD_TIMEOUT })
  if code ~= 0 then return nil, (out .. err):sub(-2000) end
  return true
end

local function needs_build(m) return m.file:match("%.[ch]$") or m.file:match("^engine/lua/") end

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

-- One kvengine run in tree `dir`: the TAP text.
local function kvengine(dir, args)
  local argv = { dir .. "/build/kvengine", "--tap", "--no-color" }
  table.move(args, 1, #args, #argv + 1, argv)
  local env = { KVENGINE_TARGET = false, KVENGINE_PATH = false, KVENGINE_ATTACH = false, TMPDIR = dir .. "/tmp" }
  local code, out, err = run(argv, { cwd = dir, timeout = RUN_TIMEOUT, env = env })
  if code == nil then out = out .. "\nnot ok 0 - (run): " .. tostring(err) end
  return out
end

local function rerun_fails(dir, file, name)
  local args = name == "(file)" and { file } or { "--filter", exact(name), file }
  return outcome(kvengine(dir, args), file, name) == false
end

-- The suite's files in the clean tree, in order.
local function suite_files(dir)
  local files = {}
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

local clean_dir
local clean_cache = {} -- "file\0name" -> task of a clean run, true when the test passed there

-- Does the test pass in the clean tree? One run per test, shared by workers.
local function passes_clean(file, name)
  local key = file .. "\0" .. name
  if not clean_cache[key] then
    clean_cache[key] = spawn(function()
      local args = name == "(file)" and { file } or { "--filter", exact(name), file }
      return outcome(kvengine(clean_dir, args), file, name) == true
    end)
  end
  return clean_cache[key]:wait()
end

-- Search the suite for a test that kills mutant m in tree dir; the result
-- {killed = {file, name, message} | nil, error =, runs =, seconds =}.
local function try_mutant(dir, m, files)
  local t0 = now()
  local result = { runs = 0 }
  local path = dir .. "/" .. m.file
  local original = fs.read(path)
  local s, e = original:find(m.find, 1, true)
  fs.write(path, original:sub(1, s - 1) .. m.replace .. original:sub(e + 1))
  local built, berr = true, nil
  if needs_build(m) then built, berr = build(dir) end
  if not built then
    result.error = "the mutant does not build: " .. berr
  else
    local order, seen = {}, {}
    for _, f in ipairs(m.tests or {}) do order[#order + 1], seen[f] = f, true end
    for _, f in ipairs(files) do
      if not seen[f] then order[#order + 1] = f end
    end
    for _, f in ipairs(order) do
      local out = kvengine(dir, { "--fail-fast", f })
      result.runs = result.runs + 1
      local file, name, message = first_failure(out)
      if file then
        local confirmed = true
        for _ = 1, CONFIRMATIONS do
          result.runs = result.runs + 1
          if not rerun_fails(dir, file, name) then confirmed = false break end
        end
        if confirmed and passes_clean(file, name) then
          result.killed = { file = file, name = name, message = message }
          break
        end
        result.flaky = (result.flaky and result.flaky .. "; " or "") .. file .. ": " .. name
      end
    end
  end
  fs.write(path, original)
  if needs_build(m) then
    local ok, err = build(dir)
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
  if r.error then return "ERROR: " .. r.error:gsub("\n", " "):sub(1, 200) end
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
if opts.list then
  for _, m in ipairs(catalogue) do say("%-34s %-9s %-40s %s", m.name, m.rule, m.file, m.kthena) end
end
for _, p in ipairs(problems) do say("catalogue: %s", p) end
for _, st in ipairs(stale) do say("STALE: %s", st) end
if #problems > 0 or #stale > 0 then
  say("mutation: %d catalogue problems, %d stale mutants: fix the catalogue (ci/mutation/catalogue.lua)", #problems,
    #stale)
  os.exit(1)
end
local list = selected()
say("mutation: %d mutants of %d (%d rules), %d at a time; find-texts current", #list, #catalogue, #rules, opts.jobs)
if opts.check or opts.list then os.exit(0) end

PARENT = fs.tmpdir()
clean_dir = make_tree("clean")
local files = suite_files(clean_dir)
say("mutation: the suite is %d files; the clean tree and %d for mutants in %s", #files, math.min(opts.jobs, #list),
  PARENT)

local results, next_i, done = {}, 1, 0
local function worker(w)
  local dir = make_tree("mutants-" .. w)
  while next_i <= #list do
    local m = list[next_i]
    next_i = next_i + 1
    local r = try_mutant(dir, m, files)
    results[m.name] = r
    done = done + 1
    say("[%d/%d] %s (%s): %s (%d runs, %.1fs)%s", done, #list, m.name, m.rule, verdict(r), r.runs, r.seconds,
      r.killed and r.killed.message ~= "" and ("\n        " .. r.killed.message:sub(1, 240)) or "")
  end
end
local workers = {}
for w = 1, math.min(opts.jobs, #list) do workers[w] = spawn(worker, w) end
for _, w in ipairs(workers) do w:wait() end

say("")
table_report(list, results)
local killed, survived, errors = 0, 0, 0
for _, m in ipairs(list) do
  local r = results[m.name]
  if r.error then errors = errors + 1 elseif r.killed then killed = killed + 1 else survived = survived + 1 end
end
say("")
say("killed %d of %d mutants (%.0f%%); %d survived, %d errors; wall time %.0fs (%dm%02ds)", killed, #list,
  100 * killed / #list, survived, errors, now() - t_start, math.floor((now() - t_start) / 60),
  math.floor(now() - t_start) % 60)
if opts.keep then say("trees kept in %s", PARENT) else fs.remove_tree(PARENT) end
os.exit((survived == 0 and errors == 0) and 0 or 1)
