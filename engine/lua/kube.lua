-- kube.lua - the Kubernetes API from Lua, on the engine's http binding: a
-- client of one cluster, made from a kubeconfig as kubectl reads it
-- (kubeconfig.lua), whose calls wait on the engine's loop like http's and
-- redis's. Reads, writes and server-side apply are REST calls; waits follow
-- the API's watch streams (kube_watch.lua) instead of polling.
--
--   local kube = require("kube")
--   local k = assert(kube.client{kubeconfig =, context =, namespace =,
--                                field_manager = "kvengine", timeout =, log = fn(line)})
--   k:get("pods", "p1")                          -> object | nil, err, status
--   k:list("pods", {labels = "app=x", fields =}) -> list (items, metadata.resourceVersion)
--   k:create(obj)   k:apply(obj, {force = true})   k:patch("deployments", "d", patch, {type = "merge"})
--   k:delete("pods", "p1", {grace_period = 0, propagation = "Foreground"})
--   k:logs("p1", {container =, since =, tail =, follow = true, stream = fn(line)})
--   k:watch("pods", {labels =}, function(type, obj) ... return done end)   (kube_watch.lua)
--   k:wait("pods", {labels =}, function(objects) return value end)        (kube_watch.lua)
--   k:namespaced(ns) -> a client of the same cluster whose default namespace is ns
--
-- A resource is named as kubectl names it: plural, singular, kind, short name
-- or plural.group ("pods", "Pod", "po", "deployments.apps", "modelroutes");
-- the server's discovery (read once, again when a name is unknown, as after
-- a CRD is installed) maps it to its group, version and scope. An object's
-- apiVersion and kind say its own. Every option table is checked strictly.
--
-- Expected failures return nil, err, status: err names the call as kubectl
-- would ("get pods p1 -n x") and what the server said; status is the API's
-- Status object (code, reason, message) when the server answered, nil when
-- it did not (err is then http's, or "timeout"). Timeouts follow the
-- bindings' one rule (docs/api-modules.md): an HTTP transfer's default,
-- 30 s times the time scale, per call unless opts.timeout says otherwise.
-- Each request is given to opts.log as "GET <url> -> 200 (0.01s)", which a
-- stranger can repeat with curl and the kubeconfig's credentials.

local engine = require("engine")
local http = require("http")
local json = require("json")
local kubeconfig = require("kubeconfig")

local M = {}
local C = {}
C.__index = C

local TRANSFER = 30 -- seconds: the http binding's default for a transfer
local DISCOVERY_ACCEPT = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
local PATCH_TYPES = { merge = "application/merge-patch+json", strategic = "application/strategic-merge-patch+json",
  json = "application/json-patch+json" }

local CLIENT_KEYS = { "kubeconfig", "context", "namespace", "field_manager", "timeout", "log" }
local GET_KEYS = { "namespace", "timeout" }
local LIST_KEYS = { "namespace", "all_namespaces", "labels", "fields", "timeout" }
local WRITE_KEYS = { "namespace", "timeout", "field_manager", "force", "dry_run" }
local PATCH_KEYS = { "namespace", "timeout", "type", "field_manager", "subresource" }
local DELETE_KEYS = { "namespace", "timeout", "propagation", "grace_period" }
local LOG_KEYS = { "namespace", "container", "follow", "since", "since_time", "tail", "timestamps", "previous",
  "timeout", "stream" }
local REQUEST_KEYS = { "method", "path", "query", "body", "json", "content_type", "accept", "timeout", "stream",
  "lines" }

M.options = { client = CLIENT_KEYS, get = GET_KEYS, list = LIST_KEYS, create = WRITE_KEYS, apply = WRITE_KEYS,
  patch = PATCH_KEYS, delete = DELETE_KEYS, logs = LOG_KEYS, request = REQUEST_KEYS }

-- Percent-encoding of a path segment or query value (RFC 3986's unreserved kept).
local function escape(s)
  return (tostring(s):gsub("[^%w%-._~]", function(c) return string.format("%%%02X", c:byte()) end))
end
M.escape = escape

-- "?a=1&b=2" of a table (keys sorted, nil values left out), "" for none.
local function query_string(q)
  if not q then return "" end
  local keys = {}
  for k in pairs(q) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = escape(k) .. "=" .. escape(q[k]) end
  return #parts > 0 and ("?" .. table.concat(parts, "&")) or ""
end

-- A label or field selector: a string as given, a table {k = v} as "k=v,..." (sorted).
local function selector(s)
  if type(s) ~= "table" then return s end
  local parts = {}
  for k, v in pairs(s) do parts[#parts + 1] = k .. "=" .. tostring(v) end
  table.sort(parts)
  return table.concat(parts, ",")
end
M.selector = selector

-- kube.client(opts) -> client | nil, err
function M.client(o)
  o = o or {}
  engine.check_options("kube.client", o, CLIENT_KEYS)
  local timeout = engine.timeout("kube.client", o, TRANSFER)
  local cfg, err = kubeconfig.read { kubeconfig = o.kubeconfig, context = o.context }
  if not cfg then return nil, err end
  return setmetatable({ server = cfg.server, context = cfg.context, namespace = o.namespace or cfg.namespace,
    tls = cfg.tls, token = cfg.token, files = cfg.files, field_manager = o.field_manager or "kvengine",
    timeout = timeout, log = o.log, shared = { discovery = nil } }, C)
end

-- A client of the same cluster (and discovery) whose default namespace is ns.
function C:namespaced(ns)
  local k = setmetatable({}, C)
  for key, v in pairs(self) do k[key] = v end
  k.namespace = ns
  return k
end

function C:note(line)
  if self.log then self.log(line) end
end

-- ------------------------------------------------------------ requests

-- request{method, path, query, body | json, content_type, accept, timeout,
-- stream, lines} -> http's response | nil, err: one call to the API server,
-- with the client's credentials, given to the log.
function C:request(o, what)
  engine.check_options("kube: request", o, REQUEST_KEYS)
  local headers = { Accept = o.accept or "application/json" }
  if self.token then headers.Authorization = "Bearer " .. self.token end
  local body = o.body
  if o.json ~= nil then body = json.encode(o.json) end
  if body then headers["Content-Type"] = o.content_type or "application/json" end
  local url = self.server .. o.path .. query_string(o.query)
  local method = o.method or "GET"
  local t0 = now()
  local r, err = http.request { method = method, url = url, headers = headers, body = body,
    timeout = o.timeout or self.timeout, tls = self.tls, stream = o.stream, lines = o.lines }
  self:note(string.format("%s %s -> %s (%.2fs)%s", method, url, r and tostring(r.status) or tostring(err), now() - t0,
    what and (": kubectl " .. what) or ""))
  return r, err
end

-- The Status the server answered with (or one made of the HTTP status).
local function status_of(r)
  local st = json.safe.decode(r.body or "")
  if type(st) == "table" and st.kind == "Status" then return st end
  return { kind = "Status", code = r.status, reason = r.status == 404 and "NotFound" or ("HTTP " .. r.status),
    message = (r.body or ""):sub(1, 300):gsub("%s+$", "") }
end

-- r decoded when 2xx; else nil, "kube: <what>: <message> (<code> <reason>)", status.
local function answer(what, r, err)
  if not r then
    if err == "timeout" then return nil, "timeout" end
    return nil, string.format("kube: %s: %s", what, tostring(err))
  end
  if r.status >= 200 and r.status < 300 then
    local doc, jerr = json.safe.decode(r.body)
    if doc == nil then return nil, string.format("kube: %s: the server's answer is not JSON (%s)", what, jerr) end
    return doc
  end
  local st = status_of(r)
  return nil, string.format("kube: %s: %s (%s %s)", what, tostring(st.message), tostring(st.code or r.status),
    tostring(st.reason or "")), st
end
M._answer = answer

-- One request of a call that kubectl words as `what` ("get pods p1 -n x"),
-- its answer decoded (answer above); the log line names the kubectl
-- equivalent beside the HTTP request.
function C:call(what, o)
  return answer(what, self:request(o, what))
end

-- ------------------------------------------------------------ discovery

-- Index one resource of a group version under every name kubectl accepts.
local function index(d, res)
  local function put(key)
    if key and d.by_name[key] == nil then d.by_name[key] = res end
  end
  put(res.name)
  put(res.singular)
  put(res.kind:lower())
  for _, s in ipairs(res.short or {}) do put(s) end
  if res.group ~= "" then put(res.name .. "." .. res.group) end
  d.by_gvk[(res.group ~= "" and (res.group .. "/") or "") .. res.version .. "/" .. res.kind] = res
end

-- Aggregated discovery (APIGroupDiscoveryList) of /api or /apis into d.
local function add_aggregated(d, list)
  for _, g in ipairs(list.items or {}) do
    local group = g.metadata and g.metadata.name or ""
    for _, v in ipairs(g.versions or {}) do
      for _, r in ipairs(v.resources or {}) do
        local kind = r.responseKind and r.responseKind.kind
        if kind and kind ~= "" then
          index(d, { group = group, version = v.version, name = r.resource, singular = r.singularResource,
            kind = kind, namespaced = r.scope == "Namespaced", short = r.shortNames })
        end
      end
    end
  end
end

-- An APIResourceList (the discovery of servers without aggregation) into d.
local function add_legacy(d, group, version, list)
  for _, r in ipairs(list.resources or {}) do
    if not r.name:find("/", 1, true) then
      index(d, { group = group, version = version, name = r.name, singular = r.singularName ~= "" and r.singularName
        or nil, kind = r.kind, namespaced = r.namespaced, short = r.shortNames })
    end
  end
end

-- GET path, decoded (kubectl's words: get --raw <path>).
function C:get_path(path, accept)
  return self:call("get --raw " .. path, { path = path, accept = accept })
end

local function legacy_discovery(self, d, core)
  for _, v in ipairs(core.versions or {}) do
    local list, err, st = self:get_path("/api/" .. v)
    if not list then return nil, err, st end
    add_legacy(d, "", v, list)
  end
  local groups, err, st = self:get_path("/apis")
  if not groups then return nil, err, st end
  for _, g in ipairs(groups.groups or {}) do
    local pv = g.preferredVersion or (g.versions or {})[1]
    local list = pv and self:get_path("/apis/" .. pv.groupVersion) -- an unavailable group is left out
    if list then add_legacy(d, g.name, pv.version, list) end
  end
  return d
end

-- The server's resource types, read now: {by_name =, by_gvk =}.
function C:discover()
  local d = { by_name = {}, by_gvk = {} }
  local core, err, st = self:get_path("/api", DISCOVERY_ACCEPT)
  if not core then return nil, err, st end
  if core.kind ~= "APIGroupDiscoveryList" then
    d, err, st = legacy_discovery(self, d, core)
    if not d then return nil, err, st end
  else
    add_aggregated(d, core)
    local groups
    groups, err, st = self:get_path("/apis", DISCOVERY_ACCEPT)
    if not groups then return nil, err, st end
    add_aggregated(d, groups)
  end
  self.shared.discovery = d
  return d
end

-- The resource type ref names ("pods", "Pod", "deployments.apps", or an
-- object with apiVersion and kind): {group, version, name, kind, namespaced}
-- | nil, err. An unknown name reads discovery again once.
function C:resource(ref)
  local function find(d)
    if type(ref) == "table" then return d.by_gvk[tostring(ref.apiVersion) .. "/" .. tostring(ref.kind)] end
    return d.by_name[ref] or d.by_name[tostring(ref):lower()]
  end
  local d = self.shared.discovery
  local res = d and find(d)
  if res then return res end
  local err, st
  d, err, st = self:discover()
  if not d then return nil, err, st end
  res = find(d)
  if res then return res end
  local name = type(ref) == "table" and (tostring(ref.apiVersion) .. " " .. tostring(ref.kind)) or tostring(ref)
  return nil, string.format("kube: the server has no resource type %q", name)
end

-- The URL path of a resource type, in namespace ns (when namespaced and
-- given), of the object `name` (when given) and its subresource.
function C:path(res, ns, name, sub)
  local p = res.group == "" and ("/api/" .. res.version) or ("/apis/" .. res.group .. "/" .. res.version)
  if res.namespaced and ns then p = p .. "/namespaces/" .. escape(ns) end
  p = p .. "/" .. res.name
  if name then p = p .. "/" .. escape(name) end
  if sub then p = p .. "/" .. sub end
  return p
end

-- The namespace a call on res uses: opts', the object's, the client's.
function C:ns_for(res, o, obj)
  if not res.namespaced then return nil end
  return o.namespace or (obj and obj.metadata and obj.metadata.namespace) or self.namespace
end

-- "get pods p1 -n ns": a call as kubectl words it, for messages.
local function words(verb, res, name, ns)
  return verb .. " " .. res.name .. (res.group ~= "" and ("." .. res.group) or "") .. (name and (" " .. name) or "")
    .. (ns and (" -n " .. ns) or "")
end

-- ------------------------------------------------------------ verbs

function C:get(ref, name, o)
  o = o or {}
  engine.check_options("kube: get", o, GET_KEYS)
  local res, err, st = self:resource(ref)
  if not res then return nil, err, st end
  local ns = self:ns_for(res, o)
  return self:call(words("get", res, name, ns), { path = self:path(res, ns, name), timeout = o.timeout })
end

-- Where a list or a watch looks and what it selects: its namespace (nil
-- across namespaces), its query (the label and field selectors, o.name as
-- one more field selector) and its listing as kubectl words it ("get pods
-- -n x -l app=y").
function C:selection(res, o)
  local ns = not o.all_namespaces and self:ns_for(res, o) or nil
  local fields = selector(o.fields)
  if o.name then fields = (fields and (fields .. ",") or "") .. "metadata.name=" .. o.name end
  local q = { labelSelector = selector(o.labels), fieldSelector = fields }
  return ns, q, words("get", res, nil, ns) .. (o.all_namespaces and " -A" or "")
    .. (q.labelSelector and (" -l " .. q.labelSelector) or "")
    .. (q.fieldSelector and (" --field-selector " .. q.fieldSelector) or "")
end

function C:list(ref, o)
  o = o or {}
  engine.check_options("kube: list", o, LIST_KEYS)
  local res, err, st = self:resource(ref)
  if not res then return nil, err, st end
  local ns, q, what = self:selection(res, o)
  return self:call(what, { path = self:path(res, ns), query = q, timeout = o.timeout })
end

local function object_name(obj)
  return obj.metadata and obj.metadata.name
end

function C:create(obj, o)
  o = o or {}
  engine.check_options("kube: create", o, WRITE_KEYS)
  local res, err, st = self:resource(obj)
  if not res then return nil, err, st end
  local ns = self:ns_for(res, o, obj)
  return self:call(words("create", res, object_name(obj), ns), { method = "POST", path = self:path(res, ns),
    json = obj, query = { fieldManager = o.field_manager or self.field_manager, dryRun = o.dry_run and "All" or nil },
    timeout = o.timeout })
end

-- Server-side apply: obj is the field manager's whole intent for the object.
function C:apply(obj, o)
  o = o or {}
  engine.check_options("kube: apply", o, WRITE_KEYS)
  local res, err, st = self:resource(obj)
  if not res then return nil, err, st end
  local name = object_name(obj)
  if not name then error("kube: apply: the object has no metadata.name", 2) end
  local ns = self:ns_for(res, o, obj)
  -- JSON is YAML, but for cjson's "\/", an escape YAML does not have
  local body = json.encode(obj):gsub("\\/", "/")
  return self:call(words("apply --server-side", res, name, ns), { method = "PATCH",
    path = self:path(res, ns, name), body = body, content_type = "application/apply-patch+yaml",
    query = { fieldManager = o.field_manager or self.field_manager, force = o.force and "true" or nil,
      dryRun = o.dry_run and "All" or nil },
    timeout = o.timeout })
end

function C:patch(ref, name, patch, o)
  o = o or {}
  engine.check_options("kube: patch", o, PATCH_KEYS)
  local ctype = PATCH_TYPES[o.type or "merge"]
  if not ctype then error("kube: patch: type is merge, strategic or json, not " .. tostring(o.type), 2) end
  local res, err, st = self:resource(ref)
  if not res then return nil, err, st end
  local ns = self:ns_for(res, o)
  return self:call(words("patch", res, name, ns), { method = "PATCH",
    path = self:path(res, ns, name, o.subresource), json = patch, content_type = ctype,
    query = { fieldManager = o.field_manager or self.field_manager }, timeout = o.timeout })
end

local PROPAGATION = { Foreground = true, Background = true, Orphan = true }

function C:delete(ref, name, o)
  o = o or {}
  engine.check_options("kube: delete", o, DELETE_KEYS)
  if o.propagation and not PROPAGATION[o.propagation] then
    error("kube: delete: propagation is Foreground, Background or Orphan, not " .. tostring(o.propagation), 2)
  end
  local res, err, st = self:resource(ref)
  if not res then return nil, err, st end
  local ns = self:ns_for(res, o)
  return self:call(words("delete", res, name, ns), { method = "DELETE", path = self:path(res, ns, name),
    json = { apiVersion = "v1", kind = "DeleteOptions", propagationPolicy = o.propagation,
      gracePeriodSeconds = o.grace_period },
    timeout = o.timeout })
end

-- logs(pod, opts) -> text | nil, err, status: a container's log, as
-- `kubectl logs` prints it; with follow and stream, each line is handed to
-- stream(line) as it comes (return false to stop) until the container ends,
-- the stream stops or the timeout.
function C:logs(pod, o)
  o = o or {}
  engine.check_options("kube: logs", o, LOG_KEYS)
  if o.follow and not o.stream then error("kube: logs: follow needs a stream function", 2) end
  local res, err, st = self:resource("pods")
  if not res then return nil, err, st end
  local ns = self:ns_for(res, o)
  local bad = {}
  local stream = o.stream and function(line, head)
    if head.status ~= 200 then
      bad[#bad + 1] = line
      return
    end
    return o.stream(line)
  end
  local what = "logs " .. pod .. (o.container and (" -c " .. o.container) or "") .. (ns and (" -n " .. ns) or "")
  local r, rerr = self:request({ path = self:path(res, ns, pod, "log"), accept = "*/*", timeout = o.timeout,
    stream = stream, lines = stream and true or nil,
    query = { container = o.container, follow = o.follow and "true" or nil, sinceSeconds = o.since,
      sinceTime = o.since_time, tailLines = o.tail, timestamps = o.timestamps and "true" or nil,
      previous = o.previous and "true" or nil } }, what)
  if r and r.status >= 300 then
    if stream then r.body = table.concat(bad, "\n") end
    return answer(what, r)
  end
  if not r then return answer(what, r, rerr) end
  return r.body
end

require("kube_watch").mixin(C, M)

return M
