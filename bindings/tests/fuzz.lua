-- The fuzz targets, run briefly on their seed corpora: the KV-event decoder,
-- the HTTP server's request path and the line framing of a streamed body
-- (a watch read with lines = true) must survive arbitrary bytes.  `make
-- test` builds them (clang's libFuzzer) into $KVENGINE_FUZZ_DIR; `make
-- fuzz-events` / `make fuzz-http FUZZ_TIME=600` run them longer.

local proc = require("proc")

local DIR = os.getenv("KVENGINE_FUZZ_DIR") or "build/fuzz"
local SECONDS = 5

local targets = {
  { name = "events", corpus = "bindings/fuzz/corpus/events", max_len = 4096 },
  { name = "http", corpus = "bindings/fuzz/corpus/http", max_len = 8192 },
  { name = "lines", corpus = "bindings/fuzz/corpus/lines", max_len = 4096 },
}

for _, t in ipairs(targets) do
  test("fuzz: " .. t.name .. " survives " .. SECONDS .. " s of mutated input", { timeout = 60 }, function()
    local bin = DIR .. "/fuzz_" .. t.name
    local f = io.open(bin)
    if not f then skip(bin .. " is not built (make test builds it)") end
    f:close()
    local work = os.tmpname()
    os.remove(work)
    expect(proc.run { argv = { "cp", "-R", t.corpus, work } }):eq(0, "copy the seed corpus")
    local status, _, err = proc.run { argv = { bin, "-max_total_time=" .. SECONDS, "-max_len=" .. t.max_len,
      "-timeout=10", "-artifact_prefix=" .. work .. "-", work }, timeout = 60 }
    proc.run { argv = { "rm", "-rf", work } }
    if status ~= 0 then
      artifact("fuzz-" .. t.name .. ".log", err or "")
      fail("the fuzzer stopped with status " .. tostring(status) .. ": " ..
        ((err or ""):match("==%d+==ERROR[^\n]*") or (err or ""):match("[^\n]*\n?$")))
    end
    expect(err):matches("Done %d+ runs", "libFuzzer reports its runs")
  end)
end
