-- kube_watch.lua - the kube client's watches and waits: the API's own way to
-- follow objects as they change, instead of polling them (methods of the
-- client of kube.lua).
--
--   k:watch(ref, opts, handler) -> handler's value | nil, err, status
--   k:wait(ref, opts, predicate) -> predicate's value | nil, err, status
--
-- watch lists the objects first (unless opts.resource_version says where to
-- start) and hands each to handler("ADDED", obj), then handler("SYNC",
-- objects) with every object known by uid, then each event of the watch
-- stream (ADDED, MODIFIED, DELETED) as it comes. A stream the server ends
-- (its timeoutSeconds, opts.server_timeout, 300 s by default, or a restart
-- of the API server) is opened again from the last resourceVersion seen, so
-- no event is lost or repeated; when that version is too old for the server
-- (410 Gone, as an HTTP status or an ERROR event) the objects are listed
-- again and the difference is handed on as ADDED, MODIFIED and DELETED,
-- then SYNC. A handler that returns a true value ends the watch with it; one
-- that raises ends it with its error. opts.timeout bounds the whole watch
-- (the transfer default, 30 s times the time scale): nil, "timeout".
--
-- wait keeps the objects the watch knows by name and calls
-- predicate(objects, type, obj) after the first listing and after each
-- event; its first true value is wait's.

local engine = require("engine")
local json = require("json")

local W = {}

local WATCH_KEYS = { "namespace", "all_namespaces", "labels", "fields", "name", "resource_version", "timeout",
  "server_timeout" }
local SERVER_TIMEOUT = 300 -- seconds a watch request asks the server to keep its stream
local RETRY_MIN, RETRY_MAX = 0.05, 1 -- seconds between attempts to reopen a stream that failed

local function uid_of(obj)
  local m = obj.metadata or {}
  return m.uid or ((m.namespace or "") .. "/" .. tostring(m.name))
end

local function rv_of(obj)
  return obj.metadata and obj.metadata.resourceVersion
end

-- One watch in progress: the client, the resource, where (its
-- selection: namespace, query, the listing in kubectl's words; the watch
-- itself is that listing with --watch), what is known.
local function new_state(self, kube, res, o, handler)
  local ns, q, listing = self:selection(res, o)
  local timeout = engine.timeout("kube: watch", o, 30)
  return { k = self, kube = kube, res = res, ns = ns, o = o, handler = handler, known = {},
    rv = o.resource_version, deadline = now() + timeout, query = q, listing = listing,
    what = listing .. " --watch" }
end

-- Hand one event on; true (and the value) when the handler ends the watch.
local function deliver(w, type, obj)
  local v = w.handler(type, obj)
  if v then
    w.value = v
    return true
  end
end

-- List, and hand on the difference from what is known (all of it, the
-- first time), then SYNC. Returns true when the handler ended the watch.
local function relist(w)
  local q = {}
  for k, v in pairs(w.query) do q[k] = v end
  local remaining = w.deadline - now()
  if remaining <= 0 then return nil, "timeout" end
  local list, err, st = w.k:call(w.listing, { path = w.k:path(w.res, w.ns),
    query = q, timeout = remaining })
  if not list then return nil, err, st end
  w.rv = list.metadata and list.metadata.resourceVersion
  local seen = {}
  for _, item in ipairs(list.items or {}) do
    local id = uid_of(item)
    seen[id] = true
    local before = w.known[id]
    w.known[id] = item
    if not before then
      if deliver(w, "ADDED", item) then return true end
    elseif rv_of(before) ~= rv_of(item) then
      if deliver(w, "MODIFIED", item) then return true end
    end
  end
  for id, obj in pairs(w.known) do
    if not seen[id] then
      w.known[id] = nil
      if deliver(w, "DELETED", obj) then return true end
    end
  end
  return deliver(w, "SYNC", w.known) or false
end

