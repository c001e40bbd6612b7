package memcached

import (
	"github.com/galago-project/galago/internal/l7"
)

// cmd is what the parser needs to know of a request line.
type cmd struct {
	api     string // the template: one of the strings below, "" for no known command
	resp    respKind
	data    int64 // bytes of the data block that follows the line (with its CRLF), 0 for none
	noreply bool  // "noreply": no response at all
	quiet   meta  // a meta command with the q flag: the response is left out on success
	opaque  uint64
	hasOpq  bool
}

// respKind is how the response to a command is framed.
type respKind uint8

const (
	rSingle respKind = iota // one line ("STORED", "VERSION 1.6.18", "HD", a number...), or VA and a data block
	rDump                   // lines until END (lru_crawler metadump/mgdump: "key=..." lines)
	rWatch                  // "OK", then log lines that answer nothing
	rNone                   // no response: quit
)

// meta says which meta command a quiet request is, for the responses it
// may still get.
type meta uint8

const (
	mNone meta = iota
	mGet
	mSet
	mDelete
	mArith
)

// names are the commands memcached 1.6 knows; stats, slabs, lru_crawler
// and lru take a known subcommand in the template too.
var names = [...]string{
	"get", "gets", "gat", "gats", "set", "add", "replace", "append", "prepend", "cas", "delete", "incr", "decr",
	"touch", "stats", "flush_all", "version", "verbosity", "quit", "shutdown", "cache_memlimit", "slabs",
	"lru_crawler", "lru", "watch", "misbehave", "debugtime", "mg", "ms", "md", "ma", "mn", "me", "extstore",
	"refresh_certs", "stats items", "stats slabs", "stats sizes", "stats settings", "stats conns",
	"stats detail", "stats reset", "stats cachedump", "stats extstore", "slabs reassign", "slabs automove",
	"lru_crawler crawl", "lru_crawler metadump", "lru_crawler mgdump", "lru_crawler enable",
	"lru_crawler disable", "lru_crawler sleep", "lru_crawler tocrawl", "lru tune", "lru mode", "lru temp_ttl",
}

// lookup returns the template equal to b, "" for none: the common
// commands by a switch (no hashing), the rest by a scan.
func lookup(b []byte) string {
	switch string(b) {
	case "get":
		return "get"
	case "set":
		return "set"
	case "gets":
		return "gets"
	case "delete":
		return "delete"
	case "mg":
		return "mg"
	case "ms":
		return "ms"
	}
	for _, n := range names {
		if n == string(b) {
			return n
		}
	}
	return ""
}

// maxLine is how much of a line is kept: a storage command with a key of
// the longest length memcached allows (250 bytes) and all its numbers, a
// meta command's flags, a VALUE line.
const maxLine = 512

// maxWords bounds the words of a line that are split out: a storage
// command has 7 at most, one more tells it has too many.
const maxWords = 8

// words splits a line (without its end) at spaces, as memcached does
// (runs of spaces are one separator), into at most len(w) words.
func words(line []byte, w [][]byte) int {
	n := 0
	for i := 0; i < len(line) && n < len(w); {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		j := i
		for j < len(line) && line[j] != ' ' {
			j++
		}
		if j > i {
			w[n] = line[i:j]
			n++
		}
		i = j
	}
	return n
}

// trimEOL takes the line end off: memcached accepts LF as well as CRLF.
func trimEOL(line []byte) []byte {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line
}

// parseCmd reads a request line (without its end; complete when full is
// set, else its first maxLine bytes).
func parseCmd(line []byte, full bool) cmd {
	if !full {
		// The last word may go on past what was kept.
		for len(line) > 0 && line[len(line)-1] != ' ' {
			line = line[:len(line)-1]
		}
	}
	var w [maxWords][]byte
	n := words(line, w[:])
	if n == 0 {
		return cmd{} // an empty line: memcached answers ERROR
	}
	c := cmd{api: template(w[:n])}
	noreply := full && n < maxWords && string(w[n-1]) == "noreply"
	switch c.api {
	case "set", "add", "replace", "append", "prepend", "cas":
		// memcached swallows the data block only when the line is well
		// formed: otherwise it answers an error and reads the block as
		// commands, so the parser does too.
		want := 5
		if c.api == "cas" {
			want = 6
		}
		if !full || n < want || n > want+1 || len(w[1]) > 250 {
			return c
		}
		if _, ok := parseUint(w[2], 1<<32-1); !ok {
			return c
		}
		if _, ok := parseInt(w[3]); !ok {
			return c
		}
		l, ok := parseUint(w[4], 1<<31-3)
		if !ok || c.api == "cas" && !validUint(w[5]) {
			return c
		}
		c.data = int64(l) + 2
		c.noreply = noreply && n == want+1
	case "delete", "incr", "decr", "touch", "flush_all", "verbosity", "cache_memlimit":
		c.noreply = noreply
	case "quit":
		c.resp = rNone
	case "watch":
		c.resp = rWatch
	case "lru_crawler metadump", "lru_crawler mgdump":
		c.resp = rDump
	case "ms":
		if n >= 3 {
			if l, ok := parseUint(w[2], 1<<31-3); ok {
				c.data = int64(l) + 2
			}
		}
		c.metaFlags(line, 3, mSet)
	case "mg":
		c.metaFlags(line, 2, mGet)
	case "md":
		c.metaFlags(line, 2, mDelete)
	case "ma":
		c.metaFlags(line, 2, mArith)
	}
	return c
}

