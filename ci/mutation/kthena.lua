-- ci/mutation/kthena.lua - the mutants `make mutation TARGET=kthena
-- KTHENA_DIR=<checkout>` applies to a copy of Kthena's own router source
-- (ci/mutation/run.lua --target kthena), one per rule of docs/kthena.md's
-- rule index that lives in Kthena's Go code at least.
--
-- Each mutant: name; rule; what it breaks, in words; file, under the
-- checkout; find, a short piece of one line of that file that must occur
-- there exactly once (else the mutant is reported stale: Kthena's code
-- moved); replace, one line; tests, the scenario files that kill it on the
-- kthena target (only these are run); filter, a pattern of the names of
-- the tests in them to run (when others of the file would only cost time);
-- needs, the capabilities of the
-- kthena driver those tests need (a mutant whose capability the driver
-- declares absent, or does not declare, is reported as not runnable on
-- this build). Anchors are kept as short as uniqueness allows: the catalogue
-- points into Kthena's code, it does not copy it.

local R = "pkg/kthena-router/"
local KA = R .. "scheduler/plugins/kvcache_aware.go"
local TOK = R .. "scheduler/plugins/tokenization/"
local SCHED = R .. "scheduler/scheduler_impl.go"
local ROUTER = R .. "router/router.go"

