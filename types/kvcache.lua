---@meta kvcache
-- `local kvcache = require("kvcache")`: the fixture library scenarios use: a whole
-- KV-cache routing stack on the run's target, and the stack object that drives it
-- (fixtures/kvcache.lua, fixtures/kvcache/; docs/writing-scenarios.md). Option classes
-- are checked against the lists of fixtures/kvcache/options.lua, the ones the library's
-- strict checks use.

-- ------------------------------------------------------------------ options

---The options of kvcache.stack.
---@class kvcache.options.stack
---@field model? string
---@field namespace? string
---@field pods? integer|kvcache.options.pod[]  a count (pods p1, p2, ...) or one spec per pod
---@field router? table|string  Kthena's router configuration (table, YAML or JSON text)
---@field runtime? kvcache.options.runtime
---@field sim? table<string, any>  the sims' own flags, for every pod
---@field target? string  default --target / KVENGINE_TARGET, else "local"
---@field dir? string  the stack's log folder
---@field sabotage? table  test-only: break a link of the data path (targets with the sabotage capability)
---@field tokenizer_port? integer  engines also answer /tokenize on this port (the router's vllmTokenizerPort)
---@field pool? boolean  the pods' stand-in parts as instances in one process per part (default: KVENGINE_POOL, else more than 16 pods)

---The options of kvcache.router_config.
---@class kvcache.options.router_config
---@field kvcache_aware? integer  the kvcache-aware plugin's scoring weight, default 1
---@field least_request? integer  the least-request plugin's scoring weight, default 1
---@field max_waiting? integer  least-request's maxWaitingRequests (nil: Kthena's default)

---A pod of kvcache.stack{pods = {...}}.
---@class kvcache.options.pod
---@field name? string
---@field namespace? string
---@field engine? "vllm"|"sglang"
---@field loras? string[]
---@field kv_cache_size? integer  blocks in the sim's cache
---@field block_size? integer
---@field sim? table<string, any>  this pod's sim flags

---kvcache.stack{runtime = {...}}.
---@class kvcache.options.runtime
---@field decode? "kthena"|"tolerant"
---@field lora_keys? "model"|"lora_name"

---The options of stack:inject (its last argument).
---@class kvcache.options.inject
---@field dialect? KvDialect  default the pod's engine's
---@field wait? "processed"|"sent"  default "processed": returns once the runtime dealt with the events
---@field ts? number
---@field timeout? number
---@field dp_rank? integer

---The options of stack:publish.
---@class kvcache.options.publish
---@field fence? boolean  default true: wait until the runtime processed the frames
---@field timeout? number

---The options of stack:tokens.
---@class kvcache.options.tokens
---@field model? string
---@field prompt? string
---@field messages? {role: string, content: string|table}[]
---@field pod? string  the pod to tokenize at

---The options of stack:prompt.
---@class kvcache.options.prompt
---@field tail? integer  tokens after the whole blocks; default 0
---@field block_size? integer  tokens per block; default the router's blockSizeToHash
---@field tag? string  letters that begin every word, to spot the prompt in logs; default "kv"
---@field model? string  the model to tokenize for
---@field pod? string  the pod to tokenize at

---The options of stack:text.
---@class kvcache.options.text
---@field tag? string
---@field model? string
---@field pod? string

---The options of stack:expect_owner and stack:expect_no_owner.
---@class kvcache.options.expect_owner
---@field model? string
---@field prompt? string
---@field messages? {role: string, content: string|table}[]
---@field tokens? integer[]
---@field pod? string  required by expect_owner
---@field blocks? integer  the first n blocks; default every full block
---@field timeout? number
---@field why? string  the rule the check stands for, named in its failure (e.g. "OWNER-4")

---The options of stack:owners: the prompt, and its model.
---@class kvcache.options.owners
---@field model? string
---@field prompt? string
---@field messages? {role: string, content: string|table}[]
---@field tokens? integer[]

---The options of stack:serve.
---@class kvcache.options.serve
---@field prompt? string
---@field messages? {role: string, content: string|table}[]
---@field model? string  default the stack's model
---@field max_tokens? integer  default 1
---@field timeout? number  seconds to wait for the announcement; default 5

