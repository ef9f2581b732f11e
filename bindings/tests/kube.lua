-- Tests of the kube module (engine/lua/kube.lua, kube_watch.lua,
-- kubeconfig.lua) against a real kube-apiserver: the cluster target's
-- control plane (fixtures/cluster/controlplane.lua: etcd, the API server,
-- the controller-manager and the scheduler from build/cluster). Skipped,
-- saying why, where the binaries are not built or the run may not make the
-- control plane's bridge (CAP_NET_ADMIN: root, outside an unprivileged
-- container). The kubeconfig tests need no server.
local engine = require("engine")
local fs = require("fs")
local http = require("http")
local json = require("json")
local kube = require("kube")
local proc = require("proc")
local binaries = require("cluster.binaries")
local controlplane = require("cluster.controlplane")
local network = require("cluster.network")
local pki = require("cluster.pki")

local FILE = engine.scope()
local START = { timeout = 240 }
local cp, dir, starting, start_error, why_not
local lines = {} -- the requests the clients made, for a failure's artifacts

before_all(function()
  dir = fs.tmpdir()
  local _, missing = binaries.find()
  local admin, why = network.can_admin()
  why_not = missing or (not admin and (why .. ": the API server serves a bridge of its own")) or nil
end)

after_all(function()
  if cp then cp:close() end
  if dir then fs.remove_tree(dir) end
end)

on_failure(function()
  artifact("requests.log", table.concat(lines, "\n") .. "\n")
  if cp then artifact("kube-apiserver.log", fs.read(cp.dir .. "/kube-apiserver.log") or "") end
end)

local function note(line) lines[#lines + 1] = line end

-- The control plane, started by the first test that needs it, in the
-- file's scope (see fixtures/tests/cluster_controlplane.lua for why).
local function control_plane()
  if why_not then skip(why_not) end
  if not starting then
    starting = engine.spawn_in(FILE, function()
      local ok, started = pcall(controlplane.start, { dir = dir .. "/cp" })
      if ok then cp = started else start_error = started end
    end)
  end
  eventually(function() return cp or start_error end, { timeout = START.timeout, interval = 0.05 })
  if start_error then error(start_error, 0) end
  return cp
end

-- An admin client of the control plane.
local function admin(o)
  local c = control_plane()
  o = o or {}
  o.kubeconfig, o.log = c.kubeconfig.admin, note
  return assert(kube.client(o))
end

local n = 0
-- A fresh namespace per test, so no test sees another's objects.
local function namespace(k)
  n = n + 1
  local name = "kube-test-" .. n
  assert(k:create { apiVersion = "v1", kind = "Namespace", metadata = { name = name } })
  return name
end

local function write_kubeconfig(path, doc)
  fs.write(path, json.encode(doc))
  return path
end

-- base64 of a file, as a kubeconfig's -data fields hold it (openssl's own encoder).
local function base64_of(path)
  local code, out = proc.run { argv = { "openssl", "base64", "-A", "-in", path } }
  assert(code == 0, "openssl base64 failed")
  return out
end

-- A client of a kubeconfig (dir/<name>.yaml) of one cluster and one user.
local function client_of(name, cluster, user, o)
  o = o or {}
  o.kubeconfig = write_kubeconfig(dir .. "/" .. name .. ".yaml", { apiVersion = "v1", kind = "Config",
    ["current-context"] = "c", clusters = { { name = "k", cluster = cluster } }, users = { { name = "u", user = user } },
    contexts = { { name = "c", context = { cluster = "k", user = "u" } } } })
  return assert(kube.client(o))
end

-- ------------------------------------------------------------ kubeconfig (no server)

