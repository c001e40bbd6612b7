// Package http parses HTTP/1.0 and HTTP/1.1 for the l7 probe: it frames
// both directions of one connection into requests and responses, pairs
// them, and gives each exchange its timing, outcome, sizes and API
// template.
//
// # Detect
//
// Detect(b) matches a connection whose client starts with one of the
// methods GET, POST, PUT, DELETE, HEAD, OPTIONS, PATCH, CONNECT or TRACE
// (upper case, exactly), one space, and a byte that can start a request
// target: '/', '*', '[', a letter or a digit. That is at most the first 10
// bytes, compared at fixed offsets: the same check fits the BPF capture.
// It does not match HTTP/2's "PRI * HTTP/2.0" preface, memcached's
// lower-case "get k", RESP, or the binary first bytes of PostgreSQL,
// MySQL, Kafka, MongoDB, DNS or TLS.
//
// # Framing
//
// Messages are framed as RFC 9112 says: a start line, header fields up to
// an empty line, then a body delimited by Transfer-Encoding: chunked
// (chunk sizes, trailers), else Content-Length, else, for responses only,
// the connection's end (close-delimited, as HTTP/1.0 servers answer). HEAD
// responses, 1xx, 204 and 304 have no body; a HEAD response is recognised
// by the method of the request it answers. Bodies are never buffered: the
// parser steps over them by their declared lengths, gaps included. Empty
// lines before a start line are skipped. Methods are any RFC 9110 token
// (up to 32 bytes) and the version must be HTTP/1.x.
//
// # Pairing
//
// Responses answer requests in order, so requests wait in a FIFO queue
// (pipelining: several requests before the first response, several
// messages in one chunk). An exchange comes out when its final response
// ends: Start is the TS of the request's first chunk, End the TS of the
// final response's first chunk. Interim responses (100 Continue, 103 Early
// Hints) do not end an exchange; their bytes count in RespBytes with the
// final response's. ReqBytes and RespBytes are the messages' sizes on the
// wire (start line, fields, body framing). A response that arrives while no
// request waits (the capture began after the request) comes out with
// HasRequest false and API ""; requests still waiting at Flush (the
// connection closed) come out with HasResponse false. A close-delimited
// response comes out at Flush.
//
// # Protocol switches
//
// A 101 Switching Protocols response, or a 2xx answer to CONNECT, ends
// HTTP/1 on the connection: the exchange comes out (class OK), Upgrade
// reports the switch and where in the last chunk it happened, and Feed
// ignores what follows (WebSocket frames, tunnelled bytes). An h2c upgrade
// (Upgrade: h2c, on the 101 or on the request it answers) is handed over
// instead: HTTP/2 answers the upgrade request on stream 1, so no exchange
// comes out here; Upgrade carries the request's Start, API and size, and
// the probe continues with http2.NewUpgradedParser fed with Upgrade.Rest
// of that chunk and every chunk after.
//
// # Outcome
//
// StatusClass: a 4xx status is a ClientError (the request was wrong: bad
// syntax, unauthorized, not found, method not allowed, too large...), 5xx
// a ServerError (the server failed a valid request: internal error, bad
// gateway, unavailable, gateway timeout), anything else OK (1xx, 2xx,
// 3xx redirects and 304). ResponseClass gives it from a response's first
// 12 bytes, for a fast path that sees only a prefix.
//
// # API template
//
// "METHOD /path/template", at most MaxAPI (128) bytes (AppendAPI):
//
//	GET /api/users/123/orders?page=2         -> GET /api/users/{id}/orders
//	DELETE /users/550e8400-e29b-41d4-...     -> DELETE /users/{id}
//	GET /static/app.3f9a8b7c6d5e.js          -> GET /static/app.{id}.js
//	GET /orders/order-12345                  -> GET /orders/order-{id}
//	GET /reports/2024-01-31                  -> GET /reports/{id}
//	GET /users/john@example.com              -> GET /users/{id}
//	GET /t/eyJhbGciOiJIUzI1NiJ9.eyJz...      -> GET /t/{id}
//	GET http://host:8080/api/items/7         -> GET /api/items/{id}
//	CONNECT db.internal:5432                 -> CONNECT
//	OPTIONS *                                -> OPTIONS *
//	BREW /pot/42                             -> _OTHER /pot/{id}
//
// The query string and fragment are dropped; an absolute target keeps its
// path; CONNECT's host:port is dropped. A path segment becomes {id} when
// it is a UUID, holds an '@' (or %40) or bytes outside printable ASCII, or
// is a random-looking token (16+ letters and digits mixing cases and
// digits at least once every 2.5 characters); otherwise its tokens between
// the separators - _ . ~ , : ; + = become {id} when they are all digits,
// 8+ hex digits with a digit, hold 4+ digits, are 12+ characters with a
// digit, or are longer than 24 characters, and a segment left with
// placeholders only is one {id}. Methods outside GET, HEAD, POST, PUT,
// DELETE, CONNECT, OPTIONS, TRACE, PATCH, PROPFIND, PROPPATCH, MKCOL,
// COPY, MOVE, LOCK, UNLOCK, SEARCH, REPORT and PURGE are "_OTHER" (they are
// still counted). A path cut at MaxAPI ends in "/..." at a segment
// boundary, and a target seen only in part (a line over LineCap bytes, or
// cut by a gap) has its last segment replaced by "...".
//
// # Gaps and desynchronisation
//
// A gap (Chunk.Size > len(Chunk.Data)) inside a body of known length is
// stepped over exactly. A gap that hides where a message ends - its header
// section's end, a chunk-size line - is counted in Desyncs, and the
// message is taken to end with the chunk (a program writes a message with
// one call more often than not): its exchange still comes out, with the
// chunk's full size. Parsing then resumes at the next chunk that starts a
// message (or, in a chunked body, a chunk-size line). A gap right after a
// message's end hides at least one more message: a hidden request is
// queued as a hole, so that its response is not paired with a later
// request. Bytes that do not parse are counted in Desyncs and skipped to
// the next chunk that starts a message. After any desync on the response
// side the requests then in flight come out without a response, since
// their responses may have been lost: pairing them with later responses
// would shift every exchange after (a late response comes out alone). What
// a gap can cost: with a capture shorter than the headers, sizes become
// the chunks' sizes and pipelined messages hidden in a gap are lost, each
// time with a desync counted.
//
// # Limits
//
// HTTP/0.9 and HTTP/2 (see package http2) are not parsed here. A request
// body with a transfer coding other than chunked (invalid per RFC 9112)
// cannot be stepped over and costs a desync. Bodies sent with sendfile or
// splice must reach the parser as gaps (a chunk with Size and no Data):
// framing trusts declared lengths, so a body that never arrives makes the
// next messages be taken for it (the parser does not guess at status
// lines inside a body, which may legitimately hold HTTP text).
//
// # Memory
//
// Per connection: one line buffer per direction, only when a line spans
// chunks, at most LineCap (1 KiB) bytes; the request queue, grown on
// pipelining up to MaxPending (128) entries of 56 bytes (requests beyond
// it are counted in Desyncs and their responses come out alone); the
// parser's own API interner of up to 64 templates (SetInterner shares one
// across parsers instead). With KeepPaths (spans exported), each request
// in flight and each exchange of the last Feed holds an l7.Path of 260
// bytes, from a pool that keeps at most 8 free: no allocation once warm.
// Nothing else grows with the traffic.
//
// # Raw paths
//
// KeepPaths makes every exchange carry its request's path (RequestPath:
// origin-form's, absolute-form's, "*"; none for CONNECT), the query and
// fragment left out, for a span's url.path; without it (the default) the
// parser does no more than a nil check per request.
package http
