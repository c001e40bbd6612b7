package http2

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/http"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// Segment i of a fixture is fed with TS ts0 + i*step (l7test.Chunks).
const ts0, step = 1000, 1000

// wantX is an expected exchange: the segments (and offsets in them) of
// the request's and the final response's first frames (segment -1: that
// half is missing).
type wantX struct {
	api                 string
	class               l7.Class
	req, resp           int
	reqBytes, respBytes int
	reqOff, respOff     int
}

func x(api string, class l7.Class, req, resp, reqBytes, respBytes int) wantX {
	return wantX{api: api, class: class, req: req, resp: resp, reqBytes: reqBytes, respBytes: respBytes}
}

// at sets where in their segments the request and the response begin.
func (w wantX) at(reqOff, respOff int) wantX {
	w.reqOff, w.respOff = reqOff, respOff
	return w
}

func (w wantX) exchange(chunks []l7.Chunk, split int) l7.Exchange {
	x := l7.Exchange{Class: w.class, API: w.api, ReqBytes: w.reqBytes, RespBytes: w.respBytes}
	if w.req >= 0 {
		x.HasRequest, x.Start = true, resplitTS(chunks, w.req, w.reqOff, split)
	}
	if w.resp >= 0 {
		x.HasResponse, x.End = true, resplitTS(chunks, w.resp, w.respOff, split)
	}
	return x
}

// resplitTS is the TS of the chunk holding byte off of chunk i once the
// chunks are re-split every n bytes (0: not re-split).
func resplitTS(chunks []l7.Chunk, i, off, n int) uint64 {
	if n == 0 {
		return chunks[i].TS
	}
	r := i
	for r > 0 && chunks[r-1].Dir == chunks[i].Dir {
		r--
	}
	pos := off
	for j := r; j < i; j++ {
		pos += len(chunks[j].Data)
	}
	cut := pos / n * n
	for j := r; ; j++ {
		if cut < len(chunks[j].Data) {
			return chunks[j].TS
		}
		cut -= len(chunks[j].Data)
	}
}

type truncWant struct {
	desyncs, undecoded uint64
	exact              bool
	list               []wantX
}

type fixture struct {
	file      string
	upgrade   bool // starts as HTTP/1.1 with Upgrade: h2c
	want      []wantX
	truncated map[int]truncWant
}