test("kubeconfig: KUBECONFIG files merge as kubectl merges them, the first name and current-context winning", function()
  local a = write_kubeconfig(dir .. "/a.yaml", { apiVersion = "v1", kind = "Config", ["current-context"] = "first",
    clusters = { { name = "k", cluster = { server = "https://127.0.0.1:1/", ["certificate-authority"] = "ca.crt" } } },
    users = { { name = "u", user = { token = "t-a" } } },
    contexts = { { name = "first", context = { cluster = "k", user = "u", namespace = "ns-a" } } } })
  local b = write_kubeconfig(dir .. "/b.yaml", { apiVersion = "v1", kind = "Config", ["current-context"] = "second",
    clusters = { { name = "k", cluster = { server = "https://127.0.0.2:2" } } },
    users = { { name = "u", user = { token = "t-b" } } },
    contexts = { { name = "second", context = { cluster = "k", user = "u" } } } })
  local kubeconfig = require("kubeconfig")
  local cfg = assert(kubeconfig.read { kubeconfig = a })
  expect(cfg.server):eq("https://127.0.0.1:1", "the server, its trailing slash dropped")
  expect(cfg.tls.ca):eq(dir .. "/ca.crt", "a relative path is the file's folder's")
  expect(cfg.namespace):eq("ns-a", "the context's namespace")
  expect(cfg.token):eq("t-a")
  local k = assert(kube.client { kubeconfig = b })
  expect(k.namespace):eq("default", "a context without a namespace means default")
  -- KUBECONFIG as a list, read by a child engine (a test cannot set its own environment)
  local script = dir .. "/read.lua"
  fs.write(script, "local c = assert(require('kubeconfig').read{}) io.write(c.context, ' ', c.server, ' ', c.token)")
  local code, out, err = proc.run { argv = { os.getenv("KVENGINE_BIN") or "build/kvengine", "serve", script },
    env = { KUBECONFIG = a .. ":" .. b } }
  expect(code):eq(0, "the child read the list: " .. tostring(err))
  expect(out):eq("first https://127.0.0.1:1 t-a", "the first file's current-context, cluster and user win")
end)

test("kubeconfig: a missing context, a plugin user or no file is a clear error, not a raise", function()
  local path = write_kubeconfig(dir .. "/plugin.yaml", { apiVersion = "v1", kind = "Config", ["current-context"] = "c",
    clusters = { { name = "k", cluster = { server = "https://127.0.0.1:1" } } },
    users = { { name = "u", user = { exec = { command = "get-token" } } } },
    contexts = { { name = "c", context = { cluster = "k", user = "u" } } } })
  local k, err = kube.client { kubeconfig = path, context = "nope" }
  expect(k):is_nil()
  expect(err):contains('no context "nope"', "names the context asked for")
  expect(err):contains("contexts: c", "and lists the ones there are")
  k, err = kube.client { kubeconfig = path }
  expect(k):is_nil()
  expect(err):contains("exec", "a credential plugin is refused by name")
  k, err = kube.client { kubeconfig = dir .. "/none.yaml" }
  expect(k):is_nil()
  expect(err):contains("cannot read " .. dir .. "/none.yaml")
  local ok, raised = pcall(kube.client, { kubeconfig = path, namespce = "x" })
  expect(ok):eq(false)
  expect(tostring(raised)):contains("namespace", "a misspelt option names the closest valid one")
end)

-- ------------------------------------------------------------ the API server

test("create makes an object once; a second create is AlreadyExists with the server's Status", START, function()
  local k = admin()
  local ns = namespace(k)
  local cm = { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "one", namespace = ns }, data = { a = "1" } }
  local made = assert(k:create(cm))
  expect(made.metadata.uid):not_nil("the server's object, with its uid")
  local again, err, st = k:create(cm)
  expect(again):is_nil()
  expect(st and st.code):eq(409, "AlreadyExists is a 409")
  expect(st and st.reason):eq("AlreadyExists")
  expect(err):contains("create configmaps one -n " .. ns, "the message names the call as kubectl would")
  local got = assert(k:get("cm", "one", { namespace = ns }))
  expect(got.data.a):eq("1", "get by short name reads it back")
end)

test("apply twice is a no-op: the same resourceVersion, one field manager", START, function()
  local k = admin()
  local ns = namespace(k)
  local cm = { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "applied", namespace = ns,
    labels = { role = "x" } }, data = { a = "1" } }
  local first = assert(k:apply(cm))
  local second = assert(k:apply(cm))
  expect(second.metadata.resourceVersion):eq(first.metadata.resourceVersion,
    "applying the same intent again changes nothing on the server")
  local managers = {}
  for _, m in ipairs(second.metadata.managedFields or {}) do managers[#managers + 1] = m.manager .. ":" .. m.operation end
  expect(managers):eq({ "kvengine:Apply" }, "the client's field manager owns the fields it applied")
  cm.data.a = "2"
  local third = assert(k:apply(cm))
  expect(third.metadata.resourceVersion):ne(first.metadata.resourceVersion, "a changed intent is written")
end)

