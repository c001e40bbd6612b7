// Package kafka parses the Kafka wire protocol for the l7 probe: it frames
// both directions of a client-broker connection, pairs each request with
// its response, and gives every exchange its timing, outcome, sizes and a
// bounded API template. It also reports, per topic, the records produced
// and fetched (TopicRecords), which is what gala-gopher's kafkaprobe
// counts (msg_type Producer/Consumer, topic, num).
//
// # Framing
//
// Every Kafka message is an int32 big-endian length followed by that many
// bytes. A request starts with the request header: api_key int16,
// api_version int16, correlation_id int32, then (header v1+) client_id as
// an int16-length nullable string, then (header v2, the flexible versions)
// tagged fields. A response starts with correlation_id int32, then (header
// v1, flexible versions except ApiVersions) tagged fields. Which version
// of each API key is flexible (compact strings, arrays and bytes, tagged
// fields) is in the apis table, checked against franz-go's kmsg; every
// API key up to 94 is named. Messages are framed by their length only:
// bodies are streamed through a small layout interpreter (walk.go) that
// keeps a few bytes and skips strings, byte blobs and record sets by their
// declared lengths, so a Fetch response of megabytes costs the same memory
// as a Heartbeat, and a capture gap inside a message costs nothing.
//
// # Detect
//
// Detect(b) is true when the first bytes a client sent are a Kafka
// request header with a plausible length, within the first 32 bytes:
//
//	b[0:4]   length, big-endian, 10 <= length <= 64 MiB
//	b[4:6]   api_key, a key this package knows (0..94)
//	b[6:8]   api_version, 0 <= version <= the key's highest known version
//	b[8:12]  correlation_id >= 0
//	b[12:14] client_id length: -1 (null) or 0 <= n <= length-10
//	b[14:min(14+n, 32)] printable ASCII (0x20..0x7e)
//
// It needs 14 bytes. HTTP, HTTP/2, RESP, memcached, PostgreSQL, MySQL,
// MongoDB, DNS-over-TCP and CRPC first bytes all fail it (tested).
//
// # Pairing
//
// Requests wait in a queue by correlation id; a response takes the request
// with its correlation id. Kafka answers a connection's requests in the
// order they were sent, so requests a response passes over are given up
// (HasResponse false) at once. Produce requests with acks=0 get no
// response: they come out as soon as they are read, HasResponse false. A
// response whose request was not seen (the capture began mid-connection)
// comes out alone (HasRequest false), class OK and no API: its body
// cannot be read without the request's key and version. At most 256
// requests wait per connection; past that the oldest is given up.
//
// # Outcome
//
// The class of an exchange is the worst class of the error codes its
// response carries where the package reads them: the top-level error_code
// of the APIs that have one (ApiVersions, FindCoordinator, JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup, ListGroups, InitProducerId,
// AddOffsetsToTxn, EndTxn, SaslHandshake, SaslAuthenticate,
// ConsumerGroupHeartbeat, DescribeCluster, Get/PushTelemetry, Metadata
// v13+, Fetch v7+, OffsetFetch v2+), every partition's error code of
// Produce, Fetch, ListOffsets, OffsetCommit and OffsetFetch, every
// coordinator's of FindCoordinator v4+, every topic-level one of Metadata,
// and the first group's or topic's of DescribeGroups, CreateTopics and
// DeleteTopics. A Metadata partition's error code (LEADER_NOT_AVAILABLE,
// REPLICA_NOT_AVAILABLE) describes the cluster, not the request, and is
// not counted. Other APIs' responses are OK.
//
// ServerError, the broker or the cluster failed a request the client had
// every right to send: UNKNOWN_SERVER_ERROR, LEADER_NOT_AVAILABLE,
// NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, BROKER_NOT_AVAILABLE,
// REPLICA_NOT_AVAILABLE, STALE_CONTROLLER_EPOCH, NETWORK_EXCEPTION,
// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
// NOT_ENOUGH_REPLICAS(_AFTER_APPEND), NOT_CONTROLLER,
// CONCURRENT_TRANSACTIONS, TRANSACTION_COORDINATOR_FENCED,
// KAFKA_STORAGE_ERROR, REASSIGNMENT_IN_PROGRESS, LISTENER_NOT_FOUND,
// UNKNOWN_LEADER_EPOCH, OFFSET_NOT_AVAILABLE,
// PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
// FEATURE_UPDATE_FAILED, BROKER_ID_NOT_REGISTERED, INCONSISTENT_TOPIC_ID,
// INCONSISTENT_CLUSTER_ID, INELIGIBLE_REPLICA, NEW_LEADER_ELECTED,
// OFFSET_MOVED_TO_TIERED_STORAGE, UNKNOWN_CONTROLLER_ID,
// TRANSACTION_ABORTABLE, REBOOTSTRAP_REQUIRED,
// CONTROLLER_ID_NOT_REGISTERED. These are availability, leadership,
// replication, storage and timeout failures: retrying the same request
// elsewhere or later succeeds, the request was not wrong.
//
// OK as well as code 0: REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED and
// ELECTION_NOT_NEEDED are the protocol working as designed (the
// coordinator telling members to rejoin, the KIP-394 join handshake that
// every first JoinGroup of a modern client gets, a no-op election);
// counting them would make every healthy consumer group look failing.
//
// ClientError, every other code: the request named something that does
// not exist (UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID,
// GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID), asked for what is not there
// (OFFSET_OUT_OF_RANGE: the consumer's position is outside the log),
// was not allowed (TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED,
// SASL_AUTHENTICATION_FAILED), was malformed or unsupported
// (INVALID_REQUEST, UNSUPPORTED_VERSION, CORRUPT_MESSAGE,
// MESSAGE_TOO_LARGE, INVALID_*), or came from a client whose state is
// stale (ILLEGAL_GENERATION, FENCED_*, *_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER,
// PRODUCER_FENCED). The request, not the broker, has to change.
//
// # API template
//
// The API name (Apache Kafka's: "ApiVersions", "Metadata",
// "FindCoordinator", "JoinGroup", "Heartbeat", "OffsetCommit", ...); for
// Produce and Fetch, a space and the request's first topic, then "+" when
// the request names several topics:
//
//	Produce orders
//	Fetch orders+        (a fetch of orders and other topics)
//	Fetch                (a fetch naming no topic)
//	Produce {topic_id}   (v13+ names topics by id, and no Metadata
//	                      response on the shared TopicNames named it)
//
// Topic names are resources chosen by operators ([a-zA-Z0-9._-], at most
// 249 bytes), kept as they are except for per-entity parts: UUIDs and runs
// of 16+ hex digits become "{id}", runs of 5+ decimal digits "{n}"
// ("logs-20241123" -> "Fetch logs-{n}"). TopicRecords carries the name
// verbatim, for the kafkaprobe view. The template is cut at 128 bytes. Values (keys, records, client ids, group ids) never appear. With
// several topics the first one names the request: "Fetch orders+" and
// "Fetch audit.events+" are the same fetch session listing its topics in
// another order. An incremental fetch (v7+ fetch sessions) that lists no
// topic reuses the connection's last Fetch template that named one, since
// it fetches that session's topics. Topic ids (Produce/Fetch v13+) are
// resolved through a TopicNames table learnt from Metadata responses (v10+
// carry ids); clients fetch metadata on another connection than the one
// they produce or fetch on, so the probe should share one TopicNames per
// process (SetTopicNames).
//
// # Building blocks for the kernel
//
// AppendAPI gives the template from a bounded prefix of a request,
// ResponseClass the outcome from a bounded prefix of a response (given the
// request's key and version), APIName and ErrorClass the tables behind
// them.
//
// # Limits
//
// A gap inside a message is stepped over by the message's length: the
// exchange stays exact, but an error code, topic name or batch header that
// falls in the gap is not read (class OK, template without topic, records
// not counted and TopicRecords.Exact false). A gap that hides a message
// boundary (a read holding several messages, captured in part) loses the
// messages in it: Desyncs counts it, and the direction resynchronises at
// the next chunk starting with a valid header (for responses, one whose
// correlation id a request waits for). API versions newer than this
// package knows are framed but their bodies are not read. Legacy message
// sets (magic 0 and 1) count one record per message, a compressed wrapper
// as one. A batch claiming a negative record count is garbage: it and the
// rest of its record set are not counted, and TopicRecords.Exact is
// false. SASL-encrypted (GSSAPI confidentiality) connections are not
// parsed, and the raw SASL tokens that follow a SaslHandshake v0 (clients
// older than Kafka 1.0) are not Kafka requests: they cost a desync. API
// keys up to 16 past the last known one are framed, with an empty
// template.
//
// # Memory
//
// Per connection: two walkers (about 1.2 KiB), two 12- and 8-byte header
// buffers, the pending queue (at most 256 entries of 48 bytes, grown on
// demand), the templates interned (at most 1024 per parser, shared with
// topic names) and the topic-id table (at most 4096 entries, shared when
// SetTopicNames is used). Nothing grows with message sizes.
package kafka
