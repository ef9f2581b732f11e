-- nginx.lua - Debian's nginx as the benchmarks' reference server: a small
-- fixed body on 127.0.0.1, one process (no master, no daemon), its config,
-- pid file, logs and temp folders in a private temp folder, stopped through
-- its process handle.
--
--   local nginx = dofile(DIR .. "/nginx.lua")
--   local srv = nginx.start()   -- nil, why when nginx is not installed
--   srv.url ... srv:stop()
local fs = require("fs")
local http = require("http")
local proc = require("proc")

local M = {}

local CONFIG = [[
worker_processes 1;
master_process off;
daemon off;
pid %s/nginx.pid;
error_log %s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %s/body;
  proxy_temp_path %s/proxy;
  fastcgi_temp_path %s/fastcgi;
  uwsgi_temp_path %s/uwsgi;
  scgi_temp_path %s/scgi;
  keepalive_requests 100000000;
  server {
    listen 127.0.0.1:%d;
    location / { default_type text/plain; return 200 "hello from nginx\n"; }
  }
}
]]

local function nginx_path()
  for _, p in ipairs({ "/usr/sbin/nginx", "/usr/bin/nginx" }) do
    local f = io.open(p, "r")
    if f then
      f:close()
      return p
    end
  end
end

-- start() -> {url, port, stop = fn} once nginx answers; nil, why if it cannot.
function M.start()
  local bin = nginx_path()
  if not bin then return nil, "nginx is not installed (apt-get install nginx)" end
  local dir = fs.tmpdir()
  local port = 20000 + math.random(0, 9999)
  fs.write(dir .. "/nginx.conf", CONFIG:format(dir, dir, dir, dir, dir, dir, dir, port))
  local p = assert(proc.spawn { argv = { bin, "-p", dir, "-c", dir .. "/nginx.conf", "-e", dir .. "/error.log" },
    log = dir .. "/stdout.log" })
  local url = "http://127.0.0.1:" .. port .. "/"
  local srv = { url = url, port = port, dir = dir }
  function srv.stop()
    p:kill("TERM")
    p:wait { timeout = 5 }
    fs.remove_tree(dir)
  end
  for _ = 1, 100 do
    local r = http.get(url, { timeout = 1 })
    if r and r.status == 200 then return srv end
    if not p:running() then break end
    sleep(0.05)
  end
  local log = fs.read(dir .. "/error.log") or ""
  srv.stop()
  return nil, "nginx did not start: " .. log
end

return M