test("apply of a field another manager owns is a Conflict naming it; force takes it over", START, function()
  local k = admin()
  local ns = namespace(k)
  local cm = { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "owned", namespace = ns }, data = { a = "1" } }
  assert(k:apply(cm, { field_manager = "helm" }))
  cm.data.a = "2"
  local r, err, st = k:apply(cm)
  expect(r):is_nil()
  expect(st and st.code):eq(409, "a conflict is a 409")
  expect(st and st.reason):eq("Conflict")
  expect(err):contains('conflict with "helm"', "the message names the manager that owns the field")
  expect(err):contains(".data.a", "and the field")
  local forced = assert(k:apply(cm, { force = true }))
  expect(forced.data.a):eq("2", "force takes the field over")
end)

test("list selects by label and field; patch merges; delete honours grace period and propagation", START, function()
  local k = admin():namespaced("default")
  local ns = namespace(k)
  local kn = k:namespaced(ns)
  for i = 1, 3 do
    assert(kn:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "c" .. i,
      labels = { tier = i == 2 and "b" or "a" } } })
  end
  local a = assert(kn:list("configmaps", { labels = { tier = "a" } }))
  expect(#a.items):eq(2, "two ConfigMaps carry tier=a")
  local by_name = assert(kn:list("configmaps", { fields = "metadata.name=c3" }))
  expect(#by_name.items):eq(1, "a field selector picks one by name")
  local patched = assert(kn:patch("configmaps", "c1", { data = { added = "yes" } }))
  expect(patched.data.added):eq("yes", "a merge patch adds a key")
  patched = assert(kn:patch("configmaps", "c1", { { op = "add", path = "/data/second", value = "2" } }, { type = "json" }))
  expect(patched.data.second):eq("2", "a JSON patch too")
  assert(kn:create { apiVersion = "apps/v1", kind = "Deployment", metadata = { name = "d" }, spec = {
    selector = { matchLabels = { app = "d" } }, replicas = 0,
    template = { metadata = { labels = { app = "d" } }, spec = { containers = { { name = "c", image = "x" } } } } } })
  assert(kn:delete("deployments.apps", "d", { propagation = "Foreground", grace_period = 0 }))
  assert(kn:delete("configmaps", "c2"))
  local gone, _, st = kn:get("configmaps", "c2")
  expect(gone):is_nil()
  expect(st and st.code):eq(404, "a deleted object is NotFound")
  local ok, raised = pcall(kn.delete, kn, "configmaps", "c1", { propagation = "Sideways" })
  expect(ok):eq(false, "an unknown propagation policy is the caller's bug")
  expect(tostring(raised)):contains("Foreground, Background or Orphan")
  local none, nerr = kn:get("flurbs", "x")
  expect(none):is_nil()
  expect(nerr):contains('no resource type "flurbs"', "an unknown resource type is named")
end)

test("logs of a pod that does not exist is a clear NotFound, not an empty log", START, function()
  local k = admin()
  local text, err, st = k:logs("no-such-pod", { container = "c" })
  expect(text):is_nil()
  expect(st and st.code):eq(404)
  expect(err):contains("logs no-such-pod -c c -n default")
end)

-- ------------------------------------------------------------ watches

-- Create ConfigMap name in ns after `after` seconds, in the test's scope.
local function create_later(k, ns, name, after)
  spawn(function()
    sleep(after)
    assert(k:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = name, namespace = ns } })
  end)
end

