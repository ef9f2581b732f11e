---@meta http
-- `local http = require "http"`: an HTTP client (libcurl) and an HTTP/1.1 server on the
-- loop (bindings/http.c; docs/http.md). Option classes are checked against http.options.

---The options of http.request: one request (each of http.batch's too).
---@class http.options.request
---@field method? string  default "GET", or "POST" with a body or json
---@field url string
---@field headers? table<string, string|number>
---@field body? string
---@field json? any  sent encoded, with Content-Type: application/json
---@field timeout? number  seconds for the whole transfer; default 30
---@field stream? fun(chunk: string, head: {status: integer, headers: table<string, string>})  the body as it arrives

---The options of http.get(url, opts).
---@class http.options.get
---@field headers? table<string, string|number>
---@field body? string
---@field json? any
---@field timeout? number
---@field stream? fun(chunk: string, head: {status: integer, headers: table<string, string>})

---The options of http.post(url, body_or_opts).
---@class http.options.post
---@field method? string  default "POST"
---@field headers? table<string, string|number>
---@field body? string
---@field json? any
---@field timeout? number
---@field stream? fun(chunk: string, head: {status: integer, headers: table<string, string>})

---The options of http.batch(requests, opts).
---@class http.options.batch
---@field concurrency? integer  transfers in flight at once; default 16

---The options of http.listen.
---@class http.options.listen
---@field host? string  an IP address; default "127.0.0.1"
---@field port? integer  0 (default) picks a free one: server:port()
---@field handler fun(req: HttpRequest, res: HttpResponse)  runs as a task per request
---@field max_body? integer  bytes; default 8 MiB

---A client's response: any status (404 and 500 are responses, not errors).
---@class HttpResult
---@field status integer
---@field headers table<string, string>  lower-case names; repeated headers joined with ", "
---@field body string
local HttpResult = {}

---Decodes body; raises when it is not JSON.
---@return any
function HttpResult:json() end

---A request as a handler sees it.
---@class HttpRequest
---@field method string
---@field path string  as sent, not percent-decoded
---@field query string  without "?", "" when none
---@field headers table<string, string>
---@field body string
---@field peer string  the client's "ip:port"
local HttpRequest = {}

---Decodes body; raises when it is not JSON.
---@return any
function HttpRequest:json() end

---What a handler answers with.
---@class HttpResponse
local HttpResponse = {}

---Before anything is sent; default 200.
---@param code integer
function HttpResponse:status(code) end

---Before anything is sent: a list sends repeated lines, nil removes the header.
---@param name string
---@param value string|string[]|nil
function HttpResponse:header(name, value) end

---Stream the body (chunked); waits while a slow reader has much queued.
---@param chunk string
---@return true?, string?
function HttpResponse:write(chunk) end

---End the response; a table body is sent as JSON.
---@param body? string|table
---@return true?, string?
function HttpResponse:finish(body) end

---@class HttpServer
local HttpServer = {}

---@return integer
function HttpServer:port() end

---Close the server and every open connection.
function HttpServer:close() end

---@class http
---@field version string  libcurl's and http-parser's
---@field options {request: string[], get: string[], post: string[], batch: string[], listen: string[]}  the keys the option checks take
local http = {}

---@param opts http.options.request
---@return HttpResult?, string?  response | nil, "http: ..." | nil, "timeout"
function http.request(opts) end

---@param url string
---@param opts? http.options.get
---@return HttpResult?, string?
function http.get(url, opts) end

---A string is the body, a table the options.
---@param url string
---@param body_or_opts? string|http.options.post
---@return HttpResult?, string?
function http.post(url, body_or_opts) end

---results[i] answers requests[i] (a request table, or a URL to GET): a response, or {err = msg}.
---@param requests (http.options.request|string)[]
---@param opts? http.options.batch
---@return (HttpResult|{err: string})[]
function http.batch(requests, opts) end

---@param opts http.options.listen
---@return HttpServer?, string?
function http.listen(opts) end

return http
