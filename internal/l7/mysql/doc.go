// Package mysql parses the MySQL client/server protocol (protocol 10 with
// CLIENT_PROTOCOL_41: MySQL 4.1 to 9, MariaDB) for the l7 probe: it frames
// both directions of a connection, pairs each command with its response
// and produces l7.Exchanges with timing, outcome and an API template.
//
// # Framing
//
// Every packet is a 3-byte little-endian payload length, a sequence id
// and the payload; a payload of 2^24-1 bytes continues in the next packet
// (16 MiB continuation), whose bytes count but which starts nothing. A
// command starts a sequence at 0 and its response continues it; so a
// header whose sequence id is neither the next one of either side nor 0
// (a new command) is taken for what it is, bytes from the middle of a
// payload, and counts as a desync instead of swallowing the stream as a
// bogus length. Payloads are skipped by their lengths; only a bounded
// head is kept: 1025 bytes of a client packet (the command byte and
// sqlapi.MaxInput bytes of SQL), 32 of a server packet (an OK's status
// flags, an ERR's code and SQLSTATE, a COM_STMT_PREPARE_OK).
//
// Connection phase: the server speaks first (the greeting, sequence 0,
// protocol 10); the client answers with a HandshakeResponse41 (sequence
// 1), or first with an SSLRequest (the first 32 bytes of one, with
// CLIENT_SSL): TLS follows, and the parser expects the decrypted
// HandshakeResponse41 (sequence 2) next: the probe feeds it, from then on,
// the plaintext of the TLS uprobes, not the ciphertext. Authentication
// packets (auth switch, more data) follow until the server's OK or ERR.
// The client's capability flags decide CLIENT_DEPRECATE_EOF (result sets
// and COM_STMT_PREPARE_OK end without EOF packets), MySQL's optional and
// MariaDB's cached result set metadata (a flag in the column count
// packet) and compression (CLIENT_COMPRESS, CLIENT_ZSTD: not parsed, the
// parser stops). With the handshake missed (the capture began later), an
// EOF packet is told from a terminator by its length (an EOF is 5 bytes,
// an OK at least 7, a row starting with 0xfe 2^24-1).
//
// # Detect
//
// MySQL servers speak first, so a connection's first bytes are the
// server's greeting: read by a client, written by a server. Two checks,
// each on 32 bytes at most, fixed offsets, one bounded loop:
//
//	DetectGreeting  LL LL 00 | 00 | 0a | [0-9] printable... up to NUL
//	                length 40..1023, sequence 0, protocol 10, the server
//	                version ("8.0.36", "5.5.5-10.11.6-MariaDB-...")
//	Detect          LL LL 00 | 01 | CC CC CC CC | MM MM MM MM | cs | 00 x 19
//	                length 32..65535, sequence 1, capabilities with
//	                CLIENT_PROTOCOL_41 (0x200), max packet size, a character
//	                set other than 0, then 19 zero bytes of the filler
//	                (its last 4 bytes, MariaDB's extended capabilities,
//	                lie past the 32)
//
// Detect is the client's first write (the HandshakeResponse41 or the
// SSLRequest, whose zero filler is a signature no other protocol's first
// bytes have); DetectGreeting is what the kernel sees first. The kernel
// can check the greeting on the connection's first data in either
// direction, or wait for the client's first write and check Detect; both
// are cheap. A connection whose handshake the probe missed is not
// detected; if fed anyway, the parser takes a client packet with sequence
// 0 as a command and goes on.
//
// # Exchanges
//
// One exchange per command the server executes and answers:
//   - COM_QUERY: one exchange, whatever the number of statements and
//     result sets (multi-statements and CALL send several, flagged
//     SERVER_MORE_RESULTS_EXISTS), up to the last OK, EOF or ERR; LOCAL
//     INFILE data is part of it;
//   - COM_STMT_EXECUTE (and MariaDB's COM_STMT_BULK_EXECUTE, and
//     COM_STMT_FETCH from a cursor): one exchange with the template of
//     its statement, remembered by statement id from COM_STMT_PREPARE
//     (sqlapi.Statements: 64 per connection, least recently used out;
//     COM_STMT_CLOSE forgets one, COM_RESET_CONNECTION and
//     COM_CHANGE_USER all); COM_STMT_SEND_LONG_DATA bytes count in the
//     execute that follows; an execute of a statement prepared before the
//     capture began has API "";
//   - other commands with a response: COM_PING ("PING"), COM_INIT_DB
//     ("USE"), COM_STATISTICS, COM_CHANGE_USER, COM_RESET_CONNECTION,
//     COM_FIELD_LIST, COM_PROCESS_KILL ("KILL"), ... named as in the
//     template column of l7_rpc_api;
//   - COM_STMT_PREPARE and COM_STMT_RESET are no exchange, unless they
//     fail: a statement whose prepare fails (a syntax error through
//     go-sql-driver) is an exchange with that error, else the error would
//     be lost;
//   - COM_QUIT, COM_STMT_CLOSE and COM_STMT_SEND_LONG_DATA have no
//     response and are no exchange;
//   - the handshake is no exchange, unless it fails: an ERR instead of
//     the final OK (bad password 1045, unknown database 1049) is an
//     exchange with API "CONNECT"; an ERR instead of the greeting (too
//     many connections 1040, host blocked) is one too, without a request
//     (HasRequest false);
//   - COM_BINLOG_DUMP is one exchange, to the first event; the
//     replication stream after it is not parsed.
//
// Start is the TS of the chunk holding the command's first byte, End that
// of the response's first packet. ReqBytes and RespBytes count whole
// packets, headers included. Commands still pending when the connection
// closes come out of Flush (HasResponse true if their response had
// started: an error and then the close). Responses to no command the
// parser saw are dropped and counted in Orphans. Commands are answered in
// order; up to MaxPending (64) may be in flight (pipelining connectors),
// more are dropped and counted in Overflows and in Desyncs.
//
// # Errors
//
// An ERR packet's error number decides where the SQLSTATE misleads, the
// SQLSTATE (sqlapi.Class, the split PostgreSQL uses) otherwise:
// ServerError for the server's resource, storage, network, lock and
// timeout errors, most of which MySQL reports under the general HY000
// (1021 disk full, 1040 too many connections, 1041 out of resources, 1053
// shutdown, 1114 table full, 1205 lock wait timeout, 1213 deadlock, 1317
// query interrupted, 1927 connection killed, 1969/3024 statement timeouts,
// and the like); ClientError for syntax and access errors (42000, 42S02
// unknown table, 28000 access denied), duplicate keys and constraint
// violations (23000), bad values (22xxx, and HY000's 1364, 1366) and other
// HY000 errors of the statement. MariaDB's progress reports (ERR packets
// numbered 0xffff) are not errors.
//
// # API template
//
// The template (package sqlapi) of the SQL of COM_QUERY and
// COM_STMT_PREPARE, MySQL dialect (backquoted names, # comments,
// executable /*!...*/ comments):
//
//	SELECT b FROM t WHERE a = 1                    SELECT t
//	INSERT INTO kv (k, v) VALUES (?, ?)            INSERT kv
//	UPDATE kv SET v = 'x' WHERE k = 1; UPDATE ...  UPDATE kv
//	CALL two_sets()                                CALL two_sets
//	select @@version_comment limit 1               SELECT
//
// # Gaps and desynchronisation
//
// A gap (Chunk.Size > len(Data)) inside a packet is stepped over by its
// length, at no cost. A gap that hides packet boundaries is a desync
// (counted in Desyncs); the parser resumes at a later chunk of that
// direction: at its start for a client command (sequence 0, a known
// command byte), or where two headers with consecutive sequence ids
// follow each other.
//   - Hidden client packets: a placeholder stands for them and takes the
//     next response as theirs, parsed as a statement's, with the API of
//     the statement whose COM_STMT_SEND_LONG_DATA came just before (the
//     hidden packet is then its COM_STMT_EXECUTE: go-sql-driver's large
//     parameters); if the client's next command comes first, the hidden
//     packets had no response and the placeholder goes.
//   - Hidden server packets: with one command in flight (the rule with
//     MySQL), they belong to its response; the command is kept, and when
//     the client sends its next command before the parser saw the end of
//     that response, it is taken as answered, with the outcome seen so far
//     (an error is the first packet of a response, so it is rarely
//     hidden). With several in flight, they are dropped.
//
// Sizes of exchanges that lost boundaries count only what was seen. At 64
// bytes of capture, the recorded fixtures (the mariadb client,
// mariadb-slap, go-sql-driver) keep exact counts, outcomes and timing.
//
// # Memory
//
// Per connection: 7.2 KiB of parser state (the pending queue of 64
// commands, 4 KiB, the statement table of 64 entries, 1.8 KiB, and the
// cache of the last 32 templates, 0.8 KiB, are most of it) and the two
// packet heads (1025 + 32 bytes), fixed: 8.3 KiB.
// Templates are interned in the parser's own l7.Interner or in a shared
// one (NewParserWith).
//
// # Limits
//
// Protocol 9 and clients without CLIENT_PROTOCOL_41 (MySQL before 4.1) are
// not parsed; nor are the compressed protocol and the X protocol (port
// 33060, protobuf).
package mysql
