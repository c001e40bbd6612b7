package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

func fixtures(t testing.TB) []string {
	files, err := filepath.Glob("testdata/*.chunks")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	return files
}

// TestFixturesAgainstOracle: every recorded connection, as the client and
// as the server, whole and re-split, gives exactly the exchanges kmsg's
// decoding says it holds.
func TestFixturesAgainstOracle(t *testing.T) {
	for _, f := range fixtures(t) {
		segs := l7test.Load(t, f)
		for _, role := range []l7.Role{l7.Client, l7.Server} {
			chunks := l7test.Chunks(segs, role, 1000, 1000)
			want := describe(oracle(t, chunks, role))
			for _, split := range []int{0, 1, 2, 7, 64} {
				in := chunks
				if split > 0 {
					in = l7test.Resplit(chunks, split)
				}
				p := NewParser(role)
				got := describe(l7test.Run(p, in))
				if split > 0 {
					// re-split chunks carry the timestamps of the originals
					// their first byte came from: same exchanges
					want := describe(oracle(t, in, role))
					if got != want {
						t.Errorf("%s as %s split %d:\ngot:\n%s\nwant:\n%s", f, role, split, got, want)
					}
				} else if got != want {
					t.Errorf("%s as %s:\ngot:\n%s\nwant:\n%s", f, role, got, want)
				}
				if p.Desyncs() != 0 {
					t.Errorf("%s as %s split %d: %d desyncs", f, role, split, p.Desyncs())
				}
			}
		}
	}
}

// TestFixtureFacts pins what the recorded clients did, independently of
// any decoder: the requests they sent and the outcomes they saw.
func TestFixtureFacts(t *testing.T) {
	count := func(file string) map[string]int {
		p := NewParser(l7.Client)
		m := map[string]int{}
		for _, e := range l7test.Run(p, l7test.Chunks(l7test.Load(t, file), l7.Client, 1, 1)) {
			k := e.API
			if !e.HasResponse {
				k += " noresp"
			}
			if e.Class != l7.OK {
				k += " " + e.Class.String()
			}
			m[k]++
		}
		return m
	}
	for file, want := range map[string]map[string]int{
		// acks=all producer, one ProduceSync per record: 3 small, 4 of 64 KiB
		"testdata/kgo-2.chunks": {"ApiVersions": 1, "Produce {topic_id}": 7},
		// the produce to "missing": metadata answers UNKNOWN_TOPIC_OR_PARTITION
		// (a client error) until the 1.5 s deadline
		"testdata/kgo-1.chunks": {"ApiVersions": 1, "InitProducerId": 1, "Metadata client_error": 5, "PushTelemetry": 1},
		// acks=0: two Produce requests, no response
		"testdata/kgo-4.chunks": {"ApiVersions": 1, "Produce {topic_id} noresp": 2},
		// the group: join twice (MEMBER_ID_REQUIRED is the KIP-394 handshake,
		// not an error), sync
		"testdata/kgo-8.chunks": {"ApiVersions": 1, "JoinGroup": 2, "SyncGroup": 1},
		"testdata/kgo-7.chunks": {"ApiVersions": 1, "FindCoordinator": 1, "OffsetFetch": 1, "ListOffsets": 1,
			"Heartbeat": 3, "OffsetCommit": 1, "LeaveGroup": 1, "PushTelemetry": 1},
		// kcat (librdkafka) produces 3 lines in one batch, then consumes them
		"testdata/kcat-0.chunks": {"ApiVersions": 1, "Metadata": 1, "Produce orders": 1},
		"testdata/kcat-1.chunks": {"ApiVersions": 1, "Metadata": 2, "ListOffsets": 1, "Fetch orders": 2, "Fetch orders noresp": 1},
	} {
		if got := count(file); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", file, got, want)
		}
	}
}

