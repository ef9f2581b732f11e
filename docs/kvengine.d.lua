---@meta
-- Type annotations for kvengine scenarios, for editors with the Lua language
-- server (LuaLS): add this folder to "Lua.workspace.library" in .luarc.json.
-- Nothing here runs; the engine provides these names.

---Any other key fails the file at the test's line, naming the closest valid one.
---@class TestOptions
---@field timeout? number  seconds; default --timeout (30)
---@field tags? string[]
---@field skip? string  skip the test, with this reason
---@field known_gap? KnownGap|string  expected to fail as documented (a string: the reason)

---What upstream gets wrong; see docs/api.md, "Known gaps".
---@class KnownGap
---@field reason string  what upstream does and why the test fails (its first clause is the console's line)
---@field link? string  the issue or code that tracks it
---@field match? string  Lua pattern the failure message must match to be the gap
---@field targets? string[]  the mark applies only on these targets
---@field versions? table<string, string>  component -> "<=v1.0.0" | "<v1.1.0" | ">=v0.9" | ">v1.0.0" | "=v1.0.0"

---Register a test.
---@param name string
---@param opts_or_fn TestOptions|fun()
---@param fn? fun()
function test(name, opts_or_fn, fn) end

---@param fn fun()
function before_all(fn) end
---@param fn fun()
function after_all(fn) end
---@param fn fun()
function before_each(fn) end
---@param fn fun()
function after_each(fn) end

---Run fn(test_name, artifacts_dir) when a test fails or times out, before cleanup.
---@param fn fun(test_name: string, artifacts_dir: string)
function on_failure(fn) end

---Stop the test (or, at a file's top level, the file) and report it skipped.
---@param reason string
function skip(reason) end

---Fail the test with this message.
---@param message string
function fail(message) end

---Fail because the test's infrastructure would not start (exit status 3).
---@param message string
function infra_error(message) end

---@class Expectation
local Expectation = {}
---@param expected any
---@param message? string
---@return Expectation
function Expectation:eq(expected, message) end
---@return Expectation
function Expectation:ne(unexpected, message) end
---@return Expectation
function Expectation:gt(bound, message) end
---@return Expectation
function Expectation:ge(bound, message) end
---@return Expectation
function Expectation:lt(bound, message) end
---@return Expectation
function Expectation:le(bound, message) end
---@param tol number
---@return Expectation
function Expectation:near(x, tol, message) end
---@return Expectation
function Expectation:contains(x, message) end
---@param pattern string
---@return Expectation
function Expectation:matches(pattern, message) end
---@return Expectation
function Expectation:is_nil(message) end
---@return Expectation
function Expectation:not_nil(message) end
---@return Expectation
function Expectation:is_true(message) end
---@return Expectation
function Expectation:is_false(message) end
---@return Expectation
function Expectation:truthy(message) end
---@return Expectation
function Expectation:falsy(message) end
---@param name type
---@return Expectation
function Expectation:type(name, message) end
---@param n integer
---@return Expectation
function Expectation:len(n, message) end
---@param pattern? string
---@return Expectation
function Expectation:raises(pattern, message) end

---@param actual any
---@return Expectation
function expect(actual) end

---Call fn until it returns a truthy value without raising; return what it returned.
---@generic T
---@param fn fun(): T
---@param opts? {timeout?: number, interval?: number}  other keys raise
---@return T
function eventually(fn, opts) end

---@param seconds number
function sleep(seconds) end

---@class Task
local Task = {}
---@return any ...
function Task:wait() end
---@return boolean
function Task:done() end
function Task:cancel() end

---@param fn function
---@return Task
function spawn(fn, ...) end

---@param fns function[]
---@return any[]
function parallel(fns) end

---Monotonic time in seconds.
---@return number
function now() end

---@param ... any
function log(...) end

---@param name string
---@param data string
---@return string path
function artifact(name, data) end

-- ------------------------------------------------------------------- engine

---A test's scope, or the file's: what its tasks open is closed when it ends.
---@class EngineScope
local EngineScope = {}
---@return boolean  whether its test (or file) still runs
function EngineScope:open() end
---Run fn when the scope ends (after the test's after_each, however it ended; the
---file's after after_all), newest first, each guarded.
---@param fn fun()
function EngineScope:defer(fn) end

---`local engine = require "engine"`, for fixture libraries.
---@class engine
local engine = {}
---@return EngineScope  the caller's scope: its test's, or the file's
function engine.scope() end
---@param scope EngineScope
---@param fn function
---@return Task
function engine.spawn_in(scope, fn, ...) end
---Run fn when the caller's scope ends: engine.scope():defer(fn).
---@param fn fun()
function engine.defer(fn) end
---Raise when t has a key not in keys, naming the closest valid key; returns t.
---@generic T: table?
---@param fname string  the function whose options these are, for the message
---@param t T
---@param keys string[]|table<string, boolean>
---@param level? integer  as in error(); default 2, the caller of fname
---@return T
function engine.check_options(fname, t, keys, level) end
---Failures raised through the calling library point at its caller.
function engine.helper() end
---@return string
function engine.artifacts_dir() end
---@return string
function engine.test_name() end

-- ------------------------------------------------------------------ kvcache

---@class KvPodSpec
---@field name? string
---@field namespace? string
---@field engine? "vllm"|"sglang"
---@field loras? string[]
---@field kv_cache_size? integer  blocks in the sim's cache
---@field block_size? integer
---@field sim? table<string, any>  extra sim flags

---@class KvStackOptions
---@field model? string
---@field namespace? string
---@field pods? integer|KvPodSpec[]
---@field router? table|string  Kthena's router configuration (table, YAML or JSON text)
---@field runtime? {decode?: "kthena"|"tolerant", lora_keys?: "model"|"lora_name"}
---@field sim? table<string, any>
---@field target? "local"|"kind"
---@field dir? string

---@class KvPod
---@field name string
---@field namespace string
---@field owner string  "<name>.<namespace>", the Redis field
---@field ip string
---@field engine string
---@field http string
---@field zmq string  the bridge input the sim publishes into
---@field events string  the bridge output the runtime reads
---@field topic string
---@field started_at integer

---@class KvPrompt
---@field model string
---@field prompt? string
---@field messages? {role: string, content: string}[]
---@field tokens? integer[]

---@class KvCompletion
---@field status integer
---@field pod string?
---@field namespace string?
---@field body string
---@field text string?
---@field scores table<string, table<string, integer>>?  per pod: per plugin, and total
---@field request_id string

---@class KvServeRequest
---@field prompt? string
---@field messages? {role: string, content: string|table}[]
---@field model? string  default the stack's model
---@field max_tokens? integer  default 1
---@field timeout? number  seconds to wait for the announcement; default 5

---@class KvServed
---@field status integer
---@field body string
---@field text string?  the engine's answer
---@field tokens integer[]  the prompt's tokens, as the pod tokenized it
---@field owned {key: string, ts: integer}[]  the pod's owner field on each full block, as the engine announced it

---@class KvPromptOptions
---@field tail? integer  tokens after the whole blocks (prompt only); default 0
---@field block_size? integer  tokens per block (prompt only); default the router's blockSizeToHash
---@field tag? string  letters that begin every word, to spot the prompt in logs; default "kv"
---@field model? string  the model to tokenize for (stack:tokens)
---@field pod? string  the pod to tokenize at (stack:tokens)

---@class KvTally
---@field n integer
---@field errors integer
local KvTally = {}
---@return integer
function KvTally:count(pod) end
---@return number
function KvTally:share(pod) end
---@return string[]
function KvTally:pods() end

---@class KvMetrics
local KvMetrics = {}
---@param name string
---@param labels? table<string, string>
---@return number  the sum of the matching samples
function KvMetrics:get(name, labels) end

---@class KvStack
---@field model string
---@field namespace string
---@field dir string
local KvStack = {}
---@return KvPod
function KvStack:pod(name) end
---@param q KvPrompt
---@return integer[]
function KvStack:tokens(q) end
---A prompt no other call in the file makes: exactly blocks x block_size + tail tokens, one per word.
---@param blocks integer
---@param opts? KvPromptOptions
---@return string prompt
---@return integer[] tokens
function KvStack:prompt(blocks, opts) end
---Words no other call in the file makes, one token each (chat content, or wherever blocks do not matter).
---@param words integer
---@param opts? KvPromptOptions
---@return string text
---@return integer[] tokens
function KvStack:text(words, opts) end
---Publish events into the pod's bridge as its sim would; waits until the runtime processed them.
---@param pod string
function KvStack:inject(pod, ...) end
---@param frames string[]
---@param opts? {fence?: boolean}
function KvStack:publish(pod, frames, opts) end
---@param q KvPrompt|{pod: string, blocks?: integer, timeout?: number}
function KvStack:expect_owner(q) end
---@param q KvPrompt|{pod?: string, blocks?: integer, timeout?: number}
function KvStack:expect_no_owner(q) end
---Send a request straight to the pod's engine (not through the router); returns once the engine's
---announcement of the prompt's full blocks is in Redis.
---@param pod string
---@param q KvServeRequest
---@return KvServed
function KvStack:serve(pod, q) end
---@param q KvPrompt|{stream?: boolean, max_tokens?: integer, headers?: table, timeout?: number}
---@return KvCompletion?, string?
function KvStack:complete(q) end
---The completion's per-plugin scores; skips the rest of the test where the target's router keeps no decision log.
---@param r KvCompletion
---@return table<string, table<string, integer>>
function KvStack:scores(r) end
---@alias KvCapability "decisions"|"restart"|"kill"|"lora_load"|"fault"|"router_restart"|"redis_outage"|"raw_redis"|"event_stats"|"engine_cache"|"runtime_options"|"sim_options"|"mixed_pods"|"sabotage"|"second_stack"
---Whether the stack's target has the capability (docs/drivers.md).
---@param capability KvCapability
---@return boolean
function KvStack:can(capability) end
---Skips the test, naming the target and the capability, unless the target has every one.
---@param ... KvCapability
function KvStack:requires(...) end
---What the pod's bridge and runtime counted (needs event_stats).
---@return {bridge: table?, runtime: table?, errors: table}
function KvStack:event_stats(pod) end
---@param q KvPrompt|{n: integer, concurrency?: integer}
---@return KvTally
function KvStack:route(q) end
---@param q KvPrompt|{pod: string, n: integer}
function KvStack:expect_routed(q) end
---@return string  the first broken link of the data path
function KvStack:explain(q) end
function KvStack:restart(pod) end
function KvStack:kill(pod) end
---@return string model  the name to request
function KvStack:load_lora(pod, name) end
---@return string model
function KvStack:lora(name) end
---@param faults {tokenize?: integer|"timeout", completions?: integer|"timeout", events?: "drop"}|nil
function KvStack:fault(pod, faults) end
function KvStack:restart_router() end
function KvStack:stop_redis() end
function KvStack:start_redis() end
---@return string
function KvStack:logs(what) end
---@return KvMetrics
function KvStack:metrics() end
function KvStack:redis() end
---@return string summary
function KvStack:diagnose(dir) end
function KvStack:close() end

---@class kvcache
local kvcache = {}
---@param opts? KvStackOptions
---@return KvStack
function kvcache.stack(opts) end
---@return integer[]
function kvcache.block_hashes(tokens, opts) end
function kvcache.stored(fields) end
function kvcache.removed(fields) end
function kvcache.cleared() end
---@return integer[]  the first n blocks' tokens
function kvcache.prefix(tokens, n) end
