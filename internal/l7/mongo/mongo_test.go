package mongo

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

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

func describe(ex []l7.Exchange) string {
	var b strings.Builder
	for _, e := range ex {
		fmt.Fprintf(&b, "%v/%v %s %q %d->%d %d/%d\n", e.HasRequest, e.HasResponse, e.Class, e.API, e.Start, e.End, e.ReqBytes, e.RespBytes)
	}
	return b.String()
}

// The oracle decodes a fixture with the driver's own bson package and
// derives the exchanges.

type oframe struct {
	b  []byte
	ts uint64
}

func oframes(t *testing.T, chunks []l7.Chunk, dir l7.Direction) []oframe {
	var buf []byte
	var tss []uint64
	for _, c := range chunks {
		if c.Dir == dir {
			buf = append(buf, c.Data...)
			for range c.Data {
				tss = append(tss, c.TS)
			}
		}
	}
	var out []oframe
	for off := 0; off < len(buf); {
		n := int(binary.LittleEndian.Uint32(buf[off:]))
		if n < 16 || off+n > len(buf) {
			t.Fatalf("bad message of %d bytes at %d", n, off)
		}
		out = append(out, oframe{buf[off : off+n], tss[off]})
		off += n
	}
	return out
}

// body returns the command or reply document of a message, and the
// OP_MSG flags.
func obody(t *testing.T, m []byte) (doc bson.Raw, flags uint32, op int32) {
	op = int32(binary.LittleEndian.Uint32(m[12:]))
	b := m[16:]
	switch op {
	case opMsg:
		flags = binary.LittleEndian.Uint32(b)
		for off := 4; off < len(b); {
			kind := b[off]
			size := int(binary.LittleEndian.Uint32(b[off+1:]))
			if kind == 0 {
				doc = bson.Raw(b[off+1 : off+1+size])
			}
			off += 1 + size
		}
	case opQuery:
		z := bytes.IndexByte(b[4:], 0)
		doc = bson.Raw(b[4+z+1+8:])
	case opReply:
		flags = binary.LittleEndian.Uint32(b)
		doc = bson.Raw(b[20:])
	default:
		t.Fatalf("opcode %d in a fixture", op)
	}
	if err := doc.Validate(); err != nil {
		t.Fatalf("bson: %v", err)
	}
	return doc, flags, op
}

func oracle(t *testing.T, chunks []l7.Chunk, role l7.Role) []l7.Exchange {
	reqDir := role.RequestDir()
	respDir := l7.Ingress
	if reqDir == l7.Ingress {
		respDir = l7.Egress
	}
	type req struct {
		f       oframe
		api     string
		noReply bool
	}
	var reqs []*req
	byID := map[int32]*req{}
	for _, f := range oframes(t, chunks, reqDir) {
		doc, flags, op := obody(t, f.b)
		elems, _ := doc.Elements()
		api := elems[0].Key()
		if coll, ok := elems[0].Value().StringValueOK(); ok && collectionCommands[api] {
			api += " " + coll
		}
		if api == "getMore" {
			api += " " + doc.Lookup("collection").StringValue()
		}
		r := &req{f: f, api: api, noReply: op == opMsg && flags&flagMoreToCome != 0}
		reqs = append(reqs, r)
		byID[int32(binary.LittleEndian.Uint32(f.b[4:]))] = r
	}
	var out []l7.Exchange
	emitted := map[*req]bool{}
	// requests without replies come out when read; the rest when answered
	ri := 0
	flushNoReply := func(before uint64) {
		for ; ri < len(reqs) && reqs[ri].f.ts <= before; ri++ {
			if reqs[ri].noReply {
				out = append(out, l7.Exchange{HasRequest: true, Start: reqs[ri].f.ts, API: reqs[ri].api, ReqBytes: len(reqs[ri].f.b)})
				emitted[reqs[ri]] = true
			}
		}
	}
	streams := map[int32]bool{} // replies with moreToCome: the ones answering them continue a stream
	for _, f := range oframes(t, chunks, respDir) {
		flushNoReply(f.ts)
		id, to := int32(binary.LittleEndian.Uint32(f.b[4:])), int32(binary.LittleEndian.Uint32(f.b[8:]))
		doc, flags, _ := obody(t, f.b)
		if flags&flagMoreToCome != 0 {
			streams[id] = true
		}
		if streams[to] {
			continue
		}
		r := byID[to]
		if r == nil {
			t.Fatal("a reply to no request")
		}
		c := l7.OK
		if v, err := doc.LookupErr("ok"); err == nil && v.AsFloat64() == 0 {
			c = CodeClass(doc.Lookup("code").Int32())
		}
		if v, err := doc.LookupErr("writeErrors", "0", "code"); err == nil {
			c = max(c, CodeClass(v.Int32()))
		}
		if v, err := doc.LookupErr("writeConcernError", "code"); err == nil {
			c = max(c, CodeClass(v.Int32()))
		}
		out = append(out, l7.Exchange{HasRequest: true, HasResponse: true, Start: r.f.ts, End: f.ts, Class: c,
			API: r.api, ReqBytes: len(r.f.b), RespBytes: len(f.b)})
		emitted[r] = true
	}
	flushNoReply(^uint64(0))
	for _, r := range reqs {
		if !emitted[r] {
			out = append(out, l7.Exchange{HasRequest: true, Start: r.f.ts, API: r.api, ReqBytes: len(r.f.b)})
		}
	}
	return out
}

