package http2

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	xhttp2 "golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// conn builds both directions of an HTTP/2 connection with x/net's
// Framer and HPACK encoder, one chunk per call.
type conn struct {
	chunks []l7.Chunk
	ts     uint64
	encC   *hpack.Encoder // the client's encoder
	encS   *hpack.Encoder
	bufC   bytes.Buffer
	bufS   bytes.Buffer
}

func newConn() *conn {
	c := &conn{}
	c.encC = hpack.NewEncoder(&c.bufC)
	c.encS = hpack.NewEncoder(&c.bufS)
	return c
}

// block encodes fields (name, value, name, value...) with the client's or
// server's encoder.
func (c *conn) block(client bool, kv ...string) []byte {
	enc, buf := c.encS, &c.bufS
	if client {
		enc, buf = c.encC, &c.bufC
	}
	buf.Reset()
	for i := 0; i < len(kv); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	return bytes.Clone(buf.Bytes())
}

// send adds one chunk written by fn with a Framer; the client's chunks
// are egress (the parsers below are clients).
func (c *conn) send(client bool, fn func(f *xhttp2.Framer)) {
	var b bytes.Buffer
	fn(xhttp2.NewFramer(&b, nil))
	c.ts++
	dir := l7.Ingress
	if client {
		dir = l7.Egress
	}
	c.chunks = append(c.chunks, l7.Chunk{Dir: dir, TS: c.ts, Data: b.Bytes(), Size: b.Len()})
}

func (c *conn) preface() {
	c.ts++
	c.chunks = append(c.chunks, l7.Chunk{Dir: l7.Egress, TS: c.ts, Data: []byte(Preface), Size: len(Preface)})
	c.send(true, func(f *xhttp2.Framer) { _ = f.WriteSettings() })
	c.send(false, func(f *xhttp2.Framer) {
		_ = f.WriteSettings(xhttp2.Setting{ID: xhttp2.SettingMaxFrameSize, Val: 1 << 20})
	})
}

func (c *conn) request(id uint32, end bool, kv ...string) {
	blk := c.block(true, kv...)
	c.send(true, func(f *xhttp2.Framer) {
		_ = f.WriteHeaders(xhttp2.HeadersFrameParam{StreamID: id, BlockFragment: blk, EndStream: end, EndHeaders: true})
	})
}

func (c *conn) response(id uint32, end bool, kv ...string) {
	blk := c.block(false, kv...)
	c.send(false, func(f *xhttp2.Framer) {
		_ = f.WriteHeaders(xhttp2.HeadersFrameParam{StreamID: id, BlockFragment: blk, EndStream: end, EndHeaders: true})
	})
}

func (c *conn) data(client bool, id uint32, end bool, n int) {
	c.send(client, func(f *xhttp2.Framer) { _ = f.WriteData(id, end, make([]byte, n)) })
}

func (c *conn) run() ([]l7.Exchange, *Parser) {
	p := newVerifying(l7.Client)
	out := l7test.Run(p, c.chunks)
	mustAgree(p)
	return out, p
}

var grpcReq = []string{":method", "POST", ":scheme", "http", ":path", "/pkg.Svc/Get", ":authority", "svc:50051", "content-type", "application/grpc", "te", "trailers"}