---The options of stack:complete: the library's own, and the OpenAI body fields passed on.
---@class kvcache.options.complete
---@field model? string  default the stack's
---@field prompt? string
---@field messages? {role: string, content: string|table}[]
---@field headers? table<string, string>
---@field group? string  a pod: the request goes to its group (engine and namespace); required on a stack of several
---@field timeout? number
---@field request_id? string  default a fresh one
---@field max_tokens? integer
---@field stream? boolean
---@field temperature? number
---@field top_p? number
---@field n? integer
---@field stop? string|string[]
---@field seed? integer
---@field user? string
---@field logprobs? boolean|integer
---@field echo? boolean
---@field presence_penalty? number
---@field frequency_penalty? number
---@field stream_options? table
---@field ignore_eos? boolean
---@field min_tokens? integer
---@field max_completion_tokens? integer
---@field system? string
---@field input? any

---The options of stack:route: stack:complete's, n times.
---@class kvcache.options.route: kvcache.options.complete
---@field n? integer  requests; default 1
---@field concurrency? integer  default 1

---The options of stack:expect_routed.
---@class kvcache.options.expect_routed: kvcache.options.route
---@field pod string  the pod every request must reach
---@field tokens? integer[]  the prompt's tokens, when known
---@field by_cache? boolean  false: the pod may win without a cache score (a filter chose it); default true

---The options of stack:expect_best: a completion's fields, and
---@class kvcache.options.expect_best: kvcache.options.complete
---@field pod string  the pod that must serve the request, by its cache
---@field why string  why pod is the best, the failure's message
---@field scores? table<string, [integer|false, string]>  per pod its kvcache-aware score (false: none) and why
---@field n? integer  further requests expect_routed to pod (none when nil)
---@field r? KvCompletion  a completion already made, instead of one of prompt

---The options of stack:explain.
---@class kvcache.options.explain
---@field model? string
---@field prompt? string
---@field messages? {role: string, content: string|table}[]
---@field tokens? integer[]
---@field pod string
---@field request_id? string
---@field block? integer

---stack:fault(pod, {...}): the pod's faults, replacing earlier ones.
---@class kvcache.options.fault
---@field tokenize? integer|"timeout"|"malformed"  an HTTP status, no answer, or a 200 that is not JSON
---@field completions? integer|"timeout"
---@field events? "drop"

---stack:fake_metrics(pod, {...}): the load gauges the pod's engine reports;
---also the sim option fake_metrics, which a pod's sim needs for it.
---@class kvcache.options.fake_metrics
---@field waiting_requests? integer  vllm:num_requests_waiting; default 0
---@field running_requests? integer  vllm:num_requests_running; default 0

---The options of stack:sweep: rates in order until p99 crosses p99_limit.
---@class kvcache.options.sweep
---@field rates number[]  requests per second, tried in order
---@field p99_limit number  seconds
---@field duration? number  seconds a rate; default 2
---@field concurrency? integer  connections at most; default 32
---@field prompt? string  a completion's prompt (the default when no messages)
---@field messages? table[]  a chat's messages
---@field model? string  default the stack's
---@field max_tokens? integer  default 1
---@field group? string  a pod: the load goes to its group; required on a stack of several
---@field timeout? number  seconds a request; default 30

-- -------------------------------------------------------------------- data

---stack:pod(name): a copy of the driver's record.
---@class KvPod
---@field name string
---@field namespace string
---@field owner string  "<name>.<namespace>", the Redis field
---@field ip string
---@field engine string
---@field http string  the engine's OpenAI base URL
---@field zmq string  where the engine publishes its KV events
---@field events? string  where the runtime reads them, when the target says
---@field topic string
---@field started_at integer  unix seconds
---@field alive boolean

---stack:complete's result (also each of a tally's results).
---@class KvCompletion
---@field status integer
---@field pod string?
---@field namespace string?
---@field body string
---@field text string?
---@field headers table<string, string>
---@field scores table<string, table<string, integer>>?  per pod: per plugin, and total
---@field request_id string
---@field decision table?  the router's decision, where the target keeps them

---stack:serve's result.
---@class KvServed
---@field status integer
---@field body string
---@field text string?  the engine's answer
---@field tokens integer[]  the prompt's tokens, as the pod tokenized it
---@field owned {key: string, ts: integer}[]  the pod's owner field on each full block, as the engine announced it