func TestFixturesAgainstOracle(t *testing.T) {
	for _, f := range fixtures(t) {
		segs := l7test.Load(t, f)
		for _, role := range []l7.Role{l7.Client, l7.Server} {
			chunks := l7test.Chunks(segs, role, 1000, 1000)
			for _, split := range []int{0, 1, 2, 7, 64} {
				in := chunks
				if split > 0 {
					in = l7test.Resplit(chunks, split)
				}
				p := NewParser(role)
				got, want := describe(l7test.Run(p, in)), describe(oracle(t, in, role))
				if got != want || p.Desyncs() != 0 {
					t.Errorf("%s as %s split %d: desyncs %d\ngot:\n%s\nwant:\n%s", f, role, split, p.Desyncs(), got, want)
				}
			}
		}
	}
}

// TestFixtureFacts pins what the recorded driver did.
func TestFixtureFacts(t *testing.T) {
	p := NewParser(l7.Client)
	var got []string
	for _, e := range l7test.Run(p, l7test.Chunks(l7test.Load(t, "testdata/driver-2.chunks"), l7.Client, 1, 1)) {
		s := e.API + " " + e.Class.String()
		if !e.HasResponse {
			s += " noreply"
		}
		got = append(got, s)
	}
	want := []string{
		"isMaster ok", // the handshake, OP_QUERY on admin.$cmd
		"insert orders ok", "insert orders ok",
		"insert orders client_error", // writeErrors: DuplicateKey 11000
		"update orders ok",
		"update orders server_error", // writeConcernError: WriteConcernFailed 64
		"find orders ok", "getMore orders ok", "aggregate orders ok",
		"aggregate orders client_error", // ok 0: Location40324, unknown stage
		"find slow server_error",        // ok 0: MaxTimeMSExpired 50
		"delete orders ok",
		"drop missing client_error", // ok 0: NamespaceNotFound 26
		"insert events ok noreply",  // w:0, moreToCome
		"ping ok", "endSessions ok",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

// TestTruncated: MongoDB declares every message's length, so captures of
// 64, 256 or 4096 bytes per read keep the exchanges exact; what a short
// capture loses is the template or the outcome past it.
func TestTruncated(t *testing.T) {
	for _, f := range fixtures(t) {
		for _, role := range []l7.Role{l7.Client, l7.Server} {
			chunks := l7test.Chunks(l7test.Load(t, f), role, 1000, 1000)
			whole := l7test.Run(NewParser(role), chunks)
			for _, capSize := range []int{64, 256, 4096} {
				p := NewParser(role)
				got := l7test.Run(p, l7test.Truncate(chunks, capSize))
				if p.Desyncs() != 0 {
					// a read holding several messages (the driver's w:0
					// insert and the ping after it), captured in part:
					// the messages in the gap are lost, and said so
					if requests(got) >= requests(whole) {
						t.Errorf("%s as %s cap %d: %d desyncs, %d requests of %d", f, role, capSize, p.Desyncs(), requests(got), requests(whole))
					}
					continue
				}
				if len(got) != len(whole) {
					t.Errorf("%s as %s cap %d: %d exchanges of %d", f, role, capSize, len(got), len(whole))
					continue
				}
				for i := range got {
					g, w := got[i], whole[i]
					if g.Start != w.Start || g.End != w.End || g.ReqBytes != w.ReqBytes || g.RespBytes != w.RespBytes || g.HasResponse != w.HasResponse {
						t.Errorf("%s cap %d #%d: %+v, want %+v", f, capSize, i, g, w)
					}
					if capSize >= 256 && (g.API != w.API || g.Class != w.Class) {
						t.Errorf("%s cap %d #%d: %q %s, want %q %s", f, capSize, i, g.API, g.Class, w.API, w.Class)
					}
				}
			}
		}
	}
}

// msg builds an OP_MSG.
func msg(id, to int32, flags uint32, doc any, seq ...any) []byte {
	b := make([]byte, 16, 256)
	binary.LittleEndian.PutUint32(b[4:], uint32(id))
	binary.LittleEndian.PutUint32(b[8:], uint32(to))
	binary.LittleEndian.PutUint32(b[12:], opMsg)
	b = binary.LittleEndian.AppendUint32(b, flags)
	raw, err := bson.Marshal(doc)
	if err != nil {
		panic(err)
	}
	b = append(append(b, 0), raw...)
	if len(seq) > 0 {
		var docs []byte
		for _, d := range seq {
			r, _ := bson.Marshal(d)
			docs = append(docs, r...)
		}
		b = append(b, 1)
		b = binary.LittleEndian.AppendUint32(b, uint32(4+len("documents")+1+len(docs)))
		b = append(append(append(b, "documents"...), 0), docs...)
	}
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	return b
}

func feed(p *Parser, dir l7.Direction, ts uint64, b []byte, out []l7.Exchange) []l7.Exchange {
	return p.Feed(l7.Chunk{Dir: dir, TS: ts, Data: b, Size: len(b)}, out)
}

// TestExhaust: a streaming hello answered by replies with moreToCome, each
// answering the previous reply: one exchange, the continuation absorbed,
// and the next request paired as usual.
func TestExhaust(t *testing.T) {
	p := NewParser(l7.Client)
	hello := bson.D{{Key: "hello", Value: 1}, {Key: "maxAwaitTimeMS", Value: 10000}}
	ok := bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "ok", Value: 1.0}}
	out := feed(p, l7.Egress, 1, msg(10, 0, flagExhaust, hello), nil)
	out = feed(p, l7.Ingress, 2, msg(100, 10, flagMoreToCome, ok), out)
	out = feed(p, l7.Ingress, 3, msg(101, 100, flagMoreToCome, ok), out)
	out = feed(p, l7.Ingress, 4, msg(102, 101, 0, ok), out)
	out = feed(p, l7.Egress, 5, msg(11, 0, 0, bson.D{{Key: "ping", Value: 1}}), out)
	out = feed(p, l7.Ingress, 6, msg(103, 11, 0, ok), out)
	var got []string
	for _, e := range out {
		got = append(got, fmt.Sprintf("%s %d->%d %v", e.API, e.Start, e.End, e.HasRequest))
	}
	want := []string{"hello 1->2 true", "ping 5->6 true"}
	if !reflect.DeepEqual(got, want) || p.Desyncs() != 0 {
		t.Errorf("%q, want %q", got, want)
	}
}

