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
// TLS: with support_ssl 1 (the l7 feature's param, accepted here too)
// the feature attaches the capture's TLS uprobes to every process
// (OpenSSL's libssl, Go executables' crypto/tls; rescanned every 2 s) and
// counts from the plaintext, as exactly as plain Kafka (tested: franz-go
// and kfake over Go crypto/tls, both ways equal to the broker's own count
// of the records on its connections). Java clients and brokers (JSSE) use
// neither library and are not read over TLS; gala-gopher's XDP program
// reads no TLS at all. The uprobes cost every TLS read and write of the
// host a few microseconds, so support_ssl is 0 by default.
//
// Cost: the capture's (see internal/syscap), plus parsing the Kafka
// connections in user space: the parser streams bodies and keeps a few
// bytes per connection; record sets are skipped by their lengths.
//
// Bounds and losses, counted in galago_probe_events_lost_total
// {probe="kafka"} with the capture's own: at most 4096 rows per period
// (records of rows beyond are lost); bytes a parser could not frame
// (desyncs). The feature asks the capture for Kafka connections' chunks
// whole (syscap Config.Whole), not the 4 KiB prefix other protocols get:
// every read and write of a Kafka connection is captured up to 256 KiB,
// in 4 KiB ring records joined again in user space, so every batch
// header of a large Produce request or Fetch response is read (measured:
// a 46 KB Produce request and a 50 KB Fetch response of 2000
// snappy-compressed records, beside 30- and 40-record topics, counted
// exactly, nothing lost). Past 256 KiB in one syscall, or when a ring
// record is lost, the rest of the chunk is a gap: a topic whose later
// batch headers fell in it counts what was read and adds one loss; a
// message whose topic entries fell in it adds one loss and its topics
// there are not counted.
//
// Cost of the whole capture: a Kafka connection's chunk costs one ring
// record per 4 KiB (copied twice: into the ring, then joined), so a
// consumer fetching 100 MB/s moves 100 MB/s through the ring; bursts past
// the ring's size are lost, counted. Other connections pay one bit test.
// Measured (syscap's BenchmarkWhole50K: 50 KB answers in a loop on
// loopback, both ends traced, three runs): 21-26 us of BPF per exchange
// captured whole against 5-8 us with the 4 KiB prefix; at that rate
// (about 1 GB/s through the ring) 4-20% of the chunks' bytes were lost to
// the full ring, counted. On other connections syscap_sys_exit's ns/run
// did not move (Redis round trips, base and new interleaved three times:
// 355-407 ns/run before, 243-458 after, within the shared machine's noise).
package kafkaprobe