// TestSharedTopicNames: kgo asks for metadata on one connection and
// produces and fetches by topic id (v13) on others; a TopicNames shared by
// the parsers of the process names the topics.
func TestSharedTopicNames(t *testing.T) {
	names := &TopicNames{}
	var recs []string
	apis := map[string]int{}
	for i := range 11 {
		p := NewParser(l7.Client)
		p.SetTopicNames(names)
		p.OnTopic = func(r TopicRecords) {
			recs = append(recs, fmt.Sprintf("%s %s %d %v", r.Kind, r.Topic, r.Records, r.Exact))
		}
		for _, e := range l7test.Run(p, l7test.Chunks(l7test.Load(t, fmt.Sprintf("testdata/kgo-%d.chunks", i)), l7.Client, 1, 1)) {
			if strings.HasPrefix(e.API, "Produce") || strings.HasPrefix(e.API, "Fetch") {
				apis[e.API]++
			}
		}
	}
	// kgo lists the two topics of its fetch session in either order: the
	// template names the first
	want := map[string]int{"Produce orders": 7, "Produce audit.events": 2, "Fetch orders+": 1, "Fetch audit.events+": 1, "Fetch": 1}
	if !reflect.DeepEqual(apis, want) {
		t.Errorf("APIs %v, want %v", apis, want)
	}
	wantRecs := []string{
		"Producer orders 1 true", "Producer orders 1 true", "Producer orders 1 true", "Producer orders 1 true",
		"Producer orders 1 true", "Producer orders 1 true", "Producer orders 1 true",
		"Producer audit.events 1 true", "Producer audit.events 1 true",
		"Consumer orders 7 true", "Consumer audit.events 2 true",
	}
	if !reflect.DeepEqual(recs, wantRecs) {
		t.Errorf("topic records %q\nwant %q", recs, wantRecs)
	}
}

// TestTruncated: what a capture of 64, 256 or 4096 bytes per syscall
// gives. Kafka declares every message's length, so a gap inside a message
// costs nothing; only a gap that hides a boundary (a read holding several
// messages) loses exchanges, and then Desyncs says so.
func TestTruncated(t *testing.T) {
	for _, f := range fixtures(t) {
		segs := l7test.Load(t, f)
		for _, role := range []l7.Role{l7.Client, l7.Server} {
			chunks := l7test.Chunks(segs, role, 1000, 1000)
			whole := l7test.Run(NewParser(role), chunks)
			for _, capSize := range []int{64, 256, 4096} {
				p := NewParser(role)
				got := l7test.Run(p, l7test.Truncate(chunks, capSize))
				if p.Desyncs() == 0 {
					if len(got) != len(whole) {
						t.Errorf("%s as %s cap %d: %d exchanges, want %d", f, role, capSize, len(got), len(whole))
						continue
					}
					for i := range got {
						g, w := got[i], whole[i]
						if g.Start != w.Start || g.End != w.End || g.ReqBytes != w.ReqBytes || g.RespBytes != w.RespBytes ||
							g.HasRequest != w.HasRequest || g.HasResponse != w.HasResponse {
							t.Errorf("%s as %s cap %d #%d: %+v, want %+v", f, role, capSize, i, g, w)
						}
						if capSize == 4096 && (g.API != w.API || g.Class != w.Class) {
							t.Errorf("%s as %s cap %d #%d: %q %s, want %q %s", f, role, capSize, i, g.API, g.Class, w.API, w.Class)
						}
					}
				} else if len(got) >= len(whole) {
					t.Errorf("%s as %s cap %d: %d desyncs but %d exchanges of %d", f, role, capSize, p.Desyncs(), len(got), len(whole))
				}
			}
		}
	}
}

func TestTruncatedFixturesStayExact(t *testing.T) {
	// The big produce and fetch connections move 64 KiB messages in
	// several reads: at every capture size their exchanges stay exact.
	for _, f := range []string{"testdata/kgo-2.chunks", "testdata/kgo-9.chunks"} {
		chunks := l7test.Chunks(l7test.Load(t, f), l7.Client, 1000, 1000)
		want := describe(l7test.Run(NewParser(l7.Client), chunks))
		for _, capSize := range []int{64, 256, 4096} {
			p := NewParser(l7.Client)
			got := l7test.Run(p, l7test.Truncate(chunks, capSize))
			if p.Desyncs() != 0 || len(got) != strings.Count(want, "\n") {
				t.Errorf("%s cap %d: %d desyncs, %d exchanges\n%s", f, capSize, p.Desyncs(), len(got), describe(got))
			}
		}
	}
}