// TestBigReplySkipped: a find whose first batch is 4 MiB, captured 4 KiB
// per 64 KiB read: the reply's "ok" after the batch is still read, since
// the batch is skipped by its length.
func TestBigReplySkipped(t *testing.T) {
	var batch bson.A
	for i := range 64 {
		batch = append(batch, bson.D{{Key: "_id", Value: i}, {Key: "blob", Value: bytes.Repeat([]byte{'x'}, 64<<10)}})
	}
	for _, okv := range []float64{1, 0} {
		reply := bson.D{{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: batch}, {Key: "id", Value: int64(0)}}},
			{Key: "ok", Value: okv}, {Key: "code", Value: int32(10107)}}
		resp := msg(2, 1, 0, reply)
		req := msg(1, 0, 0, bson.D{{Key: "find", Value: "blobs"}})
		p := NewParser(l7.Client)
		out := feed(p, l7.Egress, 1, req, nil)
		for off := 0; off < len(resp); off += 64 << 10 {
			end := min(off+64<<10, len(resp))
			out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: uint64(2 + off), Data: resp[off:min(end, off+4096)], Size: end - off}, out)
		}
		want := l7.OK
		if okv == 0 {
			want = l7.ServerError // NotWritablePrimary
		}
		if len(out) != 1 || out[0].Class != want || out[0].API != "find blobs" || out[0].RespBytes != len(resp) || p.Desyncs() != 0 {
			t.Errorf("ok %v: %+v", okv, out)
		}
	}
}

