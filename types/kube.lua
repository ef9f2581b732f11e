---@meta kube
-- `local kube = require("kube")`: the Kubernetes API on the engine's http binding
-- (engine/lua/kube.lua, kube_watch.lua; docs/api-modules.md). A client is made from a
-- kubeconfig as kubectl reads it; reads and writes are REST calls, waits follow watch
-- streams. Expected failures return nil, err, status (the API's Status when the server
-- answered); option classes are checked against kube.options.

---The options of kube.client.
---@class kube.options.client
---@field kubeconfig? string  one kubeconfig file; default $KUBECONFIG (a ':' list, merged as kubectl merges it), else ~/.kube/config
---@field context? string  default the current-context
---@field namespace? string  default the context's, else "default"
---@field field_manager? string  for create, apply and patch; default "kvengine"
---@field timeout? number  seconds per call; default 30 times engine.time_scale()
---@field log? fun(line: string)  each request as "GET <url> -> 200 (0.01s)"

---@class kube.options.get
---@field namespace? string
---@field timeout? number

---@class kube.options.list
---@field namespace? string
---@field all_namespaces? boolean
---@field labels? string|table<string, string>  a label selector: "a=b,c" or {a = "b"}
---@field fields? string|table<string, string>  a field selector
---@field timeout? number

---@class kube.options.create
---@field namespace? string
---@field timeout? number
---@field field_manager? string
---@field force? boolean  (apply only) take over fields other managers own
---@field dry_run? boolean

---@class kube.options.apply
---@field namespace? string
---@field timeout? number
---@field field_manager? string
---@field force? boolean  take over fields other managers own
---@field dry_run? boolean

---@class kube.options.patch
---@field namespace? string
---@field timeout? number
---@field type? "merge"|"strategic"|"json"  default "merge"
---@field field_manager? string
---@field subresource? string  e.g. "status", "scale"

---@class kube.options.delete
---@field namespace? string
---@field timeout? number
---@field propagation? "Foreground"|"Background"|"Orphan"
---@field grace_period? integer  seconds

---@class kube.options.logs
---@field namespace? string
---@field container? string
---@field follow? boolean  with stream: each line as it comes
---@field since? integer  seconds
---@field since_time? string  RFC 3339
---@field tail? integer  the last lines only
---@field timestamps? boolean
---@field previous? boolean  the container's previous run
---@field timeout? number
---@field stream? fun(line: string): boolean?  return false to stop

---@class kube.options.request
---@field method? string  default GET
---@field path string  e.g. "/api/v1/namespaces"
---@field query? table<string, string|number>
---@field body? string
---@field json? any
---@field content_type? string
---@field accept? string
---@field timeout? number
---@field stream? fun(chunk: string, head: {status: integer, headers: table<string, string>}): boolean?
---@field lines? boolean

---The options of k:watch and k:wait.
---@class kube.options.watch
---@field namespace? string
---@field all_namespaces? boolean
---@field labels? string|table<string, string>
---@field fields? string|table<string, string>
---@field name? string  one object, by name
---@field resource_version? string  start there, without listing first
---@field timeout? number  the whole watch; default 30 times engine.time_scale()
---@field server_timeout? number  seconds each watch request asks the server for; default 300

---The resource type a name stands for (discovery's).
---@class KubeResource
---@field group string  "" for the core group
---@field version string
---@field name string  the plural, as in the URL
---@field kind string
---@field namespaced boolean

---A client of one cluster.
---@class KubeClient
---@field server string
---@field context string
---@field namespace string  the default namespace of namespaced calls
local KubeClient = {}

---@param ref string|table  "pods", "Pod", "po", "deployments.apps", or an object with apiVersion and kind
---@param name string
---@param opts? kube.options.get
---@return table?, string?, table?
function KubeClient:get(ref, name, opts) end

---@param ref string|table
---@param opts? kube.options.list
---@return table?, string?, table?  the list (items, metadata.resourceVersion)
function KubeClient:list(ref, opts) end

---@param obj table
---@param opts? kube.options.create
---@return table?, string?, table?
function KubeClient:create(obj, opts) end

---Server-side apply: obj is the field manager's whole intent for the object.
---@param obj table
---@param opts? kube.options.apply
---@return table?, string?, table?
function KubeClient:apply(obj, opts) end

---@param ref string|table
---@param name string
---@param patch table
---@param opts? kube.options.patch
---@return table?, string?, table?
function KubeClient:patch(ref, name, patch, opts) end

---@param ref string|table
---@param name string
---@param opts? kube.options.delete
---@return table?, string?, table?
function KubeClient:delete(ref, name, opts) end

---A container's log (or, with follow and stream, each line handed on as it comes).
---@param pod string
---@param opts? kube.options.logs
---@return string?, string?, table?
function KubeClient:logs(pod, opts) end

---List, then follow the watch stream: handler("ADDED"|"MODIFIED"|"DELETED", obj) per
---event, handler("SYNC", {[uid] = obj}) after each listing; a true value ends it.
---@param ref string|table
---@param opts kube.options.watch?
---@param handler fun(type: string, obj: table): any
---@return any, string?, table?
function KubeClient:watch(ref, opts, handler) end

---Until predicate(objects by name, type, obj) is true, by watch; its value.
---@param ref string|table
---@param opts kube.options.watch?
---@param predicate fun(objects: table<string, table>, type?: string, obj?: table): any
---@return any, string?, table?
function KubeClient:wait(ref, opts, predicate) end

---One request to the API server with the client's credentials (http's response);
---what, the kubectl words of the call, goes into the log line beside the request.
---@param opts kube.options.request
---@param what? string
---@return HttpResult?, string?
function KubeClient:request(opts, what) end

---request(opts, what), its answer decoded: the object | nil, err, status.
---@param what string  the call as kubectl words it: "get pods p1 -n x"
---@param opts kube.options.request
---@return table?, string?, table?
function KubeClient:call(what, opts) end

---A client of the same cluster whose default namespace is ns.
---@param ns string
---@return KubeClient
function KubeClient:namespaced(ns) end

---The server's resource types, read now.
---@return table?, string?, table?
function KubeClient:discover() end

---The resource type a name stands for.
---@param ref string|table
---@return KubeResource?, string?, table?
function KubeClient:resource(ref) end

---The URL path of res in ns, of the object name and its subresource.
---@param res KubeResource
---@param ns? string
---@param name? string
---@param sub? string
---@return string
function KubeClient:path(res, ns, name, sub) end

---The namespace a call on res uses: opts', the object's, the client's.
---@param res KubeResource
---@param opts table
---@param obj? table
---@return string?
function KubeClient:ns_for(res, opts, obj) end

---GET path, decoded.
---@param path string
---@param accept? string
---@return table?, string?, table?
function KubeClient:get_path(path, accept) end

---Where a list or watch of res looks and what it selects: namespace, query, listing in kubectl's words.
---@param res KubeResource
---@param opts kube.options.list|kube.options.watch
---@return string?, table, string
function KubeClient:selection(res, opts) end

---Give a line to the client's log.
---@param line string
function KubeClient:note(line) end

---@class kube
---@field options {client: string[], get: string[], list: string[], create: string[], apply: string[], patch: string[], delete: string[], logs: string[], request: string[], watch: string[]}
local kube = {}

---@param opts? kube.options.client
---@return KubeClient?, string?
function kube.client(opts) end

---Percent-encoding of a path segment or query value.
---@param s string
---@return string
function kube.escape(s) end

---A selector's text: a string as given, {k = v} as "k=v,..." (sorted).
---@param s string|table?
---@return string?
function kube.selector(s) end

return kube
