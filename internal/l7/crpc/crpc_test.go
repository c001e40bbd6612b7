package crpc

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

const fixture = "testdata/synthetic.chunks"

// want is what the fixture's client and server did (record_test.go).
func want() []string {
	size := func(req bool, hb bool, id string, body string) int { return len(frame(req, hb, 0, id, []byte(body))) }
	resp := func(id string) int { return size(false, false, id, "opaque body: serialized result of "+id) }
	var w []string
	for i := range 3 {
		id := fmt.Sprintf("call-%d", i)
		w = append(w, fmt.Sprintf("true/true %q %d/%d", "", size(true, false, id, fmt.Sprintf("opaque body: serialized call %d", i)), resp(id)))
	}
	w = append(w, fmt.Sprintf("true/true %q %d/%d", "heartbeat", size(true, true, "hb-1", ""), size(false, true, "hb-1", "opaque body: serialized result of hb-1")))
	for i := 4; i >= 1; i-- { // answered last first
		id := fmt.Sprintf("pipe-%d", i)
		w = append(w, fmt.Sprintf("true/true %q %d/%d", "", size(true, false, id, `{"opaque":"json body"}`), resp(id)))
	}
	w = append(w, fmt.Sprintf("true/true %q %d/%d", "", size(true, false, "big", string(bytes.Repeat([]byte("opaque body: a large serialized argument. "), 5000))), resp("big")))
	w = append(w, fmt.Sprintf("true/false %q %d/0", "", size(true, false, "unanswered", "opaque body: a call the server never answers")))
	return w
}

func summary(t *testing.T, ex []l7.Exchange) []string {
	var s []string
	for _, e := range ex {
		if e.Class != l7.OK {
			t.Errorf("class %s", e.Class)
		}
		if e.HasResponse && e.End <= e.Start {
			t.Errorf("latency %d->%d", e.Start, e.End)
		}
		s = append(s, fmt.Sprintf("%v/%v %q %d/%d", e.HasRequest, e.HasResponse, e.API, e.ReqBytes, e.RespBytes))
	}
	return s
}

func TestFixture(t *testing.T) {
	segs := l7test.Load(t, fixture)
	for _, role := range []l7.Role{l7.Client, l7.Server} {
		chunks := l7test.Chunks(segs, role, 1000, 1000)
		whole := l7test.Run(NewParser(role), chunks)
		if got := summary(t, whole); !reflect.DeepEqual(got, want()) {
			t.Fatalf("as %s:\n%q\nwant\n%q", role, got, want())
		}
		for _, n := range []int{1, 2, 7, 64} {
			p := NewParser(role)
			got := l7test.Run(p, l7test.Resplit(chunks, n))
			if !reflect.DeepEqual(got, whole) || p.Desyncs() != 0 {
				t.Errorf("as %s split %d: %+v", role, n, got)
			}
		}
		for _, n := range []int{64, 256, 4096} {
			p := NewParser(role)
			got := l7test.Run(p, l7test.Truncate(chunks, n))
			if p.Desyncs() == 0 && !reflect.DeepEqual(got, whole) {
				t.Errorf("as %s cap %d: %+v", role, n, got)
			}
			// the 4 pipelined calls share one read: a capture shorter
			// than it hides their boundaries, and those requests are lost
			// (their responses come out alone)
			if p.Desyncs() != 0 && (n >= 4096 || requests(got) >= requests(whole)) {
				t.Errorf("as %s cap %d: %d desyncs, %d requests", role, n, p.Desyncs(), requests(got))
			}
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

func TestHeaderChecks(t *testing.T) {
	good := frame(true, false, 0, "x", []byte("body"))
	if !Detect(good) || !Detect(good[:12]) {
		t.Fatal("request not detected")
	}
	for name, mut := range map[string]func(b []byte){
		"response":       func(b []byte) { b[9] &^= rqFlag },
		"flag":           func(b []byte) { b[1] = 0x18 },
		"version 3":      func(b []byte) { b[8] = 3 },
		"format 3":       func(b []byte) { b[9] |= 3 << 2 },
		"head too short": func(b []byte) { b[6], b[7] = 0, 90 },
		"head past end":  func(b []byte) { b[2], b[3], b[4], b[5] = 0, 0, 0, 90 },
	} {
		b := bytes.Clone(good)
		mut(b)
		if Detect(b) {
			t.Errorf("%s detected", name)
		}
	}
	for name, b := range otherProtocols {
		if Detect(b) {
			t.Errorf("%s detected as CRPC", name)
		}
	}
}

func TestUnmatchedAndBounded(t *testing.T) {
	p := NewParser(l7.Client)
	resp := frame(false, false, 0, "nobody", nil)
	out := p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 1, Data: resp, Size: len(resp)}, nil)
	if len(out) != 1 || out[0].HasRequest || !out[0].HasResponse || out[0].RespBytes != len(resp) {
		t.Errorf("%+v", out)
	}
	out = out[:0]
	for i := range maxPending + 3 {
		r := frame(true, false, 0, fmt.Sprint(i), nil)
		out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: uint64(10 + i), Data: r, Size: len(r)}, out)
	}
	if len(out) != 3 || out[0].Start != 10 || out[0].HasResponse {
		t.Errorf("%+v", out)
	}
	if n := len(p.Flush(nil)); n != maxPending {
		t.Errorf("flushed %d", n)
	}
}

var otherProtocols = map[string][]byte{
	"http":      []byte("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"),
	"http2":     []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
	"redis":     []byte("*1\r\n$4\r\nPING\r\n"),
	"pgsql":     append([]byte{0, 0, 0, 0x54, 0, 3, 0, 0}, "user\x00postgres\x00database\x00postgres\x00\x00"...),
	"mysql":     append([]byte{0x55, 0, 0, 1, 0x85, 0xa6, 0xff, 0x01, 0, 0, 0, 1, 0x21}, make([]byte, 23)...),
	"kafka":     append([]byte{0, 0, 0, 0x2c, 0, 0x12, 0, 5, 0, 0, 0, 0, 0, 0x0f}, "galago-producer\x00"...),
	"mongo":     {0x3d, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xdd, 0x07, 0, 0, 0, 0, 0, 0, 0, 0x28, 0, 0, 0, 2, 'h', 'e', 'l', 'l', 'o', 0},
	"memcached": []byte("get k\r\n"),
	"dns":       {0, 0x1d, 0xab, 0xcd, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 1, 0, 1},
}
