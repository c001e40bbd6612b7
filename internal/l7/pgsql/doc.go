// Package pgsql parses the PostgreSQL frontend/backend protocol (version
// 3.x, PostgreSQL 7.4 to 18) for the l7 probe: it frames both directions
// of a connection, pairs each request with its response and produces
// l7.Exchanges with timing, outcome and an API template.
//
// # Framing
//
// After the startup phase every message is a type byte and a big-endian
// int32 length that counts itself. The startup phase has untyped messages
// (an int32 length, then an int32 code): StartupMessage (code 3.x),
// SSLRequest (80877103), GSSENCRequest (80877104) and CancelRequest
// (80877102); SSLRequest and GSSENCRequest are answered by one byte.
// Message bodies are skipped by their declared lengths; only a bounded
// head of each message is kept: 1093 bytes of a frontend message (a
// statement name and the first sqlapi.MaxInput bytes of SQL), 96 of a
// backend message (an ErrorResponse's SQLSTATE).
//
// TLS: an SSLRequest answered 'S' means TLS follows. The parser then
// expects the next client bytes to be the StartupMessage: the probe feeds
// it, from then on, the plaintext of the TLS uprobes (OpenSSL, Go
// crypto/tls), which starts with that message, and not the ciphertext the
// syscalls carry. Answered 'N', the startup message follows in plaintext.
// GSSAPI encryption ('G') has no plaintext to see: the parser stops. A
// connection that starts with a CancelRequest carries nothing else.
//
// # Detect
//
// Detect(b) is true for a client's first bytes that are
//
//	00 00 00 08 04 d2 16 2f                    SSLRequest
//	00 00 00 08 04 d2 16 30                    GSSENCRequest
//	00 00 LL LL 00 03 00 xx [a-z_]             StartupMessage v3.x: length 9..10000,
//	                                           then the first parameter name
//
// nine bytes at most, fixed offsets, no loop: what BPF can check. A
// CancelRequest is not claimed (the connection carries no exchange).
// Connections whose start the probe missed are not detected; if fed
// anyway, the parser takes a first client byte other than 0 as a typed
// message and goes on (responses to requests it never saw are dropped and
// counted in Orphans).
//
// # Exchanges
//
// One exchange per statement the client has executed:
//   - a simple Query ('Q') is one exchange, from the Query to its
//     ReadyForQuery, whatever the number of statements in it ("BEGIN;
//     UPDATE ...; COMMIT" is one round trip, one exchange, with the
//     template of its first statement other than BEGIN); its class is the
//     first ErrorResponse's;
//   - in the extended protocol, each Execute is one exchange: the Parse,
//     Bind and Describe messages sent since the previous Execute or Sync
//     belong to it, and it ends at its CommandComplete, EmptyQueryResponse,
//     PortalSuspended or ErrorResponse. Sync and ReadyForQuery belong to no
//     exchange. So pgbench's tpcb-like script gives exactly 7 exchanges per
//     transaction with -M simple, extended and prepared (prepared's Parse
//     rounds on first use are not exchanges), and a pipelined batch of n
//     Executes before one Sync gives n exchanges, answered in order;
//   - messages that execute nothing (a Parse/Describe/Sync prepare, a
//     Close) are not exchanges, unless the server answers them with an
//     ErrorResponse: a statement whose Parse fails (a syntax error in a
//     pgx query) is an exchange with that error, else the error would be
//     lost;
//   - after an ErrorResponse in the extended protocol the server skips
//     every message up to Sync: the Executes it skipped are exchanges
//     without a response (HasResponse false); an ErrorResponse to the Sync
//     itself (the implicit transaction's commit failing) is an exchange
//     with API "COMMIT";
//   - a FunctionCall ('F') is one exchange ("FUNCTION CALL"); COPY data
//     belongs to the Query or Execute that started the COPY; notices,
//     notifications and parameter changes answer no request, and count
//     in the response under way, if any;
//   - the startup is no exchange, unless it fails: an ErrorResponse before
//     the first ReadyForQuery (bad password 28P01, unknown database 3D000,
//     too many connections 53300) is an exchange with API "CONNECT".
//
// Start is the TS of the chunk holding the exchange's first message, End
// that of the first response message (a notice included). ReqBytes and
// RespBytes are the sizes of those messages, without Sync and
// ReadyForQuery in the extended protocol (a simple Query's ReadyForQuery
// is its last response message). Requests still pending when the
// connection closes come out of Flush, with HasResponse true when their
// response had started (a FATAL error and then the close). Responses to
// no request the parser saw are dropped and counted in Orphans.
//
// Up to MaxPending (256) requests in flight are tracked one by one; deeper
// pipelines are tracked in aggregate (counted in Overflows): each of their
// Executes is still one exchange, with the template shared by all of them
// ("" if they differ) and the Start of the first.
//
// # Errors
//
// An ErrorResponse's SQLSTATE (field 'C') decides the class, with the
// split of sqlapi.Class: ClientError for syntax and access rules (42),
// data exceptions (22), integrity constraints (23), authorization (28),
// unknown database or schema (3D, 3F), unsupported features (0A), a wrong
// transaction state (25) and the like; ServerError for insufficient
// resources (53), operator intervention and timeouts (57), system and
// internal errors (58, XX), lost connections (08), serialization failures
// and deadlocks (40) and any class nobody classified.
//
// # API template
//
// The template (package sqlapi) of the statement's SQL: a Query's text, a
// Parse's; an Execute takes the template of the statement bound to its
// portal, by name, so named prepared statements (pgbench -M prepared's
// P0_1, pgx's stmtcache_...) keep their template from their Parse to
// their last Execute. The names are remembered in a bounded table
// (sqlapi.Statements, 64 statements, least recently used out; plus the
// unnamed statement and four named portals); an Execute of a statement
// prepared before the capture began has API "".
//
//	SELECT abalance FROM pgbench_accounts WHERE aid = $1    SELECT pgbench_accounts
//	UPDATE pgbench_tellers SET tbalance = tbalance + $1 ... UPDATE pgbench_tellers
//	INSERT INTO pgbench_history (tid, ...) VALUES (...)     INSERT pgbench_history
//	BEGIN / END                                             BEGIN / END
//
// # Gaps and desynchronisation
//
// A gap (Chunk.Size > len(Data)) inside a message is stepped over by its
// declared length, at no cost. A gap that hides message boundaries is a
// desync (counted in Desyncs); the parser resumes at a later chunk of that
// direction, where a valid header starts the chunk (syscalls nearly always
// start on a message boundary) or two valid headers follow each other.
//   - Hidden requests: when the hidden bytes after a Bind of the unnamed
//     portal are exactly Execute+Sync or Describe+Execute+Sync (a
//     parameter larger than the capture), or after a Parse exactly Sync or
//     Describe+Sync, the parser completes them and nothing is lost (no
//     desync). Otherwise a placeholder stands for the hidden requests: each
//     outcome the server sends for them (CommandComplete, ErrorResponse...)
//     up to the next ReadyForQuery is one exchange, the first with the
//     template of what was visible.
//   - Hidden responses: with one request in flight, the hidden bytes belong
//     to its response; the request is kept, and when the client sends its
//     next request (or terminates) before the parser saw the end of that
//     response, it is taken as answered (HasResponse, the class seen so
//     far: an ErrorResponse hidden in the gap is missed). With several in
//     flight, they are dropped: which of their responses the gap held is
//     unknown, and pairing later responses with the wrong requests would
//     be worse than losing them.
//
// Sizes of exchanges that lost boundaries count only what was seen. With
// captures of 4 KiB and of 256 bytes, the recorded fixtures (pgbench in
// its three modes, psql, pgx) keep exact counts, timing and outcomes,
// though the long authentication answer, pgx's 20 kB row and its batches
// desync; at 64 bytes too, except for pgx, whose 56-digit statement names
// no longer fit, and for one outcome psql's last query hides past the
// 64th byte of its answer.
//
// # Memory
//
// Per connection: 3.3 KiB of parser state (the statement table of 64
// entries is 1.8 KiB of it, the cache of the last 32 templates 0.8 KiB),
// the two message heads (1093 + 96 bytes) and the pending queue (8
// entries of 64 bytes, doubling up to MaxPending, so at most 16 KiB, and
// only while that many requests are in flight): about 5 KiB at rest, 21
// KiB at most. Templates are interned in the
// parser's own l7.Interner or in a shared one (NewParserWith).
//
// # Limits
//
// Protocol 2 (PostgreSQL before 7.4) is not parsed. Replication
// connections (CopyBothResponse) are one exchange that ends only with
// the stream. Pipelined simple Queries beyond MaxPending are counted as
// one exchange per CommandComplete.
package pgsql