return {
  -- ---------------------------------------------------------------- KEY
  { name = "k-tail-block-dropped", rule = "KEY-1", file = KA,
    what = "the final partial block is not hashed",
    find = "i < len(tokens) && len(chunks) < maxBlocks;", replace = "i+tbp.blockSize <= len(tokens) && len(chunks) < maxBlocks;",
    tests = { "scenarios/partial_prefix.lua" } },
  { name = "k-hash-top-bit-kept", rule = "KEY-2", file = KA,
    what = "the block hash keeps its top bit",
    find = "fullHash & 0x7FFFFFFFFFFFFFFF", replace = "fullHash",
    -- Half of all hashes have the top bit clear, so a short prompt may still
    -- match; a full score over 128 blocks cannot.
    tests = { "scenarios/long_prompt.lua" }, filter = "first 128 blocks" },
  { name = "k-key-prefix", rule = "KEY-3", file = KA,
    what = "the router looks blocks up under another key prefix than the runtime writes",
    find = [[kvCacheKeyPrefix = "matrix:kv:block:"]], replace = [[kvCacheKeyPrefix = "matrix:kv:blocks:"]],
    tests = { "scenarios/datapath.lua" } },

  -- ---------------------------------------------------------------- OWNER
  { name = "k-owner-without-namespace", rule = "OWNER-1", file = KA,
    what = "the router compares owners by pod name alone",
    find = [[fmt.Sprintf("%s.%s", podName.Name, podName.Namespace)]], replace = "podName.Name",
    tests = { "scenarios/datapath.lua" } },
  { name = "k-non-candidates-counted", rule = "OWNER-6", file = KA,
    what = "owners that are not candidates of the request count in the walk and the match ratio",
    find = "candidateNames[name]; ok {", replace = "candidateNames[name]; ok || true {",
    tests = { "scenarios/candidates_only.lua" } },

  -- ---------------------------------------------------------------- FRESH
  { name = "k-same-second-fresh", rule = "FRESH-1", file = KA,
    what = "ownership stamped in the pod's start second counts",
    find = "written <= startedAt", replace = "written < startedAt",
    tests = { "scenarios/restart_freshness.lua" }, filter = "restart second" },
  { name = "k-unparsable-dropped", rule = "FRESH-2", file = KA,
    what = "an owner whose value does not parse is dropped as stale",
    find = "err == nil && written <= startedAt", replace = "(err != nil || written <= startedAt)",
    tests = { "scenarios/restart_freshness.lua" } },
  { name = "k-gc-every-second", rule = "FRESH-3", file = KA,
    what = "the GC runs every second, deleting fields older than a second instead of a day",
    find = "kvCacheFieldFreshDuration = 24 * time.Hour", replace = "kvCacheFieldFreshDuration = time.Second",
    -- Kthena's GC runs hourly; the harness runs its step on demand
    -- (fixtures/kthena/gc.go, capability router_gc).
    tests = { "scenarios/restart_freshness.lua" }, filter = "GC", needs = { "router_gc" } },

  -- ---------------------------------------------------------------- SCORE
  { name = "k-walk-resumes-after-gap", rule = "SCORE-1", file = KA,
    what = "a pod missing a block in the middle goes on matching after it",
    find = "if podScores[podName] == i {", replace = "if podScores[podName] >= 1 {",
    tests = { "scenarios/partial_prefix.lua" } },
  { name = "k-score-rounded", rule = "SCORE-2", file = KA,
    what = "the score is rounded instead of truncated",
    find = "float64(totalBlocks)) * 100)", replace = "float64(totalBlocks))*100 + 0.5)",
    tests = { "scenarios/partial_prefix.lua" } },
  { name = "k-zero-for-non-owners", rule = "SCORE-3", file = KA,
    what = "every candidate without block 0 gets a kvcache-aware score of 0",
    find = "podScores[podScoreKey]; exists {", replace = "podScores[podScoreKey]; exists || true {",
    tests = { "scenarios/partial_prefix.lua" } },
  { name = "k-match-ratio-full", rule = "SCORE-4", file = KA,
    what = "kvcache-aware's match ratio reports every block matched once block 0 is owned",
    find = "longestMatch := lastMatchedBlock + 1", replace = "longestMatch := totalBlocks",
    tests = { "scenarios/partial_prefix.lua", "scenarios/candidates_only.lua" } },
  { name = "k-match-ratio-of-total", rule = "SCORE-4", file = R .. "scheduler/plugins/prefix_cache.go",
    what = "the match ratio (prefix-cache's function, shared) is 1 whatever matched",
    find = "return float64(matched) / float64(total)", replace = "return float64(total) / float64(total)",
    tests = { "scenarios/candidates_only.lua", "scenarios/partial_prefix.lua" } },
  { name = "k-weights-ignored", rule = "SCORE-5", file = SCHED,
    what = "plugin weights are ignored in the total",
    find = "res[k] = v * scorePlugin.weight", replace = "res[k] = v",
    tests = { "scenarios/plugin_weights.lua" } },
  { name = "k-best-one-only", rule = "SCORE-5", file = SCHED,
    what = "only the best pod is kept, so nothing is left to retry on",
    find = "topN = 5", replace = "topN = 1",
    tests = { "scenarios/upstream_retry.lua" } },
  { name = "k-random-kept-beside-others", rule = "SCORE-6", file = R .. "scheduler/plugins/conf/conf.go",
    what = "random stays configured beside other score plugins",
    find = "if hasRandomPlugin && hasOtherScorePlugins {", replace = "if hasRandomPlugin && hasOtherScorePlugins && false {",
    tests = { "scenarios/plugin_weights.lua" }, filter = "random" },
  { name = "k-least-request-idle-99", rule = "SCORE-7", file = R .. "scheduler/plugins/least_request.go",
    what = "least-request scores an idle pod 99 instead of 100",
    find = "score := 100.0", replace = "score := 99.0",
    tests = { "scenarios/datapath.lua" } },
  { name = "k-least-request-queue-unweighted", rule = "SCORE-7", file = R .. "scheduler/plugins/least_request.go",
    what = "least-request does not weigh requests queued in the engine 100 times",
    find = "+ 100*math.Max(", replace = "+ 0*math.Max(",
    tests = { "scenarios/plugin_weights.lua" }, filter = "queued" },
  { name = "k-random-constant", rule = "SCORE-8", file = R .. "scheduler/plugins/random.go",
    what = "random scores every pod 100",
    find = "score := rand.Intn(101)", replace = "score := 100 + rand.Intn(1)",
    tests = { "scenarios/plugin_weights.lua" }, filter = "random" },

  -- ---------------------------------------------------------------- FILTER
  { name = "k-max-waiting-inclusive", rule = "FILTER-1", file = R .. "scheduler/plugins/least_request.go",
    what = "least-request keeps a pod reporting exactly maxWaitingRequests waiting (< turned <=)",
    find = "GetRequestWaitingNum() < float64(", replace = "GetRequestWaitingNum() <= float64(",
    tests = { "scenarios/least_request_boundary.lua" } },
  { name = "k-lora-filter-removed", rule = "FILTER-2", file = R .. "scheduler/plugins/lora_affinity.go",
    what = "lora-affinity keeps every pod",
    find = "return info.Contains(ctx.Model)", replace = "return info.Contains(ctx.Model) || true",
    tests = { "scenarios/lora_prefix.lua" } },
  { name = "k-pod-serves-any-model", rule = "FILTER-2", file = R .. "datastore/store.go",
    what = "the datastore says a pod serves every model (PodInfo.Contains)",
    find = "p.models != nil && p.models.Contains(model)", replace = "p.models != nil",
    tests = { "scenarios/lora_prefix.lua" } },
  { name = "k-empty-filter-continues", rule = "FILTER-3", file = SCHED,
    what = "a filter that leaves no pod does not fail the request",
    find = [[return nil, fmt.Errorf("pods have all been filtered out]], replace = [[return pods, nil; _ = fmt.Errorf("pods have all been filtered out]],
    tests = { "scenarios/request_errors.lua" }, filter = "filter" },
  { name = "k-waiting-from-running-gauge", rule = "FILTER-4", file = R .. "backend/vllm/metrics.go",
    what = "the router reads a vLLM pod's waiting requests from its running gauge",
    find = [[RequestWaitingNum = "vllm:num_requests_waiting"]], replace = [[RequestWaitingNum = "vllm:num_requests_running"]],
    tests = { "scenarios/least_request_boundary.lua" } },

  -- ---------------------------------------------------------------- RETRY
  { name = "k-no-upstream-retry", rule = "RETRY-1", file = ROUTER,
    what = "a failed upstream is not retried on the next best pod",
    find = "i < len(ctx.BestPods); i++ {", replace = "i < len(ctx.BestPods) && i < 1; i++ {",
    tests = { "scenarios/upstream_retry.lua" } },
  { name = "k-attempts-not-counted", rule = "RETRY-2", file = ROUTER,
    what = "the access log counts one upstream attempt whatever happened",
    find = "pod := ctx.BestPods[i]", replace = "pod := ctx.BestPods[i]; defer accesslog.SetUpstreamInfo(c, 0, 1)",
    tests = { "scenarios/upstream_retry.lua" } },
  { name = "k-selected-pod-last", rule = "RETRY-2", file = ROUTER,
    what = "the access log's selected_pod names the last of the best pods, not the one scheduled first",
    find = "selectedPod := ctx.BestPods[0]", replace = "selectedPod := ctx.BestPods[len(ctx.BestPods)-1]",
    tests = { "scenarios/upstream_retry.lua", "scenarios/lora_prefix.lua" } },
  { name = "k-tokenizer-not-retried", rule = "RETRY-3", file = TOK .. "remote_client.go",
    what = "a failed tokenize request is not retried",
    find = "defaultMaxRetries = 1", replace = "defaultMaxRetries = 0",
    tests = { "scenarios/tokenizer_failure.lua" }, needs = { "fault" } },
  { name = "k-redis-never-redialled", rule = "RETRY-4", file = R .. "utils/redis.go",
    what = "the router's Redis client refuses every connection after its first: once Redis restarted it never scores",
    find = "DB:       0,",
    replace = "DB: 0, OnConnect: func() func(context.Context, *redis.Conn) error { n := 0; return func(context.Context, *redis.Conn) error { n++; if n > 1 { return context.Canceled }; return nil } }(),",
    tests = { "scenarios/redis_outage.lua" } },

  -- ---------------------------------------------------------------- ERR
  { name = "k-trailing-body-accepted", rule = "ERR-1", file = ROUTER,
    what = "a body with data after its first JSON value is accepted",
    find = "Decode(&struct{}{}); err != io.EOF {", replace = "Decode(&struct{}{}); err != io.EOF && false {",
    tests = { "scenarios/request_errors.lua" } },
  { name = "k-blank-model-accepted", rule = "ERR-2", file = ROUTER,
    what = "a blank model is taken as a model name",
    find = [[strings.TrimSpace(modelName) == ""]], replace = [[modelName == ""]],
    tests = { "scenarios/request_errors.lua" } },
  { name = "k-missing-prompt-empty", rule = "ERR-3", file = ROUTER,
    what = "a request without a usable prompt is served as an empty prompt instead of 404 prompt not found",
    find = "prompt, err := utils.ParsePrompt(modelRequest)",
    replace = "prompt, err := utils.ParsePrompt(modelRequest); if err != nil { prompt, err = &common.ChatMessage{}, nil }",
    tests = { "scenarios/request_errors.lua" } },
  -- ---------------------------------------------------------------- ROUTE
  { name = "k-route-headers-ignored", rule = "ROUTE-1", file = R .. "datastore/store.go",
    what = "a rule's header match is ignored: the route's first rule takes every request",
    find = "headersMatched = false", replace = "headersMatched = true",
    tests = { "scenarios/model_server_groups.lua" } },
  { name = "k-candidates-of-every-server", rule = "ROUTE-2", file = ROUTER,
    what = "the candidates are every pod the router knows, not the pods of the ModelServer the route picked",
    find = "pods, err := r.store.GetPodsByModelServer(modelServerName)",
    replace = "pods, err := func() (ps []*datastore.PodInfo, e error) { for _, p := range r.store.GetAllPods() "
      .. "{ ps = append(ps, p) }; return }()",
    tests = { "scenarios/model_server_groups.lua" } },

  { name = "k-route-always-found", rule = "ERR-4", file = R .. "datastore/store.go",
    what = "a model no ModelRoute names is routed by some other model's route instead of 404 route not found",
    find = "routes, ok := s.routes[model]",
    replace = "routes, ok := s.routes[model]; if !ok { for _, any := range s.routes { routes, ok = any, true; break } }",
    tests = { "scenarios/request_errors.lua" } },
  { name = "k-tokenize-error-as-redis", rule = "ERR-5", file = KA,
    what = "a tokenize failure is counted under stage redis",
    find = "RecordKVCacheError(metrics.StageTokenize)", replace = "RecordKVCacheError(metrics.StageRedis)",
    tests = { "scenarios/tokenizer_failure.lua" }, needs = { "fault" } },
  { name = "k-redis-error-as-tokenize", rule = "ERR-6", file = KA,
    what = "a Redis failure is counted under stage tokenize",
    find = "RecordKVCacheError(metrics.StageRedis)", replace = "RecordKVCacheError(metrics.StageTokenize)",
    tests = { "scenarios/redis_outage.lua" } },
  { name = "k-redis-late-dialled", rule = "ERR-7", file = KA,
    what = "a router that could not PING Redis at start dials it at the next request and scores",
    find = [[return blockToPods, fmt.Errorf("redis client not initialized")]],
    replace = [[if t.redisClient = utils.TryGetRedisClient(); t.redisClient == nil { return blockToPods, fmt.Errorf("redis client not initialized") }]],
    tests = { "scenarios/redis_outage.lua" } },
  { name = "k-malformed-reply-accepted", rule = "ERR-8", file = TOK .. "vllm.go",
    what = "a tokenize reply that does not decode is taken as no tokens, not as a failure",
    find = "json.Unmarshal(data, &resp); err != nil {", replace = "json.Unmarshal(data, &resp); err != nil && false {",
    tests = { "scenarios/tokenizer_failure.lua" }, filter = "not JSON", needs = { "fault" } },
  { name = "k-empty-prompt-tokenized", rule = "ERR-9", file = KA,
    what = "an empty prompt is sent to the tokenizer and counted as a failure",
    find = [[(ctx.Prompt.Text == "" && len(ctx.Prompt.Messages) == 0) || ctx.Model == ""]], replace = [[ctx.Model == ""]],
    tests = { "scenarios/request_errors.lua" } },

  -- ---------------------------------------------------------------- WIRE
  { name = "k-tokenizer-port-ignored", rule = "WIRE-1", file = KA,
    what = "the configured vllmTokenizerPort is ignored: vLLM pods are tokenized at the default port",
    find = "args.VLLMTokenizerPort, defaultVLLMTokenizerPort", replace = "0, defaultVLLMTokenizerPort",
    tests = { "scenarios/tokenize_requests.lua" }, needs = { "tokenizer_port" } },
  { name = "k-generation-prompt-flipped", rule = "WIRE-2", file = TOK .. "tokenizer_manager.go",
    what = "the chat tokenize request asks for no generation prompt",
    find = "AddGenerationPrompt: true,", replace = "AddGenerationPrompt: false,",
    tests = { "scenarios/tokenize_requests.lua" }, needs = { "tokenize_log" } },
  { name = "k-upstream-body-dropped", rule = "WIRE-4", file = ROUTER,
    what = "the upstream request is sent with an empty body",
    find = "req.Body = io.NopCloser(bytes.NewReader(bodyBytes))", replace = "req.Body = io.NopCloser(bytes.NewReader(bodyBytes[:0]))",
    tests = { "scenarios/datapath.lua" } },
  { name = "k-errors-metric-renamed", rule = "WIRE-5", file = R .. "metrics/metrics.go",
    what = "the kvcache-aware errors counter is published under another name",
    find = [["kthena_router_kvcache_aware_errors_total"]], replace = [["kthena_router_kvcache_aware_error_total"]],
    tests = { "scenarios/redis_outage.lua" } },
  { name = "k-access-log-attempts-renamed", rule = "WIRE-6", file = R .. "accesslog/logger.go",
    what = "the access log writes upstream_attempts under another name",
    find = [[" upstream_attempts=%d"]], replace = [[" attempts=%d"]],
    tests = { "scenarios/upstream_retry.lua" } },
}
