package kafka

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// The oracle decodes a fixture with franz-go's kmsg, an independent Kafka
// codec, and derives the exchanges a correct parser must produce: every
// request and response decoded in full (kmsg fails on a byte too many or
// too few), error codes read from the decoded structs.

type oframe struct {
	b  []byte // the whole message, length included
	ts uint64
}

// oframes cuts one direction's bytes into messages, with the timestamp of
// the chunk each one's first byte arrived in.
func oframes(t *testing.T, chunks []l7.Chunk, dir l7.Direction) []oframe {
	var buf []byte
	var tss []uint64
	for _, c := range chunks {
		if c.Dir != dir {
			continue
		}
		buf = append(buf, c.Data...)
		for range c.Data {
			tss = append(tss, c.TS)
		}
	}
	var out []oframe
	for off := 0; off < len(buf); {
		if len(buf)-off < 4 {
			t.Fatalf("%d trailing bytes", len(buf)-off)
		}
		n := int(binary.BigEndian.Uint32(buf[off:])) + 4
		if off+n > len(buf) {
			t.Fatalf("message of %d bytes at %d cut at %d", n, off, len(buf))
		}
		out = append(out, oframe{b: buf[off : off+n], ts: tss[off]})
		off += n
	}
	return out
}

type oreq struct {
	key, ver int16
	corr     int32
	req      kmsg.Request
	f        oframe
}

// oracle returns the exchanges of a connection seen from role's side.
func oracle(t *testing.T, chunks []l7.Chunk, role l7.Role) []l7.Exchange {
	t.Helper()
	reqDir := role.RequestDir()
	respDir := l7.Ingress
	if reqDir == l7.Ingress {
		respDir = l7.Egress
	}
	var reqs []oreq
	for _, f := range oframes(t, chunks, reqDir) {
		b := f.b[4:]
		key := int16(binary.BigEndian.Uint16(b))
		ver := int16(binary.BigEndian.Uint16(b[2:]))
		corr := int32(binary.BigEndian.Uint32(b[4:]))
		r := kmsg.RequestForKey(key)
		r.SetVersion(ver)
		body := b[8:]
		cid := int(int16(binary.BigEndian.Uint16(body)))
		body = body[2+max(cid, 0):]
		if r.IsFlexible() {
			var tags kmsg.Tags
			rd := kbinReader(body)
			body = skipTags(t, rd, &tags)
		}
		if err := r.ReadFrom(body); err != nil {
			t.Fatalf("kmsg: request key %d v%d: %v", key, ver, err)
		}
		reqs = append(reqs, oreq{key, ver, corr, r, f})
	}
	byCorr := map[int32]int{}
	for i, r := range reqs {
		byCorr[r.corr] = i
	}
	answered := map[int]oframe{}
	classes := map[int]l7.Class{}
	for _, f := range oframes(t, chunks, respDir) {
		corr := int32(binary.BigEndian.Uint32(f.b[4:]))
		i, ok := byCorr[corr]
		if !ok {
			t.Fatalf("response to unknown correlation id %d", corr)
		}
		rq := reqs[i]
		resp := rq.req.ResponseKind()
		resp.SetVersion(rq.ver)
		body := f.b[8:]
		if resp.IsFlexible() && rq.key != keyApiVersions {
			var tags kmsg.Tags
			body = skipTags(t, kbinReader(body), &tags)
		}
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("kmsg: response key %d v%d: %v", rq.key, rq.ver, err)
		}
		answered[i] = f
		classes[i] = oracleClass(rq.key, resp)
	}
	type keyed struct {
		e   l7.Exchange
		key uint64
	}
	var ks []keyed
	lastFetch := ""
	for i, r := range reqs {
		api := oracleAPI(r, &lastFetch)
		e := l7.Exchange{HasRequest: true, Start: r.f.ts, API: api, ReqBytes: len(r.f.b)}
		if p, ok := r.req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
			ks = append(ks, keyed{e, r.f.ts})
			continue
		}
		k := ^uint64(0) // unanswered: at Flush
		if f, ok := answered[i]; ok {
			e.HasResponse, e.End, e.RespBytes, e.Class = true, f.ts, len(f.b), classes[i]
			k = f.ts
		}
		ks = append(ks, keyed{e, k})
	}
	// The parser emits an exchange when its response (or, for acks=0, its
	// request) completes and unanswered ones at Flush: order the oracle's
	// list the same way (a stable sort keeps request order among ties).
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && ks[j].key < ks[j-1].key; j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
	out := make([]l7.Exchange, len(ks))
	for i, k := range ks {
		out[i] = k.e
	}
	return out
}

