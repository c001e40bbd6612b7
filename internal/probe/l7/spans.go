package l7

import (
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/l7"
)

// Span is one request/response exchange, for a trace exporter: what the
// l7 tables sum, one exchange at a time.
type Span struct {
	Protocol string // l7_rpc's protocol label: http, http2, redis, pgsql, ...
	Server   bool   // seen from the server process (else the client)
	TGID     uint32
	// Local and Remote are the traced socket's addresses (Remote is the
	// service's backend with cluster_ip_backend).
	Local, Remote netip.AddrPort
	SSL           bool
	API           string // the request's template ("GET /users/{id}", "SET"); "" when unknown
	// Path is an HTTP request's raw path, query excluded (l7.Path: at
	// most l7.MaxPath bytes, "..." ending a cut one); "" when unknown.
	Path  string
	Class l7.Class
	// Status is the HTTP status code (HTTP/1, HTTP/2 :status), 0 when
	// none was seen; GRPCStatus the gRPC status code when GRPC is set.
	Status     uint16
	GRPC       bool
	GRPCStatus int16
	// Start is the request's first byte, End the response's first byte;
	// End is zero when no response was seen (the connection closed).
	Start, End time.Time
	ReqBytes   int
	RespBytes  int
}

// SpanSink takes the exchanges the probe sees. Span must not block: a
// sink bounds its own queue and counts what it drops.
type SpanSink interface {
	Span(s Span)
}

// WithSpans hands every exchange to sink as well as to the tables.
func WithSpans(sink SpanSink) Option { return func(p *Probe) { p.spans = sink } }

// monoToWall converts CLOCK_MONOTONIC nanoseconds (the capture's clock)
// to wall time, with the offset between the two clocks taken now.
type monoToWall struct{ offset time.Duration }

func newMonoToWall() monoToWall {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	now := time.Now()
	return monoToWall{offset: time.Duration(now.UnixNano() - ts.Nano())}
}

func (m monoToWall) at(ns uint64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(ns)+int64(m.offset))
}

// span builds the Span of exchange e on connection c.
func (m monoToWall) span(c *conn, e *l7.Exchange) Span {
	s := Span{
		Protocol: c.key.proto.String(), Server: c.key.l7Role == l7.Server, TGID: c.info.TGID,
		Local: c.info.Local, Remote: c.info.Remote, SSL: c.info.SSL,
		API: e.API, Class: e.Class, Status: e.Status, GRPC: e.GRPC, GRPCStatus: e.GRPCStatus,
		ReqBytes: e.ReqBytes, RespBytes: e.RespBytes,
	}
	if !s.Remote.IsValid() { // one peer of an unconnected UDP socket: its row's address
		if s.Server {
			s.Remote = netip.AddrPortFrom(c.key.clientIP, 0)
		} else {
			s.Remote = netip.AddrPortFrom(c.key.serverIP, c.key.serverPort)
		}
	}
	if e.HasRequest {
		s.Start = m.at(e.Start)
	}
	if e.Path != nil {
		s.Path = e.Path.String()
	}
	if e.HasResponse {
		s.End = m.at(e.End)
	}
	return s
}