var fixtures = []fixture{
	{
		file: "h2c_go.chunks",
		want: []wantX{
			x("GET /users/{id}", l7.OK, 2, 3, 53, 93),
			x("POST /orders", l7.OK, 4, 5, 20039, 33).at(0, 26),
			x("GET /big", l7.OK, 6, 7, 19, 40102),
			x("GET /missing", l7.ClientError, 8, 9, 22, 68).at(130, 0),
			x("GET /fail", l7.ServerError, 10, 11, 20, 30),
			x("HEAD /users/{id}", l7.OK, 12, 13, 19, 13),
			x("GET /users/{id}", l7.OK, 15, 16, 30, 48), // answered before /slow
			x("GET /slow", l7.OK, 14, 17, 20, 27),
		},
		truncated: map[int]truncWant{
			64: {desyncs: 4, undecoded: 2, list: []wantX{
				// The capture of stream 1's response ends inside the next
				// frame's header: the response comes out with what was seen.
				x("GET /users/{id}", l7.OK, 2, 3, 53, 58),
				// DATA payloads cut short are stepped over by their lengths.
				x("POST /orders", l7.OK, 4, 5, 20039, 33).at(0, 26),
				// /big's 40102 bytes in one write: only its first DATA frame
				// is seen.
				x("GET /big", l7.OK, 6, 7, 19, 4117),
				// Ten WINDOW_UPDATEs then /missing's HEADERS in one write:
				// the request is hidden, its response comes out alone
				// (undecoded: its content-type is an unknown entry, so it
				// might be gRPC, whose 404 would be UNIMPLEMENTED).
				x("", l7.ClientError, -1, 9, 0, 68),
				x("GET /fail", l7.ServerError, 10, 11, 20, 30),
				// The client's HPACK table was cleared at that desync: the
				// HEAD request's :path is a reference to an entry added
				// before it.
				x("", l7.OK, 12, 13, 19, 13),
				x("GET /users/{id}", l7.OK, 15, 16, 30, 48),
				x("GET /slow", l7.OK, 14, 17, 20, 27),
			}},
			256:  {desyncs: 1, list: bigCut},
			4096: {desyncs: 1, list: bigCut},
		},
	},
	{
		file:    "h2c_upgrade_curl.chunks",
		upgrade: true,
		want: []wantX{
			x("GET /users/{id}", l7.OK, 0, 3, 180, 93).at(0, 13), // the upgrade request, answered on stream 1
			x("GET /missing", l7.ClientError, 4, 5, 50, 68),
		},
		truncated: map[int]truncWant{
			// Neither the request's nor the 101's Upgrade: h2c header is
			// within 64 bytes: HTTP/1 ends with a switch to an unknown
			// protocol, the 101 taken to fill its chunk.
			64: {desyncs: 2, list: []wantX{
				x("GET /users/{id}", l7.OK, 0, 1, 180, 116),
			}},
			256:  {exact: true},
			4096: {exact: true},
		},
	},
	{
		file: "grpc.chunks",
		want: []wantX{
			x("/grpc.health.v1.Health/Check", l7.OK, 3, 5, 123, 72).at(9, 30),
			x("/grpc.health.v1.Health/Check", l7.ClientError, 6, 7, 44, 29).at(47, 47), // NOT_FOUND
			x("/galago.test.Echo/Unary", l7.OK, 8, 9, 78, 62).at(17, 30),
			x("/galago.test.Echo/Unary", l7.ClientError, 10, 11, 41, 25).at(47, 47), // INVALID_ARGUMENT
			x("/galago.test.Echo/Unary", l7.ServerError, 12, 13, 42, 22).at(17, 30), // INTERNAL
			x("/galago.test.Echo/Stream", l7.OK, 14, 15, 100, 85).at(17, 30),
			x("/grpc.health.v1.Health/Watch", l7.ClientError, 22, 23, 68, 27).at(17, 30), // CANCELLED by the client
			x("/galago.test.Echo/Unary", l7.OK, 24, 25, 42, 45).at(60, 47),
		},
		truncated: map[int]truncWant{
			// At 64 bytes most of gRPC's writes (pings, window updates,
			// then a frame) are cut inside a frame header or a header
			// block: 6 desyncs of the client's frames, 3 of the server's.
			// Each lost block clears that direction's HPACK table, and
			// Go's encoder then refers to content-type, grpc-status, ...
			// by index to entries added before: a request's gRPC-ness is
			// known only when its response shows it (the first and third
			// calls), otherwise its API is not decoded, and the outcomes
			// degrade to OK - each such exchange counted in Undecoded,
			// none given a guessed API or outcome.
			64: {desyncs: 9, undecoded: 8, list: []wantX{
				x("/grpc.health.v1.Health/Check", l7.OK, 3, 5, 123, 39).at(9, 30),
				x("", l7.OK, 6, 7, 24, 29).at(47, 47),
				x("/galago.test.Echo/Unary", l7.OK, 8, 9, 59, 27).at(17, 30),
				x("", l7.OK, 10, 11, 24, 25).at(47, 47),
				x("", l7.OK, 12, 13, 42, 22).at(17, 30),
				x("", l7.OK, 14, 15, 84, 85).at(17, 30),
				x("", l7.OK, 22, 23, 46, 27).at(17, 30),
				// The last call's HEADERS frame header is cut: its
				// response comes out alone.
				x("", l7.OK, -1, 25, 0, 11).at(0, 47),
			}},
			256:  {exact: true},
			4096: {exact: true},
		},
	},
}

// bigCut is h2c_go at 256 and 4096 bytes: /big's 40102-byte write shows
// its first DATA frame only, the rest is exact.
var bigCut = []wantX{
	x("GET /users/{id}", l7.OK, 2, 3, 53, 93),
	x("POST /orders", l7.OK, 4, 5, 20039, 33).at(0, 26),
	x("GET /big", l7.OK, 6, 7, 19, 4117),
	x("GET /missing", l7.ClientError, 8, 9, 22, 68).at(130, 0),
	x("GET /fail", l7.ServerError, 10, 11, 20, 30),
	x("HEAD /users/{id}", l7.OK, 12, 13, 19, 13),
	x("GET /users/{id}", l7.OK, 15, 16, 30, 48),
	x("GET /slow", l7.OK, 14, 17, 20, 27),
}