---@alias KvCapability "decisions"|"restart"|"kill"|"lora_load"|"fault"|"router_restart"|"router_gc"|"redis_outage"|"raw_redis"|"event_stats"|"engine_cache"|"runtime_options"|"sim_options"|"mixed_pods"|"sabotage"|"second_stack"|"tokenize_log"|"runtime_input"|"router_view"|"tokenizer_port"

---What stack:route and stack:expect_routed return.
---@class KvTally
---@field n integer
---@field errors integer
---@field counts table<string, integer>  per pod
---@field results (KvCompletion|{err: string})[]
local KvTally = {}

---@param pod string
---@return integer
function KvTally:count(pod) end

---@param pod string
---@return number  count / n
function KvTally:share(pod) end

---@return string[]  the pods that served, sorted
function KvTally:pods() end

-- ------------------------------------------------------------------- stack

---A started stack; stops with the test or hook that made it, at stack:close(), or at the
---end of a `local s <close> = ...` block.
---@class KvStack
---@field model string
---@field namespace string
---@field target string
---@field dir string  its logs
---@field started_in number  seconds
local KvStack = {}

---Whether the stack's target has the capability (docs/drivers.md).
---@param capability KvCapability
---@return boolean
function KvStack:can(capability) end

---Skips the test, naming the target and the capability, unless the target has every one.
---@param ... KvCapability
function KvStack:requires(...) end

---@param name string
---@return KvPod
function KvStack:pod(name) end

---@return KvPod[]
function KvStack:pods() end

---The stack's groups of pods, one per engine and namespace, each its own
---ModelServer: a request reaches the pods of one group only.
---@return {key: string, engine: string, namespace: string, pods: string[]}[]
function KvStack:groups() end

---The endpoints, as `kvengine up --json` prints them.
---@return {target: string, model: string, namespace: string, router: string, metrics: string, debug: string?, redis: {host: string?, port: integer?}, pods: KvPod[], logs: string, pods_ready_at: number?, kube: {kubeconfig: string?, context: string, namespace: string}?}
function KvStack:endpoints() end

---Where the stack's cluster is (kubeconfig, context, namespace), where the target is a cluster; nil elsewhere.
---@return {kubeconfig: string?, context: string, namespace: string}?
function KvStack:kube_endpoint() end

---A prompt's tokens, asked from a pod's /tokenize as the router asks it.
---@param o kvcache.options.tokens
---@return integer[]
function KvStack:tokens(o) end

---A prompt no other call in the file makes: exactly blocks x block_size + tail tokens, one per word.
---@param blocks integer
---@param opts? kvcache.options.prompt
---@return string prompt
---@return integer[] tokens
function KvStack:prompt(blocks, opts) end

---Words no other call in the file makes, one token each.
---@param words integer
---@param opts? kvcache.options.text
---@return string text
---@return integer[] tokens
function KvStack:text(words, opts) end

---Kthena's block hashes of tokens, as the stack's router cuts them.
---@param tokens integer[]
---@return integer[]
function KvStack:hashes(tokens) end

---Publish events (kvcache.stored{...}, ...; lists of them too) into the pod's event path as
---its engine would; the last argument may be the options. Waits until the runtime processed them.
---@param pod string
---@param ... KvEvent|KvEvent[]|kvcache.options.inject
function KvStack:inject(pod, ...) end

---Raw ZMQ frames into the pod's event path.
---@param pod string
---@param frames string[]
---@param opts? kvcache.options.publish
function KvStack:publish(pod, frames, opts) end

---Waits until the pod owns the prompt's first blocks; fails naming the first broken link.
---@param o kvcache.options.expect_owner
---@return {key: string, ts: integer}[]
function KvStack:expect_owner(o) end

---Waits until no one (or not o.pod) owns the prompt's blocks.
---@param o kvcache.options.expect_owner
---@return true
function KvStack:expect_no_owner(o) end

---Who owns each block of the prompt now, as the router reads it: {[i] = {[owner] = unix seconds}}.
---@param o kvcache.options.owners
---@return table<string, string>[]
function KvStack:owners(o) end

