// Package kafkaprobe is galago's kafka feature (gala-gopher's kafkaprobe):
// per report_period, how many records each Kafka client produced to and
// fetched from each topic of each broker.
//
// Source: a view on the one syscall capture (internal/syscap) the l7
// probe reads. The shared capture fans its records out, so when l7 also
// runs no hook is added, only the kernel's protocol set grows by Kafka if
// l7 did not trace it already. Each Kafka connection, client's or
// broker's, is parsed by the l7 Kafka parser (internal/l7/kafka), whose
// OnTopic hook reports every topic of every Produce request and Fetch
// response with its record count (a v2 record batch's count, one per
// legacy message). Topic ids (Produce and Fetch v13+) are named from the
// Metadata responses the same process read; an id never named is
// reported as its 32 hex digits.
//
// Table kafkaprobe (gala-gopher's keys): msg_type Producer or Consumer,
// client_ip, client_port, topic, server_ip, server_port; num is the
// records of the period. Only topics with records in the period make a
// row. Only connections whose broker port is kafka_port (default 9092)
// count; a change of kafka_port applies at once. When both ends of a
// connection are on this host (client and broker both traced) they read
// the same bytes, not always in the same period: a row keeps each end's
// count since it was first seen and reports the growth of the larger, so
// every record counts once (a row is forgotten after three periods
// without records).
//
// gala-gopher attaches an XDP program to dev_name and reads packets; here
// the bytes come from the processes' socket syscalls, so traffic of
// processes on this host is seen on any device, loopback included, and
// traffic that only passes through the host (forwarded) is not. dev_name
// is accepted and not used (one log line at start says so). Kafka over
// TLS is not read: the capture's TLS plaintext comes from OpenSSL and Go
// crypto/tls uprobes, which this feature does not attach, and Java
// clients and brokers use neither (gala-gopher's XDP program cannot read
// it either).
//
// Cost: the capture's (see internal/syscap), plus parsing the Kafka
// connections in user space: the parser streams bodies and keeps a few
// bytes per connection; record sets are skipped by their lengths.
//
// Bounds and losses, counted in galago_probe_events_lost_total
// {probe="kafka"} with the capture's own: at most 4096 rows per period
// (records of rows beyond are lost); bytes a parser could not frame
// (desyncs). The capture keeps a prefix of each syscall's bytes (4 KiB
// for the first of a turn, 256 bytes for the next, see internal/syscap),
// so a large Produce request or Fetch response is read in part: a topic
// whose later batch headers fell in the gap counts what was read and adds
// one loss; a message whose topic entries fell in the gap adds one loss
// and its topics there are not counted (measured: a 28 KB Fetch response
// of 30 records of one topic then 2000 snappy-compressed records of
// another counted the first 30 and lost the 2000; 30-record responses are
// exact).
package kafkaprobe