test("watch lists first, then hands each event on as it happens, and ends when the handler says", START, function()
  local k = admin()
  local ns = namespace(k)
  assert(k:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "before", namespace = ns } })
  local seen = {}
  create_later(k, ns, "after", 0.2)
  local value = assert(k:watch("configmaps", { namespace = ns, timeout = 20 }, function(type, obj)
    if type == "SYNC" then
      seen[#seen + 1] = "SYNC"
      return
    end
    seen[#seen + 1] = type .. " " .. obj.metadata.name
    if obj.metadata.name == "after" then return obj end
  end))
  expect(value.metadata.name):eq("after", "the handler's value is the watch's")
  local rest = {}
  for _, s in ipairs(seen) do
    if not s:find("kube-root-ca", 1, true) then rest[#rest + 1] = s end
  end
  expect(rest):eq({ "ADDED before", "SYNC", "ADDED after" }, "the listing, the sync point, then the event")
end)

test("wait returns within 100 ms of the event that satisfies it, as another watch sees the event", START, function()
  local k = admin()
  local ns = namespace(k)
  local seen_at
  spawn(function() -- an independent observer of the same event
    k:watch("configmaps", { namespace = ns, timeout = 20 }, function(type, obj)
      if type == "ADDED" and obj.metadata.name == "ready" then
        seen_at = now()
        return true
      end
    end)
  end)
  create_later(k, ns, "ready", 0.3)
  local got = assert(k:wait("configmaps", { namespace = ns, timeout = 20 }, function(objects) return objects.ready end))
  local returned = now()
  expect(got.metadata.name):eq("ready")
  eventually(function() return seen_at end)
  log(string.format("wait returned %.1f ms from the observer's event", (returned - seen_at) * 1000))
  expect(math.abs(returned - seen_at)):lt(0.1, "the wait follows the event, not a poll's interval")
end)

test("a watch the server closes on its timeout is opened again from its resourceVersion: no event lost", START,
  function()
  local k = admin()
  local ns = namespace(k)
  create_later(k, ns, "late", 2.5)
  local value = assert(k:watch("configmaps", { namespace = ns, timeout = 20, server_timeout = 1 }, function(type, obj)
    if type == "ADDED" and obj.metadata.name == "late" then return obj end
  end))
  expect(value.metadata.name):eq("late", "the event after two server timeouts arrived")
  local opened = 0
  for _, l in ipairs(lines) do
    if l:find("/namespaces/" .. ns .. "/configmaps?", 1, true) and l:find("watch=true", 1, true) then opened = opened + 1 end
  end
  expect(opened):ge(2, "the stream was opened again after the server closed it")
end)

test("a watch from a resourceVersion too old for the server (410 Gone) lists again and goes on", START, function()
  local k = admin()
  local c = control_plane()
  local ns = namespace(k)
  local made = assert(k:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "existing", namespace = ns } })
  -- history before this object is compacted away in etcd, as the API server does every few minutes
  local r = assert(http.post(c.etcd .. "/v3/kv/compaction", { json = { revision = made.metadata.resourceVersion,
    physical = true } }))
  expect(r.status):eq(200, "etcd compacted its history: " .. r.body)
  -- and the API server's watch cache, which still holds it, starts afresh
  local restarted = false
  engine.spawn_in(FILE, function()
    c:stop({ "kube-apiserver" })
    c:start_apiserver()
    restarted = true
  end)
  eventually(function() return restarted end, { timeout = 120, interval = 0.05 })
  create_later(k, ns, "new", 0.5)
  local seen = {}
  local value = assert(k:watch("configmaps", { namespace = ns, timeout = 20, resource_version = "1" },
    function(type, obj)
      if type ~= "SYNC" then seen[#seen + 1] = type .. " " .. obj.metadata.name end
      if type == "ADDED" and obj.metadata.name == "new" then return obj end
    end))
  expect(value.metadata.name):eq("new")
  local relisted = false
  for _, l in ipairs(lines) do relisted = relisted or l:find("resourceVersion 1 is gone (410)", 1, true) ~= nil end
  expect(relisted):eq(true, "the watch saw 410 Gone and listed again")
  expect(table.concat(seen, ",")):contains("ADDED existing", "the re-list handed on what was there")
end)

test("a watch across a restart of the API server resumes and misses nothing", START, function()
  local k = admin()
  local c = control_plane()
  local ns = namespace(k)
  -- the new API server belongs to the file, as the first did, not to this test
  engine.spawn_in(FILE, function()
    sleep(0.3)
    c:stop({ "kube-apiserver" })
    c:start_apiserver()
    assert(k:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "after-restart", namespace = ns } })
  end)
  local value = assert(k:watch("configmaps", { namespace = ns, timeout = 120 }, function(type, obj)
    if type == "ADDED" and obj.metadata.name == "after-restart" then return obj end
  end))
  expect(value.metadata.name):eq("after-restart", "the event made after the restart arrived on the same watch")
  local reopened = false
  for _, l in ipairs(lines) do reopened = reopened or l:find("reopening from resourceVersion", 1, true) ~= nil end
  expect(reopened):eq(true, "the stream failed with the server and was opened again")
