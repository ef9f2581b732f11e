---@meta kv
-- `local kv = require("kv")`: KV-cache facts as Kthena computes them: block hashes, Redis
-- keys, the sim's tokenizer, KV events and their wire dialects (bindings/kv.c;
-- docs/api-modules.md). Hashes are Lua integers with the uint64's bits (above 2^63 they
-- read negative; kv.u64 prints them). Option classes are checked against kv.options and
-- kv.events.options.

---@alias KvDialect "vllm-0.9"|"vllm-array"|"vllm-map"|"sim-legacy"|"sim-map"|"sglang"

---The fields of kv.block_hashes's options.
---@class kv.options.block_hashes
---@field block_size? integer  tokens per block; default 16
---@field max_blocks? integer  default 128

---The fields of kv.stored{...}: a BlockStored event.
---@class kv.options.stored
---@field hashes? (integer|string)[]  the engine's block hashes (decimal strings taken too)
---@field tokens? integer[]  uint32 token ids; default {}
---@field block_size? integer  default 16
---@field parent? integer|string  the parent block's hash
---@field lora_id? integer
---@field lora_name? string
---@field medium? string|false  default "GPU"; false for none
---@field group_idx? integer
---@field kv_cache_spec_kind? string
---@field kv_cache_spec_sliding_window? integer
---@field kind? "stored"

---The fields of kv.removed{...}: a BlockRemoved event.
---@class kv.options.removed
---@field hashes? (integer|string)[]
---@field medium? string|false
---@field group_idx? integer
---@field kind? "removed"

---The fields of kv.cleared{}: an AllBlocksCleared event.
---@class kv.options.cleared
---@field kind? "cleared"

---The options of kv.events.decode.
---@class kv.events.options.decode
---@field profile? "tolerant"|"kthena"  "kthena": exactly what Kthena's runtime accepts
---@field dialect? boolean  false: do not name the dialect (saves a re-encoding per candidate)

---An event, as the constructors make it and decode returns it.
---@class KvEvent
---@field kind "stored"|"removed"|"cleared"|"unknown"
---@field hashes? integer[]
---@field tokens? integer[]
---@field block_size? integer
---@field parent? integer
---@field lora_id? integer
---@field lora_name? string
---@field medium? string
---@field group_idx? integer
---@field kv_cache_spec_kind? string
---@field kv_cache_spec_sliding_window? integer
---@field signed_hashes? table<integer, true>  decoded: positions of hashes sent as negative integers
---@field type? any  decoded, kind "unknown": the event's tag

---@class KvEventBatch
---@field ts? number  epoch seconds; default now
---@field events KvEvent[]
---@field dp_rank? integer

---@class kv
---@field events kv.events
---@field version string  msgpack-c's and OpenSSL's
---@field options {block_hashes: string[], stored: string[], removed: string[], cleared: string[]}  the keys the option checks take
local kv = {}

---Kthena's hash of one chunk (all tokens); 0 for none.
---@param tokens integer[]
---@return integer
function kv.block_hash(tokens) end

---The router's chunked hashes (the last partial chunk kept).
---@param tokens integer[]
---@param opts? kv.options.block_hashes
---@return integer[]
function kv.block_hashes(tokens, opts) end

---"matrix:kv:block:<model>@<unsigned decimal>"
---@param model string
---@param hash integer|string
---@return string
function kv.block_key(model, hash) end

---"matrix:kv:block:<model>@", or "matrix:kv:block:" without a model.
---@param model? string
---@return string
function kv.block_key_prefix(model) end

---"<engine>:kv:block:<owner>@<unsigned decimal>": the runtime's engine-hash mapping.
---@param engine "vllm"|"sglang"
---@param owner string
---@param hash integer|string
---@return string
function kv.mapping_key(engine, owner, hash) end

---"<engine>:kv:block:<owner>@"
---@param engine "vllm"|"sglang"
---@param owner string
---@return string
function kv.mapping_key_prefix(engine, owner) end

---"<pod>.<namespace>", the field the runtime writes.
---@param pod string
---@param namespace string
---@return string
function kv.owner(pod, namespace) end

---"kv@<ip>[:<port>]@<model>": the topic the sim publishes its events under.
---@param ip string
---@param model string
---@param port? integer
---@return string
function kv.topic(ip, model, port) end

---Integer (any 64 bits) -> unsigned decimal string; unsigned decimal string -> the integer.
---@param x integer|string
---@return string|integer
function kv.u64(x) end

---llm-d-inference-sim's tokenizer.
---@param text string
---@return integer[]
function kv.tokenize(text) end

---@param messages {role: string, content: string|table}[]
---@return integer[]
function kv.tokenize_chat(messages) end

---@param fields kv.options.stored
---@return KvEvent
function kv.stored(fields) end

---@param fields kv.options.removed
---@return KvEvent
function kv.removed(fields) end

---@param fields? kv.options.cleared
---@return KvEvent
function kv.cleared(fields) end

---Encoding and decoding of event batches, in each producer's dialect.
---@class kv.events
---@field dialects KvDialect[]
---@field options {decode: string[]}  the keys the option checks take
kv.events = {}

---The batch's bytes as the dialect's producer writes them (default "vllm-array"); raises on
---a bad batch.
---@param batch KvEventBatch
---@param dialect? KvDialect
---@return string
function kv.events.encode(batch, dialect) end

---Any producer's payload; never raises on bad bytes (nil, "msgpack: ..." | "shape: ..." |
---"kthena: ...").
---@param bytes string
---@param opts? kv.events.options.decode
---@return KvEventBatch?, KvDialect|string?  batch, dialect | nil, err
function kv.events.decode(bytes, opts) end

return kv
