// Package l7 is what the l7 probe's protocol parsers share: the protocols,
// what a parser is fed (chunks of one connection's two byte streams, as the
// syscall capture saw them) and what it produces (request/response
// exchanges with their timing, outcome and a bounded API template).
//
// Each protocol lives in its own package under internal/l7/<protocol> and
// provides, by convention:
//
//	Detect(b []byte) bool          // b (a connection's first bytes from the
//	                               // client) starts a request of this protocol
//	NewParser(role Role) l7.Parser // a stream parser for one connection
//
// plus whatever building blocks the in-kernel fast path needs from user
// space (an API template from a request prefix, an outcome from a response
// prefix).
//
// Parsers are pure: no I/O, no clocks, no goroutines; they never panic on
// any input, and on the steady path they do not allocate.
package l7

import "fmt"

// Protocol identifies an L7 protocol. The numeric values are an ABI with the
// BPF capture (enum l7_protocol in C): change both.
type Protocol uint8

const (
	Unknown   Protocol = 0
	HTTP      Protocol = 1 // HTTP/1.0 and HTTP/1.1
	HTTP2     Protocol = 2 // HTTP/2, including gRPC
	MySQL     Protocol = 3 // MySQL and MariaDB client/server protocol
	PgSQL     Protocol = 4 // PostgreSQL frontend/backend protocol v3
	DNS       Protocol = 5 // DNS over UDP and TCP
	Redis     Protocol = 6 // RESP2 and RESP3
	Kafka     Protocol = 7
	Mongo     Protocol = 8 // MongoDB wire protocol (OP_MSG, legacy OP_QUERY/OP_REPLY)
	Memcached Protocol = 9 // memcached text protocol
	CRPC      Protocol = 10
	Dubbo     Protocol = 11 // Apache Dubbo2 (dubbo://), the sermant feature's
)

// protocolNames are the `protocol` label values, gala-gopher's where it has
// them (l7probe: http, http2, mysql, pgsql, dns, redis, kafka, mongo, crpc).
var protocolNames = [...]string{
	Unknown: "unknown", HTTP: "http", HTTP2: "http2", MySQL: "mysql", PgSQL: "pgsql",
	DNS: "dns", Redis: "redis", Kafka: "kafka", Mongo: "mongo", Memcached: "memcached", CRPC: "crpc",
	Dubbo: "dubbo",
}

// String returns the protocol's label value.
func (p Protocol) String() string {
	if int(p) < len(protocolNames) {
		return protocolNames[p]
	}
	return fmt.Sprintf("protocol(%d)", uint8(p))
}

// Direction says which way a chunk travelled, seen from the observed
// process. Values are an ABI with the BPF capture.
type Direction uint8

const (
	Egress  Direction = 1 // written (sent) by the observed process
	Ingress Direction = 2 // read (received) by the observed process
)

func (d Direction) String() string {
	switch d {
	case Egress:
		return "egress"
	case Ingress:
		return "ingress"
	}
	return fmt.Sprintf("direction(%d)", uint8(d))
}

// Role is the observed process's side of the conversation. Values are an
// ABI with the BPF capture.
type Role uint8

const (
	RoleUnknown Role = 0
	Client      Role = 1 // sends requests (connect()ed, or the first to speak a request)
	Server      Role = 2 // receives requests (accept()ed)
)

func (r Role) String() string {
	switch r {
	case Client:
		return "client"
	case Server:
		return "server"
	}
	return "unknown"
}

// RequestDir is the direction requests travel for role r (Egress for a
// client, Ingress for a server).
func (r Role) RequestDir() Direction {
	if r == Server {
		return Ingress
	}
	return Egress
}

// Chunk is the data of one syscall (or one TLS read/write) on a connection.
type Chunk struct {
	Dir Direction
	// TS is CLOCK_MONOTONIC in ns when the syscall returned.
	TS uint64
	// Data is what was captured: a prefix of the bytes the syscall moved.
	// It is only valid during Feed; a parser copies what it keeps.
	Data []byte
	// Size is how many bytes the syscall moved. Size > len(Data) means the
	// rest (Size-len(Data) bytes) was not captured: a gap the parser must
	// step over, using the lengths the protocol declares, or resynchronise
	// after (and count what it could not account for).
	Size int
}