func TestCompressed(t *testing.T) {
	// OP_COMPRESSED: framed, paired and timed, not decoded
	comp := func(id, to int32, orig int32) []byte {
		b := make([]byte, 16)
		binary.LittleEndian.PutUint32(b[4:], uint32(id))
		binary.LittleEndian.PutUint32(b[8:], uint32(to))
		binary.LittleEndian.PutUint32(b[12:], opCompressed)
		b = binary.LittleEndian.AppendUint32(b, uint32(orig))
		b = binary.LittleEndian.AppendUint32(b, 100)
		b = append(b, 2) // zlib
		b = append(b, bytes.Repeat([]byte{0x78}, 40)...)
		binary.LittleEndian.PutUint32(b, uint32(len(b)))
		return b
	}
	req, resp := comp(5, 0, opMsg), comp(6, 5, opMsg)
	if !Detect(req) {
		t.Error("OP_COMPRESSED not detected")
	}
	p := NewParser(l7.Server)
	out := feed(p, l7.Ingress, 1, req, nil)
	out = feed(p, l7.Egress, 2, resp, out)
	want := []l7.Exchange{{HasRequest: true, HasResponse: true, Start: 1, End: 2, API: "OP_COMPRESSED", ReqBytes: len(req), RespBytes: len(resp)}}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("%+v", out)
	}
}

// TestLegacy: OP_QUERY on a collection (a legacy find) and its OP_REPLY,
// whose documents are data, not a command reply; legacy writes get no
// reply.
func TestLegacy(t *testing.T) {
	query := func(id int32, coll string, doc any) []byte {
		b := make([]byte, 16)
		binary.LittleEndian.PutUint32(b[4:], uint32(id))
		binary.LittleEndian.PutUint32(b[12:], opQuery)
		b = binary.LittleEndian.AppendUint32(b, 0)
		b = append(append(b, coll...), 0)
		b = binary.LittleEndian.AppendUint64(b, 0)
		raw, _ := bson.Marshal(doc)
		b = append(b, raw...)
		binary.LittleEndian.PutUint32(b, uint32(len(b)))
		return b
	}
	reply := func(id, to int32, flags uint32, doc any) []byte {
		b := make([]byte, 16)
		binary.LittleEndian.PutUint32(b[4:], uint32(id))
		binary.LittleEndian.PutUint32(b[8:], uint32(to))
		binary.LittleEndian.PutUint32(b[12:], opReply)
		b = binary.LittleEndian.AppendUint32(b, flags)
		b = append(b, make([]byte, 16)...)
		raw, _ := bson.Marshal(doc)
		b = append(b, raw...)
		binary.LittleEndian.PutUint32(b, uint32(len(b)))
		return b
	}
	insert := func(id int32, coll string) []byte {
		b := make([]byte, 16)
		binary.LittleEndian.PutUint32(b[4:], uint32(id))
		binary.LittleEndian.PutUint32(b[12:], opInsert)
		b = binary.LittleEndian.AppendUint32(b, 0)
		b = append(append(b, coll...), 0)
		raw, _ := bson.Marshal(bson.D{{Key: "x", Value: 1}})
		b = append(b, raw...)
		binary.LittleEndian.PutUint32(b, uint32(len(b)))
		return b
	}
	p := NewParser(l7.Client)
	// a document that happens to hold ok: 0 is data
	out := feed(p, l7.Egress, 1, query(1, "shop.users", bson.D{{Key: "name", Value: "bob"}}), nil)
	out = feed(p, l7.Ingress, 2, reply(2, 1, 0, bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: 1}}), out)
	// a failed query: QueryFailure with $err and code
	out = feed(p, l7.Egress, 3, query(3, "shop.users", bson.D{{Key: "$where", Value: "x"}}), out)
	out = feed(p, l7.Ingress, 4, reply(4, 3, 2, bson.D{{Key: "$err", Value: "bad"}, {Key: "code", Value: int32(2)}}), out)
	out = feed(p, l7.Egress, 5, insert(5, "shop.users"), out)
	var got []string
	for _, e := range out {
		got = append(got, fmt.Sprintf("%s %s %v", e.API, e.Class, e.HasResponse))
	}
	want := []string{"find users ok true", "find users client_error true", "insert users ok false"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%q, want %q", got, want)
	}
}

