---@meta http
-- `local http = require("http")`: an HTTP client (libcurl) and an HTTP/1.1 server on the
-- loop (bindings/http.c; docs/http.md). Option classes are checked against http.options.

---The options of http.request: one request (each of http.batch's too).
---@class http.options.request
---@field method? string  default "GET", or "POST" with a body or json
---@field url string
---@field headers? table<string, string|number>
---@field body? string
---@field json? any  sent encoded, with Content-Type: application/json
---@field timeout? number  seconds for the whole transfer; default 30 times engine.time_scale(); 0 polls
---@field stream? fun(chunk: string, head: {status: integer, headers: table<string, string>}): boolean?  the body as it arrives; returning false stops the transfer (result.stopped)
---@field lines? boolean  with stream: one call per line of the body, without its "\n" (and a "\r" before it)
---@field tls? http.tls  https:// to a server of the test's own CA, with a client certificate

---The options of http.get(url, opts).
---@class http.options.get
---@field headers? table<string, string|number>
---@field body? string
---@field json? any
---@field timeout? number
---@field stream? fun(chunk: string, head: {status: integer, headers: table<string, string>}): boolean?
---@field lines? boolean
---@field tls? http.tls

---The options of http.post(url, body_or_opts).
---@class http.options.post
---@field method? string  default "POST"
---@field headers? table<string, string|number>
---@field body? string
---@field json? any
---@field timeout? number
---@field stream? fun(chunk: string, head: {status: integer, headers: table<string, string>}): boolean?
---@field lines? boolean
---@field tls? http.tls

---What an https:// request trusts and presents (http.request's tls), as a kubeconfig gives it:
---each PEM as a file or as its base64 text (one or the other).
---@class http.tls
---@field ca? string  a PEM file of the CA certificates to trust instead of the system's store
---@field cert? string  a PEM file of a client certificate to present
---@field key? string  a PEM file of its private key
---@field ca_data? string  base64 of the CA's PEM text (certificate-authority-data); line breaks allowed
---@field cert_data? string  base64 of the client certificate's PEM text (client-certificate-data)
---@field key_data? string  base64 of its key's PEM text (client-key-data)
---@field server_name? string  the name the server's certificate carries, when not the URL's host (tls-server-name)
---@field insecure? boolean  no check of the server's certificate or name (insecure-skip-tls-verify)

---The options of http.batch(requests, opts).
---@class http.options.batch
---@field concurrency? integer  transfers in flight at once; default 16
---@field summary? boolean  counts and a latency histogram from the load client, not responses

---The options of http.load: one request, sent at a fixed rate (an open loop).
---@class http.options.load
---@field url string  http://, to an IP address or localhost
---@field method? string
---@field headers? table<string, string|number>
---@field body? string
---@field json? any
---@field timeout? number  seconds a request may take, or wait for a connection; default 30 times engine.time_scale()
---@field rate number  requests per second
---@field duration number  seconds
---@field concurrency? integer  connections at most; default 16

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
---@field body string  "" when streamed
---@field stopped? true  a stream function returned false: the transfer ended there
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

---What the load client answers with (http.load, http.batch{summary = true}).
---@class HttpLoadResult
---@field sent integer  requests written
---@field ok integer  answers with a 2xx or 3xx status
---@field errors integer  requests without an answer (refused, reset, not HTTP, timeout)
---@field dropped? integer  http.load: due requests that waited past their timeout, not sent
---@field statuses table<integer, integer>  answers per status
---@field latency HttpHistogram  http.load: from the due time; a batch: from sending
---@field uncorrected? HttpHistogram  http.load: from sending
---@field elapsed number  seconds
---@field first_error? string

---Latencies in log-linear buckets: a percentile at most 1/128 above the true value.
---@class HttpHistogram
local HttpHistogram = {}

---Count a value (n times).
---@param seconds number
---@param n? integer
---@return HttpHistogram
function HttpHistogram:record(seconds, n) end

---@param p number  0..100
---@return number?  seconds; nil when empty
function HttpHistogram:percentile(p) end

---Add other's counts.
---@param other HttpHistogram
---@return HttpHistogram
function HttpHistogram:merge(other) end

---@return integer
function HttpHistogram:count() end

---@return number?
function HttpHistogram:min() end

---@return number?
function HttpHistogram:max() end

---@return number?
function HttpHistogram:mean() end

---count, min, max, mean, p50, p90, p99, p99.9 and the buckets, as JSON text.
---@return string
function HttpHistogram:json() end

---@class HttpServer
local HttpServer = {}

---@return integer
function HttpServer:port() end

---Close the server and every open connection.
function HttpServer:close() end

---@class http
---@field version string  libcurl's and http-parser's
---@field options {request: string[], get: string[], post: string[], batch: string[], load: string[], listen: string[]}  the keys the option checks take
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

---results[i] answers requests[i] (a request table, or a URL to GET): a response, or {err = msg};
---with summary = true, counts and a latency histogram instead (one origin, no stream).
---@param requests (http.options.request|string)[]
---@param opts? http.options.batch
---@return (HttpResult|{err: string})[]|HttpLoadResult
function http.batch(requests, opts) end

---An open loop: request k is due at start + k / rate; latency counts from its due time.
---@param opts http.options.load
---@return HttpLoadResult
function http.load(opts) end

---An empty histogram, or the one h:json() wrote (decoded).
---@param decoded? table
---@return HttpHistogram
function http.histogram(decoded) end

---@param opts http.options.listen
---@return HttpServer?, string?
function http.listen(opts) end

return http