func TestGRPCOutcomes(t *testing.T) {
	c := newConn()
	c.preface()
	codes := []int{GRPCOK, GRPCNotFound, GRPCDeadlineExceeded, GRPCUnauthenticated, GRPCUnavailable, 99}
	for i, code := range codes {
		id := uint32(2*i + 1)
		c.request(id, false, grpcReq...)
		c.data(true, id, true, 12)
		c.response(id, false, ":status", "200", "content-type", "application/grpc")
		c.data(false, id, false, 20)
		c.response(id, true, "grpc-status", fmt.Sprint(code), "grpc-message", "m")
	}
	// Trailers-only: no data, status in the only HEADERS.
	c.request(13, true, grpcReq...)
	c.response(13, true, ":status", "200", "content-type", "application/grpc", "grpc-status", "7")
	// An HTTP status without grpc-status (a proxy's 503).
	c.request(15, true, grpcReq...)
	c.response(15, true, ":status", "503", "content-type", "text/plain")
	// :status 200 and no grpc-status at all: OK.
	c.request(17, true, grpcReq...)
	c.response(17, true, ":status", "200", "content-type", "application/grpc")
	got, p := c.run()
	want := []l7.Class{l7.OK, l7.ClientError, l7.ServerError, l7.ClientError, l7.ServerError, l7.ServerError, l7.ClientError, l7.ServerError, l7.OK}
	if len(got) != len(want) {
		t.Fatalf("%d exchanges: %+v", len(got), got)
	}
	for i, x := range got {
		if x.Class != want[i] || x.API != "/pkg.Svc/Get" || !x.HasRequest || !x.HasResponse {
			t.Errorf("%d: %+v, want class %v", i, x, want[i])
		}
	}
	if p.Desyncs() != 0 || p.Undecoded() != 0 {
		t.Errorf("%d desyncs, %d undecoded", p.Desyncs(), p.Undecoded())
	}
}

func TestGRPCClassTable(t *testing.T) {
	client := map[int]bool{1: true, 3: true, 5: true, 6: true, 7: true, 9: true, 11: true, 16: true}
	for code := 0; code <= 17; code++ {
		want := l7.ServerError
		switch {
		case code == 0:
			want = l7.OK
		case client[code]:
			want = l7.ClientError
		}
		if got := GRPCClass(code); got != want {
			t.Errorf("code %d: %v, want %v", code, got, want)
		}
	}
	for status, code := range map[int]int{200: 0, 400: 13, 401: 16, 403: 7, 404: 12, 429: 14, 502: 14, 503: 14, 504: 14, 418: 2} {
		if got := GRPCStatusFromHTTP(status); got != code {
			t.Errorf("HTTP %d: %d, want %d", status, got, code)
		}
	}
	for rst, code := range map[uint32]int{0: 13, 1: 13, 2: 13, 7: 14, 8: 1, 0xb: 8, 0xc: 7} {
		if got := GRPCStatusFromReset(rst); got != code {
			t.Errorf("RST %d: %d, want %d", rst, got, code)
		}
	}
}

func TestResetsAndGoAway(t *testing.T) {
	get := []string{":method", "GET", ":scheme", "http", ":path", "/items/42", ":authority", "a"}
	c := newConn()
	c.preface()
	// 1: the server refuses the stream.
	c.request(1, true, get...)
	c.send(false, func(f *xhttp2.Framer) { _ = f.WriteRSTStream(1, xhttp2.ErrCodeRefusedStream) })
	// 3: the client gives up before any response.
	c.request(3, true, get...)
	c.send(true, func(f *xhttp2.Framer) { _ = f.WriteRSTStream(3, xhttp2.ErrCodeCancel) })
	// 5: a gRPC call the server resets with REFUSED_STREAM (UNAVAILABLE).
	c.request(5, true, grpcReq...)
	c.send(false, func(f *xhttp2.Framer) { _ = f.WriteRSTStream(5, xhttp2.ErrCodeRefusedStream) })
	// 7 and 9 in flight, GOAWAY(last 7): 9 is not processed.
	c.request(7, true, get...)
	c.request(9, true, get...)
	c.send(false, func(f *xhttp2.Framer) { _ = f.WriteGoAway(7, xhttp2.ErrCodeNo, nil) })
	c.response(7, true, ":status", "204")
	got, p := c.run()
	n := func(i int) int { return len(c.chunks[i].Data) }
	want := []l7.Exchange{
		{HasRequest: true, HasResponse: true, Start: 4, End: 5, Class: l7.ServerError, API: "GET /items/{id}", ReqBytes: n(3)},
		{HasRequest: true, Start: 6, API: "GET /items/{id}", ReqBytes: n(5)},
		{HasRequest: true, HasResponse: true, Start: 8, End: 9, Class: l7.ServerError, API: "/pkg.Svc/Get", ReqBytes: n(7)},
		{HasRequest: true, Start: 11, API: "GET /items/{id}", ReqBytes: n(10)},
		{HasRequest: true, HasResponse: true, Start: 10, End: 13, API: "GET /items/{id}", ReqBytes: n(9), RespBytes: 9 + 1},
	}
	diff(t, "resets", got, want)
	if p.Desyncs() != 0 {
		t.Errorf("%d desyncs", p.Desyncs())
	}
}

