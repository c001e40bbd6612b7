package http

// detectMethods are the methods Detect accepts, each with its SP: the
// ones a connection starts with in practice. Lower case (memcached's
// "get k") and HTTP/2's "PRI" are not among them.
var detectMethods = [...]string{"GET ", "POST ", "PUT ", "DELETE ", "HEAD ", "OPTIONS ", "PATCH ", "CONNECT ", "TRACE "}

// Detect reports whether b, the first bytes a client sent on a
// connection, starts an HTTP/1.x request: one of the methods GET, POST,
// PUT, DELETE, HEAD, OPTIONS, PATCH, CONNECT, TRACE in upper case, one
// space, then the first character of a request target: '/' (origin
// form), '*' (OPTIONS *), or a letter or digit (absolute form
// "http://...", CONNECT's "host:port") or '[' (an IPv6 authority). At most
// the first 10 bytes are read.
func Detect(b []byte) bool {
	for _, m := range detectMethods {
		if len(b) > len(m) && string(b[:len(m)]) == m {
			t := b[len(m)]
			return t == '/' || t == '*' || t == '[' || t >= 'a' && t <= 'z' || t >= 'A' && t <= 'Z' || t >= '0' && t <= '9'
		}
	}
	return false
}

// looksLikeRequest is Detect for a chunk the parser resynchronises on,
// which may be shorter than a method: a prefix of a known method counts,
// the full request line check follows.
func looksLikeRequest(b []byte) bool {
	if Detect(b) {
		return true
	}
	if len(b) >= 9 {
		return false
	}
	for _, m := range detectMethods {
		if len(b) <= len(m) && string(b) == m[:len(b)] {
			return true
		}
	}
	return false
}

// looksLikeResponse is the same for a status line: a full one, or a chunk
// too short to hold one that matches its shape so far.
func looksLikeResponse(b []byte) bool {
	if len(b) >= 12 {
		_, _, ok := ParseStatusLine(b)
		return ok
	}
	const shape = "HTTP/1.# ###" // # is a digit
	for i, c := range b {
		if shape[i] == '#' {
			if c < '0' || c > '9' {
				return false
			}
		} else if c != shape[i] {
			return false
		}
	}
	return len(b) > 0
}