func oracleAPI(r oreq, lastFetch *string) string {
	name := APIName(r.key)
	var topics []string
	switch q := r.req.(type) {
	case *kmsg.ProduceRequest:
		for _, tp := range q.Topics {
			topics = append(topics, topicOf(tp.Topic, tp.TopicID, r.ver))
		}
	case *kmsg.FetchRequest:
		for _, tp := range q.Topics {
			topics = append(topics, topicOf(tp.Topic, tp.TopicID, r.ver))
		}
		if len(topics) == 0 && *lastFetch != "" {
			return *lastFetch
		}
	default:
		return name
	}
	if len(topics) == 0 {
		return name
	}
	api := name + " " + topics[0]
	if len(topics) > 1 {
		api += "+"
	}
	if r.key == keyFetch {
		*lastFetch = api
	}
	return api
}

func topicOf(name string, id [16]byte, ver int16) string {
	if ver >= 13 {
		return "{topic_id}"
	}
	return name
}

// oracleClass collects the error codes this package's doc says decide a
// response's class, by reflection over kmsg's decoded struct.
func oracleClass(key int16, resp kmsg.Response) l7.Class {
	var codes []int16
	v := reflect.ValueOf(resp).Elem()
	switch key {
	case keyProduce, keyFetch, keyListOffsets, keyMetadata, keyOffsetCommit, keyOffsetFetch, keyFindCoordinator:
		collectCodes(v, &codes)
	case keyDescribeGroups, keyCreateTopics, keyDeleteTopics:
		if s := v.FieldByName("Groups"); s.IsValid() && s.Len() > 0 {
			codes = append(codes, int16(s.Index(0).FieldByName("ErrorCode").Int()))
		}
		if s := v.FieldByName("Topics"); s.IsValid() && s.Len() > 0 {
			codes = append(codes, int16(s.Index(0).FieldByName("ErrorCode").Int()))
		}
	default:
		if decoded(key) {
			codes = append(codes, int16(v.FieldByName("ErrorCode").Int()))
		}
	}
	c := l7.OK
	for _, code := range codes {
		c = max(c, ErrorClass(code))
	}
	return c
}

func collectCodes(v reflect.Value, codes *[]int16) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(kmsg.MetadataResponseTopicPartition{}) {
			return // partition-level metadata errors are not the request's outcome
		}
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if f.Name == "ErrorCode" {
				*codes = append(*codes, int16(v.Field(i).Int()))
				continue
			}
			if strings.HasPrefix(f.Name, "Unknown") {
				continue
			}
			collectCodes(v.Field(i), codes)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Struct {
			for i := 0; i < v.Len(); i++ {
				collectCodes(v.Index(i), codes)
			}
		}
	case reflect.Pointer:
		if !v.IsNil() {
			collectCodes(v.Elem(), codes)
		}
	}
}

type kbin struct{ b []byte }

func kbinReader(b []byte) *kbin { return &kbin{b} }

func (r *kbin) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	r.b = r.b[n:]
	return v
}

// skipTags skips a tagged-field section and returns what follows.
func skipTags(t *testing.T, r *kbin, _ *kmsg.Tags) []byte {
	n := r.uvarint()
	for range n {
		r.uvarint()
		size := r.uvarint()
		if int(size) > len(r.b) {
			t.Fatalf("tag of %d bytes", size)
		}
		r.b = r.b[size:]
	}
	return r.b
}

func describe(ex []l7.Exchange) string {
	var b strings.Builder
	for _, e := range ex {
		fmt.Fprintf(&b, "%v/%v %s %q %d->%d %d/%d\n", e.HasRequest, e.HasResponse, e.Class, e.API, e.Start, e.End, e.ReqBytes, e.RespBytes)
	}
	return b.String()
}

var _ = l7test.Chunks
