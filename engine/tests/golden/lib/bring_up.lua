-- A library step that never finishes: a golden case's before_all calls it,
-- and the report says where, inside the library, the time ran out.
local M = {}

function M.wait_ready() sleep(100) end

function M.start() M.wait_ready() end

return M
