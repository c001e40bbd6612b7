package http

import "bytes"

// MaxAPI is the longest API template AppendAPI produces, in bytes.
const MaxAPI = 128

// Placeholder replaces a path segment (or part of one) that holds a value:
// a number, a UUID, a hash, a random token, an e-mail address.
const Placeholder = "{id}"

// OtherMethod stands for a request method outside the known set, so that
// made-up or garbage methods cannot multiply API values (the name comes
// from OpenTelemetry's HTTP conventions).
const OtherMethod = "_OTHER"

// truncMark ends a template cut at MaxAPI or a path seen only in part.
const truncMark = "..."

// knownMethods are kept as they are in templates: RFC 9110's methods,
// PATCH, WebDAV's and the cache-purge extension. Anything else is
// OtherMethod.
var knownMethods = [...]string{
	"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
	"PROPFIND", "PROPPATCH", "MKCOL", "COPY", "MOVE", "LOCK", "UNLOCK", "SEARCH", "REPORT", "PURGE",
}

// knownMethod returns the canonical string of method, or "" when it is not
// in knownMethods. Comparison is exact: methods are case-sensitive.
func knownMethod(method []byte) string {
	switch string(method) {
	case "GET":
		return "GET"
	case "POST":
		return "POST"
	case "PUT":
		return "PUT"
	case "HEAD":
		return "HEAD"
	case "DELETE":
		return "DELETE"
	case "PATCH":
		return "PATCH"
	case "OPTIONS":
		return "OPTIONS"
	}
	for _, m := range knownMethods {
		if string(method) == m {
			return m
		}
	}
	return ""
}

// AppendAPI appends the API template of a request with the given method
// and request target (as on the request line, or HTTP/2's :method and
// :path) to dst, and returns the extended slice. The template is
//
//	METHOD SP path-template
//
// where METHOD is the method if it is a known one (GET, POST, ..., WebDAV's)
// and OtherMethod otherwise, and the path template is the target's path
// without query string or fragment, each value-like segment replaced by
// Placeholder (see the package documentation for the rules). Absolute
// targets (http://host/p) keep their path only; CONNECT's authority target
// gives "CONNECT" and an asterisk target "OPTIONS *". The result is at most
// MaxAPI bytes.
func AppendAPI(dst []byte, method, target []byte) []byte {
	return appendAPI(dst, method, target, false)
}

// AppendAPIPrefix is AppendAPI for a target seen only in part (cut by a
// capture or a buffer): its last, possibly incomplete, path segment
// becomes "..." unless the path is known to be complete (a '?' or '#'
// follows it).
func AppendAPIPrefix(dst []byte, method, targetPrefix []byte) []byte {
	return appendAPI(dst, method, targetPrefix, true)
}

// RequestAPI appends the API template of the request whose first bytes
// (a bounded prefix, as a capture delivers it) are req, and reports
// whether req starts with a request line at all. A request line cut by
// the prefix's end still gives a template, its last segment "...".
func RequestAPI(dst []byte, req []byte) ([]byte, bool) {
	line, long := req, true
	if i := bytes.IndexByte(req, '\n'); i >= 0 {
		line, long = trimEOL(req[:i+1]), false
	}
	method, target, partial, ok := splitRequestLine(line, long)
	if !ok {
		return dst, false
	}
	return appendAPI(dst, method, target, partial), true
}

// appendAPI is AppendAPI for a target that may have been cut short
// (partial): its last, possibly incomplete, segment becomes truncMark.
func appendAPI(dst []byte, method, target []byte, partial bool) []byte {
	start := len(dst)
	m := knownMethod(method)
	if m == "" {
		m = OtherMethod
	}
	dst = append(dst, m...)
	if m == "CONNECT" {
		return dst // authority-form: host and port are values, not an API
	}
	if len(target) == 0 {
		return dst
	}
	if target[0] == '*' {
		return append(dst, " *"...)
	}
	if target[0] != '/' {
		// absolute-form (a request to a proxy): keep the path only.
		p, ok := absolutePath(target)
		if !ok {
			return dst
		}
		target = p
	}
	if i := bytes.IndexByte(target, '?'); i >= 0 {
		target, partial = target[:i], false // the path itself was complete
	}
	if i := bytes.IndexByte(target, '#'); i >= 0 {
		target, partial = target[:i], false
	}
	dst = append(dst, ' ')
	return appendPath(dst, start, target, partial)
}

// absolutePath returns the path of an absolute-form target
// ("http://host:port/path?q" -> "/path?q"), "/" when it has none.
func absolutePath(t []byte) ([]byte, bool) {
	i := 0
	for i < len(t) && i < 16 && isSchemeChar(t[i]) {
		i++
	}
	if i == 0 || i+3 > len(t) || t[i] != ':' || t[i+1] != '/' || t[i+2] != '/' {
		return nil, false
	}
	rest := t[i+3:]
	for j, b := range rest {
		if b == '/' {
			return rest[j:], true
		}
		if b == '?' || b == '#' {
			break
		}
	}
	return []byte("/"), true
}

func isSchemeChar(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '+' || b == '-' || b == '.'
}