// TestBigFetchSkipped: a Fetch response of 8 MiB of records, captured 4
// KiB per read, is stepped over by its lengths: exact exchange, records
// counted from the batch headers the capture holds.
func TestBigFetchSkipped(t *testing.T) {
	req := encodeRequest(t, &kmsg.FetchRequest{Version: 11, MaxWaitMillis: 500, Topics: []kmsg.FetchRequestTopic{
		{Topic: "big", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0}}}}}, 7)
	batch := recordBatch(1000, 8<<20)
	resp := encodeResponse(t, &kmsg.FetchResponse{Version: 11, Topics: []kmsg.FetchResponseTopic{{Topic: "big",
		Partitions: []kmsg.FetchResponseTopicPartition{{Partition: 0, HighWatermark: 1000, RecordBatches: batch}}}}}, 7)
	p := NewParser(l7.Client)
	var recs []TopicRecords
	p.OnTopic = func(r TopicRecords) { recs = append(recs, r) }
	out := p.Feed(l7.Chunk{Dir: l7.Egress, TS: 10, Data: req, Size: len(req)}, nil)
	for off := 0; off < len(resp); off += 64 << 10 {
		end := min(off+64<<10, len(resp))
		out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: uint64(20 + off), Data: resp[off:min(end, off+4096)], Size: end - off}, out)
	}
	want := []l7.Exchange{{HasRequest: true, HasResponse: true, Start: 10, End: 20, API: "Fetch big", ReqBytes: len(req), RespBytes: len(resp)}}
	if !reflect.DeepEqual(out, want) || p.Desyncs() != 0 {
		t.Fatalf("%+v (desyncs %d), want %+v", out, p.Desyncs(), want)
	}
	if len(recs) != 1 || recs[0] != (TopicRecords{Kind: Fetch, Topic: "big", Records: 1000, Exact: true}) {
		t.Errorf("topic records %+v", recs)
	}
}

// TestNegativeRecordCount: a batch claiming -1 records (garbage: no batch
// has a negative count) is not counted and leaves the topic's count
// inexact; the batch after it is not counted either.
func TestNegativeRecordCount(t *testing.T) {
	batches := append(recordBatch(3, 100), recordBatch(-1, 100)...)
	batches = append(batches, recordBatch(5, 100)...)
	req := encodeRequest(t, &kmsg.ProduceRequest{Version: 7, Acks: 1, TimeoutMillis: 1000, Topics: []kmsg.ProduceRequestTopic{{Topic: "orders",
		Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batches}}}}}, 3)
	p := NewParser(l7.Client)
	var recs []TopicRecords
	p.OnTopic = func(r TopicRecords) { recs = append(recs, r) }
	p.Feed(l7.Chunk{Dir: l7.Egress, TS: 10, Data: req, Size: len(req)}, nil)
	if len(recs) != 1 || recs[0] != (TopicRecords{Kind: Produce, Topic: "orders", Records: 3, Exact: false}) {
		t.Errorf("topic records %+v", recs)
	}
}

// TestPipelined: requests pipelined on one connection, their responses in
// one read, paired by correlation id; a response passing over a request
// gives that request up.
func TestPipelined(t *testing.T) {
	var reqs, resps []byte
	for i := range 5 {
		reqs = append(reqs, encodeRequest(t, &kmsg.HeartbeatRequest{Version: 4, Group: "g", MemberID: "m"}, int32(100+i))...)
	}
	for _, i := range []int{0, 1, 3, 4} { // 102 is never answered
		code := int16(0)
		if i == 3 {
			code = kerr.NotCoordinator.Code
		}
		if i == 4 {
			code = kerr.UnknownMemberID.Code
		}
		resps = append(resps, encodeResponse(t, &kmsg.HeartbeatResponse{Version: 4, ErrorCode: code}, int32(100+i))...)
	}
	p := NewParser(l7.Client)
	out := p.Feed(l7.Chunk{Dir: l7.Egress, TS: 1, Data: reqs, Size: len(reqs)}, nil)
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 2, Data: resps, Size: len(resps)}, out)
	out = p.Flush(out)
	var got []string
	for _, e := range out {
		got = append(got, fmt.Sprintf("%v %s %d", e.HasResponse, e.Class, e.End))
	}
	want := []string{"true ok 2", "true ok 2", "false ok 0", "true server_error 2", "true client_error 2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%q, want %q", got, want)
	}
}