// runFixture feeds chunks to a parser for role, handing an h2c upgrade
// over from HTTP/1 as the l7 probe does. It returns the exchanges and the
// parsers' desync and undecoded counts.
// The parsers verify their HPACK mirror; a disagreement panics.
func runFixture(chunks []l7.Chunk, role l7.Role, upgrade bool) ([]l7.Exchange, uint64, uint64) {
	var out []l7.Exchange
	var h1desyncs uint64
	if upgrade {
		h1 := http.NewParser(role)
		for i, c := range chunks {
			out = h1.Feed(c, out)
			if up, ok := h1.Upgrade(); ok {
				h1desyncs = h1.Desyncs()
				if up.Protocol != l7.HTTP2 {
					return out, h1desyncs, 0
				}
				p := NewUpgradedParser(role, up.Start, up.API, up.ReqBytes)
				p.verify()
				out = p.Feed(up.Rest(c), out)
				for _, c := range chunks[i+1:] {
					out = p.Feed(c, out)
				}
				out = p.Flush(out)
				mustAgree(p)
				return out, h1desyncs + p.Desyncs(), p.Undecoded()
			}
		}
		return h1.Flush(out), h1.Desyncs(), 0
	}
	p := newVerifying(role)
	out = l7test.Run(p, chunks)
	mustAgree(p)
	return out, p.Desyncs(), p.Undecoded()
}

func mustAgree(p *Parser) {
	if n := p.mismatches(); n != 0 {
		panic(fmt.Sprintf("the HPACK mirror disagreed with the Decoder %d times", n))
	}
}

func TestFixtures(t *testing.T) {
	for _, f := range fixtures {
		segs := l7test.Load(t, filepath.Join("testdata", f.file))
		for _, role := range []l7.Role{l7.Client, l7.Server} {
			t.Run(fmt.Sprintf("%s/%s", f.file, role), func(t *testing.T) {
				chunks := l7test.Chunks(segs, role, ts0, step)
				expect := func(ws []wantX, split int) []l7.Exchange {
					var xs []l7.Exchange
					for _, w := range ws {
						xs = append(xs, w.exchange(chunks, split))
					}
					return xs
				}
				got, desyncs, undecoded := runFixture(chunks, role, f.upgrade)
				if desyncs != 0 || undecoded != 0 {
					t.Errorf("whole: %d desyncs, %d undecoded", desyncs, undecoded)
				}
				diff(t, "whole", got, expect(f.want, 0))
				for _, n := range []int{1, 2, 7, 64} {
					got, desyncs, undecoded := runFixture(l7test.Resplit(chunks, n), role, f.upgrade)
					if desyncs != 0 || undecoded != 0 {
						t.Errorf("resplit %d: %d desyncs, %d undecoded", n, desyncs, undecoded)
					}
					diff(t, fmt.Sprintf("resplit %d", n), got, expect(f.want, n))
				}
				for _, size := range []int{64, 256, 4096} {
					tw, ok := f.truncated[size]
					if !ok {
						t.Fatalf("no expectation for capture size %d", size)
					}
					got, desyncs, undecoded := runFixture(l7test.Truncate(chunks, size), role, f.upgrade)
					if desyncs != tw.desyncs || undecoded != tw.undecoded {
						t.Errorf("capture %d: %d desyncs, %d undecoded, want %d, %d", size, desyncs, undecoded, tw.desyncs, tw.undecoded)
					}
					want := tw.list
					if tw.exact {
						want = f.want
					}
					diff(t, fmt.Sprintf("capture %d", size), got, expect(want, 0))
				}
			})
		}
	}
}

// diff compares exchanges but for their numeric statuses, which
// TestStatuses checks.
func diff(t *testing.T, what string, got, want []l7.Exchange) {
	t.Helper()
	got, want = l7test.WithoutStatus(got), l7test.WithoutStatus(want)
	if reflect.DeepEqual(got, want) {
		return
	}
	var b strings.Builder
	for i := 0; i < max(len(got), len(want)); i++ {
		var g, w string
		if i < len(got) {
			g = fmt.Sprintf("%+v", got[i])
		}
		if i < len(want) {
			w = fmt.Sprintf("%+v", want[i])
		}
		mark := "  "
		if g != w {
			mark = "! "
		}
		fmt.Fprintf(&b, "%sgot  %s\n%swant %s\n", mark, g, mark, w)
	}
	t.Errorf("%s: exchanges differ:\n%s", what, b.String())
}
