package http

import "github.com/galago-project/galago/internal/l7"

// StatusClass is the outcome of an HTTP status code: 4xx is a ClientError
// (the request was wrong: bad syntax, not found, not allowed), 5xx and
// above a ServerError (the server failed to answer a valid request),
// anything else OK.
func StatusClass(status int) l7.Class {
	switch {
	case status >= 500:
		return l7.ServerError
	case status >= 400:
		return l7.ClientError
	}
	return l7.OK
}

// ParseStatusLine reads an HTTP/1.x status line ("HTTP/1.1 404 Not
// Found") from the start of b, which may be a bounded prefix of the
// response: the first 12 bytes are enough. It returns the status code and
// the minor version (0 or 1), or ok false when b does not start a status
// line.
func ParseStatusLine(b []byte) (status, minor int, ok bool) {
	// "HTTP/1.x SP DDD" then SP, CR or LF.
	if len(b) < 12 || string(b[:7]) != "HTTP/1." || b[7] < '0' || b[7] > '9' || b[8] != ' ' {
		return 0, 0, false
	}
	for _, d := range b[9:12] {
		if d < '0' || d > '9' {
			return 0, 0, false
		}
		status = status*10 + int(d-'0')
	}
	if status < 100 || len(b) > 12 && b[12] != ' ' && b[12] != '\r' && b[12] != '\n' {
		return 0, 0, false
	}
	return status, int(b[7] - '0'), true
}

// ResponseClass is the outcome of a response from a bounded prefix of it
// (its first 12 bytes suffice): ok is false when b does not start with a
// status line, or when it is an interim (1xx) response, which does not
// end the exchange.
func ResponseClass(b []byte) (c l7.Class, ok bool) {
	status, _, ok := ParseStatusLine(b)
	if !ok || status < 200 && status != 101 {
		return l7.OK, false
	}
	return StatusClass(status), true
}
