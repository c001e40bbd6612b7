// Package memcached parses memcached's text protocol on one connection
// into request/response exchanges for the l7 probe.
//
// # Framing
//
// Requests are command lines (CRLF or LF) and, for the storage commands
// (set, add, replace, append, prepend, cas, and the meta command ms), a
// data block of the length the line declares, stepped over by that
// length. As memcached itself, the parser takes a data block only after a
// well-formed storage line (5 or 6 words, 6 or 7 for cas, numeric fields,
// a key of at most 250 bytes): otherwise memcached answers an error and
// reads the block as command lines, each answered ERROR, and so does the
// parser. Responses are framed by their lines: a VALUE line (get, gets,
// gat, gats) is followed by its data block and the list ends at END;
// STAT and ITEM lists end at END; a meta VA line is followed by its data
// block; lru_crawler metadump and mgdump answer lines until END; every
// other response (STORED, NOT_FOUND, a number for incr, VERSION, HD, EN,
// errors...) is one line. Of a line, 512 bytes are kept (a storage line
// with the longest key and all its numbers, a meta command's flags); the
// rest of a longer line (a multi-key get) is scanned, not kept.
//
// # Detect
//
// The first bytes a client sends are a command memcached knows, in lower
// case, followed by a space and a printable byte (get, gets, gat, gats,
// set, add, replace, append, prepend, cas, delete, incr, decr, touch,
// stats, verbosity, flush_all, mg, ms, md, ma, me, lru_crawler, watch),
// or one that stands alone followed by "\r\n" or "\n" (stats, version,
// flush_all, quit, mn): 15 bytes at most are compared. memcached's
// commands are case-sensitive, so "GET / HTTP/1.1" and Redis's upper-case
// inline commands are not taken. The binary protocol (first byte 0x80,
// deprecated since memcached 1.6) is not parsed: Detect is false for it.
//
// # Pairing
//
// Responses come in request order, so each answers the oldest request
// waiting, pipelined or not. Start is the TS of the request's first
// chunk, End that of the response's. Commands with "noreply" (storage,
// delete, incr, decr, touch, flush_all, verbosity, cache_memlimit) and
// quit get no response: they come out as soon as they are read, with
// HasResponse false. Meta commands with the q flag get a response only
// when it is not the usual one (memcached 1.6.18 leaves out mg's EN, ms's
// and md's HD, ma's HD and VA): a response that such a command could not
// have sent, or that carries another opaque (O flag) than its own, passes
// it, and it comes out with HasResponse false; without opaques, a quiet
// command's answer goes to the first quiet command that could have sent
// it. After "watch" is answered OK, the log lines that follow answer
// nothing.
//
// A request whose connection closes unanswered comes out of Flush with
// HasResponse false; a response cut short by the close answers the
// oldest request. A response that answers no request seen (capture began
// mid-conversation) is dropped and counted in Desyncs.
//
// # Errors
//
// ERROR (a command memcached does not know) and CLIENT_ERROR (a malformed
// line, a bad data chunk, incr on a non-numeric value) are ClientError;
// SERVER_ERROR (out of memory, an object too large for the cache) and
// BUSY (the LRU crawler is busy) are ServerError. NOT_FOUND, NOT_STORED,
// EXISTS and the meta codes EN, NF, NS, EX are answers, OK. An error that
// ends a get's list makes the exchange that error.
//
// # API template
//
// The command: "get", "set", "delete", "incr", "mg", "ms"...; for stats,
// slabs, lru_crawler and lru, with a subcommand memcached knows ("stats
// slabs", "lru_crawler metadump"). Never a key, a value or a flag. A
// command memcached does not know gives "" (its response is ERROR), as
// does a command line the capture cut before its first word ended, and a
// response standing for a request a gap hid (below).
//
// # Gaps and limits
//
// A gap (a chunk captured short of its size) is stepped over when it
// falls inside a data block: a 1 MiB set captured on 256 bytes is one
// exact exchange. After a VALUE's data block, 5 uncaptured bytes more
// can only be END (another VALUE takes 16 at least): a get of one large
// value stays exact too. A gap anywhere else hides where messages end:
// the message in progress still counts (a request with what its line
// says, a response as the answer to the oldest request), the parser
// counts a desync, skips chunks until one starts with a command (for
// requests) or a response word (for responses), and puts a barrier in the
// queue. Behind a gap in the requests, each response before the first
// request that follows stands for one hidden request (Start: the gap's
// chunk; template and size unknown), so pipelined batches cut by the
// capture keep exact counts as long as their responses parse. Behind a
// gap in the responses, the pending requests are dropped (their responses
// may be in the gap) and responses are dropped until one starts after a
// new request: the stats of a client that waits for each response before
// the next request stay exact, only Desyncs says a line was cut. A
// server data block whose CRLF is not where its length says is a desync
// the same way.
//
// Memory: a Parser is about 1.4 KiB (per direction a 512-byte line start)
// plus the queue of pending requests, 64 bytes each, which grows with the
// pipeline depth up to 1024 (64 KiB); requests beyond that are counted,
// not kept: their responses still pair in order, with the start of the
// first of them and their template when they share one (a quiet meta
// command among them loses its quietness), and a desync is counted.
package memcached
