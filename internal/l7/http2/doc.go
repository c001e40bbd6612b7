// Package http2 parses HTTP/2 (RFC 9113) and gRPC over it for the l7
// probe: it frames both directions of one connection, decodes header
// blocks with HPACK, pairs requests and responses by stream, and gives
// each exchange its timing, outcome, sizes and API.
//
// # Detect
//
// Detect(b) matches the client connection preface "PRI * HTTP/2.0\r\n\r\n
// SM\r\n\r\n": the first 14 bytes at least, and every byte present up to
// the 24th (fixed offsets, no loops over input). An HTTP/1.1 connection
// that upgrades to h2c is detected as HTTP/1; package http reports the
// switch and NewUpgradedParser continues it. A parser may also start on a
// connection already under way (the capture began after the preface): it
// takes the first 9 bytes of each direction as a frame header if they are
// a plausible one.
//
// # Framing
//
// Every frame is read by its 9-byte header; payloads are not buffered,
// except what is read of them: HEADERS, CONTINUATION and PUSH_PROMISE
// header blocks (padding and priority fields skipped), RST_STREAM's error
// code, GOAWAY's last stream id, SETTINGS (MAX_FRAME_SIZE, which bounds
// resynchronisation). DATA, PING, WINDOW_UPDATE, PRIORITY and unknown
// frame types are stepped over by their lengths. A frame header breaking
// RFC 9113's rules (stream 0 or not by type, fixed lengths, a CONTINUATION
// out of place) is a desync.
//
// # HPACK
//
// Each direction has its own golang.org/x/net/http2/hpack Decoder, its
// table starting at 4096 bytes and following the encoder's size updates,
// clamped at MaxTable (16 KiB): a clamp or a clear only makes older entries
// unknown, never wrong. The parser walks each header block's field
// representations itself and hands them to the Decoder one by one, so that
// what cannot be known never shifts the table's indexes: a reference to
// an entry added before the capture began (or before bytes were lost) is
// an unknown field; a literal added to the table under such a name, or
// longer than RepCap (4 KiB), is added as a placeholder (empty name)
// whose size is at most the real entry's, so the table never evicts
// before the encoder's and every index still names the right entry or a
// placeholder. When header block bytes are lost (a gap, a desync) the
// table is cleared: entries added afterwards are tracked again. The
// Decoder decodes every literal added to the table; from its callbacks
// the parser keeps a mirror of the table's bookkeeping (each entry's size,
// which field it is, the Decoder's own value string for the fields read)
// and resolves indexed fields - most fields on a warm connection - from
// it without calling the Decoder, skipping those it does not read. Tests
// check the mirror against the Decoder on every indexed field (including
// a table churned through evictions and size updates) and in the fuzz
// target. Literals not added to the table are decoded without
// allocating, and only for the fields read (:method, :path, :status,
// content-type, grpc-status).
//
// # Pairing
//
// A request is the client's HEADERS on a new stream (an odd id above the
// last one seen): Start is the TS of the chunk its first frame began in.
// The server's first non-1xx HEADERS on the stream is the response
// (End, :status); interim 1xx HEADERS do not end it; its END_STREAM (on
// DATA or on trailers) ends the exchange, which comes out then. ReqBytes
// and RespBytes are the sizes (headers included) of the stream's HEADERS,
// CONTINUATION and DATA frames each way, counted as each frame passes.
// A response HEADERS with a decoded final :status on a stream whose
// request was not seen (sent before the capture, or lost) comes out with
// HasRequest false once it ends; other frames of unknown streams (a
// cancelled call's late trailers) and pushed streams (even ids) make no
// exchange. RST_STREAM ends a stream: from
// the server it is the response (End is its TS when no HEADERS came); from
// the client, a stream with no response yet comes out with HasResponse
// false. GOAWAY from the server ends the streams above its last stream id
// without a response (not processed). At Flush the streams still open come
// out with what they had. At most MaxStreams (128) streams are tracked;
// a new one beyond that ends the oldest (counted in Desyncs).
//
// # Outcome
//
// Plain HTTP/2: :status 4xx is a ClientError, 5xx a ServerError (as for
// HTTP/1), anything else OK; a stream the server resets without a status
// is a ServerError. gRPC (content-type application/grpc...): the
// grpc-status of the trailers (or of a trailers-only response) decides by
// GRPCClass (ClientError: CANCELLED, INVALID_ARGUMENT, NOT_FOUND,
// ALREADY_EXISTS, PERMISSION_DENIED, FAILED_PRECONDITION, OUT_OF_RANGE,
// UNAUTHENTICATED; ServerError: UNKNOWN, DEADLINE_EXCEEDED,
// RESOURCE_EXHAUSTED, ABORTED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE,
// DATA_LOSS and codes out of range - see GRPCClass for why). Without
// grpc-status: :status 200 is OK, another status maps as gRPC clients do
// (GRPCStatusFromHTTP: 404 is UNIMPLEMENTED...), a reset by the client is
// CANCELLED, a reset by the server maps its error code
// (GRPCStatusFromReset: REFUSED_STREAM is UNAVAILABLE...), and a
// connection closed before the status is UNAVAILABLE.
//
// # API
//
// gRPC: the method's path as it is, "/package.Service/Method", at most
// 128 bytes (longer ones end in "...", bytes outside printable ASCII become
// '?'). Plain HTTP/2: as HTTP/1 (http.AppendAPI), "GET /api/users/{id}".
// The API is "" when :method or :path cannot be decoded. A POST whose
// content-type cannot be decoded may be gRPC or not: its API is the gRPC
// form if the response shows gRPC (content-type or grpc-status), else "" -
// never the HTTP form of a gRPC method.
//
// # What cannot be decoded
//
// Undecoded counts the exchanges whose API or outcome could not be
// decoded (fields naming unknown table entries, a block cut by a gap, an
// outcome not seen because the server's frames lost their boundaries).
// Their API is "" and an outcome that could not be read is OK: no API or
// error class is ever guessed. With a capture that began mid-connection,
// or after lost header bytes, encoders that keep referring to old entries
// (Go's and grpc-go's index every field once) leave :path, content-type
// and grpc-status unknown for as long as those entries live.
//
// # Gaps and desynchronisation
//
// A gap inside a frame's payload is stepped over by the frame's length
// (header block bytes in it break that block: its remaining fields are
// unknown and the table is cleared). A gap that runs past a frame's end
// hides the next frame header: the direction's boundaries are lost, which
// is counted in Desyncs, the table is cleared, and parsing resumes at the
// next chunk that starts with a plausible frame header (a known type with
// only its defined flags, the reserved bit clear, a length the receiver
// accepts, the stream id rules of its type; not CONTINUATION). When the
// server's frames desync, responses already under way come out at once
// (their end may have been lost; later frames of theirs are ignored) with
// an outcome counted as undecoded unless their :status decided it;
// requests still waiting keep waiting.
//
// # Limits
//
// Server push makes no exchange (its PUSH_PROMISE blocks are decoded to
// keep the table). Extended CONNECT, WebSocket over HTTP/2 and trailers
// sent by clients are not treated specially (client trailers count in
// ReqBytes). HTTP/2 over TLS needs the plaintext (the probe's TLS uprobes).
//
// # Memory
//
// Per direction: the HPACK table (at most MaxTable = 16 KiB of RFC 7541
// size, i.e. entries plus 32 bytes each, held by the Decoder) and its
// mirror (24 bytes an entry: 3 KiB for a full default 4 KiB table of
// minimal entries, 12 KiB at MaxTable; a gRPC connection has a few dozen
// entries), one field representation being assembled across chunks (at
// most RepCap = 4 KiB, grown on demand), and fixed buffers (a frame
// header, a :path of 256 bytes). Per connection: up to MaxStreams (128) tracked streams of about
// 100 bytes, and an API interner of up to 64 templates (SetInterner shares
// one across parsers). With KeepPaths (spans exported), each exchange
// carries its :path, query and fragment left out (l7.Path, 260 bytes, as
// package http's), lent by a pool as there: no allocation once warm; a
// :path longer than the 256 bytes kept ends in "...".
package http2