func TestResponseWithoutRequest(t *testing.T) {
	resp := encodeResponse(t, &kmsg.HeartbeatResponse{Version: 4}, 9)
	p := NewParser(l7.Client)
	out := p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 5, Data: resp, Size: len(resp)}, nil)
	want := []l7.Exchange{{HasResponse: true, End: 5, RespBytes: len(resp)}}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("%+v", out)
	}
}

func TestGapHidingBoundaryResyncs(t *testing.T) {
	var reqs []byte
	for i := range 3 {
		reqs = append(reqs, encodeRequest(t, &kmsg.HeartbeatRequest{Version: 4, Group: "g", MemberID: "m"}, int32(i))...)
	}
	one := len(reqs) / 3
	p := NewParser(l7.Server)
	// the first read holds all three requests but only 10 bytes are captured
	out := p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 1, Data: reqs[:10], Size: len(reqs)}, nil)
	if p.Desyncs() != 1 {
		t.Fatalf("desyncs %d", p.Desyncs())
	}
	// garbage at a chunk start is not taken for a header
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 2, Data: reqs[3:one], Size: one - 3}, out)
	// the next request, alone in its read, resynchronises
	next := encodeRequest(t, &kmsg.HeartbeatRequest{Version: 4, Group: "g", MemberID: "m"}, 3)
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 3, Data: next, Size: len(next)}, out)
	resp := encodeResponse(t, &kmsg.HeartbeatResponse{Version: 4}, 3)
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 4, Data: resp, Size: len(resp)}, out)
	want := []l7.Exchange{{HasRequest: true, HasResponse: true, Start: 3, End: 4, API: "Heartbeat", ReqBytes: len(next), RespBytes: len(resp)}}
	if !reflect.DeepEqual(out, want) || p.Desyncs() != 1 {
		t.Errorf("%+v desyncs %d", out, p.Desyncs())
	}
}

func TestPendingBounded(t *testing.T) {
	p := NewParser(l7.Client)
	var out []l7.Exchange
	for i := range maxPending + 10 {
		r := encodeRequest(t, &kmsg.HeartbeatRequest{Version: 4, Group: "g", MemberID: "m"}, int32(i))
		out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: uint64(i), Data: r, Size: len(r)}, out)
	}
	if len(out) != 10 || out[0].Start != 0 || out[9].Start != 9 || out[0].HasResponse {
		t.Fatalf("%d given up: %+v", len(out), out)
	}
	if out = p.Flush(nil); len(out) != maxPending {
		t.Errorf("flushed %d", len(out))
	}
}

// TestAPITable: names, versions and flexible versions agree with kmsg.
func TestAPITable(t *testing.T) {
	renamed := map[string]string{"AlterPartitionReassignments": "AlterPartitionAssignments"}
	for k := range apis {
		r := kmsg.RequestForKey(int16(k))
		if r == nil {
			t.Errorf("key %d unknown to kmsg", k)
			continue
		}
		want := kmsg.NameForKey(int16(k))
		name := apis[k].name
		if n, ok := renamed[name]; ok {
			name = n
		}
		if !strings.EqualFold(name, want) {
			t.Errorf("key %d: %s, kmsg %s", k, apis[k].name, want)
		}
		if apis[k].maxVer != r.MaxVersion() {
			t.Errorf("%s: max version %d, kmsg %d", apis[k].name, apis[k].maxVer, r.MaxVersion())
		}
		for v := int16(0); v <= r.MaxVersion(); v++ {
			r.SetVersion(v)
			if flexible(int16(k), v) != r.IsFlexible() {
				t.Errorf("%s v%d: flexible %v", apis[k].name, v, flexible(int16(k), v))
			}
		}
	}
}