// Class is the outcome of an exchange.
type Class uint8

// Each protocol's package documents which of its errors are which, and
// why.
const (
	OK          Class = 0
	ClientError Class = 1 // the request was at fault: HTTP 4xx, gRPC INVALID_ARGUMENT, DNS FORMERR/NXDOMAIN, SQL syntax errors, Redis unknown command
	ServerError Class = 2 // the server failed a valid request: HTTP 5xx, gRPC INTERNAL, DNS SERVFAIL, Redis OOM
)

func (c Class) String() string {
	switch c {
	case OK:
		return "ok"
	case ClientError:
		return "client_error"
	case ServerError:
		return "server_error"
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// Exchange is one request and its response, or one of them alone when the
// other was never seen (a request whose connection closed first, a
// response to a request sent before capture started).
type Exchange struct {
	// HasRequest and HasResponse say which halves were seen.
	HasRequest, HasResponse bool
	// Start is the TS of the request's first chunk; End the TS of the
	// response's first chunk. Latency is End-Start when both are set.
	Start, End uint64
	Class      Class
	// Status is the response's HTTP status code (HTTP/1 status line,
	// HTTP/2 :status), 0 when the protocol has none or it was not seen.
	Status uint16
	// GRPC says the exchange is a gRPC call whose status code is known:
	// GRPCStatus, from grpc-status or implied by how the stream ended
	// (see http2.GRPCClass).
	GRPC       bool
	GRPCStatus int16
	// API is the bounded template of the request (see each protocol's doc),
	// "" when unknown. Parsers return interned strings: the same template
	// is the same string, and computing it does not allocate once seen.
	API string
	// ReqBytes and RespBytes are the sizes of the two messages, where the
	// protocol frames them (0 when unknown).
	ReqBytes, RespBytes int
	// Path is the request's raw path (HTTP/1 and HTTP/2), only from a
	// parser asked to keep paths (spans are exported), nil otherwise or
	// when the request has none. It is only valid until the parser's next
	// Feed or Flush (see PathPool): a consumer copies what it keeps.
	Path *Path
}

// Latency is the exchange's latency in ns, or 0 when a half is missing.
func (e *Exchange) Latency() uint64 {
	if !e.HasRequest || !e.HasResponse || e.End < e.Start {
		return 0
	}
	return e.End - e.Start
}

// Parser frames one connection's two byte streams into exchanges. Feed is
// called with the connection's chunks in the order the syscalls returned.
type Parser interface {
	// Feed consumes one chunk and appends every exchange it completes to
	// out (pipelined requests complete several at once).
	Feed(c Chunk, out []Exchange) []Exchange
	// Flush returns what is pending when the connection closes: requests
	// still waiting for a response (HasResponse false).
	Flush(out []Exchange) []Exchange
	// Desyncs counts the times the parser lost the message boundaries (a
	// gap it could not step over, or bytes that do not parse) and
	// resynchronised: what it could not account for there is not in any
	// exchange, and the probe reports it as lost.
	Desyncs() uint64
}

// Interner returns one string per distinct byte sequence, so that API
// templates computed from bytes do not allocate once seen. It holds at
// most Max entries (default 1024); past that, new values are returned
// unshared (allocated). The zero value is ready to use; not safe for
// concurrent use.
type Interner struct {
	Max int
	m   map[string]string
}

// Intern returns the string equal to b.
func (in *Interner) Intern(b []byte) string {
	if s, ok := in.m[string(b)]; ok { // no allocation: the compiler keys by b
		return s
	}
	s := string(b)
	limit := in.Max
	if limit <= 0 {
		limit = 1024
	}
	if in.m == nil {
		in.m = make(map[string]string)
	}
	if len(in.m) < limit {
		in.m[s] = s
	}
	return s
}