---Send a request straight to the pod's engine (not through the router); returns once the
---engine's announcement of the prompt's full blocks is in Redis.
---@param pod string
---@param o kvcache.options.serve
---@return KvServed
function KvStack:serve(pod, o) end

---One request through the router.
---@param o kvcache.options.complete
---@return KvCompletion?, string?
function KvStack:complete(o) end

---The completion's per-plugin scores; skips the rest of the test where the target's router
---keeps no decision log.
---@param r KvCompletion
---@return table<string, table<string, integer>>
function KvStack:scores(r) end

---The options of stack:decision (the bindings' timeout rule).
---@class kvcache.options.decision
---@field timeout? number  seconds; default 2 times engine.time_scale(); 0 looks once

---The router's decision for a request id, or nil (none kept, or not in time).
---@param request_id string
---@param opts? kvcache.options.decision
---@return table?
function KvStack:decision(request_id, opts) end

---n requests through the router, counted per pod.
---@param o kvcache.options.route
---@return KvTally
function KvStack:route(o) end

---Every request reaches o.pod, or the test fails with the cause.
---@param o kvcache.options.expect_routed
---@return KvTally
function KvStack:expect_routed(o) end

---r was served by pod, which won it with a kvcache-aware score (where the target reports
---decisions); else the test fails with why, the scores and the target's known cause.
---@param r KvCompletion
---@param pod string
---@param why string
function KvStack:expect_served(r, pod, why) end

---pod's kvcache-aware score for r is want (nil: none), or the test fails saying so.
---@param r KvCompletion
---@param pod string
---@param want integer?
---@param why string
function KvStack:expect_scored(r, pod, want, why) end

---One request served by o.pod for o.why, each o.scores entry its pod's kvcache-aware score
---where the target reports scores, then o.n more requests expect_routed to o.pod.
---@param o kvcache.options.expect_best
---@return KvCompletion r
---@return KvTally? tally  nil when o.n is nil
function KvStack:expect_best(o) end

---Of the router's last n decisions (default 200), how many gave some pod a kvcache-aware
---score, how many were read, and the target's known cause when none did ("" otherwise); nil
---where the target reports no decisions.
---@param n? integer
---@return integer?, integer?, string?
function KvStack:cache_scored(n) end

---"" or "; the router's own account: ..." where the target's router reports no decisions: the
---driver's line on what its router did (smg: its policy, flags and logged choices), for a
---message about routing.
---@return string
function KvStack:router_account() end

---"" or "; known cause: ..." naming the target's known causes that break need (a need of
---fixtures/stacks/kthena_causes.lua), for a failure message.
---@param need string
---@return string
function KvStack:cause_note(need) end

---@param o kvcache.options.explain
---@return string  the first broken link of the data path
function KvStack:explain(o) end

---http.load through the router at each rate until p99 crosses the limit (or over 1% fail).
---@param o kvcache.options.sweep
---@return {points: {rate: number, sent: integer, ok: integer, errors: integer, dropped: integer, p50: number, p90: number, p99: number, p999: number, latency: HttpHistogram}[], limit: number, crossed_at: number?, last_under: number?, report: string}
function KvStack:sweep(o) end