// TestErrorClassesCoverKerr: every error code franz-go knows has the class
// the doc gives it.
func TestErrorClassesCoverKerr(t *testing.T) {
	want := map[int16]l7.Class{
		kerr.UnknownTopicOrPartition.Code: l7.ClientError, kerr.InvalidRequest.Code: l7.ClientError,
		kerr.UnsupportedVersion.Code: l7.ClientError, kerr.TopicAuthorizationFailed.Code: l7.ClientError,
		kerr.OffsetOutOfRange.Code: l7.ClientError, kerr.MessageTooLarge.Code: l7.ClientError,
		kerr.NotLeaderForPartition.Code: l7.ServerError, kerr.RequestTimedOut.Code: l7.ServerError,
		kerr.KafkaStorageError.Code: l7.ServerError, kerr.UnknownServerError.Code: l7.ServerError,
		kerr.CoordinatorLoadInProgress.Code: l7.ServerError, kerr.NotEnoughReplicas.Code: l7.ServerError,
		kerr.RebalanceInProgress.Code: l7.OK, kerr.MemberIDRequired.Code: l7.OK, 0: l7.OK,
	}
	for code, c := range want {
		if got := ErrorClass(code); got != c {
			t.Errorf("%d (%v): %s, want %s", code, kerr.ErrorForCode(code), got, c)
		}
	}
	for code := int16(-1); code < 200; code++ {
		var ke *kerr.Error
		if e := kerr.ErrorForCode(code); e == nil || !errors.As(e, &ke) || ke.Code != code {
			continue
		}
		if ErrorClass(code) == l7.OK && code != 0 && !signalCodes[code] {
			t.Errorf("code %d is OK", code)
		}
	}
}

// TestServerErrorNames: the codes of serverErrors and signalCodes are the
// errors their comments name (kerr's names; NOT_LEADER_OR_FOLLOWER is its
// NOT_LEADER_FOR_PARTITION).
func TestServerErrorNames(t *testing.T) {
	names := map[string]bool{}
	for _, n := range strings.Fields(`UNKNOWN_SERVER_ERROR LEADER_NOT_AVAILABLE NOT_LEADER_FOR_PARTITION
		REQUEST_TIMED_OUT BROKER_NOT_AVAILABLE REPLICA_NOT_AVAILABLE STALE_CONTROLLER_EPOCH NETWORK_EXCEPTION
		COORDINATOR_LOAD_IN_PROGRESS COORDINATOR_NOT_AVAILABLE NOT_COORDINATOR NOT_ENOUGH_REPLICAS
		NOT_ENOUGH_REPLICAS_AFTER_APPEND NOT_CONTROLLER CONCURRENT_TRANSACTIONS TRANSACTION_COORDINATOR_FENCED
		KAFKA_STORAGE_ERROR REASSIGNMENT_IN_PROGRESS LISTENER_NOT_FOUND UNKNOWN_LEADER_EPOCH OFFSET_NOT_AVAILABLE
		PREFERRED_LEADER_NOT_AVAILABLE ELIGIBLE_LEADERS_NOT_AVAILABLE FEATURE_UPDATE_FAILED BROKER_ID_NOT_REGISTERED
		INCONSISTENT_TOPIC_ID INCONSISTENT_CLUSTER_ID INELIGIBLE_REPLICA NEW_LEADER_ELECTED
		OFFSET_MOVED_TO_TIERED_STORAGE UNKNOWN_CONTROLLER_ID TRANSACTION_ABORTABLE REBOOTSTRAP_REQUIRED
		CONTROLLER_ID_NOT_REGISTERED REBALANCE_IN_PROGRESS MEMBER_ID_REQUIRED ELECTION_NOT_NEEDED`) {
		names[n] = true
	}
	check := func(code int16) {
		var ke *kerr.Error
		if e := kerr.ErrorForCode(code); !errors.As(e, &ke) || !names[ke.Message] {
			t.Errorf("code %d is %v", code, e)
			return
		}
		delete(names, ke.Message)
	}
	for code := range serverErrors {
		check(code)
	}
	for code := range signalCodes {
		check(code)
	}
	if len(names) != 0 {
		t.Errorf("not in the tables: %v", names)
	}
}

