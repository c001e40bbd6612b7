// Package dns parses DNS messages of one UDP socket or TCP connection into
// query/response exchanges for the l7 probe.
//
// # Framing
//
// Over UDP (NewUDPParser) each chunk is one datagram and one message: the
// l7 probe feeds datagrams, and a datagram captured short of its size is
// read as far as it goes (the header and question come first). Over TCP
// (NewParser) messages follow a 2-byte length (RFC 1035 4.2.2), several
// per connection and in either order; the length is read across chunks
// and the message stepped over by it, keeping its first 512 bytes (the
// header, the longest question, a whole small response for its OPT
// record). A message is a query or a response by its QR bit, which must
// match the direction it goes (queries from the client): one going the
// wrong way, or too short for a header, is counted in Desyncs.
//
// # Detect
//
// The first bytes a client sends (a UDP datagram, or the start of a TCP
// stream) are a query header: QR 0, opcode QUERY, NOTIFY or UPDATE, the Z
// bit and RCODE 0, QDCOUNT 1, ANCOUNT 0, for QUERY and NOTIFY NSCOUNT 0 and
// ARCOUNT at most 2 (OPT, TSIG), then a first label length of at most 63
// (0 for the root); over TCP the same after a length of 17 to 65535. At
// most 13 bytes are read (15 over TCP). The other protocols' first bytes
// fail it on the fixed QDCOUNT/ANCOUNT/NSCOUNT bytes or the label length.
//
// # Pairing
//
// A response answers the oldest query waiting with its ID and question
// (name compared without case, type, class), in any order (a stub
// resolver asks A and AAAA at once; TCP answers may come out of order); a
// response whose question differs is not paired. A response without a
// question (some FORMERR answers), or captured short of its question, is
// paired by ID alone. Start is the TS of the query's chunk (over TCP, the
// chunk of its first length byte), End that of the response's. A response
// with the TC bit (truncated, "retry over TCP") is a response like any.
// Queries wait at most Timeout (10 s, by the chunks' timestamps: UDP
// queries do get lost) and at most 256 at once (the oldest is given up
// first); given up, or pending at Flush, they come out with HasResponse
// false. A retransmitted query is a query: if one answer comes, the other
// is unanswered. A response to no query seen (capture began late, or the
// answer came after Timeout) is dropped and counted in Desyncs.
//
// # Errors
//
// From the RCODE: the header's 4 bits, extended by the OPT record's 8
// when the whole message was captured. NOERROR is OK. ClientError when
// the query was malformed, named nothing that exists, or was not allowed:
// FORMERR, NXDOMAIN (the name does not exist, like HTTP's 404), REFUSED
// (a policy, like 403), YXDOMAIN, YXRRSET, NXRRSET, NOTAUTH, NOTZONE,
// DSOTYPENI, and the EDNS/TSIG codes 16 to 23 (BADVERS/BADSIG, BADKEY,
// BADTIME, BADMODE, BADNAME, BADALG, BADTRUNC, BADCOOKIE). ServerError
// when the server failed or cannot do what was asked: SERVFAIL, NOTIMP
// (like 501), and codes not assigned. gala-gopher's proc_dns counts every
// non-zero RCODE as an error: the error counts are the same, split in two.
//
// # API template
//
// "<type> <name>" of the first question, the name in lower case without
// its final dot: "A example.com", "AAAA db.example.test", "MX
// example.test", "NS ." (the root). The class is added when not IN ("CH
// TXT version.bind"), the opcode when not QUERY ("NOTIFY SOA
// example.com", "UPDATE SOA example.com"). Labels that look like
// identifiers become "{id}": 4 digits or more, over 32 bytes, or a byte
// other than a letter, digit, '-' or '_' ("A {id}.{id}.cdn.example.com"
// for "a1b2c3d4e5.session-12345.cdn.example.com"); a reverse name's
// address labels become one "{ip}" ("PTR {ip}.in-addr.arpa"). At most 128
// bytes: a longer name keeps its rightmost labels after "*.". Unknown
// types and classes are "TYPE<n>" and "CLASS<n>" (RFC 3597). EDNS OPT
// records play no part. A query whose question was not captured has "".
// Templates are interned per parser, or in an interner shared with
// SetInterner (a stub resolver opens a socket, so a parser, per query).
//
// # Gaps and limits
//
// Over UDP a gap costs nothing: the next datagram is the next message.
// Over TCP a gap inside a message is stepped over by its length; a gap
// over a length prefix loses the boundaries: the message in progress is
// dropped, Desyncs counted, and the stream skips chunks until one starts
// with a length and a header going the right way. The queries the gap hid
// are unknown, so their responses are counted in Desyncs; the others
// still pair by ID.
//
// Memory: a Parser is about 1.5 KiB (two 512-byte TCP heads, the last
// question for its template) plus the queries waiting, 48 bytes each, 256
// at most (12 KiB).
package dns
