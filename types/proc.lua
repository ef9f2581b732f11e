---@meta proc
-- `local proc = require("proc")`: child processes under a supervisor that owns their
-- process group (bindings/proc.c; docs/api-modules.md). No shell: argv arrays only.
-- Option classes are checked against proc.options.

---The options of proc.spawn.
---@class proc.options.spawn
---@field argv string[]  the program (found on PATH) and its arguments
---@field env? table<string, string|false>  merged onto the engine's; false removes one
---@field env_clear? boolean  start from an empty environment
---@field cwd? string
---@field log? string  append the child's stdout and stderr to this file

---The options of proc.run.
---@class proc.options.run
---@field argv string[]
---@field env? table<string, string|false>
---@field env_clear? boolean
---@field cwd? string
---@field input? string  written to the child's stdin
---@field timeout? number  seconds; default 60 times engine.time_scale(); 0 polls

---The options of p:wait (engine.h's timeout rule).
---@class proc.options.wait
---@field timeout? number  seconds; default 60 times engine.time_scale(); 0 polls

---A running (or finished) child.
---@class Process
local Process = {}

---@return integer
function Process:pid() end

---@return integer
function Process:pgid() end

---@return boolean
function Process:running() end

---Signal the whole process group.
---@param signal? string|integer  "TERM" (default), "KILL", "INT", ...
---@return true?, string?
function Process:kill(signal) end

---The exit code, or nil, "signal", signum, or nil, "timeout".
---@param opts? proc.options.wait
---@return integer?, string?, integer?
function Process:wait(opts) end

---SIGTERM, then SIGKILL after a grace period, when it still runs.
function Process:close() end

---@class proc
---@field options {spawn: string[], run: string[], wait: string[]}  the keys the option checks take
local proc = {}

---@param opts proc.options.spawn
---@return Process?, string?  p | nil, "proc: ..."
function proc.spawn(opts) end

---Run to the end: code, stdout, stderr; or nil, "signal", stdout, stderr, signum; or
---nil, "timeout", stdout, stderr; or nil, err when the program cannot start.
---@param opts proc.options.run
---@return integer?, string?, string?, string|integer?
function proc.run(opts) end

return proc
