// Package crpc frames and pairs CRPC, the protocol gala-gopher's l7probe
// lists as "crpc" (l7_protocol value crpc, flag 0x200), for the l7 probe.
//
// # What CRPC is, and what is known of it
//
// CRPC is China CITIC Bank's in-house RPC framework (Java packages
// com.citicbank.crpc, @EnableCrpc, @CrpcReference; caller fields such as
// intorSystCod, sendSystCod, intorTranjnalNum set through its
// RpcContext). No implementation, specification or sample traffic is
// public. What is public is gala-gopher's own reading of its header,
// added in 2024 (openeuler-mirror/gala-gopher,
// src/probes/extends/ebpf.probe/src/l7probe/include/l7.h, the comment and
// checks of __get_crpc_type, and protocol/crpc/crpc_parser.c and
// crpc_internal.h):
//
//	offset size  field
//	0      2     beginFlag 0x1A 0x19
//	2      4     msgLen, big-endian: the message's bytes after offset 6
//	6      2     headLen, big-endian: the header's bytes after offset 8
//	8      1     headVer: 1 or 2
//	9      3     property: bit 0 (0x80 of byte 9) rqFlag, 1 request and 0
//	             response; bit 1 reserved; bit 2 (0x20) hbFlag, heartbeat;
//	             bits 3-5 (0x1C) msgFmt, the body's serialization: 000
//	             Hessian, 001 XML, 010 JSON; the rest reserved
//	12     16    requestID
//	28     4     timeout
//	             -- the tech header ends here (32 bytes) --
//	32     4     intorSystCod (initiating system code)
//	36     36    intorTranJnalNum (initiating transaction journal number)
//	72     26    aplySystTmtp (applying system timestamp)
//	98     4     sendSystCod (sending system code)
//	102    1     hbCount
//	103    ...   further header fields (not documented), then the body
//
// gala-gopher's minimum header is 103 bytes (CRPC_REQUEST_HEADER_MIN_LEN).
// Nothing documents where a response's status is (gala-gopher's
// crpc_parse_response_code is a TODO) nor how the service and method are
// encoded (inside the serialized body).
//
// gala-gopher's own CRPC support never produces data: its BPF check tests
// (buf[9] & 0x80) == 1, which is never true, so no connection is ever
// classified CRPC; its matcher compares request ids with strncpy instead
// of strncmp, which never matches (and overwrites the request's id); and
// its frame parser consumes a whole read as one message whatever its
// msgLen. This package implements the documented layout as it is written.
//
// # Framing and pairing
//
// Messages are framed by msgLen (header and body are skipped by length,
// never buffered; at most 64 MiB) after checking the header: beginFlag,
// headVer 1 or 2, msgFmt 0-2, 103 <= headLen+8 <= msgLen+6. A request and
// its response carry the same requestID and are paired by it, in any
// order: an RPC connection multiplexes calls. A response whose request was
// not seen comes out alone (HasRequest false). At most 256 requests wait
// per connection (calls that are never answered, one-way calls); past
// that the oldest is given up (HasResponse false). Heartbeats (hbFlag) are
// exchanges like calls, with the template "heartbeat". Requests sent by
// the server (server-initiated heartbeats: rqFlag set in the response
// direction) and their answers are not paired and not counted.
//
// # Detect
//
// Detect(b) needs the first 12 bytes:
//
//	b[0:2]  0x1A 0x19
//	b[2:6]  msgLen, with msgLen+6 <= 64 MiB
//	b[6:8]  headLen, with 103 <= headLen+8 <= msgLen+6
//	b[8]    1 or 2
//	b[9]    rqFlag (0x80) set, msgFmt ((b[9]>>2)&7) <= 2
//
// HTTP, HTTP/2, RESP, memcached, PostgreSQL, MySQL, Kafka, MongoDB and DNS
// first bytes fail it (tested).
//
// # Outcome and API template
//
// Every exchange is OK: no public source says where a response's status
// is, and inventing one would be worse than counting none. The API
// template is "heartbeat" for heartbeats and "" for calls: the service
// and method are inside the serialized body, whose layout is not
// published. The building block for the kernel is Detect; there is no
// template or outcome to compute from a prefix.
//
// # Fixture
//
// testdata/synthetic.chunks is synthetic, and says so: no CRPC software
// can be run here. record_test.go builds every frame byte by byte from the
// layout above, exchanges them between a test client and server over
// loopback sockets, and records them through l7test.Record like the other
// protocols' fixtures (calls, a heartbeat, pipelined JSON-format calls
// answered in reverse order, a 210 KB call, an unanswered call).
//
// # Limits and memory
//
// Only what is documented is read: the tech header. A gap inside a message
// costs nothing; a gap that hides a boundary loses the messages in it
// (Desyncs counts it; the direction resynchronises at the next chunk that
// starts with a valid header). Per connection: two 28-byte headers and the
// pending queue (at most 256 entries of 56 bytes).
package crpc
