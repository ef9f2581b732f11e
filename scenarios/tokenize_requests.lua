-- scenarios/tokenize_requests.lua - what the router asks a pod's tokenizer,
-- and where (WIRE-1 and WIRE-2 in docs/kthena.md).
--
-- Kthena's kvcache-aware plugin tokenizes every prompt on one candidate pod,
-- at the pod's IP and the port its configuration names for the engine
-- (vllmTokenizerPort, 8000 by default; sglangTokenizerPort, 30000), never
-- at the port the pod serves inference on; and it sends a body of a fixed
-- shape, which decides the tokens: a chat prompt goes as structured
-- messages with add_generation_prompt true for vLLM, so that the tokens
-- are those of the templated conversation the engine caches. The sims'
-- tokenizer ignores most of those fields, so routing alone cannot show a
-- wrong body or port; the engines' record of the /tokenize requests they
-- answered (tokenize_log) can. Where a target keeps no such record the
-- tests check routing only.

local kvcache = require("kvcache")

-- The /tokenize requests the stack's pods receive while fn runs, as
-- {pod =, seq =, port =, body =}, in pod order.
local function tokenize_requests_during(s, fn)
  local last = {}
  for _, p in ipairs(s:pods()) do
    local list = s:tokenize_requests(p.name)
    last[p.name] = #list > 0 and list[#list].seq or 0
  end
  fn()
  local out = {}
  for _, p in ipairs(s:pods()) do
    for _, r in ipairs(s:tokenize_requests(p.name)) do
      if r.seq > last[p.name] then
        r.pod = p.name
        out[#out + 1] = r
      end
    end
  end
  return out
end

-- The one /tokenize request the router sent for the request r (its body
-- holds `marker`, a word of the prompt), or a failure saying what came.
local function the_request(list, marker, what)
  local found = {}
  for _, r in ipairs(list) do
    if r.body:find(marker, 1, true) then found[#found + 1] = r end
  end
  if #found ~= 1 then
    local seen = {}
    for _, r in ipairs(list) do seen[#seen + 1] = string.format("%s:%d %s", r.pod, r.port, r.body:sub(1, 120)) end
    fail(string.format("WIRE-1: the router should tokenize %s once, on one pod; the pods got %d /tokenize "
      .. "requests for it (all requests while it was routed: %s)", what, #found,
      #seen > 0 and table.concat(seen, " | ") or "none"))
  end
  return found[1]
end

local function json_string(s) return '"' .. s .. '"' end -- the prompts here need no escapes

-- got must be want byte for byte; a failure shows where they part.
local function expect_bytes(got, want, what)
  if got == want then return end
  local i = 1
  while got:byte(i) == want:byte(i) do i = i + 1 end
  local from = math.max(1, i - 40)
  fail(string.format("%s: the bodies part at byte %d: expected ...%s..., got ...%s... (expected %d bytes, got %d; "
    .. "the whole body received: %s)", what, i, want:sub(from, i + 40), got:sub(from, i + 40), #want, #got, got))
end

-- Route one request and return the /tokenize request the router made for it.
local function tokenized(s, request, marker, what)
  local r
  local list = tokenize_requests_during(s, function()
    r = assert(s:complete(request))
  end)
  expect(r.status):eq(200, what .. " is served: " .. r.body)
  return the_request(list, marker, what), r
end

test("vLLM pods: a text prompt and a chat prompt are tokenized with Kthena's bodies, at vllmTokenizerPort",
  function()
    local s <close> = kvcache.stack { pods = 3 }
    s:requires("tokenize_log")
    local prompt = s:prompt(2)
    local got = tokenized(s, { prompt = prompt, max_tokens = 1 }, prompt, "a text prompt")
    expect(got.port):eq(8000, string.format("WIRE-1: %s's tokenizer is asked at vllmTokenizerPort, 8000 by default",
      got.pod))
    expect_bytes(got.body, '{"model":' .. json_string(s.model) .. ',"prompt":' .. json_string(prompt)
      .. ',"add_special_tokens":true,"return_token_strs":false}', string.format("WIRE-2: the /tokenize body "
      .. "%s received for a text prompt, byte for byte (Kthena marshals vllmTokenizeCompletionRequest)", got.pod))

    local system, user = s:text(12), s:text(20)
    local chat = tokenized(s, { messages = { { role = "system", content = system }, { role = "user", content = user } },
      max_tokens = 1 }, user, "a chat prompt")
    expect(chat.port):eq(8000, string.format("WIRE-1: %s's tokenizer is asked at vllmTokenizerPort", chat.pod))
    expect_bytes(chat.body, '{"model":' .. json_string(s.model) .. ',"messages":[{"role":"system","content":'
      .. json_string(system) .. '},{"role":"user","content":' .. json_string(user) .. '}],"add_special_tokens":'
      .. 'false,"add_generation_prompt":true,"return_token_strs":false}', string.format("WIRE-2: the /tokenize "
      .. "body %s received for a chat prompt, byte for byte: structured messages, no special tokens, and "
      .. "add_generation_prompt true (the template's assistant turn is part of the cached prefix)", chat.pod))
  end)

test("SGLang pods: both prompt kinds are tokenized with SGLang's bodies, at sglangTokenizerPort", function()
  local s <close> = kvcache.stack { pods = { { engine = "sglang" }, { engine = "sglang" } } }
  s:requires("tokenize_log")
  local prompt = s:prompt(2)
  local got = tokenized(s, { prompt = prompt, max_tokens = 1 }, prompt, "a text prompt")
  expect(got.port):eq(30000, string.format("WIRE-1: %s's tokenizer is asked at sglangTokenizerPort, 30000 by "
    .. "default", got.pod))
  expect_bytes(got.body, '{"model":' .. json_string(s.model) .. ',"prompt":' .. json_string(prompt)
    .. ',"add_special_tokens":true}', string.format("WIRE-2: the /tokenize body %s received for a text prompt "
    .. "(SGLang's request has no return_token_strs)", got.pod))

  local user = s:text(20)
  local chat = tokenized(s, { messages = { { role = "user", content = user } }, max_tokens = 1 }, user,
    "a chat prompt")
  expect_bytes(chat.body, '{"model":' .. json_string(s.model) .. ',"messages":[{"role":"user","content":'
    .. json_string(user) .. '}],"add_special_tokens":false}', string.format("WIRE-2: the /tokenize body %s "
    .. "received for a chat prompt (SGLang's request has no add_generation_prompt)", chat.pod))
end)

test("a tokenizer on a port of its own: the router asks it there and follows the cache",
  { tags = { "needs:kvcache_score" } }, function()
  -- tokenizer_port sets vllmTokenizerPort in the router's configuration, and
  -- the engines answer /tokenize there as well as at their serving port.
  local s <close> = kvcache.stack { pods = 3, tokenizer_port = 8100 }
  local prompt, tokens = s:prompt(3)
  s:inject("p2", kvcache.stored { tokens = tokens })
  s:expect_owner { tokens = tokens, pod = "p2" }
  local t = s:expect_routed { prompt = prompt, pod = "p2", n = 3, max_tokens = 1 }
  if s:can("decisions") then
    expect(s:scores(t.results[1]).p2["kvcache-aware"]):eq(100, "WIRE-1: the router tokenized the prompt at the "
      .. "tokenizer port and found p2's blocks")
  end

  s:requires("tokenize_log")
  local other = s:prompt(2)
  local got = tokenized(s, { prompt = other, max_tokens = 1 }, other, "a text prompt")
  expect(got.port):eq(8100, string.format("WIRE-1: the router must ask %s's tokenizer at vllmTokenizerPort (8100 "
    .. "here), not at the port the pod serves inference on (8000)", got.pod))
end)
