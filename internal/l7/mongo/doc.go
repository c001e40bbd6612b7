// Package mongo parses the MongoDB wire protocol for the l7 probe: it
// frames both directions of a connection, pairs each request with its
// reply, and gives every exchange its timing, outcome, sizes and a bounded
// API template ("find orders").
//
// # Framing
//
// Every message starts with a 16-byte little-endian header: messageLength
// (header included), requestID, responseTo, opCode. Messages are framed by
// messageLength only (at most 64 MiB): the request's first 512 bytes after
// the header are kept to find its command, and replies are walked as they
// stream by a minimal BSON reader (bson.go) that skips every value it does
// not need by its declared length, so a reply with a first batch of
// megabytes costs the same memory as a ping, and a capture gap inside a
// message costs nothing but what was in it.
//
// Opcodes: OP_MSG (2013: flagBits with checksumPresent, moreToCome and
// exhaustAllowed; a kind 0 body section and kind 1 document sequences,
// skipped by their size; the optional CRC-32C is ignored), OP_QUERY (2004)
// and OP_REPLY (1), which drivers still use for the first handshake
// (isMaster on admin.$cmd); the legacy OP_INSERT, OP_UPDATE, OP_DELETE,
// OP_GET_MORE and OP_KILL_CURSORS (removed in MongoDB 6.0) are framed
// and named from their collection. OP_COMPRESSED (2012) is framed, paired
// and timed with the API template "OP_COMPRESSED", but not decompressed:
// compression is opt-in in every official driver (the compressors URI
// option, off by default), and decoding it on the probe's hot path would
// mean buffering whole compressed messages (snappy has no streaming form)
// and per-connection decoder state (zstd windows reach megabytes), past
// this package's fixed memory bound; its outcome is counted OK.
//
// # Detect
//
// Detect(b) is true when the first bytes a client sent are a MongoDB
// request, within the first 32 bytes (at least 21 needed):
//
//	b[0:4]   messageLength, 21 <= n <= 64 MiB
//	b[4:8]   requestID >= 0
//	b[8:12]  responseTo == 0
//	b[12:16] opCode, then by opCode:
//	  2013 OP_MSG: b[16:20] flagBits with no bit but 0, 1 and 16 set;
//	       b[20] section kind 0: b[21:25] document length 5 <= l <= n-21,
//	       b[25] a BSON element type, b[26:] printable ASCII up to a NUL
//	       (the command's name); or kind 1: b[21:25] section size <= n-21
//	  2004 OP_QUERY: b[16:20] flags with no bit but 1..7 set, b[20:]
//	       printable ASCII up to a NUL, holding a '.' ("admin.$cmd")
//	  2012 OP_COMPRESSED: b[16:20] a known original opCode, b[24] a
//	       compressor id <= 3
//	  2001, 2002, 2005, 2006, 2007: the legacy operations
//
// HTTP, HTTP/2, RESP, memcached, PostgreSQL, MySQL, Kafka (big-endian
// lengths), DNS-over-TCP and CRPC first bytes fail it (tested).
//
// # Pairing
//
// A reply takes the request whose requestID is its responseTo. A server
// answers a connection's requests in order, so requests a reply passes
// over are given up (HasResponse false). Requests that get no reply come
// out as soon as they are read, HasResponse false: OP_MSG with moreToCome
// (unacknowledged writes, w:0) and the legacy writes and killCursors. A
// reply with moreToCome (an exhaust cursor, the streaming hello of a
// driver's monitor) is followed by more replies to the same request, each
// answering the previous reply (or, as accepted too, the request): the
// first reply completes the exchange (latency to the first batch) and the
// ones after it continue the stream and are not counted again. A reply to
// a request that was not seen (the capture began mid-connection) comes
// out alone (HasRequest false) with its outcome. At most 64 requests wait
// per connection; past that the oldest is given up.
//
// # Outcome
//
// A reply (an OP_MSG body; an OP_REPLY's first document when the request
// was an OP_QUERY command or the reply has QueryFailure set) is an error
// when its top-level "ok" is 0 (by its "code"), when it has "writeErrors"
// (by the first one's code: the command succeeded, writes failed) or a
// "writeConcernError" (by its code); the worst class wins. Fields inside
// cursor batches are data and never read.
//
// ServerError, the server failed a request it should have served:
// InternalError 1, HostUnreachable 6, HostNotFound 7, UnknownError 8,
// LockTimeout 24, LockBusy 46, MaxTimeMSExpired 50 and ExceededTimeLimit
// 262 (the server did not finish within the time the client allowed),
// StaleShardVersion 63, WriteConcernFailed 64 (replication did not
// acknowledge in time), NodeNotFound 74, NetworkTimeout 89,
// ShutdownInProgress 91, NotYetInitialized 94, WriteConflict 112,
// ConflictingOperationInProgress 117, FailedToSatisfyReadPreference 133,
// ReadConcernMajorityNotAvailableYet 134, ExceededMemoryLimit 146,
// StaleEpoch 150, PrimarySteppedDown 189,
// NetworkInterfaceExceededTimeLimit 202, KeyNotFound 211,
// RetryChangeStream 234, SocketException 9001, LegacyNotPrimary 10058,
// NotWritablePrimary 10107, InterruptedAtShutdown
// 11600, Interrupted 11601, InterruptedDueToReplStateChange 11602,
// StaleConfig 13388, NotPrimaryNoSecondaryOk 13435, NotPrimaryOrSecondary
// 13436. These are failures, elections, timeouts and conflicts that a
// retry (later, or on another member) clears; they include every code the
// official drivers retry or resume change streams on.
//
// ClientError, every other code, and ok 0 without a code: the request was
// malformed or invalid (BadValue 2, FailedToParse 9, TypeMismatch 14,
// InvalidOptions 72, the aggregation and query "Location" assertions such
// as 40324 for an unknown stage), named what does not exist
// (NamespaceNotFound 26: the client named a collection that is not there;
// IndexNotFound 27, CursorNotFound 43, CommandNotFound 59), was not
// allowed (Unauthorized 13, AuthenticationFailed 18), or broke a
// constraint of the data (DuplicateKey 11000: the write conflicts with a
// unique index, retrying it fails the same; DocumentValidationFailure
// 121, ImmutableField 66). The request has to change.
//
// # API template
//
// "<command>" or, for commands whose first value is a collection (find,
// insert, update, delete, aggregate, count, distinct, findAndModify,
// getMore (its "collection" field), killCursors, create, drop,
// createIndexes, dropIndexes, listIndexes, collMod, collStats, validate,
// mapReduce, ...), "<command> <collection>":
//
//	find orders
//	insert orders
//	aggregate orders
//	aggregate            (a database aggregate: {aggregate: 1})
//	getMore orders
//	explain find orders
//	hello, isMaster, ping, endSessions, createUser
//	find users           (a legacy OP_QUERY on shop.users)
//	OP_COMPRESSED
//
// Never values: no filters, documents, user or role names (createUser
// "alice" is "createUser"), no database name. Collection names are kept
// as they are except for per-entity parts: UUIDs and runs of 16+ hex
// digits become "{id}", runs of 5+ decimal digits "{n}" ("logs_20241123"
// -> "insert logs_{n}"). Command names are letters, digits, '_' and '$'
// (at most 64), collections printable ASCII without spaces (at most 120);
// others are left out. At most 128 bytes.
//
// # Building blocks for the kernel
//
// AppendAPI gives the template from a bounded prefix of a request,
// ReplyClass the outcome from a bounded prefix of a reply, CodeClass the
// table behind it.
//
// # Limits
//
// A gap inside a message is stepped over by its length: the exchange
// stays exact, but a command past the captured prefix leaves the template
// empty, and a gap over a reply's deciding fields (anywhere but inside a
// value skipped by its length) leaves the outcome OK. A gap that hides a
// message boundary loses the messages in it: Desyncs counts it, and the
// direction resynchronises at the next chunk starting with a valid header
// (for replies, one a request waits for). Replies that continue an exhaust
// stream are not counted, and their errors are not seen. Only the first
// write error's code is read. OP_COMPRESSED is not decoded (above).
//
// # Memory
//
// Per connection: the 512-byte request prefix, two 16-byte headers, the
// reply walker (about 100 bytes), the pending queue (at most 64 entries of
// 48 bytes, grown on demand) and the interned templates (at most 1024 per
// parser). Nothing grows with message sizes.
package mongo
