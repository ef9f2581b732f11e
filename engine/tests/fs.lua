-- The fs module's file chores on a real folder.
local fs = require("fs")

local dir

before_all(function() dir = fs.tmpdir() end)
after_all(function() fs.remove_tree(dir) end)

test("fs.list: a folder's entries sorted, hidden ones too, without . and ..", function()
  local d = fs.mkdir_p(dir .. "/list/sub")
  local want = { ".hidden", "sub" }
  for i = 24, 1, -1 do -- enough names that the folder's own order is not sorted by chance
    local name = string.format("pod-%02d.json", i)
    fs.write(dir .. "/list/" .. name, "x")
    table.insert(want, 2, name)
  end
  fs.write(dir .. "/list/.hidden", "x")
  expect(fs.list(dir .. "/list")):eq(want)
  expect(fs.list(d)):eq({}, "an empty folder lists nothing")
end)

test("fs.list of a folder that is not there: nil and an error naming it", function()
  local names, err = fs.list(dir .. "/missing")
  expect(names):is_nil()
  expect(err):contains(dir .. "/missing")
  expect(err):contains("No such file or directory")
end)

test("fs.remove_tree removes a folder and all below it; a missing path is already removed", function()
  fs.mkdir_p(dir .. "/tree/a/b")
  fs.write(dir .. "/tree/a/b/c", "x")
  expect(fs.remove_tree(dir .. "/tree")):is_true()
  expect(fs.is_dir(dir .. "/tree")):is_false()
  expect(fs.remove_tree(dir .. "/tree")):is_true()
end)

test("fs.is_file: a file is one, a folder and a missing path are not", function()
  fs.write(dir .. "/plain", "")
  fs.mkdir_p(dir .. "/folder")
  expect(fs.is_file(dir .. "/plain")):is_true()
  expect(fs.is_file(dir .. "/folder")):is_false()
  expect(fs.is_file(dir .. "/missing")):is_false()
end)
