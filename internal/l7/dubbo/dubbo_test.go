package dubbo

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/dubbo/dubbotest"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// conversation is a client's bytes each way: calls of two services
// (one versioned), answered out of order, with error statuses, an
// exception, a heartbeat, a one-way call, a large argument and an
// unanswered call.
func conversation() (req, resp [][]byte, want []string) {
	call := func(id uint64, svc, ver, m string, args []byte) []byte {
		return dubbotest.Request(nil, dubbotest.Call{ID: id, Service: svc, Version: ver, Method: m, Args: args})
	}
	greet, order := "org.apache.dubbo.demo.GreetingService", "com.example.OrderService"
	req = append(req, call(1, greet, "", "sayHello", dubbotest.String(nil, "world")))
	resp = append(resp, dubbotest.Response(nil, 1, StatusOK, RespValue, "hello world"))
	want = append(want, "true/true ok "+greet+"/sayHello")
	// pipelined, answered last first
	req = append(req, bytes.Join([][]byte{
		call(2, order, "1.0.0", "create", nil), call(3, order, "1.0.0", "cancel", nil), call(4, greet, "", "sayHello", nil),
	}, nil))
	resp = append(resp, bytes.Join([][]byte{
		dubbotest.Response(nil, 4, StatusServiceNotFound, 0, "no provider"),
		dubbotest.Response(nil, 3, StatusOK, RespException, "java.lang.IllegalStateException"),
		dubbotest.Response(nil, 2, StatusServerTimeout, 0, "timeout"),
	}, nil))
	want = append(want, "true/true client_error "+greet+"/sayHello", "true/true server_error "+order+":1.0.0/cancel",
		"true/true server_error "+order+":1.0.0/create")
	req = append(req, dubbotest.Heartbeat(nil, 5))
	resp = append(resp, dubbotest.HeartbeatReply(nil, 5)) // no exchange
	req = append(req, dubbotest.Request(nil, dubbotest.Call{ID: 6, Service: greet, Method: "notify", OneWay: true}))
	resp = append(resp, nil)
	want = append(want, "true/false ok "+greet+"/notify")
	big := dubbotest.String(nil, strings.Repeat("x", 30000))
	req = append(req, call(7, order, "1.0.0", "bulk", big))
	resp = append(resp, dubbotest.Response(nil, 7, StatusOK, RespValueWithAttachment, "done"))
	want = append(want, "true/true ok "+order+":1.0.0/bulk")
	req = append(req, call(8, order, "1.0.0", "lost", nil))
	want = append(want, "true/false ok "+order+":1.0.0/lost")
	return req, resp, want
}

func summary(ex []l7.Exchange) []string {
	var s []string
	for _, e := range ex {
		s = append(s, fmt.Sprintf("%v/%v %s %s", e.HasRequest, e.HasResponse, e.Class, e.API))
	}
	return s
}

// chunks turns the conversation into role's chunks: each request then its
// response.
func chunks(role l7.Role) []l7.Chunk {
	req, resp, _ := conversation()
	var out []l7.Chunk
	ts := uint64(0)
	for i := range req {
		ts += 10
		out = append(out, l7.Chunk{Dir: role.RequestDir(), TS: ts, Data: req[i], Size: len(req[i])})
		if i < len(resp) && len(resp[i]) > 0 {
			ts += 10
			d := l7.Ingress
			if role == l7.Server {
				d = l7.Egress
			}
			out = append(out, l7.Chunk{Dir: d, TS: ts, Data: resp[i], Size: len(resp[i])})
		}
	}
	return out
}

func TestConversation(t *testing.T) {
	_, _, want := conversation()
	for _, role := range []l7.Role{l7.Client, l7.Server} {
		whole := l7test.Run(NewParser(role), chunks(role))
		if got := summary(whole); !reflect.DeepEqual(got, want) {
			t.Fatalf("as %s:\n%q\nwant\n%q", role, got, want)
		}
		for _, e := range whole {
			if e.HasResponse && e.End <= e.Start {
				t.Errorf("latency %d->%d", e.Start, e.End)
			}
		}
		for _, n := range []int{1, 3, 16, 100} {
			p := NewParser(role)
			got := l7test.Run(p, l7test.Resplit(chunks(role), n))
			if !reflect.DeepEqual(summary(got), want) || p.Desyncs() != 0 {
				t.Errorf("as %s split %d: %q, %d desyncs", role, n, summary(got), p.Desyncs())
			}
		}
	}
}

// TestGap: the capture keeps a prefix of the large call; the parser
// steps over the rest by the declared length and stays in sync.
func TestGap(t *testing.T) {
	_, _, want := conversation()
	cs := chunks(l7.Client)
	for i := range cs {
		if cs[i].Size > 4096 {
			cs[i].Data = cs[i].Data[:4096]
		}
	}
	p := NewParser(l7.Client)
	if got := summary(l7test.Run(p, cs)); !reflect.DeepEqual(got, want) || p.Desyncs() != 0 {
		t.Fatalf("%q, %d desyncs", got, p.Desyncs())
	}
}

func TestDetect(t *testing.T) {
	req := dubbotest.Request(nil, dubbotest.Call{ID: 1, Service: "S", Method: "m"})
	if !Detect(req) {
		t.Error("a request not detected")
	}
	if Detect(dubbotest.Response(nil, 1, StatusOK, RespValue, "")) {
		t.Error("a response detected as a request")
	}
	if Detect(req[:15]) {
		t.Error("a short header detected")
	}
	for name, b := range map[string]string{
		"http": "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "redis": "*1\r\n$4\r\nPING\r\n",
		"kafka": "\x00\x00\x00\x20\x00\x03\x00\x09\x00\x00\x00\x01\x00\x05abcde......",
	} {
		if Detect([]byte(b)) {
			t.Errorf("%s detected", name)
		}
	}
}

func TestReadString(t *testing.T) {
	for _, s := range []string{"", "a", strings.Repeat("b", 31), strings.Repeat("c", 32), strings.Repeat("d", 1023),
		strings.Repeat("e", 1024), "héllo", "日本", "😀x"} {
		b := dubbotest.String(nil, s)
		got, rest, ok := readString(append(b, 'Z'))
		if !ok || string(got) != s || string(rest) != "Z" {
			t.Errorf("%q: %q %q %v", s, got, rest, ok)
		}
		if _, _, ok := readString(b[:len(b)-1]); ok && len(s) > 0 {
			t.Errorf("%q cut: ok", s)
		}
	}
	for _, v := range []int32{-16, 0, 47, 48, -17, 2047, -2048, 2048, 1 << 20} {
		if got, ok := readInt(dubbotest.Int(nil, v)); !ok || got != v {
			t.Errorf("int %d: %d %v", v, got, ok)
		}
	}
}

// TestSteadyAllocs: once a connection's APIs were seen, parsing its calls
// does not allocate.
func TestSteadyAllocs(t *testing.T) {
	cs := chunks(l7.Server)
	p := NewParser(l7.Server)
	out := make([]l7.Exchange, 0, 64)
	run := func() {
		for _, c := range cs {
			out = p.Feed(c, out[:0])
		}
		out = p.Flush(out[:0])
	}
	run()
	if n := testing.AllocsPerRun(20, run); n != 0 {
		t.Errorf("%v allocations per conversation", n)
	}
}
