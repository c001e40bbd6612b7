package redis

import (
	"strings"

	"github.com/galago-project/galago/internal/l7"
)

// maxName bounds a command or subcommand name in a template: longer words
// are not commands (the longest in Redis 7 has 27 bytes).
const maxName = 32

// known maps every template of knownCommands to itself, so a parser finds
// the string of a common template without an interner. Built once, read
// only.
var known = func() map[string]string {
	m := make(map[string]string, 400)
	for _, f := range strings.Split(knownCommands, ",") {
		if f = strings.TrimSpace(f); f != "" {
			m[f] = f
		}
	}
	return m
}()

// container reports whether the upper-cased command name has
// subcommands that make the template ("CONFIG GET", "XINFO STREAM").
func container(name []byte) bool {
	switch string(name) {
	case "ACL", "CLIENT", "CLUSTER", "COMMAND", "CONFIG", "FUNCTION", "LATENCY", "MEMORY",
		"MODULE", "OBJECT", "PUBSUB", "SCRIPT", "SLOWLOG", "XGROUP", "XINFO":
		return true
	}
	return false
}

// AppendAPI appends to dst the API template of the request that req
// starts: a multibulk request ("*3\r\n$3\r\nSET\r\n...") or an inline
// command line ("PING\r\n"). The template is the command name upper-cased
// and, for container commands, the subcommand ("CONFIG GET"); never a key
// or a value. It reports false, appending nothing, when req is too short
// to hold the command name or the name is not a command's (longer than 32
// bytes, or a byte other than a letter, digit, '_', '-', '.' or '|').
func AppendAPI(dst, req []byte) ([]byte, bool) {
	name, ok := reqArg(req, 0)
	if !ok || !validName(name) {
		return dst, false
	}
	start := len(dst)
	dst = appendUpper(dst, name)
	if container(dst[start:]) {
		if sub, ok := reqArg(req, 1); ok && validName(sub) {
			dst = append(dst, ' ')
			dst = appendUpper(dst, sub)
		}
	}
	return dst, true
}

// nameEnd returns the length of the prefix of a multibulk request req
// that runs to the end of its command name, all that AppendAPI reads for a
// command without subcommands; 0 when req does not hold the whole name or
// is an inline command.
func nameEnd(req []byte) int {
	if len(req) == 0 || req[0] != '*' {
		return 0
	}
	if _, rest, ok := header(req); ok && len(rest) > 0 && rest[0] == '$' {
		if l, body, ok := header(rest); ok && l >= 0 && l <= int64(len(body)) {
			return len(req) - len(body) + int(l)
		}
	}
	return 0
}

func validName(b []byte) bool {
	if len(b) == 0 || len(b) > maxName {
		return false
	}
	for _, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '.', c == '|':
		default:
			return false
		}
	}
	return true
}

func appendUpper(dst, b []byte) []byte {
	for _, c := range b {
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// reqArg returns argument i (0 is the command name) of the request that
// req starts, when req holds all of it.
func reqArg(req []byte, i int) ([]byte, bool) {
	if len(req) == 0 {
		return nil, false
	}
	if req[0] != '*' {
		return inlineArg(req, i)
	}
	n, rest, ok := header(req)
	if !ok || n <= int64(i) {
		return nil, false
	}
	for k := 0; ; k++ {
		if len(rest) == 0 || rest[0] != '$' {
			return nil, false
		}
		l, body, ok := header(rest)
		if !ok || l < 0 || l > int64(len(body)) {
			return nil, false
		}
		if k == i {
			return body[:l], true
		}
		if l+2 > int64(len(body)) {
			return nil, false
		}
		rest = body[l+2:]
	}
}

// inlineArg returns word i of an inline command line, when the line holds
// all of it (it ends before the end of req).
func inlineArg(req []byte, i int) ([]byte, bool) {
	k := 0
	for p := 0; p < len(req); {
		c := req[p]
		if c == '\r' || c == '\n' {
			return nil, false
		}
		if c == ' ' || c == '\t' {
			p++
			continue
		}
		q := p
		for q < len(req) && req[q] != ' ' && req[q] != '\t' && req[q] != '\r' && req[q] != '\n' {
			q++
		}
		if q == len(req) {
			return nil, false // the word may go on past the prefix
		}
		if k == i {
			return req[p:q], true
		}
		k++
		p = q
	}
	return nil, false
}

// header parses a "<type><integer>\r\n" line at the start of b and returns
// the integer and what follows the line.
func header(b []byte) (int64, []byte, bool) {
	for j := 1; j < len(b) && j < 24; j++ {
		if b[j] == '\n' {
			end := j
			if b[end-1] == '\r' {
				end--
			}
			n, ok := parseInt(b[1:end])
			return n, b[j+1:], ok
		}
	}
	return 0, nil, false
}

// parseInt parses a decimal integer of at most 19 digits, with an
// optional minus sign.
func parseInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// ReplyClass is the outcome of the reply that resp starts: an error reply
// ('-' simple error, '!' blob error) is a ClientError or a ServerError by
// its code (see errorClass); everything else, nulls and "-" elements
// nested inside an array included (EXEC's results), is OK. An attribute
// ('|') before the reply is not skipped: the parser hands the reply that
// follows it.
func ReplyClass(resp []byte) l7.Class {
	if len(resp) == 0 {
		return l7.OK
	}
	switch resp[0] {
	case '-':
		return errorClass(resp[1:])
	case '!':
		if _, body, ok := header(resp); ok {
			return errorClass(body)
		}
		return l7.ServerError
	}
	return l7.OK
}

// errorClass classifies an error by its code, the upper-case first word
// of the message (Redis' convention): the client is at fault when the
// command itself was wrong or not allowed (ERR: unknown command, wrong
// number of arguments, syntax, out-of-range values; WRONGTYPE, NOAUTH,
// WRONGPASS, NOPERM, NOSCRIPT, EXECABORT, NOGROUP, BUSYGROUP, BUSYKEY,
// NOPROTO, NOTBUSY, UNKILLABLE, CROSSSLOT, and the cluster redirections
// MOVED and ASK: the request went to the wrong node); the server is when
// it could not serve a valid command in its current state (OOM, LOADING,
// BUSY, MASTERDOWN, READONLY: a write to a replica, typically after a
// failover, MISCONF, NOREPLICAS, TRYAGAIN, CLUSTERDOWN, UNBLOCKED, and
// "ERR max number of clients reached"). A code not listed, or an error
// without one, is a ServerError: nothing says the client was wrong.
func errorClass(msg []byte) l7.Class {
	n := 0
	for n < len(msg) && msg[n] >= 'A' && msg[n] <= 'Z' {
		n++
	}
	if n < len(msg) && msg[n] != ' ' && msg[n] != '\r' && msg[n] != '\n' {
		return l7.ServerError // not a code: a lower-case or odd first word
	}
	switch string(msg[:n]) {
	case "ERR":
		if hasPrefix(msg[n:], " max number of clients reached") {
			return l7.ServerError
		}
		return l7.ClientError
	case "WRONGTYPE", "NOAUTH", "WRONGPASS", "NOPERM", "NOSCRIPT", "EXECABORT", "NOGROUP", "BUSYGROUP",
		"BUSYKEY", "NOPROTO", "NOTBUSY", "UNKILLABLE", "CROSSSLOT", "MOVED", "ASK":
		return l7.ClientError
	}
	return l7.ServerError
}

func hasPrefix(b []byte, p string) bool {
	return len(b) >= len(p) && string(b[:len(p)]) == p
}