func TestContinuationPaddingPriority(t *testing.T) {
	c := newConn()
	c.preface()
	blk := c.block(true, ":method", "PUT", ":scheme", "http", ":path", "/files/report-2024.pdf", ":authority", "a", "x-long", strings.Repeat("v", 300))
	c.send(true, func(f *xhttp2.Framer) {
		_ = f.WriteHeaders(xhttp2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:5], PadLength: 7,
			Priority: xhttp2.PriorityParam{StreamDep: 0, Weight: 10}})
		_ = f.WriteContinuation(1, false, blk[5:100])
		_ = f.WriteContinuation(1, true, blk[100:])
		_ = f.WriteDataPadded(1, true, make([]byte, 10), make([]byte, 20))
	})
	rblk := c.block(false, ":status", "103", "link", "</a.css>")
	fblk := c.block(false, ":status", "201")
	c.send(false, func(f *xhttp2.Framer) {
		_ = f.WriteHeaders(xhttp2.HeadersFrameParam{StreamID: 1, BlockFragment: rblk, EndHeaders: true})
		_ = f.WriteHeaders(xhttp2.HeadersFrameParam{StreamID: 1, BlockFragment: fblk, EndHeaders: true, PadLength: 3})
		_ = f.WriteData(1, true, []byte("ok"))
	})
	got, p := c.run()
	reqBytes := 9 + 1 + 5 + 5 + 7 + 9 + 95 + 9 + len(blk) - 100 + 9 + 1 + 10 + 20
	respBytes := 9 + len(rblk) + 9 + 1 + len(fblk) + 3 + 9 + 2
	want := []l7.Exchange{{HasRequest: true, HasResponse: true, Start: 4, End: 5, API: "PUT /files/report-{id}.pdf", ReqBytes: reqBytes, RespBytes: respBytes}}
	diff(t, "continuation", got, want)
	if p.Desyncs() != 0 || p.Undecoded() != 0 {
		t.Errorf("%d desyncs, %d undecoded", p.Desyncs(), p.Undecoded())
	}
}

// TestHPACKAlignment starts mid-connection, where the table holds entries
// the parser never saw: references to them are unknown, and entries
// added after the start are decoded at the right indexes, even when a
// literal names an unknown entry or is too long to keep.
func TestHPACKAlignment(t *testing.T) {
	c := newConn()
	c.preface()
	// Before the capture: the encoders fill their tables.
	c.request(1, true, ":method", "GET", ":scheme", "http", ":path", "/old/path", ":authority", "a", "x-tenant", "acme")
	c.response(1, true, ":status", "200", "x-served-by", "node-1")
	before := len(c.chunks)
	// After: stream 3 refers to old entries (":path /old/path" is
	// unknown), adds x-tenant: beta under that unknown name, and a cookie
	// too long to keep (a 16 KiB table lets the encoder index it; '~' does
	// not shrink with Huffman coding).
	c.encC.SetMaxDynamicTableSizeLimit(MaxTable)
	c.encC.SetMaxDynamicTableSize(MaxTable)
	c.request(3, true, ":method", "GET", ":scheme", "http", ":path", "/old/path", ":authority", "a", "x-tenant", "beta", "cookie", strings.Repeat("~", RepCap+10))
	c.response(3, true, ":status", "200", "x-served-by", "node-2")
	// A new path, added to the table after those two entries...
	c.request(5, true, ":method", "GET", ":scheme", "http", ":path", "/new/path/77", ":authority", "a")
	c.response(5, true, ":status", "404")
	// ... and found again by index.
	c.request(7, true, ":method", "GET", ":scheme", "http", ":path", "/new/path/77", ":authority", "a", "x-tenant", "beta")
	c.response(7, true, ":status", "404", "x-served-by", "node-2")
	p := newVerifying(l7.Client)
	got := l7test.Run(p, c.chunks[before:])
	checkMirror(t, p)
	n := func(i int) int { return len(c.chunks[before+i].Data) }
	want := []l7.Exchange{
		{HasRequest: true, HasResponse: true, Start: 6, End: 7, API: "", ReqBytes: n(0), RespBytes: n(1)},
		{HasRequest: true, HasResponse: true, Start: 8, End: 9, Class: l7.ClientError, API: "GET /new/path/{id}", ReqBytes: n(2), RespBytes: n(3)},
		{HasRequest: true, HasResponse: true, Start: 10, End: 11, Class: l7.ClientError, API: "GET /new/path/{id}", ReqBytes: n(4), RespBytes: n(5)},
	}
	diff(t, "mid-connection", got, want)
	if p.Undecoded() != 1 || p.Desyncs() != 0 {
		t.Errorf("%d undecoded, %d desyncs, want 1, 0", p.Undecoded(), p.Desyncs())
	}
	// The request block really did hold a literal past RepCap.
	if n(0) < RepCap {
		t.Errorf("stream 3's block is %d bytes", n(0))
	}
}

