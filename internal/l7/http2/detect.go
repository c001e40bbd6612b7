package http2

// Preface is the client connection preface (RFC 9113 section 3.4).
const Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// Detect reports whether b, the first bytes a client sent on a connection,
// starts HTTP/2 with prior knowledge: the 24-byte client preface "PRI *
// HTTP/2.0\r\n\r\nSM\r\n\r\n". b must hold at least its first 14 bytes
// ("PRI * HTTP/2.0"), and whatever more it holds, up to 24 bytes, must
// match too. (An h2c upgrade starts as HTTP/1: see http.Upgrade.)
func Detect(b []byte) bool {
	n := min(len(b), len(Preface))
	return n >= 14 && string(b[:n]) == Preface[:n]
}
