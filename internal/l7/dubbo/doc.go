// Package dubbo frames and pairs Dubbo2, the RPC protocol of Apache Dubbo
// (the "dubbo://" protocol) that Huawei's Sermant agent instruments, for
// galago's sermant feature (and the l7 probe).
//
// # The protocol (Apache Dubbo's ExchangeCodec, public)
//
//	offset size  field
//	0      2     magic 0xda 0xbb
//	2      1     flag: 0x80 request (else response), 0x40 two-way (a
//	             response is expected), 0x20 event (heartbeat), low 5 bits
//	             the body's serialization id (2 hessian2, 6 fastjson, ...)
//	3      1     status (responses): 20 OK, 30 client timeout, 31 server
//	             timeout, 40 bad request, 50 bad response, 60 service not
//	             found, 70 service error, 80 server error, 90 client error,
//	             100 server thread pool exhausted
//	4      8     request id, big-endian: a response carries its request's
//	12     4     body length, big-endian
//	16     ...   body
//
// A request's hessian2 body starts with four strings: the Dubbo version,
// the service path (interface name), the service version and the method
// name; then the parameter types, the arguments and the attachments. A
// response's body starts with an int, the response type: 0 or 3 an
// exception the service threw, 1/2/4/5 a value or null.
//
// # What the parser gives
//
// Requests and responses are paired by request id, in any order (a Dubbo
// connection multiplexes calls). API is "<service>/<method>", with the
// service version as "<service>:<version>/<method>" when it is set; it
// is read from the request's first bytes (the parser keeps at most
// maxBody of a body, so a service or method name cut by the capture or
// longer than that gives "" and the call is still counted). A body in
// another serialization than hessian2 has no API. Heartbeats (event
// flag) are not calls and give no exchange; one-way requests (no two-way
// flag) come out alone, as a request without response.
//
// Class: status 40, 90 and 30 (bad request, client error, client
// timeout) and 60 (service not found: the caller asked for what the
// server does not export) are client errors; the other non-20 statuses
// are server errors, and so is a status-20 response that carries the
// exception the service method threw (response type 0 or 3).
//
// Detect accepts the first bytes of a request: the magic, the request
// flag and a serialization id below 32; the syscall capture infers the
// protocol from the same signature in the kernel.
package dubbo