func TestSizeUpdateAndNeverIndexed(t *testing.T) {
	c := newConn()
	c.preface()
	c.encC.SetMaxDynamicTableSizeLimit(64 << 10)
	c.encC.SetMaxDynamicTableSize(64 << 10) // past MaxTable: clamped by the parser
	blk := c.block(true, ":method", "GET", ":scheme", "http", ":authority", "a")
	// :path as a never-indexed literal (x/net Huffman-codes it).
	var b bytes.Buffer
	e := hpack.NewEncoder(&b)
	_ = e.WriteField(hpack.HeaderField{Name: ":path", Value: "/secret/9f86d081884c7d65", Sensitive: true})
	blk = append(blk, b.Bytes()...)
	c.send(true, func(f *xhttp2.Framer) {
		_ = f.WriteHeaders(xhttp2.HeadersFrameParam{StreamID: 1, BlockFragment: blk, EndStream: true, EndHeaders: true})
	})
	c.response(1, true, ":status", "500")
	got, p := c.run()
	if len(got) != 1 || got[0].API != "GET /secret/{id}" || got[0].Class != l7.ServerError {
		t.Errorf("%+v", got)
	}
	if p.c.hp.tableMax != MaxTable || p.Undecoded() != 0 {
		t.Errorf("table %d, %d undecoded", p.c.hp.tableMax, p.Undecoded())
	}
}

func TestEviction(t *testing.T) {
	c := newConn()
	c.preface()
	for i := 0; i < MaxStreams+2; i++ {
		c.request(uint32(2*i+1), true, ":method", "GET", ":scheme", "http", ":path", "/w", ":authority", "a")
	}
	got, p := c.run()
	if len(got) != MaxStreams+2 || p.Desyncs() != 2 {
		t.Fatalf("%d exchanges, %d desyncs", len(got), p.Desyncs())
	}
	for i, x := range got {
		if !x.HasRequest || x.HasResponse || x.Start != uint64(4+i) {
			t.Errorf("%d: %+v", i, x)
		}
	}
}

// TestNeverMisattributes starts the parser at every point of every
// fixture, whole and truncated: what it decodes must agree with the whole
// run (an API or an error class it reports is the real one), and what it
// cannot decode is counted.
func TestNeverMisattributes(t *testing.T) {
	for _, f := range fixtures {
		if f.upgrade {
			continue
		}
		segs := l7test.Load(t, filepath.Join("testdata", f.file))
		for _, role := range []l7.Role{l7.Client, l7.Server} {
			neverMisattributes(t, f.file, l7test.Chunks(segs, role, ts0, step), role)
		}
	}
}

