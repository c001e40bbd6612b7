// Package redis parses the Redis protocol (RESP2 and RESP3) of one
// connection into request/reply exchanges for the l7 probe.
//
// # Framing
//
// Both directions are framed by RESP's own declarations: a type byte, a
// header line ending in LF (CRLF in practice), bulk payloads ('$' strings,
// '!' blob errors, '=' verbatim strings) stepped over by their declared
// length and checked for the CRLF that must follow, aggregates ('*'
// arrays, '%' maps, '~' sets, '>' pushes, '|' attributes) counted element
// by element, nulls ('$-1', '*-1', '_'), every RESP3 scalar ('+', '-',
// ':', ',', '(', '#'), and streamed strings ("$?" with ";<n>" parts) and
// aggregates ("*?" ... ".") although Redis itself sends neither. An
// attribute is part of the reply it precedes. Requests are multibulk
// arrays or, when the first byte is not '*', inline command lines ("PING"
// typed by hand, LF or CRLF); a blank inline line, "*0" and "*-1" are no
// command (Redis reads and ignores them). Nothing but a message's first
// 128 bytes (its head, for the template and the outcome) and a line's
// first 24 bytes is kept: a value of any size costs nothing, and chunks
// may be cut anywhere (down to one byte each) with the same result.
//
// # Detect
//
// The first bytes a client sends are a multibulk header
// "*<1-3 digits, first non-zero>\r\n$<non-zero digit>" (six bytes at
// least), or an inline command among PING, AUTH, HELLO, SELECT, INFO,
// ECHO, QUIT, MONITOR, CLIENT, COMMAND, DBSIZE, FLUSHALL, FLUSHDB, KEYS,
// SUBSCRIBE, PSUBSCRIBE (upper case) followed by ' ', '\r' or '\n'. Inline
// GET and SET are left out: "GET / HTTP/1.1" is HTTP and "get k\r\n" is
// memcached.
//
// # Pairing
//
// Replies come in request order, so each reply answers the oldest request
// waiting, pipelined or not (redis-benchmark -P 16: sixteen requests in
// one write, sixteen replies in one, sixteen exchanges). Start is the TS
// of the request's first chunk, End that of the reply's. What answers no
// request is not an exchange: RESP3 pushes (published messages, client
// tracking invalidations), RESP2 published messages ("message",
// "pmessage", "smessage" arrays while subscribed), MONITOR's feed lines
// ("+<time> [<db> <client>] ...", after MONITOR's +OK). SUBSCRIBE,
// PSUBSCRIBE, SSUBSCRIBE and their UNSUBSCRIBE get one reply per channel
// (RESP2 arrays, RESP3 pushes): one exchange, ended by the first; an
// UNSUBSCRIBE without channels takes replies until the one that leaves no
// subscription. MULTI's "+QUEUED" replies are exchanges of the queued
// commands; EXEC's array is EXEC's. HELLO 3 needs no switch: every type
// is always understood. CLIENT REPLY OFF and SKIP, and the commands they
// silence, come out at once with HasResponse false.
//
// A request whose connection closes unanswered comes out of Flush with
// HasResponse false. A reply that answers no request seen (capture began
// mid-conversation) is dropped and counted in Desyncs.
//
// # Errors
//
// Error replies ('-', and RESP3 '!' blob errors) are classified by their
// code, the upper-case first word: ClientError when the command was wrong
// or not allowed (ERR: unknown command, wrong number of arguments, syntax,
// values out of range; WRONGTYPE, NOAUTH, WRONGPASS, NOPERM, NOSCRIPT,
// EXECABORT, NOGROUP, BUSYGROUP, BUSYKEY, NOPROTO, NOTBUSY, UNKILLABLE,
// CROSSSLOT, and the cluster redirections MOVED and ASK: the client asked
// the wrong node); ServerError when the server could not serve a valid
// command in its state (OOM, LOADING, BUSY, MASTERDOWN, READONLY: a write
// to a replica, typically after a failover; MISCONF, NOREPLICAS,
// TRYAGAIN, CLUSTERDOWN, UNBLOCKED, "ERR max number of clients reached")
// and for any other code, since nothing says the client was wrong. Errors
// nested in an array (EXEC's results) leave the exchange OK: EXEC ran.
//
// # API template
//
// The command name, upper-cased, and for container commands (ACL,
// CLIENT, CLUSTER, COMMAND, CONFIG, FUNCTION, LATENCY, MEMORY, MODULE,
// OBJECT, PUBSUB, SCRIPT, SLOWLOG, XGROUP, XINFO) the subcommand:
// "GET", "SET", "CONFIG GET", "CLIENT SETNAME", "XINFO STREAM",
// "JSON.SET". Never a key, a value or a password. A name that is not a
// command's (over 32 bytes, or a byte other than a letter, digit, '_',
// '-', '.', '|') gives "", as does a request whose name the capture cut.
// The templates of Redis 7's commands are shared strings; others are
// interned per parser, or in an interner shared with SetInterner. A reply
// that stands for a request a gap hid (below) has the template "".
//
// # Gaps and limits
//
// A gap (a chunk captured short of its size) is stepped over when it
// falls inside a bulk payload: a 64 KiB SET captured on 256 bytes is one
// exact exchange. A gap anywhere else hides where messages end: the
// message in progress still counts (a request with what its head says; a
// reply as the answer to the oldest request), the parser counts a desync,
// skips chunks until one starts a message ('*' and a digit for requests,
// a RESP type for replies) and puts a barrier in the queue. Behind a gap
// in the requests, each reply before the first request that follows
// stands for one hidden request (Start: the gap's chunk; template and
// request size unknown), so pipelined batches cut by the capture keep
// exact counts as long as their replies parse. Behind a gap in the
// replies, the pending requests are dropped (their replies may be in the
// gap) and replies are dropped until one starts after a new request.
// Bytes that are not RESP, a bulk whose CRLF is not where its length
// says, nesting deeper than 32 levels are desyncs the same way.
//
// Memory: a Parser is 1.7 KiB (per direction a 128-byte head, a 24-byte
// line start and a 32-level stack of element counts) plus the queue of
// pending requests, 56 bytes each, which grows with the pipeline depth up
// to 1024 (56 KiB); requests beyond that are counted, not kept:
// their replies still pair in order, with the start of the first of them
// and their template when they share one, and a desync is counted.
// Limits: RESP2 pub/sub replies to an inline SUBSCRIBE whose channels do
// not fit in the 128-byte head are counted as fewer; CLIENT REPLY is
// followed, but a reply silenced by other means (a client killed mid-way)
// shifts the pairing until the connection's next gap or close.
package redis