// TestEveryVersion builds, with kmsg, a response of every decoded API at
// every version with error codes in every place, and requests of Produce
// and Fetch at every version with two topics, and checks the building
// blocks against kmsg's own decoding.
func TestEveryVersion(t *testing.T) {
	for k := range apis {
		key := int16(k)
		for v := int16(0); v <= apis[k].maxVer; v++ {
			if !decoded(key) {
				continue
			}
			for _, code := range []int16{0, kerr.UnknownTopicOrPartition.Code, kerr.NotLeaderForPartition.Code} {
				resp := kmsg.ResponseForKey(key)
				resp.SetVersion(v)
				fill(reflect.ValueOf(resp).Elem(), code, 0)
				msg := encodeResponse(t, resp, 1)
				back := kmsg.ResponseForKey(key)
				back.SetVersion(v)
				body := msg[8:]
				if back.IsFlexible() && key != keyApiVersions {
					body = body[1:]
				}
				if err := back.ReadFrom(body); err != nil {
					t.Fatalf("%s v%d: kmsg cannot read its own encoding: %v", apis[k].name, v, err)
				}
				want := oracleClass(key, back)
				if got, _ := ResponseClass(key, v, msg); got != want {
					t.Errorf("%s v%d code %d: %s, want %s", apis[k].name, v, code, got, want)
				}
				// and through the parser, in 3-byte pieces
				p := NewParser(l7.Client)
				req := kmsg.RequestForKey(key)
				req.SetVersion(v)
				fill(reflect.ValueOf(req).Elem(), 0, 0)
				rb := encodeRequest(t, req, 1)
				out := l7test.Run(p, l7test.Resplit([]l7.Chunk{{Dir: l7.Egress, TS: 1, Data: rb, Size: len(rb)}, {Dir: l7.Ingress, TS: 2, Data: msg, Size: len(msg)}}, 3))
				if key == keyProduce {
					if pr := req.(*kmsg.ProduceRequest); pr.Acks == 0 {
						continue
					}
				}
				if len(out) != 1 || out[0].Class != want || !out[0].HasResponse || p.Desyncs() != 0 {
					t.Errorf("%s v%d code %d: parser %+v", apis[k].name, v, code, out)
				}
			}
		}
	}
	for _, key := range []int16{keyProduce, keyFetch} {
		for v := int16(0); v <= apis[key].maxVer; v++ {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			fill(reflect.ValueOf(req).Elem(), 0, 0)
			msg := encodeRequest(t, req, 1)
			want := APIName(key) + " orders+"
			if v >= 13 {
				want = APIName(key) + " {topic_id}+"
			}
			if got := string(AppendAPI(nil, msg)); got != want {
				t.Errorf("%s v%d: %q, want %q", APIName(key), v, got, want)
			}
			if key == keyProduce {
				p := NewParser(l7.Client)
				var recs []TopicRecords
				p.OnTopic = func(r TopicRecords) { recs = append(recs, r) }
				l7test.Run(p, l7test.Resplit([]l7.Chunk{{Dir: l7.Egress, TS: 1, Data: msg, Size: len(msg)}}, 5))
				if len(recs) != 2 || recs[0].Records != 2*2*5 || recs[1].Records != 2*2*5 || !recs[0].Exact {
					t.Errorf("Produce v%d: %+v", v, recs)
				}
			}
		}
	}
}