func neverMisattributes(t *testing.T, file string, chunks []l7.Chunk, role l7.Role) {
	{
		f := fixture{file: file}
		whole, _, _ := runFixture(chunks, role, false)
		byStart, byEnd := map[uint64]l7.Exchange{}, map[uint64][]l7.Exchange{}
		for _, x := range whole {
			byStart[x.Start] = x
			byEnd[x.End] = append(byEnd[x.End], x)
		}
		for from := 1; from < len(chunks); from++ {
			for _, size := range []int{0, 64, 256} {
				cs := chunks[from:]
				if size > 0 {
					cs = l7test.Truncate(cs, size)
				}
				got, _, undecoded := runFixture(cs, role, false)
				for _, x := range got {
					var ref l7.Exchange
					var ok bool
					if x.HasRequest {
						ref, ok = byStart[x.Start]
					} else if len(byEnd[x.End]) == 1 {
						ref, ok = byEnd[x.End][0], true
					}
					if !ok {
						if x.HasRequest {
							t.Errorf("%s from %d (capture %d): an exchange the whole run lacks: %+v", f.file, from, size, x)
						}
						continue
					}
					if x.API != "" && x.API != ref.API {
						t.Errorf("%s from %d (capture %d): API %q, really %q", f.file, from, size, x.API, ref.API)
					}
					if x.HasResponse && ref.HasResponse && x.End == ref.End && x.Class != ref.Class && (x.Class != l7.OK || undecoded == 0) {
						t.Errorf("%s from %d (capture %d): class %v, really %v (%d undecoded)", f.file, from, size, x.Class, ref.Class, undecoded)
					}
				}
			}
		}
	}
}

func TestDetect(t *testing.T) {
	if !Detect([]byte(Preface)) || !Detect([]byte(Preface+"\x00\x00\x00\x04")) || !Detect([]byte("PRI * HTTP/2.0")) {
		t.Error("preface not detected")
	}
	for _, s := range []string{"", "PRI", "PRI * HTTP/2.", "PRI * HTTP/2.0\r\n\r\nXX", "GET / HTTP/1.1\r\n", "PRI * HTTP/1.1\r\n"} {
		if Detect([]byte(s)) {
			t.Errorf("%q detected", s)
		}
	}
	others := [][]byte{
		[]byte("*1\r\n$4\r\nPING\r\n"), {0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f}, []byte("get k\r\n"),
		{0x55, 0, 0, 1, 0x8d, 0xa6, 0xff, 0x09}, {0, 0, 0, 0x1c, 0, 0x12, 0, 3}, {0x3a, 0, 0, 0, 1, 0, 0, 0},
		{0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}, {0x16, 3, 1, 0, 0xc8, 1},
	}
	for _, b := range others {
		if Detect(b) {
			t.Errorf("%q detected", b)
		}
	}
	for _, f := range fixtures {
		segs := l7test.Load(t, filepath.Join("testdata", f.file))
		if Detect(segs[0].Data) == f.upgrade {
			t.Errorf("%s: Detect %v on %q", f.file, !f.upgrade, segs[0].Data[:14])
		}
	}
	files, _ := filepath.Glob(filepath.Join("..", "http", "testdata", "*.chunks"))
	if len(files) == 0 {
		t.Fatal("no http fixtures")
	}
	for _, file := range files {
		for _, s := range l7test.Load(t, file) {
			if s.FromClient && Detect(s.Data) {
				t.Errorf("%s: HTTP/1 bytes detected as HTTP/2: %q", file, s.Data[:min(len(s.Data), 24)])
			}
		}
	}
}