// metaFlags reads a meta command's flags, from word skip on: q (quiet)
// and O<opaque>.
func (c *cmd) metaFlags(line []byte, skip int, m meta) {
	k := 0
	for i := 0; i < len(line); {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		j := i
		for j < len(line) && line[j] != ' ' {
			j++
		}
		if j > i {
			if f := line[i:j]; k >= skip {
				switch {
				case len(f) == 1 && f[0] == 'q':
					c.quiet = m
				case len(f) > 1 && f[0] == 'O':
					c.opaque, c.hasOpq = hash(f[1:]), true
				}
			}
			k++
		}
		i = j
	}
}

// template is the command's name, with the subcommand of stats, slabs,
// lru_crawler and lru when memcached knows it; "" for an unknown command.
func template(w [][]byte) string {
	if len(w) >= 2 {
		switch string(w[0]) {
		case "stats", "slabs", "lru_crawler", "lru":
			var buf [32]byte
			if len(w[0])+1+len(w[1]) <= len(buf) {
				b := append(append(append(buf[:0], w[0]...), ' '), w[1]...)
				if s := lookup(b); s != "" {
					return s
				}
			}
		}
	}
	return lookup(w[0])
}

// AppendAPI appends to dst the API template of the request that req
// starts (a command line, or its first bytes) and reports whether it is a
// command memcached knows: its name ("get", "set", "delete", "mg"...),
// with the subcommand of stats, slabs, lru_crawler and lru ("stats
// slabs", "lru_crawler metadump"). Never a key or a value.
func AppendAPI(dst, req []byte) ([]byte, bool) {
	line := req
	for i, c := range req {
		if c == '\n' {
			line = req[:i]
			break
		}
	}
	if len(line) == len(req) {
		// The line is cut: its last word may be cut too.
		for len(line) > 0 && line[len(line)-1] != ' ' {
			line = line[:len(line)-1]
		}
	}
	var w [2][]byte
	n := words(trimEOL(line), w[:])
	if n == 0 {
		return dst, false
	}
	t := template(w[:min(n, 2)])
	if t == "" {
		return dst, false
	}
	return append(dst, t...), true
}

// ResponseClass is the outcome of the response that resp starts: ERROR (a
// command memcached does not know) and CLIENT_ERROR (a malformed line or
// data block) are the client's errors; SERVER_ERROR (out of memory, an
// object too large for the cache, a failed allocation) and BUSY (the LRU
// crawler is busy) the server's. NOT_FOUND, NOT_STORED, EXISTS and the
// meta codes EN, NF, NS, EX are answers, OK.
func ResponseClass(resp []byte) l7.Class {
	switch code(resp) {
	case cError, cClientError:
		return l7.ClientError
	case cServerError, cBusy:
		return l7.ServerError
	}
	return l7.OK
}

// rcode is a response line's first word.
type rcode uint8

const (
	cOther rcode = iota
	cValue
	cEnd
	cStat
	cItem
	cVA
	cHD
	cEN
	cNF
	cNS
	cEX
	cMN
	cOK
	cReset
	cError
	cClientError
	cServerError
	cBusy
	cStored
	cNotStored
	cExists
	cNotFound
	cDeleted
	cTouched
	cVersion
	cME
	cNumber // incr/decr's new value
)

func code(line []byte) rcode {
	n := 0
	for n < len(line) && line[n] != ' ' && line[n] != '\r' && line[n] != '\n' {
		n++
	}
	switch string(line[:n]) {
	case "VALUE":
		return cValue
	case "END":
		return cEnd
	case "STAT":
		return cStat
	case "ITEM":
		return cItem
	case "VA":
		return cVA
	case "HD":
		return cHD
	case "EN":
		return cEN
	case "NF":
		return cNF
	case "NS":
		return cNS
	case "EX":
		return cEX
	case "MN":
		return cMN
	case "OK":
		return cOK
	case "RESET":
		return cReset
	case "ERROR":
		return cError
	case "CLIENT_ERROR":
		return cClientError
	case "SERVER_ERROR":
		return cServerError
	case "BUSY":
		return cBusy
	case "STORED":
		return cStored
	case "NOT_STORED":
		return cNotStored
	case "EXISTS":
		return cExists
	case "NOT_FOUND":
		return cNotFound
	case "DELETED":
		return cDeleted
	case "TOUCHED":
		return cTouched
	case "VERSION":
		return cVersion
	case "ME":
		return cME
	}
	if _, ok := parseUint(line[:n], 1<<64-1); ok {
		return cNumber
	}
	return cOther
}

// mayAnswer reports whether a quiet meta command can get a response with
// this code (memcached 1.6 leaves out mg's EN, ms's and md's HD, ma's HD
// and VA); errors answer any command.
func mayAnswer(q meta, c rcode) bool {
	switch c {
	case cError, cClientError, cServerError:
		return true
	}
	switch q {
	case mGet:
		return c == cVA || c == cHD
	case mSet:
		return c == cNS || c == cEX || c == cNF
	case mDelete:
		return c == cNF || c == cEX
	case mArith:
		return c == cNF || c == cNS || c == cEX
	}
	return true
}

func parseUint(b []byte, max uint64) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (max-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

func validUint(b []byte) bool {
	_, ok := parseUint(b, 1<<64-1)
	return ok
}

func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	n, ok := parseUint(b, 1<<63-1)
	if neg {
		return -int64(n), ok
	}
	return int64(n), ok
}

// hash is FNV-1a, for opaque tokens.
func hash(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return h
}

// valueLen is the data block length a VALUE ("VALUE <key> <flags>
// <bytes> [<cas>]") or VA ("VA <size> <flags>*") line announces, with its
// CRLF.
func valueLen(line []byte, c rcode) (int64, bool) {
	var w [maxWords][]byte
	n := words(line, w[:])
	i := 3
	if c == cVA {
		i = 1
	}
	if n <= i {
		return 0, false
	}
	l, ok := parseUint(w[i], 1<<40)
	return int64(l) + 2, ok
}
