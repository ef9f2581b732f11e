-- scenarios/chat_multiturn.lua - chat conversations and the cached prefix.
--
-- Chat traffic is where prefix caching pays most: every turn of a
-- conversation resends all the turns before it, so the pod that served
-- turn n already holds most of turn n + 1. Kthena's router tokenizes a chat
-- request by sending its messages to a pod's /tokenize in the messages form
-- (the engine applies its chat template; the router never flattens the
-- conversation to text), and looks the resulting blocks up in Redis. This
-- file proves that the chat template's tokens are what gets matched, that
-- content given as text parts matches the same cache as the joined text,
-- and that a conversation's next turn lands on the pod whose sim cached its
-- earlier turns, learnt from the sim's own KV events with no injection.

local kvcache = require("kvcache")

local stack

before_all(function()
  stack = kvcache.stack { pods = 3, sim = { event_batch_delay = 0.05 } }
end)

-- Kthena's score for a pod holding the first `held` blocks of a prompt of
-- `ntokens` tokens (blocks of 16, the partial tail counted).
local function score_for(held, ntokens)
  return math.floor(held / ((ntokens + 15) // 16) * 100)
end

local function full_blocks(tokens)
  return kvcache.prefix(tokens, #tokens // 16)
end

test("chat requests are matched by their chat-template tokens, not by their text",
  { tags = { "needs:kvcache_score" } }, function()
  local system, question = stack:text(24), stack:text(30)
  local messages = { { role = "system", content = system }, { role = "user", content = question } }
  local chat = stack:tokens { messages = messages }
  local text = stack:tokens { prompt = system .. " " .. question }
  expect(stack:hashes(chat)[1]):ne(stack:hashes(text)[1],
    "the chat template changes the first block: the pod's /tokenize must have applied it to the messages")

  -- p1 caches the conversation as plain text, p2 as the chat prompt.
  stack:inject("p1", kvcache.stored { tokens = full_blocks(text) })
  stack:inject("p2", kvcache.stored { tokens = full_blocks(chat) })
  stack:expect_owner { messages = messages, pod = "p2" }
  local t = stack:expect_routed { messages = messages, pod = "p2", n = 3, max_tokens = 1 }

  -- p2 winning is the claim (matched by the text, p1 would hold the whole
  -- prefix); the scores say it again where the router reports them.
  if not stack:can("decisions") then return end
  local s = stack:scores(t.results[1])
  expect(s.p2["kvcache-aware"]):eq(score_for(#chat // 16, #chat), string.format(
    "p2 holds %d of the chat prompt's %d tokens in whole blocks", (#chat // 16) * 16, #chat))
  expect(s.p1["kvcache-aware"]):is_nil("p1's blocks of the flattened text are no prefix of the chat prompt")
end)

test("content given as text parts matches the cache of the same text joined by newlines",
  { tags = { "needs:kvcache_score", "needs:chat_text_parts" } }, function()
  local a, b = stack:text(20), stack:text(20)
  local joined = { { role = "user", content = a .. "\n" .. b } }
  local parts = { { role = "user", content = { { type = "text", text = a }, { type = "text", text = b } } } }
  local tokens = stack:tokens { messages = joined }
  stack:inject("p3", kvcache.stored { tokens = full_blocks(tokens) })
  stack:expect_owner { messages = joined, pod = "p3" }
  stack:expect_routed { messages = parts, pod = "p3", n = 2, max_tokens = 1 }
end)

test("each conversation's next turn lands on the pod that cached its earlier turns",
  { tags = { "needs:kvcache_score" } }, function()
  -- Two conversations, each first turn routed as the router likes; then
  -- every later turn resends the whole conversation.
  local conversations = {}
  for c = 1, 2 do
    local messages = { { role = "system", content = stack:text(20) }, { role = "user", content = stack:text(28) } }
    local r = assert(stack:complete { messages = messages, max_tokens = 8 })
    expect(r.status):eq(200, "the router serves the turn: " .. r.body)
    expect(r.text):type("string", "the first turn's reply is the assistant message of the next turn")
    conversations[c] = { messages = messages, pod = r.pod, reply = r.text }
  end

  local scored = {} -- score checks, made once every turn's routing is checked
  for turn = 2, 3 do
    for c, conv in ipairs(conversations) do
      -- The pod's sim announced the blocks of the turns it served.
      stack:expect_owner { messages = conv.messages, pod = conv.pod }
      local before = stack:tokens { messages = conv.messages }
      table.insert(conv.messages, { role = "assistant", content = conv.reply })
      table.insert(conv.messages, { role = "user", content = stack:text(12) })
      local r = assert(stack:complete { messages = conv.messages, max_tokens = 8 })
      expect(r.status):eq(200, "the router serves the turn: " .. r.body)
      if r.pod ~= conv.pod then
        fail(string.format("turn %d of conversation %d went to %s, not to %s, which cached its earlier turns. "
          .. "First broken link: %s", turn, c, tostring(r.pod), conv.pod,
          stack:explain { messages = conv.messages, pod = conv.pod, request_id = r.request_id }))
      end
      local now_tokens = stack:tokens { messages = conv.messages }
      scored[#scored + 1] = { r = r, pod = conv.pod, want = score_for(#before // 16, #now_tokens),
        why = string.format("turn %d of conversation %d: %s holds the %d whole blocks of the turns before, of "
          .. "%d tokens now", turn, c, conv.pod, #before // 16, #now_tokens) }
      conv.reply = r.text
    end
  end
  for _, x in ipairs(stack:can("decisions") and scored or {}) do
    stack:expect_scored(x.r, x.pod, x.want, x.why)
  end
end)