func TestResponseStatus(t *testing.T) {
	frame := func(flags byte, payload ...byte) []byte {
		return append([]byte{0, 0, byte(len(payload)), frameHeaders, flags, 0, 0, 0, 1}, payload...)
	}
	var lit bytes.Buffer
	e := hpack.NewEncoder(&lit)
	_ = e.WriteField(hpack.HeaderField{Name: ":status", Value: "503"}) // Huffman-coded literal
	cases := []struct {
		frame  []byte
		status int
		ok     bool
	}{
		{frame(flagEndHeaders, 0x88), 200, true},
		{frame(flagEndHeaders, 0x8d, 0x5f), 404, true},
		{frame(flagEndHeaders, 0x3f, 0xe1, 0x1f, 0x8e), 500, true},                 // after a size update
		{frame(flagEndHeaders|flagPadded, 2, 0x8b, 0, 0), 304, true},               // padded
		{frame(flagEndHeaders|flagPriority, 0, 0, 0, 3, 9, 0x89), 204, true},       // priority
		{frame(flagEndHeaders, 0x08, 0x03, '4', '2', '9'), 429, true},              // literal without indexing
		{frame(flagEndHeaders, append([]byte(nil), lit.Bytes()...)...), 503, true}, // literal, Huffman
		{frame(flagEndHeaders, 0xbe), 0, false},                                    // dynamic table entry
		{frame(flagEndHeaders, 0x82), 0, false},                                    // :method, not :status
		{append([]byte{0, 0, 1, frameData, 0, 0, 0, 0, 1}, 0x88), 0, false},
		{frame(flagEndHeaders, 0x48, 0x03, '2'), 0, false}, // cut short
	}
	for i, c := range cases {
		s, ok := ResponseStatus(c.frame)
		if s != c.status || ok != c.ok {
			t.Errorf("%d (% x): %d %v, want %d %v", i, c.frame, s, ok, c.status, c.ok)
		}
	}
	// Every response HEADERS of the fixtures whose status the parser
	// decoded from static or literal fields agrees.
	n := 0
	for _, f := range fixtures {
		segs := l7test.Load(t, filepath.Join("testdata", f.file))
		for _, s := range segs {
			if s.FromClient {
				continue
			}
			for b := s.Data; len(b) >= 9; {
				l := int(b[0])<<16 | int(b[1])<<8 | int(b[2])
				if 9+l > len(b) {
					break
				}
				if st, ok := ResponseStatus(b[:9+l]); ok {
					if st != 200 && st != 201 && st != 404 && st != 500 {
						t.Errorf("%s: status %d", f.file, st)
					}
					n++
				}
				b = b[9+l:]
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d statuses read from the fixtures", n)
	}
}

// TestHPACKChurn fills both tables far past their size, with fields that
// stay (referenced by index) and fields that change every time (added,
// later evicted), and shrinks and grows the client's table on the way:
// every field the parser resolves from its mirror must be what the
// Decoder says, and every exchange decoded.
func TestHPACKChurn(t *testing.T) {
	c := newConn()
	c.preface()
	const n = 400
	for i := 0; i < n; i++ {
		id := uint32(2*i + 1)
		switch i {
		case 150:
			c.encC.SetMaxDynamicTableSize(700)
		case 250:
			c.encC.SetMaxDynamicTableSize(4096)
		}
		c.request(id, true, ":method", "GET", ":scheme", "http", ":path", fmt.Sprintf("/items/%d", i*7919%1000),
			":authority", "svc", "x-request-id", fmt.Sprintf("req-%08x", i*2654435761), "x-tenant", "acme")
		status := []string{"200", "404", "503", "429"}[i%4]
		c.response(id, true, ":status", status, "x-trace", fmt.Sprintf("t%d", i), "content-type", "application/json")
	}
	got, p := c.run()
	if len(got) != n || p.Undecoded() != 0 || p.Desyncs() != 0 {
		t.Fatalf("%d exchanges, %d undecoded, %d desyncs", len(got), p.Undecoded(), p.Desyncs())
	}
	for i, x := range got {
		want := []l7.Class{l7.OK, l7.ClientError, l7.ServerError, l7.ClientError}[i%4]
		if x.API != "GET /items/{id}" || x.Class != want {
			t.Errorf("%d: %+v", i, x)
		}
	}
	if p.c.hp.len == 0 || p.c.hp.size > p.c.hp.tableMax || p.s.hp.size > p.s.hp.tableMax {
		t.Errorf("tables: client %d entries %d bytes of %d, server %d bytes of %d",
			p.c.hp.len, p.c.hp.size, p.c.hp.tableMax, p.s.hp.size, p.s.hp.tableMax)
	}
}
