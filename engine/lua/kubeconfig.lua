-- kubeconfig.lua - where a Kubernetes API server is and how to prove who we
-- are to it, read from kubeconfig files as kubectl reads them. The kube
-- module's client is made from what this returns.
--
--   local kubeconfig = require("kubeconfig")
--   kubeconfig.read{kubeconfig = path | nil, context = name | nil}
--     -> {server =, context =, namespace =, tls = {...}, token =, files = {...}} | nil, err
--
-- Which files: opts.kubeconfig, else $KUBECONFIG (a list separated by ':',
-- merged as kubectl merges it: the first file to name a cluster, a user or a
-- context wins, and the first current-context set is the one), else
-- ~/.kube/config. Relative paths in a file are relative to that file's folder.
-- What a user may be: a client certificate and key (files or -data), a
-- bearer token or tokenFile. An exec or auth-provider plugin is refused by
-- name: running a credential program per client is not what a test wants.
-- The result's tls is the http binding's request option (ca/ca_data,
-- cert/cert_data, key/key_data, server_name, insecure).

local fs = require("fs")
local lyaml = require("lyaml")

local M = {}

local function files_of(o)
  if o.kubeconfig then return { o.kubeconfig } end
  local env = os.getenv("KUBECONFIG")
  local out = {}
  for path in (env or ""):gmatch("[^:]+") do out[#out + 1] = path end
  if #out == 0 then out[1] = (os.getenv("HOME") or "") .. "/.kube/config" end
  return out
end

-- A path as the file that names it means it: relative to its folder.
local function resolve(path, file)
  if type(path) ~= "string" or path == "" or path:sub(1, 1) == "/" then return path end
  return (file:match("^(.*)/[^/]*$") or ".") .. "/" .. path
end

-- The named entries of one list (clusters, users, contexts) into by_name,
-- the first file's winning; each remembers its file.
local function merge(by_name, list, file)
  for _, entry in ipairs(type(list) == "table" and list or {}) do
    if type(entry) == "table" and type(entry.name) == "string" and by_name[entry.name] == nil then
      by_name[entry.name] = { value = entry, file = file }
    end
  end
end

-- Every file read and merged: {clusters =, users =, contexts =, current =, files =} | nil, err.
local function load(o)
  local doc = { clusters = {}, users = {}, contexts = {}, files = {} }
  local paths = files_of(o)
  for _, path in ipairs(paths) do
    local text = fs.read(path)
    if not text and (o.kubeconfig or #paths == 1) then return nil, "kubeconfig: cannot read " .. path end
    if text then
      local ok, cfg = pcall(lyaml.load, text)
      if not ok or type(cfg) ~= "table" then
        return nil, string.format("kubeconfig: %s is not a kubeconfig (%s)", path, ok and "not a mapping" or cfg)
      end
      doc.files[#doc.files + 1] = path
      merge(doc.clusters, cfg.clusters, path)
      merge(doc.users, cfg.users, path)
      merge(doc.contexts, cfg.contexts, path)
      local cur = cfg["current-context"]
      if doc.current == nil and type(cur) == "string" and cur ~= "" then doc.current = cur end
    end
  end
  return doc
end

local function names(map)
  local out = {}
  for name in pairs(map) do out[#out + 1] = name end
  table.sort(out)
  return #out > 0 and table.concat(out, ", ") or "none"
end

-- The http binding's tls option for a cluster and a user entry.
local function tls_of(cluster, c_file, user, u_file)
  local tls = {
    ca = resolve(cluster["certificate-authority"], c_file),
    ca_data = cluster["certificate-authority-data"],
    server_name = cluster["tls-server-name"],
    insecure = cluster["insecure-skip-tls-verify"] == true or nil,
    cert = resolve(user["client-certificate"], u_file),
    cert_data = user["client-certificate-data"],
    key = resolve(user["client-key"], u_file),
    key_data = user["client-key-data"],
  }
  return next(tls) and tls or nil
end

-- The bearer token of a user entry: token, or tokenFile's first line.
local function token_of(user, file)
  if type(user.token) == "string" and user.token ~= "" then return user.token end
  local path = resolve(user.tokenFile, file)
  if not path then return nil end
  local text = fs.read(path)
  if not text then return nil, "kubeconfig: cannot read tokenFile " .. path end
  return (text:gsub("%s+$", ""))
end

function M.read(o)
  o = o or {}
  local doc, err = load(o)
  if not doc then return nil, err end
  local ctx_name = o.context or doc.current
  if not ctx_name then
    return nil, string.format("kubeconfig: %s set no current-context; name one (contexts: %s)",
      table.concat(doc.files, ":"), names(doc.contexts))
  end
  local ctx = doc.contexts[ctx_name]
  if not ctx then
    return nil, string.format("kubeconfig: no context %q in %s (contexts: %s)", ctx_name,
      table.concat(doc.files, ":"), names(doc.contexts))
  end
  local c = ctx.value.context or {}
  local cluster, user = doc.clusters[c.cluster or ""], doc.users[c.user or ""]
  if not cluster or type(cluster.value.cluster) ~= "table" or not cluster.value.cluster.server then
    return nil, string.format("kubeconfig: context %q names cluster %q, which has no server", ctx_name,
      tostring(c.cluster))
  end
  local u = user and user.value.user or {}
  if u.exec or u["auth-provider"] then
    return nil, string.format("kubeconfig: user %q authenticates with a plugin (%s), which the kube module does "
      .. "not run; give it a client certificate or a token", tostring(c.user), u.exec and "exec" or "auth-provider")
  end
  local token, terr = token_of(u, user and user.file)
  if terr then return nil, terr end
  local cl = cluster.value.cluster
  return {
    server = (cl.server:gsub("/+$", "")),
    context = ctx_name,
    namespace = (type(c.namespace) == "string" and c.namespace ~= "") and c.namespace or "default",
    tls = tls_of(cl, cluster.file, u, user and user.file),
    token = token,
    files = doc.files,
  }
end

return M
