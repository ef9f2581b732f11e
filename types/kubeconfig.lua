---@meta kubeconfig
-- `local kubeconfig = require("kubeconfig")`: where a Kubernetes API server is and how
-- to prove who we are to it, read from kubeconfig files as kubectl reads them
-- (engine/lua/kubeconfig.lua; the kube module's clients are made from it).

---@class KubeconfigEntry
---@field server string
---@field context string
---@field namespace string
---@field tls? http.tls  the http binding's request option
---@field token? string
---@field files string[]  the files read

---@class kubeconfig
local kubeconfig = {}

---@param opts? {kubeconfig?: string, context?: string}
---@return KubeconfigEntry?, string?
function kubeconfig.read(opts) end

return kubeconfig
