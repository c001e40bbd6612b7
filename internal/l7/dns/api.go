package dns

import (
	"strconv"

	"github.com/galago-project/galago/internal/l7"
)

const (
	headerLen = 12
	// maxAPI bounds a template.
	maxAPI = 128
	// maxName is the longest name DNS allows on the wire.
	maxName = 255
)

// header is a message's fixed header.
type header struct {
	id             uint16
	qr             bool
	opcode         uint8
	rcode          uint8 // the header's 4 bits
	tc             bool
	qd, an, ns, ar uint16
}

func parseHeader(m []byte) (header, bool) {
	if len(m) < headerLen {
		return header{}, false
	}
	return header{
		id:     uint16(m[0])<<8 | uint16(m[1]),
		qr:     m[2]&0x80 != 0,
		opcode: m[2] >> 3 & 0xf,
		tc:     m[2]&0x02 != 0,
		rcode:  m[3] & 0xf,
		qd:     uint16(m[4])<<8 | uint16(m[5]),
		an:     uint16(m[6])<<8 | uint16(m[7]),
		ns:     uint16(m[8])<<8 | uint16(m[9]),
		ar:     uint16(m[10])<<8 | uint16(m[11]),
	}, true
}

// question is a message's first question.
type question struct {
	name  []byte // the name on the wire (length-prefixed labels, the root's 0 included)
	typ   uint16
	class uint16
	end   int // offset after the question
}

// parseQuestion reads the question that starts at m[12]. Names in a
// question are never compressed in practice; a pointer there is taken
// for garbage.
func parseQuestion(m []byte) (question, bool) {
	i := headerLen
	for {
		if i >= len(m) || i-headerLen >= maxName {
			return question{}, false
		}
		l := int(m[i])
		if l == 0 {
			break
		}
		if l > 63 { // a compression pointer or a reserved label type
			return question{}, false
		}
		i += 1 + l
	}
	if i+5 > len(m) {
		return question{}, false
	}
	return question{
		name:  m[headerLen : i+1],
		typ:   uint16(m[i+1])<<8 | uint16(m[i+2]),
		class: uint16(m[i+3])<<8 | uint16(m[i+4]),
		end:   i + 5,
	}, true
}

