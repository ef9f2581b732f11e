---@meta engine
-- `local engine = require("engine")`: what fixture libraries need from the engine beyond
-- the test API (engine/lua/engine.lua; docs/api.md). The option classes here type the
-- test API's option tables; their fields are checked against engine.options.

---The options of test(name, opts, fn).
---@class engine.options.test
---@field timeout? number  seconds; default --timeout (30)
---@field tags? string[]
---@field skip? string  skip the test, with this reason
---@field known_gap? engine.options.known_gap|string  expected to fail as documented (a string: the reason)

---A known_gap mark: what upstream gets wrong (docs/api.md, "Known gaps").
---@class engine.options.known_gap
---@field reason string  what upstream does and why the test fails (its first clause is the console's line)
---@field link? string  the issue or code that tracks it
---@field match? string  Lua pattern the failure message must match to be the gap
---@field targets? string[]  the mark applies only on these targets
---@field versions? table<string, string>  component -> "<=v1.0.0" | "<v1.1.0" | ">=v0.9" | ">v1.0.0" | "=v1.0.0"

---The options of eventually(fn, opts).
---@class engine.options.eventually
---@field timeout? number  seconds; default 5 times engine.time_scale()
---@field interval? number  seconds between tries; default 0.05

---A test's scope, or the file's: what its tasks open is closed when it ends.
---@class EngineScope
local EngineScope = {}

---@return boolean  whether its test (or file) still runs
function EngineScope:open() end

---Run fn when the scope ends (a test's after its after_each hooks, however it ended; the
---file's after after_all), newest first, each guarded.
---@param fn fun()
function EngineScope:defer(fn) end

---@class engine
---@field options {test: string[], eventually: string[], known_gap: string[], command: string[]}  the keys the test API's and engine.command's checks take
local engine = {}

---@return EngineScope  the caller's scope: its test's, or the file's
function engine.scope() end

---A task in that scope: what fn opens lives as long as the scope, not the calling test.
---@param scope EngineScope
---@param fn function
---@param ... any
---@return Task
function engine.spawn_in(scope, fn, ...) end

---Run fn when the caller's scope ends: engine.scope():defer(fn).
---@param fn fun()
function engine.defer(fn) end

---Raise when t has a key not in keys, naming fname, the key and the closest valid one;
---returns t (nil passes).
---@generic T: table?
---@param fname string  the function whose options these are, for the message
---@param t T
---@param keys string[]|table<string, boolean>
---@param level? integer  as in error(); default 2, the caller of fname
---@return T
function engine.check_options(fname, t, keys, level) end

---The bindings' one timeout rule, for a library's own waits: opts.timeout in seconds
---(0 polls); nil gives default times engine.time_scale(), or nil without a default.
---Raises, naming fname, on a bare number, a negative or a non-number timeout.
---@param fname string  the function whose options these are, for the message
---@param opts? {timeout?: number}
---@param default? number  seconds, before the time scale
---@return number?
function engine.timeout(fname, opts, default) end

---Mark the calling file as a helper: failures raised through it point at the scenario
---line that called it.
function engine.helper() end

---@return string  the running test's artifacts folder (created); outside a test, the file's
function engine.artifacts_dir() end

---@return string  the running test's name ("" outside a test)
function engine.test_name() end

---@return string  the scenario file this worker runs ("" outside one)
function engine.file_name() end

---The process's open-file limits; the engine raised the soft one to the hard one at start.
---@return integer soft
---@return integer hard
function engine.fd_limits() end

---The factor for default waits on slow machines (KVENGINE_TIME_SCALE, default 1).
---@return number
function engine.time_scale() end

---@return string?  the run's target: --target / KVENGINE_TARGET, else the declared one
function engine.target() end

---When the run names no target, the fixture layer says which one it picked.
---@param name string
function engine.declare_target(name) end

---Structured data for the reports, kept with the running test (outside a test, with the
---file) and the scenario line that led to the call; the HTML report draws the kinds a
---fixture library registered a drawer for (engine.drawer), the other reports ignore
---them. Raises on a bad kind, or data JSON cannot carry or over 256 KiB of it.
---@param kind string  letters, digits, _ and -
---@param data table
function engine.report(kind, data) end

---A command of `kvengine` a fixture library adds, from its kvengine_plugins.lua:
---`kvengine NAME ARG...` runs the module `script` (found on the module path) as
---`kvengine serve` would; --help lists it.
---@class engine.options.command
---@field name string  a-z, 0-9, _ and -; not serve or version
---@field usage string  its arguments, as --help shows them after "kvengine NAME"
---@field summary string  what it does, one or two sentences
---@field script string  the module to run, e.g. "up" for fixtures/up.lua

---Register a command (from a kvengine_plugins.lua; the first registration of a name
---on the module path stands).
---@param spec engine.options.command
function engine.command(spec) end

---Register the module that draws reports of `kind` in the HTML page: it returns
---{draw = function(report) -> html, lead? = boolean, style? = css}, is pure (the parent
---requires it) and draws with require("report_svg").
---@param kind string  letters, digits, _ and -
---@param module string  a module name on the module path, e.g. "kvcache.report_route"
function engine.drawer(kind, module) end

---The version of a component this worker's stack runs, for known_gap.versions.
---@param component string
---@param version string  "v1.0.0", a pre-release or pseudo-version, or "main"
function engine.declare_version(component, version) end

return engine
