---@meta fs
-- `local fs = require("fs")`: the few file chores tests and fixtures share
-- (engine/lua/fs.lua). Blocking, for small local files.

---@class fs
local fs = {}

---@param path string
---@return string?, string?  contents | nil, err
function fs.read(path) end

---Raises when it cannot.
---@param path string
---@param data string
function fs.write(path, data) end

---Raises when it cannot.
---@param path string
---@param data string
function fs.append(path, data) end

---The folder and its parents; raises when it cannot.
---@param path string
---@return string path
function fs.mkdir_p(path) end

---A new private folder under $TMPDIR or /tmp.
---@return string path
function fs.tmpdir() end

---path and all below it (links are removed, not followed).
---@param path string
---@return true?, string?
function fs.remove_tree(path) end

---@param path string
---@return boolean
function fs.is_dir(path) end

---A file this process can open for reading (not a folder).
---@param path string
---@return boolean
function fs.is_file(path) end

---The folder's entries, sorted, without . and ..
---@param path string
---@return string[]?, string?  names | nil, err
function fs.list(path) end

return fs