-- One line of the stream: an event handed on; false stops the transfer
-- (the handler is done, the version is gone, or the server said ERROR).
local function on_line(w, line)
  local ev = json.safe.decode(line)
  if type(ev) ~= "table" or type(ev.object) ~= "table" then
    w.failed = string.format("kube: %s: the stream sent a line that is not a watch event: %s", w.what, line:sub(1, 200))
    return false
  end
  if ev.type == "ERROR" then
    if ev.object.code == 410 then
      w.gone = true
    else
      w.failed, w.status = string.format("kube: %s: %s (%s %s)", w.what, tostring(ev.object.message),
        tostring(ev.object.code), tostring(ev.object.reason)), ev.object
    end
    return false
  end
  w.rv = rv_of(ev.object) or w.rv
  if ev.type == "BOOKMARK" then return end
  local id = uid_of(ev.object)
  w.known[id] = ev.type ~= "DELETED" and ev.object or nil
  if deliver(w, ev.type, ev.object) then return false end
end

-- One watch request from w.rv until the server ends it, the handler is
-- done or something fails. Returns the http response | nil, err.
local function stream_once(w)
  local remaining = w.deadline - now()
  if remaining <= 0 then return nil, "timeout" end
  local q = { watch = "true", allowWatchBookmarks = "true", resourceVersion = w.rv,
    timeoutSeconds = math.max(1, math.floor(math.min(remaining, w.o.server_timeout or SERVER_TIMEOUT))) }
  for k, v in pairs(w.query) do q[k] = v end
  local refused = {}
  local r, err = w.k:request({ path = w.k:path(w.res, w.ns), query = q, timeout = remaining, lines = true,
    stream = function(line, head)
      if head.status ~= 200 then
        refused[#refused + 1] = line
        return
      end
      return on_line(w, line)
    end }, w.what)
  if not r then return nil, err end
  return r, refused
end

-- The loop of a watch after its first listing.
local function follow(w)
  local pause = RETRY_MIN
  while true do
    w.gone, w.failed = false, nil
    local r, err = stream_once(w)
    if w.value then return w.value end
    if w.failed then return nil, w.failed, w.status end
    if not r and err == "timeout" then return nil, "timeout" end
    if r and r.status == 410 then w.gone = true end
    if w.gone then
      w.k:note(string.format("%s: resourceVersion %s is gone (410): listing again", w.what, tostring(w.rv)))
      local done, lerr, st = relist(w)
      if done then return w.value end
      if done == nil then return nil, lerr, st end
      pause = RETRY_MIN
    elseif r and r.status ~= 200 then
      r.body = table.concat(err, "\n")
      return w.kube._answer(w.what, r)
    elseif not r then
      -- the server went away (a restart): open the stream again from w.rv
      w.k:note(string.format("%s: the stream failed (%s); reopening from resourceVersion %s", w.what, tostring(err),
        tostring(w.rv)))
      if w.deadline - now() <= pause then return nil, "timeout" end
      sleep(pause)
      pause = math.min(RETRY_MAX, pause * 2)
    else
      pause = RETRY_MIN -- the server ended the stream in order: go on from w.rv
    end
  end
end

function W:watch(ref, o, handler)
  o = o or {}
  engine.check_options("kube: watch", o, WATCH_KEYS)
  if type(handler) ~= "function" then error("kube: watch: the handler must be a function", 2) end
  local res, err, st = self:resource(ref)
  if not res then return nil, err, st end
  local w = new_state(self, W.kube, res, o, handler)
  if not w.rv then
    local done, lerr, lst = relist(w)
    if done then return w.value end
    if done == nil then return nil, lerr, lst end
  end
  return follow(w)
end

-- Objects by name (namespace/name across namespaces).
local function key_of(obj, across)
  local m = obj.metadata or {}
  return across and ((m.namespace or "") .. "/" .. tostring(m.name)) or m.name
end

function W:wait(ref, o, predicate)
  if type(predicate) ~= "function" then error("kube: wait: the predicate must be a function", 2) end
  local objects, synced = {}, false
  return self:watch(ref, o, function(type, obj)
    if type == "SYNC" then
      objects = {}
      for _, item in pairs(obj) do objects[key_of(item, (o or {}).all_namespaces)] = item end
      synced = true
      return predicate(objects)
    end
    local key = key_of(obj, (o or {}).all_namespaces)
    objects[key] = type ~= "DELETED" and obj or nil
    if synced then return predicate(objects, type, obj) end
  end)
end

return {
  mixin = function(C, kube)
    W.kube = kube
    kube.options.watch = WATCH_KEYS
    for k, v in pairs(W) do
      if k ~= "kube" then C[k] = v end
    end
  end,
}