// appendPath appends the templated path; start is where the whole template
// began in dst, for the MaxAPI bound.
func appendPath(dst []byte, start int, path []byte, partial bool) []byte {
	if len(path) == 0 {
		return append(dst, '/')
	}
	for len(path) > 0 {
		// path[0] is '/' except for a relative garbage target.
		seg, next := path, len(path)
		if i := bytes.IndexByte(path[1:], '/'); i >= 0 {
			seg, next = path[:i+1], i+1
		}
		last := next == len(path)
		mark := len(dst)
		if seg[0] == '/' {
			dst = append(dst, '/')
			seg = seg[1:]
		}
		if last && partial {
			dst = append(dst, truncMark...)
		} else {
			dst = appendSegment(dst, seg, start+MaxAPI)
		}
		if len(dst)-start > MaxAPI {
			// Cut before the segment that does not fit (a path that is one
			// huge segment is "/...").
			dst = dst[:mark]
			if mark-start+1+len(truncMark) > MaxAPI {
				dst = dst[:start+MaxAPI-len(truncMark)]
				return append(dst, truncMark...)
			}
			return append(append(dst, '/'), truncMark...)
		}
		path = path[next:]
	}
	return dst
}

// Byte classes for segment scanning.
const (
	cLower = 1 << iota
	cUpper
	cDigit
	cHex
	cSep   // splits a segment into tokens
	cValue // makes the whole segment a value: '@', bytes outside printable ASCII
)

var byteClass = func() (t [256]uint8) {
	for b := 0; b < 256; b++ {
		switch {
		case b >= 'a' && b <= 'z':
			t[b] = cLower
		case b >= 'A' && b <= 'Z':
			t[b] = cUpper
		case b >= '0' && b <= '9':
			t[b] = cDigit | cHex
		case b < 0x21 || b > 0x7e || b == '@':
			t[b] = cValue
		}
		if b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F' {
			t[b] |= cHex
		}
		switch b {
		case '-', '_', '.', '~', ',', ':', ';', '+', '=':
			t[b] = cSep
		}
	}
	return t
}()

// appendSegment appends one path segment (without its '/'), collapsing
// values to Placeholder, in one pass: tokens between separators are
// appended as they are classified, and the whole segment is replaced by
// Placeholder at the end if it is one value. Past limit it stops
// appending (the caller cuts the segment off) but still classifies, so a
// long token still becomes Placeholder.
func appendSegment(dst []byte, seg []byte, limit int) []byte {
	if len(seg) == 0 {
		return dst
	}
	// Most segments are a word in lower case or a number: settle those
	// with one branch-free pass over the bytes.
	all, any := uint8(0xff), uint8(0)
	for _, b := range seg {
		c := byteClass[b]
		all &= c
		any |= c
	}
	switch {
	case all&cDigit != 0 || isUUID(seg):
		return append(dst, Placeholder...)
	case any&^(cLower|cHex) == 0 && len(seg) <= 24:
		return append(dst, seg...)
	}
	mark := len(dst)
	var lower, upper, digit, switches int
	var prev uint8
	value, words := false, false
	tok, tokDigits, tokHex := 0, 0, 0 // current token: start, digits, hex digits
	for i := 0; i <= len(seg); i++ {
		var c uint8
		if i < len(seg) {
			c = byteClass[seg[i]]
		}
		if i == len(seg) || c&cSep != 0 {
			if n := i - tok; n > 0 && len(dst) <= limit {
				if tokenIsValue(n, tokDigits, tokHex) {
					dst = append(dst, Placeholder...)
				} else {
					dst = append(dst, seg[tok:i]...)
					words = true
				}
			}
			if i < len(seg) && len(dst) <= limit {
				dst = append(dst, seg[i])
			}
			tok, tokDigits, tokHex = i+1, 0, 0
			continue
		}
		switch cls := c & (cLower | cUpper | cDigit); cls {
		case cLower:
			lower++
		case cUpper:
			upper++
		case cDigit:
			digit++
			tokDigits++
		case 0:
			if c&cValue != 0 || seg[i] == '%' && i+2 < len(seg) && seg[i+1] == '4' && seg[i+2] == '0' { // %40 is '@'
				value = true
			}
		}
		if cls := c & (cLower | cUpper | cDigit); cls != 0 {
			if prev != 0 && cls != prev {
				switches++
			}
			prev = cls
		}
		if c&cHex != 0 {
			tokHex++
		}
	}
	// Random base64/base62 text switches between lower, upper and digits at
	// about two characters in three; words and CamelCase names rarely do
	// more than one in three.
	n := lower + upper + digit
	random := n >= 16 && upper >= 2 && lower >= 2 && digit >= 1 && switches*5 >= (n-1)*2
	if value || random || !words && len(dst)-mark > len(Placeholder) {
		return append(dst[:mark], Placeholder...)
	}
	return dst
}

// isUUID matches 8-4-4-4-12 hex digits.
func isUUID(s []byte) bool {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return false
	}
	h := uint8(cHex)
	for _, run := range [...][2]int{{0, 8}, {9, 13}, {14, 18}, {19, 23}, {24, 36}} {
		for _, b := range s[run[0]:run[1]] {
			h &= byteClass[b]
		}
	}
	return h != 0
}

// tokenIsValue reports whether a token (a segment's part between
// separators) of n bytes, digits of them digits and hex of them hex digits,
// is a value: all digits, a hex string of 8+ characters with a digit in it
// (hashes), a token with 4+ digits or of 12+ characters with a digit
// ("a1b2c3d4e5f6", "INV20230001"), or any token over 24 characters.
func tokenIsValue(n, digits, hex int) bool {
	switch {
	case n > 24 || digits == n:
		return true
	case digits == 0:
		return false
	case hex == n && n >= 8:
		return true
	}
	return digits >= 4 || n >= 12
}