end)

-- ------------------------------------------------------------ failures

test("a server whose certificate the kubeconfig's CA did not sign is refused, with curl's reason", START, function()
  local c = control_plane()
  local other = assert(pki.ca(fs.tmpdir()))
  local k = client_of("bad-ca", { server = c.server, ["certificate-authority"] = other.cert },
    { ["client-certificate"] = c.pki.admin.cert, ["client-key"] = c.pki.admin.key })
  local t0 = now()
  local r, err = k:get("namespaces", "default")
  expect(r):is_nil()
  expect(err):matches("[Cc]ertificate", "the error says the certificate was not trusted")
  expect(now() - t0):lt(10, "refused at once, not after a timeout")
end)

test("tls-server-name: the certificate is checked against that name, and a wrong one is refused", START, function()
  local c = control_plane()
  local user = { ["client-certificate-data"] = base64_of(c.pki.admin.cert),
    ["client-key-data"] = base64_of(c.pki.admin.key) }
  local function named(name)
    return client_of("sni-" .. name, { server = c.server, ["certificate-authority-data"] = base64_of(c.ca),
      ["tls-server-name"] = name }, user)
  end
  expect((assert(named("kubernetes.default.svc"):get("namespaces", "default"))).metadata.name):eq("default",
    "the -data credentials and the server name the certificate carries work")
  local r, err = named("not-the-apiserver"):get("namespaces", "default")
  expect(r):is_nil()
  expect(err):contains("not-the-apiserver", "the name the certificate does not carry is refused")
end)

test("an unreachable server is a clear error at once; one that never answers times out, no hang", START, function()
  local k = client_of("closed", { server = "https://127.0.0.1:1", ["insecure-skip-tls-verify"] = true },
    { token = "x" })
  local t0 = now()
  local r, err = k:get("namespaces", "default")
  expect(r):is_nil()
  expect(err):matches("[Cc]onnect", "the error says the connection failed")
  expect(now() - t0):lt(5, "at once")
  -- a listener that accepts and never answers
  local srv = assert(http.listen { host = "127.0.0.1", port = 0, handler = function() sleep(30) end })
  k = client_of("silent", { server = "http://127.0.0.1:" .. srv:port() }, { token = "x" }, { timeout = 0.5 })
  t0 = now()
  r, err = k:get("namespaces", "default")
  expect(r):is_nil()
  expect(err):eq("timeout", "the one timeout rule's answer")
  expect(now() - t0):lt(5, "within its timeout, not the server's")
  srv:close()
end)

test("a bearer token the server does not know is 401, one without rights is 403, each with the server's words",
  START, function()
  local c = control_plane()
  local k = admin()
  local cluster = { server = c.server, ["certificate-authority"] = c.ca }
  local r, err, st = client_of("token", cluster, { token = "not-a-token" }):get("namespaces", "default")
  expect(r):is_nil()
  expect(st and st.code):eq(401, "an unknown token is Unauthorized: " .. tostring(err))
  local ns = namespace(k)
  assert(k:create { apiVersion = "v1", kind = "ServiceAccount", metadata = { name = "nobody", namespace = ns } })
  local resp = assert(k:request { method = "POST", path = "/api/v1/namespaces/" .. ns .. "/serviceaccounts/nobody/token",
    json = { apiVersion = "authentication.k8s.io/v1", kind = "TokenRequest", spec = { expirationSeconds = 600 } } })
  expect(resp.status):eq(201, "the TokenRequest was granted")
  local token = json.decode(resp.body).status.token
  r, err, st = client_of("sa", cluster, { token = token }):get("namespaces", "default")
  expect(r):is_nil()
  expect(st and st.code):eq(403, "a service account without rights is Forbidden")
  expect(err):contains("system:serviceaccount:" .. ns .. ":nobody", "the server names who was refused")
end)