// key identifies a question for pairing: FNV-1a of its name (ASCII
// letters folded to lower case, as DNS compares them), type and class.
func (q *question) key() uint64 {
	h := uint64(14695981039346656037)
	for _, c := range q.name {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		h = (h ^ uint64(c)) * 1099511628211
	}
	for _, c := range [4]byte{byte(q.typ >> 8), byte(q.typ), byte(q.class >> 8), byte(q.class)} {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return h
}

// AppendAPI appends to dst the API template of the DNS message that msg
// starts (without TCP's length prefix): "<type> <name>" of its first
// question, the name in lower case without its final dot ("A
// example.com", "AAAA db.example.test", "NS ." for the root), preceded by
// the class when it is not IN ("CH TXT version.bind") and by the opcode
// when it is not QUERY ("UPDATE SOA example.com"). Labels that look like
// identifiers (4 digits or more, over 32 bytes, or a byte other than a
// letter, digit, '-' or '_') become "{id}"; the address labels of a
// reverse name become "{ip}" ("PTR {ip}.in-addr.arpa"); a name too long
// for 128 bytes loses its leftmost labels to "*.". It reports false when
// msg does not hold a question.
func AppendAPI(dst, msg []byte) ([]byte, bool) {
	h, ok := parseHeader(msg)
	if !ok || h.qd == 0 {
		return dst, false
	}
	q, ok := parseQuestion(msg)
	if !ok {
		return dst, false
	}
	start := len(dst)
	if h.opcode != 0 {
		dst = appendCode(dst, h.opcode, opcodes[:], "OPCODE")
		dst = append(dst, ' ')
	}
	if q.class != 1 {
		dst = appendClass(dst, q.class)
		dst = append(dst, ' ')
	}
	dst = appendType(dst, q.typ)
	dst = append(dst, ' ')
	return appendName(dst, q.name, maxAPI-(len(dst)-start)), true
}

var opcodes = [...]string{0: "QUERY", 1: "IQUERY", 2: "STATUS", 4: "NOTIFY", 5: "UPDATE", 6: "DSO"}

func appendCode(dst []byte, v uint8, names []string, prefix string) []byte {
	if int(v) < len(names) && names[v] != "" {
		return append(dst, names[v]...)
	}
	return strconv.AppendUint(append(dst, prefix...), uint64(v), 10)
}

func appendClass(dst []byte, c uint16) []byte {
	switch c {
	case 1:
		return append(dst, "IN"...)
	case 3:
		return append(dst, "CH"...)
	case 4:
		return append(dst, "HS"...)
	case 254:
		return append(dst, "NONE"...)
	case 255:
		return append(dst, "ANY"...)
	}
	return strconv.AppendUint(append(dst, "CLASS"...), uint64(c), 10)
}

// types are the mnemonics of the RR types in use (RFC 3597 "TYPE<n>" for
// the others).
var types = map[uint16]string{
	1: "A", 2: "NS", 5: "CNAME", 6: "SOA", 12: "PTR", 13: "HINFO", 15: "MX", 16: "TXT", 17: "RP", 18: "AFSDB",
	24: "SIG", 25: "KEY", 28: "AAAA", 29: "LOC", 33: "SRV", 35: "NAPTR", 36: "KX", 37: "CERT", 39: "DNAME",
	41: "OPT", 42: "APL", 43: "DS", 44: "SSHFP", 45: "IPSECKEY", 46: "RRSIG", 47: "NSEC", 48: "DNSKEY",
	49: "DHCID", 50: "NSEC3", 51: "NSEC3PARAM", 52: "TLSA", 53: "SMIMEA", 55: "HIP", 59: "CDS", 60: "CDNSKEY",
	61: "OPENPGPKEY", 62: "CSYNC", 63: "ZONEMD", 64: "SVCB", 65: "HTTPS", 99: "SPF", 108: "EUI48", 109: "EUI64",
	249: "TKEY", 250: "TSIG", 251: "IXFR", 252: "AXFR", 253: "MAILB", 254: "MAILA", 255: "ANY", 256: "URI",
	257: "CAA", 32768: "TA", 32769: "DLV",
}

func appendType(dst []byte, t uint16) []byte {
	switch t { // the common ones without hashing
	case 1:
		return append(dst, 'A')
	case 28:
		return append(dst, "AAAA"...)
	}
	if s, ok := types[t]; ok {
		return append(dst, s...)
	}
	return strconv.AppendUint(append(dst, "TYPE"...), uint64(t), 10)
}

// appendName appends the template of a wire name in at most room bytes.
func appendName(dst, name []byte, room int) []byte {
	// First pass: the shown length of each label (placeholders
	// included), and whether the name is a reverse one.
	var shown [128]uint8
	n := 0
	for i := 0; i < len(name) && name[i] != 0 && n < len(shown); i += 1 + int(name[i]) {
		l := name[i+1 : i+1+int(name[i])]
		shown[n] = uint8(len(l))
		if idLike(l) {
			shown[n] = uint8(len("{id}"))
		}
		n++
	}
	if n == 0 {
		return append(dst, '.')
	}
	// A reverse name's address labels are one "{ip}" (shown as label 0,
	// the others empty).
	ip := 0
	if n > 2 && eqFold(label(name, n-1), "arpa") && (eqFold(label(name, n-2), "in-addr") || eqFold(label(name, n-2), "ip6")) {
		ip = n - 2
		shown[0] = uint8(len("{ip}"))
	}
	// The right labels say the most (the domain): when the name is too
	// long, the left ones give way to "*.".
	first, size := n-1, int(shown[n-1])
	for first > 0 {
		k := first - 1
		if ip > 0 && k > 0 && k < ip {
			first-- // an address label: nothing of its own
			continue
		}
		limit := room
		if k > 0 {
			limit -= 2
		}
		if size+int(shown[k])+1 > limit {
			break
		}
		size += int(shown[k]) + 1
		first--
	}
	if ip > 0 && first > 0 && first < ip {
		first = ip // the placeholder did not fit: no address labels at all
	}
	if first > 0 {
		dst = append(dst, "*."...)
	}
	k := 0
	for i := 0; k < n; i += 1 + int(name[i]) {
		l := name[i+1 : i+1+int(name[i])]
		switch {
		case k < first, ip > 0 && k > 0 && k < ip:
		case ip > 0 && k == 0:
			dst = append(dst, "{ip}."...)
		case idLike(l):
			dst = append(dst, "{id}"...)
		default:
			for _, c := range l {
				if c >= 'A' && c <= 'Z' {
					c += 'a' - 'A'
				}
				dst = append(dst, c)
			}
		}
		if k >= first && k < n-1 && (ip == 0 || k >= ip) {
			dst = append(dst, '.')
		}
		k++
	}
	return dst
}

// label returns label k of a wire name (which has more than k).
func label(name []byte, k int) []byte {
	i := 0
	for ; k > 0; k-- {
		i += 1 + int(name[i])
	}
	return name[i+1 : i+1+int(name[i])]
}

// idLike reports whether a label looks like an identifier rather than a
// host or domain name: 4 digits or more, over 32 bytes, or a byte that
// is not a letter, digit, '-' or '_'.
func idLike(l []byte) bool {
	if len(l) > 32 {
		return true
	}
	digits := 0
	for _, c := range l {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-', c == '_':
		default:
			return true
		}
	}
	return digits >= 4
}

func eqFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// ResponseClass is the outcome of the DNS response that msg starts
// (without TCP's length prefix), from its RCODE: the header's 4 bits,
// extended by the OPT record's 8 when msg holds the whole message.
// NOERROR is OK, truncated (TC) or not. The client is at fault when the
// request was malformed, named nothing that exists, or was not allowed:
// FORMERR, NXDOMAIN (like HTTP's 404), REFUSED (a policy: like 403),
// YXDOMAIN, YXRRSET, NXRRSET, NOTAUTH, NOTZONE (dynamic update
// prerequisites and zones), DSOTYPENI, and the EDNS/TSIG codes BADVERS
// (BADSIG), BADKEY, BADTIME, BADMODE, BADNAME, BADALG, BADTRUNC,
// BADCOOKIE. The server is when it failed or cannot do what was asked:
// SERVFAIL, NOTIMP (like 501), and any code not assigned.
func ResponseClass(msg []byte) l7.Class {
	h, ok := parseHeader(msg)
	if !ok {
		return l7.OK
	}
	return rcodeClass(uint16(h.rcode) | uint16(extRcode(msg, &h))<<4)
}

func rcodeClass(rc uint16) l7.Class {
	switch {
	case rc == 0:
		return l7.OK
	case rc == 2, rc == 4:
		return l7.ServerError
	case rc == 1, rc == 3, rc == 5, rc >= 6 && rc <= 11, rc >= 16 && rc <= 23:
		return l7.ClientError
	}
	return l7.ServerError
}

// extRcode is the upper 8 bits of the RCODE from the OPT record, 0 when
// there is none or msg does not hold the whole message. Its walk is
// bounded by the message's length: each record takes 11 bytes at least.
func extRcode(msg []byte, h *header) uint8 {
	if h.ar == 0 {
		return 0
	}
	i := headerLen
	for range h.qd {
		var ok bool
		if i, ok = skipName(msg, i); !ok || i+4 > len(msg) {
			return 0
		}
		i += 4
	}
	n := int(h.an) + int(h.ns) + int(h.ar)
	for k := 0; k < n; k++ {
		j, ok := skipName(msg, i)
		if !ok || j+10 > len(msg) {
			return 0
		}
		typ := uint16(msg[j])<<8 | uint16(msg[j+1])
		rdlen := int(msg[j+8])<<8 | int(msg[j+9])
		if typ == 41 && k >= int(h.an)+int(h.ns) {
			return msg[j+4] // the OPT's TTL: extended RCODE, version, flags
		}
		i = j + 10 + rdlen
		if i > len(msg) {
			return 0
		}
	}
	return 0
}

// skipName steps over a name at msg[i]: labels up to the root or a
// compression pointer.
func skipName(msg []byte, i int) (int, bool) {
	for start := i; i < len(msg) && i-start <= maxName; {
		l := int(msg[i])
		switch {
		case l == 0:
			return i + 1, true
		case l&0xc0 == 0xc0:
			return i + 2, i+2 <= len(msg)
		case l > 63:
			return 0, false
		}
		i += 1 + l
	}
	return 0, false
}
