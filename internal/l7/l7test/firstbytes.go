package l7test

// FirstBytes holds the first bytes a client sends on a connection, per
// protocol, for testing that one protocol's Detect does not claim
// another's connections. Each is a real client's opening (as the comment
// says) or built byte by byte from the protocol's specification.
var FirstBytes = map[string][]byte{
	"http":  []byte("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n"),
	"http2": []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x12\x04\x00\x00\x00\x00\x00"),
	// redis-cli PING
	"redis": []byte("*1\r\n$4\r\nPING\r\n"),
	// pgx v5 StartupMessage (user, database)
	"pgsql": []byte("\x00\x00\x00\x29\x00\x03\x00\x00user\x00postgres\x00database\x00postgres\x00\x00"),
	// libpq's SSLRequest (sslmode=prefer)
	"pgsql-ssl": {0x00, 0x00, 0x00, 0x08, 0x04, 0xd2, 0x16, 0x2f},
	// the MariaDB 10.11 command-line client's HandshakeResponse41, up to its
	// user name
	"mysql": {
		0xd2, 0x00, 0x00, 0x01, // length 210, sequence 1
		0x84, 0xa2, 0xbf, 0x00, // capabilities (PROTOCOL_41, SECURE_CONNECTION, ...; CLIENT_MYSQL clear: MariaDB)
		0x00, 0x00, 0x10, 0x00, // max packet
		0x21,                                                                   // utf8mb3_general_ci
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x1d, 0, 0, 0, // filler, MariaDB's extended capabilities
		'g', 'a', 'l', 'a', 'g', 'o', 0,
	},
	// MySQL SSLRequest: the first 32 bytes of a HandshakeResponse41, CLIENT_SSL set
	"mysql-ssl": {
		0x20, 0x00, 0x00, 0x01,
		0x8d, 0xae, 0xff, 0x01,
		0x00, 0x00, 0x00, 0x01,
		0x2d,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	},
	// Kafka ApiVersionsRequest v3, correlation id 1, client id "rdkafka", flexible
	"kafka": {
		0x00, 0x00, 0x00, 0x23, // size 35
		0x00, 0x12, 0x00, 0x03, // api key 18, version 3
		0x00, 0x00, 0x00, 0x01, // correlation id
		0x00, 0x07, 'r', 'd', 'k', 'a', 'f', 'k', 'a', // client id
		0x00,                                    // tagged fields
		0x08, 'l', 'i', 'b', 'r', 'd', 'k', 'a', // client software name (compact)
		0x06, '2', '.', '0', '.', '2', // version
		0x00,
	},
	// MongoDB OP_MSG hello: header (length, requestID, responseTo, opCode 2013), flags, body section
	"mongo": {
		0x3a, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xdd, 0x07, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00,
		0x00,
		0x25, 0x00, 0x00, 0x00, 0x10, 'h', 'e', 'l', 'l', 'o', 0x00, 0x01, 0x00, 0x00, 0x00,
		0x02, '$', 'd', 'b', 0x00, 0x06, 0x00, 0x00, 0x00, 'a', 'd', 'm', 'i', 'n', 0x00, 0x00,
		0, 0, 0, 0, 0, 0, 0,
	},
	"memcached": []byte("get k\r\n"),
	// DNS query for example.com A, over UDP (no length prefix)
	"dns": {
		0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x07, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 0x03, 'c', 'o', 'm', 0x00, 0x00, 0x01, 0x00, 0x01,
	},
	// the same over TCP (two-byte length prefix)
	"dns-tcp": {
		0x00, 0x1d,
		0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x07, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 0x03, 'c', 'o', 'm', 0x00, 0x00, 0x01, 0x00, 0x01,
	},
}