func TestTemplates(t *testing.T) {
	for want, doc := range map[string]any{
		"find orders":                 bson.D{{Key: "find", Value: "orders"}, {Key: "filter", Value: bson.D{{Key: "secret", Value: "hunter2"}}}},
		"insert logs_{n}":             bson.D{{Key: "insert", Value: "logs_20241123"}},
		"getMore orders":              bson.D{{Key: "getMore", Value: int64(42)}, {Key: "collection", Value: "orders"}},
		"aggregate":                   bson.D{{Key: "aggregate", Value: 1}},
		"explain find orders":         bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "orders"}}}},
		"createUser":                  bson.D{{Key: "createUser", Value: "alice"}, {Key: "pwd", Value: "s3cret"}},
		"hello":                       bson.D{{Key: "hello", Value: 1}},
		"update cache-{id}":           bson.D{{Key: "update", Value: "cache-0b9e3f6a-2c1d-4e5f-8a7b-9c0d1e2f3a4b"}},
		"insert tenant_{id}.sessions": bson.D{{Key: "insert", Value: "tenant_5f2b9c0e4a1d3e7f90ab.sessions"}},
	} {
		if got := string(AppendAPI(nil, msg(1, 0, 0, doc))); got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
}

func TestReplyClass(t *testing.T) {
	for _, c := range []struct {
		doc  any
		want l7.Class
	}{
		{bson.D{{Key: "ok", Value: 1.0}}, l7.OK},
		{bson.D{{Key: "ok", Value: int32(0)}, {Key: "code", Value: int32(13)}, {Key: "codeName", Value: "Unauthorized"}}, l7.ClientError},
		{bson.D{{Key: "ok", Value: false}, {Key: "code", Value: int64(10107)}}, l7.ServerError},
		{bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "no code"}}, l7.ClientError},
		{bson.D{{Key: "n", Value: 0}, {Key: "writeErrors", Value: bson.A{bson.D{{Key: "index", Value: 0}, {Key: "code", Value: 11000}}}}, {Key: "ok", Value: 1.0}}, l7.ClientError},
		{bson.D{{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 64}}}, {Key: "ok", Value: 1.0}}, l7.ServerError},
		// a code inside data is not the reply's
		{bson.D{{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: bson.A{bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: 1}}}}}}, {Key: "ok", Value: 1.0}}, l7.OK},
		{bson.D{{Key: "re", Value: bson.Regex{Pattern: "a", Options: "i"}}, {Key: "bin", Value: bson.Binary{Data: []byte{1, 2}}}, {Key: "ok", Value: 0.0}, {Key: "code", Value: 1}}, l7.ServerError},
	} {
		if got := ReplyClass(msg(2, 1, 0, c.doc), false); got != c.want {
			t.Errorf("%v: %s, want %s", c.doc, got, c.want)
		}
	}
}

func TestPipelinedAndUnmatched(t *testing.T) {
	p := NewParser(l7.Server)
	var reqs []byte
	for i := range 3 {
		reqs = append(reqs, msg(int32(i+1), 0, 0, bson.D{{Key: "ping", Value: 1}})...)
	}
	ok := bson.D{{Key: "ok", Value: 1.0}}
	out := feed(p, l7.Ingress, 1, reqs, nil)
	// replies to 1 and 3: 2 is passed over; then a reply to an unseen request
	out = feed(p, l7.Egress, 2, append(msg(11, 1, 0, ok), msg(13, 3, 0, ok)...), out)
	out = feed(p, l7.Egress, 3, msg(14, 99, 0, ok), out)
	var got []string
	for _, e := range out {
		got = append(got, fmt.Sprintf("%v/%v %d->%d", e.HasRequest, e.HasResponse, e.Start, e.End))
	}
	want := []string{"true/true 1->2", "true/false 1->0", "true/true 1->2", "false/true 0->3"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%q, want %q", got, want)
	}
}

func TestGapResync(t *testing.T) {
	p := NewParser(l7.Server)
	a, b := msg(1, 0, 0, bson.D{{Key: "ping", Value: 1}}), msg(2, 0, 0, bson.D{{Key: "ping", Value: 1}})
	both := append(a, b...)
	out := p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 1, Data: both[:20], Size: len(both)}, nil)
	if p.Desyncs() != 1 || len(out) != 0 {
		t.Fatalf("desyncs %d, %+v", p.Desyncs(), out)
	}
	c := msg(3, 0, 0, bson.D{{Key: "ping", Value: 1}})
	out = feed(p, l7.Ingress, 2, c, out)
	out = feed(p, l7.Egress, 3, msg(9, 3, 0, bson.D{{Key: "ok", Value: 1.0}}), out)
	// the first request's header was captured, so it was framed (its
	// command was in the gap); the second was lost in the gap; the third
	// resynchronised
	want := []l7.Exchange{
		{HasRequest: true, Start: 1, ReqBytes: len(a)},
		{HasRequest: true, HasResponse: true, Start: 2, End: 3, API: "ping", ReqBytes: len(c), RespBytes: 38},
	}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("%+v", out)
	}
}

