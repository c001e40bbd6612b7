package http

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// Segment i of a fixture is fed with TS ts0 + i*step (l7test.Chunks).
const ts0, step = 1000, 1000

// wantX is an expected exchange: the segments (and offsets in them) of
// the request's and the final response's first bytes (segment -1: that
// half is missing).
type wantX struct {
	api                 string
	class               l7.Class
	req, resp           int
	reqBytes, respBytes int
	reqOff, respOff     int
}

// at sets where in their segments the request and the response begin.
func (w wantX) at(reqOff, respOff int) wantX {
	w.reqOff, w.respOff = reqOff, respOff
	return w
}

// exchange is w as fed in whole segments (split 0) or re-split every
// split bytes, where a chunk's TS is that of its first byte's segment.
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
// chunks are re-split every n bytes (l7test.Resplit): the TS of the chunk
// the re-cut chunk's first byte came from.
func resplitTS(chunks []l7.Chunk, i, off, n int) uint64 {
	if n == 0 {
		return chunks[i].TS
	}
	r := i // first chunk of i's run of one direction
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

func x(api string, class l7.Class, req, resp, reqBytes, respBytes int) wantX {
	return wantX{api: api, class: class, req: req, resp: resp, reqBytes: reqBytes, respBytes: respBytes}
}

type fixture struct {
	file string
	want []wantX
	// up is the protocol switch the connection ends with, if any.
	up *Upgrade
	// truncated: per capture size, the Desyncs a capture of that size
	// costs and whether the exchanges still equal want exactly.
	truncated map[int]truncWant
}

type truncWant struct {
	desyncs uint64
	exact   bool    // the exchanges are want's
	list    []wantX // otherwise these
}

var fixtures = []fixture{
	{
		file: "nginx_curl.chunks",
		want: []wantX{
			x("GET /index.html", l7.OK, 0, 1, 89, 269),
			x("GET /api/users/{id}/orders", l7.OK, 2, 3, 105, 150),
			x("HEAD /index.html", l7.OK, 4, 5, 90, 236),
			x("GET /big.txt", l7.OK, 6, 7, 128, 23796),
			x("GET /missing/{id}", l7.ClientError, 8, 9, 103, 308),
			x("POST /api/users/{id}", l7.OK, 10, 11, 211, 150),
			x("GET /err", l7.ServerError, 12, 13, 82, 339),
		},
		// Every request and response is written with one call: a gap that
		// hides a header end is taken as the message's end, which is right
		// here, and each such guess is counted.
		truncated: map[int]truncWant{
			64: {desyncs: 14, exact: true},
			// big.txt's last chunk is in the gap: its response is counted
			// and the next message resumes parsing, so no desync.
			256:  {desyncs: 0, exact: true},
			4096: {desyncs: 0, exact: true},
		},
	},
	{
		file: "nginx_go.chunks",
		want: []wantX{
			x("GET /index.html", l7.OK, 0, 1, 106, 305),
			x("GET /big.txt", l7.OK, 2, 3, 103, 23796),
			x("HEAD /big.txt", l7.OK, 4, 5, 81, 243),
			x("GET /api/orders/{id}/items/{id}", l7.OK, 6, 7, 130, 214),
			x("POST /api/orders", l7.OK, 8, 9, 152, 214),
			x("DELETE /api/orders/{id}", l7.OK, 10, 11, 116, 214),
			x("GET /nope.html", l7.ClientError, 12, 13, 105, 311),
			x("GET /err", l7.ServerError, 14, 15, 99, 339),
		},
		truncated: map[int]truncWant{
			64:   {desyncs: 16, exact: true},
			256:  {desyncs: 0, exact: true}, // gaps only in chunked bodies
			4096: {desyncs: 0, exact: true},
		},
	},
	{
		file: "go_pipelined.chunks",
		want: []wantX{
			x("GET /a", l7.OK, 0, 1, 28, 118),
			x("HEAD /users/{id}", l7.OK, 0, 1, 38, 117).at(28, 118),
			x("POST /echo", l7.OK, 0, 1, 63, 128).at(66, 235),
			x("GET /status/{id}", l7.ClientError, 0, 1, 37, 176).at(129, 363),
			x("GET /status/{id}", l7.ServerError, 0, 1, 45, 173).at(166, 539),
			x("POST /echo", l7.OK, 2, 3, 113, 128),
			x("GET /stream", l7.OK, 2, 4, 33, 196).at(113, 0),
			x("DELETE /users/{id}", l7.OK, 2, 7, 40, 64).at(146, 17),
			x("GET /cached", l7.OK, 2, 7, 54, 78).at(186, 81),
			x("PUT /upload/{id}", l7.OK, 8, 11, 84, 25+129),      // 100 Continue, then 201
			x("GET /hints", l7.OK, 12, 13, 32, 71+166).at(0, 71), // 103 Early Hints, then 200
			x("GET /a", l7.OK, 14, 15, 47, 137),
		},
		truncated: map[int]truncWant{
			// Pipelined batches hide whole requests and responses in the
			// gaps: what is lost is said so, and the requests in flight
			// at a response-side desync come out without a response
			// rather than shift the pairing of every later exchange.
			64: {desyncs: 9, list: []wantX{
				// Batch 1: GET /a whole, HEAD's headers cut (taken as
				// ended), POST, 404 and 500 hidden; GET /a's response is
				// cut and taken to fill the chunk; HEAD is abandoned.
				x("GET /a", l7.OK, 0, 1, 28, 712),
				x("HEAD /users/{id}", l7.OK, 0, -1, 183, 0).at(28, 0),
				// Batch 2: only its first request and response are seen.
				x("POST /echo", l7.OK, 2, 3, 240, 128),
				// /stream's response, its request hidden; its chunks and
				// the 204 and 304 after are skipped.
				x("", l7.OK, -1, 4, 0, 155),
				x("PUT /upload/{id}", l7.OK, 8, 11, 76, 25+129),
				// The 103's end is cut, the 200 after it hidden: /hints
				// is abandoned, and the last GET /a is paired right.
				x("GET /hints", l7.OK, 12, -1, 32, 0),
				x("GET /a", l7.OK, 14, 15, 47, 137),
			}},
			256: {desyncs: 1, list: []wantX{
				x("GET /a", l7.OK, 0, 1, 28, 118),
				x("HEAD /users/{id}", l7.OK, 0, 1, 38, 117).at(28, 118),
				// The third response's headers are cut at 256 bytes: it
				// is taken to fill the chunk, the 404 and 500 responses
				// in the gap are lost and their requests abandoned.
				x("POST /echo", l7.OK, 0, 1, 63, 712-235).at(66, 235),
				x("GET /status/{id}", l7.OK, 0, -1, 37, 0).at(129, 0),
				x("GET /status/{id}", l7.OK, 0, -1, 45, 0).at(166, 0),
				x("POST /echo", l7.OK, 2, 3, 113, 128),
				x("GET /stream", l7.OK, 2, 4, 33, 196).at(113, 0),
				x("DELETE /users/{id}", l7.OK, 2, 7, 40, 64).at(146, 17),
				x("GET /cached", l7.OK, 2, 7, 54, 78).at(186, 81),
				x("PUT /upload/{id}", l7.OK, 8, 11, 84, 25+129),
				x("GET /hints", l7.OK, 12, 13, 32, 71+166).at(0, 71),
				x("GET /a", l7.OK, 14, 15, 47, 137),
			}},
			4096: {desyncs: 0, exact: true},
		},
	},
	{
		file: "go_http10.chunks",
		want: []wantX{
			x("GET /stream", l7.OK, 0, 1, 33, 136), // close-delimited: out at Flush
		},
		truncated: map[int]truncWant{
			64:   {desyncs: 1, exact: true},
			256:  {desyncs: 0, exact: true},
			4096: {desyncs: 0, exact: true},
		},
	},
	{
		file: "go_websocket.chunks",
		want: []wantX{
			x("GET /a", l7.OK, 0, 1, 28, 118),
			x("GET /ws", l7.OK, 2, 3, 142, 129),
		},
		up: &Upgrade{Protocol: l7.Unknown, Offset: 129},
		truncated: map[int]truncWant{
			// Both messages of GET /a and the upgrade request are cut;
			// the 101's end is too, and it still ends HTTP/1.
			64:   {desyncs: 3, exact: true},
			256:  {desyncs: 0, exact: true},
			4096: {desyncs: 0, exact: true},
		},
	},
	{
		file: "go_connect.chunks",
		want: []wantX{
			x("CONNECT", l7.OK, 0, 1, 61, 39),
		},
		up: &Upgrade{Protocol: l7.Unknown, Offset: 39},
		truncated: map[int]truncWant{
			64:   {desyncs: 0, exact: true},
			256:  {desyncs: 0, exact: true},
			4096: {desyncs: 0, exact: true},
		},
	},
}

func loadFixture(t testing.TB, name string) []l7test.Segment {
	return l7test.Load(t, filepath.Join("testdata", name))
}

func run(chunks []l7.Chunk, role l7.Role) ([]l7.Exchange, *Parser) {
	p := NewParser(role)
	return l7test.Run(p, chunks), p
}

func TestFixtures(t *testing.T) {
	for _, f := range fixtures {
		segs := loadFixture(t, f.file)
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
				got, p := run(chunks, role)
				if p.Desyncs() != 0 {
					t.Errorf("whole: %d desyncs", p.Desyncs())
				}
				diff(t, "whole", got, expect(f.want, 0))
				checkUpgrade(t, p, f.up, role, true)
				for _, n := range []int{1, 2, 7, 64} {
					got, p := run(l7test.Resplit(chunks, n), role)
					if p.Desyncs() != 0 {
						t.Errorf("resplit %d: %d desyncs", n, p.Desyncs())
					}
					diff(t, fmt.Sprintf("resplit %d", n), got, expect(f.want, n))
					checkUpgrade(t, p, f.up, role, false)
				}
				for _, size := range []int{64, 256, 4096} {
					tw, ok := f.truncated[size]
					if !ok {
						t.Fatalf("no expectation for capture size %d", size)
					}
					got, p := run(l7test.Truncate(chunks, size), role)
					if p.Desyncs() != tw.desyncs {
						t.Errorf("capture %d: %d desyncs, want %d", size, p.Desyncs(), tw.desyncs)
					}
					want := tw.list
					if tw.exact {
						want = f.want
					}
					diff(t, fmt.Sprintf("capture %d", size), got, expect(want, 0))
					checkUpgrade(t, p, f.up, role, false)
				}
			})
		}
	}
}

func checkUpgrade(t *testing.T, p *Parser, want *Upgrade, role l7.Role, offset bool) {
	t.Helper()
	up, ok := p.Upgrade()
	if want == nil {
		if ok {
			t.Errorf("unexpected upgrade %+v", up)
		}
		return
	}
	w := *want
	w.Dir = l7.Ingress
	if role == l7.Server {
		w.Dir = l7.Egress
	}
	if !ok || up.Protocol != w.Protocol || up.Dir != w.Dir || offset && up.Offset != w.Offset {
		t.Errorf("upgrade %+v (%v), want %+v", up, ok, w)
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