// fill gives every field of a kmsg struct a value: error codes code, two
// elements in slices, topic names "orders", record sets of two batches of
// 5 records.
func fill(v reflect.Value, code int16, depth int) {
	if depth > 6 {
		return
	}
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		name := v.Type().Field(i).Name
		switch {
		case name == "Version" || strings.HasPrefix(name, "Unknown") || !f.CanSet():
		case name == "ErrorCode":
			f.SetInt(int64(code))
		case name == "Acks":
			f.SetInt(-1)
		case name == "Topic" && f.Kind() == reflect.String:
			f.SetString("orders")
		case name == "TopicID":
			f.Set(reflect.ValueOf([16]byte{1, 2, 3}))
		case name == "Records" || name == "RecordBatches":
			f.SetBytes(append(recordBatch(5, 100), recordBatch(5, 100)...))
		case f.Kind() == reflect.String:
			f.SetString("x")
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
			s := reflect.MakeSlice(f.Type(), 2, 2)
			for j := range 2 {
				fill(s.Index(j), code, depth+1)
			}
			f.Set(s)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Int32:
			f.Set(reflect.ValueOf([]int32{1, 2}))
		case f.Kind() == reflect.Struct:
			fill(f, code, depth+1)
		}
	}
}

// recordBatch is a v2 record batch header claiming n records, padded to
// size bytes.
func recordBatch(n, size int) []byte {
	b := (&kmsg.RecordBatch{Magic: 2, NumRecords: int32(n)}).AppendTo(nil)
	if len(b) < size {
		b = append(b, make([]byte, size-len(b))...)
	}
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	return b
}

func encodeRequest(t testing.TB, r kmsg.Request, corr int32) []byte {
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint16(b, uint16(r.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(r.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	if r.Key() != keyControlledShutdown || r.GetVersion() > 0 {
		b = binary.BigEndian.AppendUint16(b, 4)
		b = append(b, "test"...)
		if r.IsFlexible() {
			b = append(b, 0)
		}
	}
	b = r.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func encodeResponse(t testing.TB, r kmsg.Response, corr int32) []byte {
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	if r.IsFlexible() && r.Key() != keyApiVersions {
		b = append(b, 0)
	}
	b = r.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// TestDetect: the first bytes of every recorded client connection are
// detected, and the other protocols' first bytes are not. (A Kafka
// response may pass for a request: it is Kafka either way.)
func TestDetect(t *testing.T) {
	for _, f := range fixtures(t) {
		segs := l7test.Load(t, f)
		if !Detect(segs[0].Data) {
			t.Errorf("%s: first request % x not detected", f, segs[0].Data[:min(32, len(segs[0].Data))])
		}
	}
	for name, b := range otherProtocols {
		if Detect(b) {
			t.Errorf("%s detected as Kafka", name)
		}
	}
	if Detect(encodeRequest(t, &kmsg.ApiVersionsRequest{Version: 99}, 1)) {
		t.Error("unknown version detected")
	}
}

// otherProtocols are the typical first bytes of the other protocols a
// connection may carry.
var otherProtocols = map[string][]byte{
	"http":      []byte("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"),
	"http2":     []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
	"redis":     []byte("*1\r\n$4\r\nPING\r\n"),
	"pgsql":     append([]byte{0, 0, 0, 0x54, 0, 3, 0, 0}, "user\x00postgres\x00database\x00postgres\x00application_name\x00psql\x00\x00"...),
	"pgsql-ssl": {0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f},
	"mysql":     append([]byte{0x55, 0, 0, 1, 0x85, 0xa6, 0xff, 0x01, 0, 0, 0, 1, 0x21}, make([]byte, 23)...),
	"mongo":     {0x3d, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xdd, 0x07, 0, 0, 0, 0, 0, 0, 0, 0x28, 0, 0, 0, 2, 'h', 'e', 'l', 'l', 'o', 0},
	"memcached": []byte("get k\r\n"),
	"dns":       {0, 0x1d, 0xab, 0xcd, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 1, 0, 1},
	"crpc":      {0x1a, 0x19, 0, 0, 0, 0x80, 0, 0x5f, 1, 0x80, 0, 0},
}
