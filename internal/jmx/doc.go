// Package jmx reads a JVM's platform MBeans through its local JMX RMI
// connector, in Go, with nothing loaded into the JVM: the connector the
// JDK's own management agent opens on `jcmd <pid>
// ManagementAgent.start_local` (as jconsole does for a local JVM), whose
// address, "service:jmx:rmi://127.0.0.1/stub/<base64>", carries the
// serialized stub of its RMIServer.
//
// It speaks JRMP, the Java RMI wire protocol (stream protocol: handshake,
// Call and ReturnData messages, DGC acknowledgements), and Java Object
// Serialization: a reader of any stream into a generic tree (Object,
// Array, Enum, ClassDesc, strings, block data) and a writer of what the
// calls send (block data, String, null, ObjectName). Calls made:
// RMIServer.newClient(null), RMIConnection.getAttribute and close.
//
// Limits: every read and write has a deadline; a reply is bounded to 1
// MiB, a stream's handles to 65536 and its nesting to 64, and nothing is
// allocated ahead from a length the peer claims. Endpoints with a client
// socket factory (SSL connectors) and credentials are not supported: the
// local connector needs neither. Remote references are not leased through
// RMI's distributed GC (the local agent exports its connections as daemon
// objects: they live until closed, or idle past the connector's timeout,
// after which the client dials again).
package jmx
