-- fs.lua - the few file operations tests and fixtures keep needing:
-- `local fs = require("fs")`.
--
--   fs.read(path) -> contents | nil, err
--   fs.write(path, data)          raises when it cannot
--   fs.append(path, data)         raises when it cannot
--   fs.mkdir_p(path) -> path      the folder and its parents; raises
--   fs.tmpdir() -> path           a new private folder under $TMPDIR or /tmp
--   fs.remove_tree(path) -> true | nil, err   path and all below it (links
--                                 are removed, not followed)
--   fs.is_dir(path) -> bool
--   fs.is_file(path) -> bool      a file this process can open for reading (not
--                                 a folder)
--   fs.list(path) -> {name, ...} | nil, err   the folder's entries, sorted,
--                                 without . and ..
--
-- Blocking calls on small local files: fine on the loop.

local fs = {}

function fs.read(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local data = f:read("a")
  f:close()
  return data
end

local function put(path, data, mode)
  local f = assert(io.open(path, mode))
  assert(f:write(data))
  f:close()
end

function fs.write(path, data) put(path, data, "wb") end

function fs.append(path, data) put(path, data, "ab") end

function fs.mkdir_p(path)
  assert(__kv.mkdir_p(path))
  return path
end

function fs.tmpdir()
  return assert(__kv.mkdtemp())
end

function fs.remove_tree(path) return __kv.remove_tree(path) end

function fs.is_dir(path) return __kv.is_dir(path) end

function fs.is_file(path)
  local f = io.open(path, "rb")
  if not f then return false end
  f:close()
  return not fs.is_dir(path)
end

function fs.list(path)
  local names, err = __kv.list_dir(path)
  if names then table.sort(names) end
  return names, err
end

return fs
