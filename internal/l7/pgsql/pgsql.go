package pgsql

import (
	"encoding/binary"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/sqlapi"
)

// DetectLen is how many bytes Detect looks at.
const DetectLen = 9

// Detect reports whether b, the first bytes a client sent on a connection,
// start a PostgreSQL StartupMessage, SSLRequest or GSSENCRequest (see the
// package doc for the signature).
func Detect(b []byte) bool {
	if len(b) < 8 || b[0] != 0 || b[1] != 0 {
		return false
	}
	n := binary.BigEndian.Uint32(b)
	code := binary.BigEndian.Uint32(b[4:])
	switch code {
	case codeSSL, codeGSSENC:
		return n == 8
	}
	if code>>16 != codeV3Major || n < 9 || n > maxStartup {
		return false
	}
	// The first parameter name: libpq, pgx, JDBC and the others send
	// lower-case names ("user", "database", "application_name", ...).
	return len(b) < 9 || (b[8] >= 'a' && b[8] <= 'z') || b[8] == '_'
}

// AppendAPI appends the API template of a frontend message to dst: for a
// simple query ('Q') or a Parse ('P'), the template of its SQL (see
// package sqlapi); nothing for other messages. msg is a prefix of the
// message, type byte first; the template is as good as the prefix is
// long.
func AppendAPI(dst, msg []byte) []byte {
	if len(msg) < 5 {
		return dst
	}
	body := msg[5:]
	switch msg[0] {
	case 'P':
		_, body = cut(body)
	case 'Q':
	default:
		return dst
	}
	sql, rest := cut(body)
	if rest == nil {
		return sqlapi.AppendPrefix(dst, sql, sqlapi.Postgres)
	}
	return sqlapi.Append(dst, sql, sqlapi.Postgres)
}

// Outcome returns the class of a backend message from a prefix of it, type
// byte first: OK for anything but an ErrorResponse; for an ErrorResponse,
// the class of its SQLSTATE (field 'C'). ok is false when the prefix ends
// before the SQLSTATE (the class is then ServerError: an error nobody
// classified is not blamed on the client).
func Outcome(msg []byte) (class l7.Class, ok bool) {
	if len(msg) == 0 || msg[0] != 'E' {
		return l7.OK, len(msg) > 0
	}
	if len(msg) < 5 {
		return l7.ServerError, false
	}
	b := msg[5:]
	// Fields: a code byte and a C string each, up to a 0 code byte.
	for len(b) > 0 && b[0] != 0 {
		code := b[0]
		val, rest := cut(b[1:])
		if code == 'C' {
			if len(val) != 5 {
				return l7.ServerError, false
			}
			return sqlapi.Class(val), true
		}
		if rest == nil {
			break
		}
		b = rest
	}
	return l7.ServerError, false
}