func TestDetect(t *testing.T) {
	for _, f := range fixtures(t) {
		if segs := l7test.Load(t, f); !Detect(segs[0].Data) {
			t.Errorf("%s: first request not detected", f)
		}
	}
	if !Detect(msg(1, 0, 0, bson.D{{Key: "hello", Value: 1}})) {
		t.Error("OP_MSG hello not detected")
	}
	if Detect(msg(1, 5, 0, bson.D{{Key: "ok", Value: 1.0}})) {
		t.Error("a reply detected as a request")
	}
	for name, b := range otherProtocols {
		if Detect(b) {
			t.Errorf("%s detected as MongoDB", name)
		}
	}
}

var otherProtocols = map[string][]byte{
	"http":      []byte("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"),
	"http2":     []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
	"redis":     []byte("*1\r\n$4\r\nPING\r\n"),
	"pgsql":     append([]byte{0, 0, 0, 0x54, 0, 3, 0, 0}, "user\x00postgres\x00database\x00postgres\x00\x00"...),
	"mysql":     append([]byte{0x55, 0, 0, 1, 0x85, 0xa6, 0xff, 0x01, 0, 0, 0, 1, 0x21}, make([]byte, 23)...),
	"kafka":     append([]byte{0, 0, 0, 0x2c, 0, 0x12, 0, 5, 0, 0, 0, 0, 0, 0x0f}, "galago-producer\x00"...),
	"memcached": []byte("get k\r\n"),
	"dns":       {0, 0x1d, 0xab, 0xcd, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 1, 0, 1},
	"crpc":      append([]byte{0x1a, 0x19, 0, 0, 0, 0x80, 0, 0x5f, 1, 0x80, 0, 0}, make([]byte, 20)...),
}

// TestBackwardSection: a kind 1 section whose size would move the reader
// back (or nowhere) ends the search instead of looping.
func TestBackwardSection(t *testing.T) {
	for _, size := range []int32{-10, 0, 3} {
		b := make([]byte, 16, 64)
		binary.LittleEndian.PutUint32(b[12:], opMsg)
		b = binary.LittleEndian.AppendUint32(b, 0)
		b = append(b, 1)
		b = binary.LittleEndian.AppendUint32(b, uint32(size))
		b = append(b, make([]byte, 20)...)
		binary.LittleEndian.PutUint32(b, uint32(len(b)))
		if got := AppendAPI(nil, b); len(got) != 0 {
			t.Errorf("size %d: %q", size, got)
		}
	}
}

func requests(ex []l7.Exchange) int {
	n := 0
	for _, e := range ex {
		if e.HasRequest {
			n++
		}
	}
	return n
}

// TestRecordedExhaust: the driver's monitor streams hello (exhaustAllowed);
// the fake server's replies carry moreToCome, each answering the previous
// one: one exchange, the stream's other replies absorbed.
func TestRecordedExhaust(t *testing.T) {
	segs := l7test.Load(t, "testdata/driver-0.chunks")
	replies := 0
	for _, s := range segs {
		if !s.FromClient {
			replies++
		}
	}
	p := NewParser(l7.Client)
	got := l7test.Run(p, l7test.Chunks(segs, l7.Client, 1, 1))
	if replies < 4 || len(got) != 2 || got[0].API != "isMaster" || got[1].API != "hello" || !got[1].HasResponse || p.Desyncs() != 0 {
		t.Errorf("%d replies: %s", replies, describe(got))
	}
}

// TestCodeClasses: the codes the official Go driver retries a command on,
// or resumes a change stream after (x/mongo/driver/errors.go,
// mongo/change_stream.go, v2.10), are server errors; the brief's client
// examples are client errors.
func TestCodeClasses(t *testing.T) {
	for _, c := range []int32{6, 7, 89, 91, 134, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436, 10058,
		63, 150, 13388, 234, 133, 50, 1, 64, 112} {
		if CodeClass(c) != l7.ServerError {
			t.Errorf("%d: %s", c, CodeClass(c))
		}
	}
	for _, c := range []int32{2, 9, 13, 18, 26, 43, 59, 11000, 11001, 121, 40324, 0} {
		if CodeClass(c) != l7.ClientError {
			t.Errorf("%d: %s", c, CodeClass(c))
		}
	}
}