---Dump the data path into dir (default a new folder under the stack's); also done by
---itself when a test fails.
---@param dir? string
---@return string summary
function KvStack:diagnose(dir) end

---A fresh Redis connection to the ownership store (needs raw_redis).
---@return RedisConnection
function KvStack:redis() end

---A client of the cluster the stack runs on, its default namespace the stack's (needs kube_api).
---@return KubeClient
function KvStack:kube() end

---What the pod's bridge and runtime counted (needs event_stats).
---@param pod string
---@return {bridge: table?, runtime: table?, errors: table}
function KvStack:event_stats(pod) end

---The router's access log entry of a request (request_id, selected_pod, upstream_attempts, status, ...), once written.
---@param request_id string
---@param opts? kvcache.options.access_log
---@return table
function KvStack:access_log(request_id, opts) end

---The options of stack:access_log (the bindings' timeout rule).
---@class kvcache.options.access_log
---@field timeout? number  seconds; default 5 times engine.time_scale()

---The /tokenize requests the pod's engine received, oldest first (needs tokenize_log).
---@param pod string
---@return {seq: integer, port: integer, body: string}[]
function KvStack:tokenize_requests(pod) end

---Frames straight to the pod's runtime, past the bridge's checks; returns once dealt with (needs runtime_input).
---@param pod string
---@param frames string[]
function KvStack:publish_runtime(pod, frames) end

---The router's view of a pod: the waiting and running counts it last polled, its models (needs router_view).
---@param pod string
---@return {waiting: integer, running: integer, models: string[]}
function KvStack:router_view(pod) end

---@param pod string
function KvStack:restart(pod) end

---@param pod string
function KvStack:kill(pod) end

---@param name string  the adapter
---@return string model  the name to request
function KvStack:lora(name) end

---Load an adapter into a running pod; returns once the router knows the pod serves it.
---@param pod string
---@param name string
---@return string model
function KvStack:load_lora(pod, name) end

---Set the pod's faults (nil clears them).
---@param pod string
---@param faults kvcache.options.fault|nil
function KvStack:fault(pod, faults) end

---The load gauges the pod's engine reports from now on, in place of its
---real load (its sim started with sim = {fake_metrics = {...}}).
---@param pod string
---@param gauges kvcache.options.fake_metrics
function KvStack:fake_metrics(pod, gauges) end

function KvStack:restart_router() end

---One step of the router's KV-cache GC now (capability router_gc).
function KvStack:router_gc() end

function KvStack:stop_redis() end

function KvStack:start_redis() end

---A process's log: a pod, "router", "redis", "<pod>-sim", ...
---@param name string
---@return string
function KvStack:logs(name) end

---@return {name: string, pid: integer, pgid: integer?, running: boolean, pool: string?}[]  what the driver started (pool: the pool process holding a pooled pod's part, whose pid it has)
function KvStack:processes() end

---The router's metrics; nil, err when it does not answer.
---@return KvMetrics?, string?
function KvStack:metrics() end

---Stop every process now.
function KvStack:close() end

-- ------------------------------------------------------------------ module

---@class kvcache
---@field prometheus prometheus
---@field events kv.events
local kvcache = {}

---Start a whole stack on the run's target; every process ready when it returns.
---@param opts? kvcache.options.stack
---@return KvStack
function kvcache.stack(opts) end

---The default router configuration (for kvcache.stack{router =}) with the given scoring
---weights and least-request's maxWaitingRequests.
---@param o? kvcache.options.router_config
---@return table
function kvcache.router_config(o) end

---The stack a `kvengine up` keeps running, as it is (where: its attach file or control
---URL, default KVENGINE_ATTACH); closing it leaves it running.
---@param where? string
---@return KvStack
function kvcache.attach(where) end

---kv.stored, with engine hashes made up (one per block_size tokens, top bit set) when
---none are given.
---@param fields kv.options.stored
---@return KvEvent
function kvcache.stored(fields) end

---The first n blocks' tokens.
---@param tokens integer[]
---@param n integer
---@param block_size? integer  default 16
---@return integer[]
function kvcache.prefix(tokens, n, block_size) end

---As kv.block_hash.
---@param tokens integer[]
---@return integer
function kvcache.block_hash(tokens) end

---As kv.block_hashes.
---@param tokens integer[]
---@param opts? kv.options.block_hashes
---@return integer[]
function kvcache.block_hashes(tokens, opts) end

---As kv.block_key.
---@param model string
---@param hash integer|string
---@return string
function kvcache.block_key(model, hash) end

---As kv.owner.
---@param pod string
---@param namespace string
---@return string
function kvcache.owner(pod, namespace) end

---As kv.u64.
---@param x integer|string
---@return string|integer
function kvcache.u64(x) end

---As kv.tokenize.
---@param text string
---@return integer[]
function kvcache.tokenize(text) end

---As kv.tokenize_chat.
---@param messages {role: string, content: string|table}[]
---@return integer[]
function kvcache.tokenize_chat(messages) end

---As kv.removed.
---@param fields kv.options.removed
---@return KvEvent
function kvcache.removed(fields) end

---As kv.cleared.
---@param fields? kv.options.cleared
---@return KvEvent
function kvcache.cleared(fields) end

return kvcache
