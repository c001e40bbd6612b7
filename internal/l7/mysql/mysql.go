package mysql

import (
	"encoding/binary"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/sqlapi"
)

// DetectLen is how many bytes Detect and DetectGreeting look at.
const DetectLen = 32

// Detect reports whether b, the first bytes a client sent on a connection,
// start a HandshakeResponse41 or an SSLRequest (see the package doc for
// the signature). MySQL servers speak first: see DetectGreeting for the
// connection's very first bytes.
func Detect(b []byte) bool {
	if len(b) < DetectLen {
		return false
	}
	n := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
	// The 23-byte filler after the character set is zeros, but for its
	// last four bytes (MariaDB's extended capabilities), past the 32.
	return n >= 32 && n <= 0xffff && b[3] == 1 && isHandshakeResponse(b[4:])
}

// DetectGreeting reports whether b, the first bytes a server sent on a
// connection, start a protocol 10 greeting (Initial Handshake Packet).
func DetectGreeting(b []byte) bool {
	if len(b) < 6 {
		return false
	}
	n := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
	if n < 40 || n > 0x3ff || b[3] != 0 || b[4] != 10 || b[5] < '0' || b[5] > '9' {
		return false
	}
	// The server version: printable up to its NUL ("8.0.36",
	// "5.5.5-10.11.6-MariaDB-0+deb12u1").
	for _, c := range b[5:min(len(b), DetectLen)] {
		if c == 0 {
			return true
		}
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// AppendAPI appends the API template of a command packet to dst: for
// COM_QUERY and COM_STMT_PREPARE, the template of its SQL (see package
// sqlapi); for the other commands their name ("PING", "USE", ...);
// nothing for COM_STMT_EXECUTE (its statement's template is known only
// from the connection's COM_STMT_PREPARE, see Parser). pkt is a prefix of
// the packet, header included; the template is as good as the prefix is
// long.
func AppendAPI(dst, pkt []byte) []byte {
	if len(pkt) < 5 || pkt[3] != 0 {
		return dst
	}
	n := int(pkt[0]) | int(pkt[1])<<8 | int(pkt[2])<<16
	switch pkt[4] {
	case comQuery, comStmtPrepare:
		sql := pkt[5:]
		if len(pkt)-4 < n {
			return sqlapi.AppendPrefix(dst, sql, sqlapi.MySQL)
		}
		return sqlapi.Append(dst, sql[:max(n-1, 0)], sqlapi.MySQL)
	}
	return append(dst, commandAPI(pkt[4])...)
}

// Outcome returns the class of a response from a prefix of its first
// packet, header included: OK unless it is an ERR packet, whose error
// number and SQLSTATE decide (see the package doc). ok is false when the
// prefix ends before what decides.
func Outcome(pkt []byte) (class l7.Class, ok bool) {
	if len(pkt) < 5 {
		return l7.OK, false
	}
	return errOutcome(pkt[4:])
}

// errOutcome classes a packet payload.
func errOutcome(p []byte) (l7.Class, bool) {
	if len(p) == 0 {
		return l7.OK, false
	}
	if p[0] != 0xff {
		return l7.OK, true
	}
	if len(p) < 3 {
		return l7.ServerError, false
	}
	code := binary.LittleEndian.Uint16(p[1:])
	if c, ok := codeClass(code); ok {
		return c, true
	}
	if len(p) >= 9 && p[3] == '#' {
		return sqlapi.Class(p[4:9]), true
	}
	if len(p) > 3 && p[3] == '#' {
		return l7.ServerError, false // the SQLSTATE was cut
	}
	// No SQLSTATE (an error before the handshake, a pre-4.1 client): an
	// error nobody classified is not blamed on the client.
	return l7.ServerError, true
}

// codeClass classes the error numbers whose SQLSTATE misleads: the
// general HY000 (which sqlapi.Class counts as the client's) covers the
// server's resource, storage, lock and timeout errors too, and errors
// sent without a SQLSTATE need their number.
func codeClass(code uint16) (l7.Class, bool) {
	switch code {
	case 1004, 1005, 1006, // can't create file, table, database (the file system)
		1010, 1011, 1012, 1013, 1014, 1015, 1016, 1017, 1018, 1019, 1020, // file system, record changed
		1021,       // disk full
		1024, 1025, // error reading/renaming file
		1026, 1027, // error writing file, file locked
		1030,             // got error from the storage engine
		1034, 1035, 1036, // index file corrupt, old key file, table read only (the server's)
		1037, 1038, 1040, 1041, // out of memory, out of sort memory, too many connections, out of resources
		1053, 1077, 1078, 1079, 1080, 1081, // shutdown, signal, forced close, socket error
		1105,                                           // unknown error
		1114,                                           // table full
		1135,                                           // can't create thread
		1152,                                           // aborted connection
		1154, 1155, 1156, 1157, 1158, 1159, 1160, 1161, // network read/write errors
		1180, 1181, // error during commit/rollback
		1184,       // aborted new connection
		1194, 1195, // table crashed
		1205, 1206, // lock wait timeout, lock table full
		1213, // deadlock
		1317, // query interrupted
		1637, // too many active concurrent transactions
		1878, // temporary file write failure
		1927, // MariaDB: connection killed
		1969, // MariaDB: statement timeout (max_statement_time)
		3024, // MySQL: query timeout (max_execution_time)
		3572, // MySQL: NOWAIT lock not available
		4031: // MySQL: disconnected for inactivity
		return l7.ServerError, true
	case 1044, 1045, 1049, // access denied to a database, bad user or password, unknown database
		1054, 1062, 1064, // unknown column, duplicate entry, syntax error
		1142, 1143, 1146, // command or column denied, unknown table
		1210, 1243, // incorrect arguments to EXECUTE, unknown prepared statement handler
		1364, 1366, 1406, // field without default, incorrect value, data too long
		1451, 1452, // foreign key constraint fails
		1698: // access denied (unix_socket)
		return l7.ClientError, true
	}
	return 0, false
}
