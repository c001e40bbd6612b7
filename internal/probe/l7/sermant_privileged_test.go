package l7

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/l7/dubbo"
	"github.com/galago-project/galago/internal/l7/dubbo/dubbotest"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/syscap"
	"github.com/galago-project/galago/internal/table"
)

func init() {
	helpers["dubboserver"] = dubboServer
	helpers["dubboclient"] = dubboClient
}

// The Dubbo helpers' outcome, carried in a request id's low byte: the
// server answers it so.
const (
	dubboOK = iota
	dubboServiceError
	dubboNotFound
	dubboException
)

// dubboCalls are the client's calls per connection: service, version,
// method, outcome and count.
var dubboCalls = []struct {
	service, version, method string
	outcome                  uint64
	n                        int
}{
	{"org.apache.dubbo.demo.GreetingService", "", "sayHello", dubboOK, 30},
	{"com.example.OrderService", "1.0.0", "create", dubboOK, 20},
	{"com.example.OrderService", "1.0.0", "cancel", dubboServiceError, 6},
	{"org.apache.dubbo.demo.GreetingService", "", "missing", dubboNotFound, 4},
	{"com.example.OrderService", "1.0.0", "refund", dubboException, 5},
}

// dubboServer answers Dubbo2 requests as their id says, and heartbeats,
// until killed.
func dubboServer() error {
	ln, err := listenLoopback()
	if err != nil {
		return err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			r := bufio.NewReader(c)
			hdr := make([]byte, dubbo.HeaderLen)
			for {
				if _, err := io.ReadFull(r, hdr); err != nil {
					return
				}
				if _, err := io.CopyN(io.Discard, r, int64(binary.BigEndian.Uint32(hdr[12:]))); err != nil {
					return
				}
				id := binary.BigEndian.Uint64(hdr[4:])
				var out []byte
				switch {
				case hdr[2]&dubbo.FlagEvent != 0:
					out = dubbotest.HeartbeatReply(nil, id)
				case id&0xff == dubboServiceError:
					out = dubbotest.Response(nil, id, dubbo.StatusServiceError, 0, "service failed")
				case id&0xff == dubboNotFound:
					out = dubbotest.Response(nil, id, dubbo.StatusServiceNotFound, 0, "no such service")
				case id&0xff == dubboException:
					out = dubbotest.Response(nil, id, dubbo.StatusOK, dubbo.RespException, "java.lang.IllegalStateException")
				default:
					out = dubbotest.Response(nil, id, dubbo.StatusOK, dubbo.RespValue, "ok")
				}
				if _, err := c.Write(out); err != nil {
					return
				}
			}
		}()
	}
}

// dubboClient makes GALAGO_L7_CONNS connections to GALAGO_L7_PORT and on
// each sends dubboCalls, three at a time in one write (pipelined), with a
// heartbeat first; it reads every response and counts, per API, what it
// got: "count <api> <status> <n>".
func dubboClient() error {
	counts := map[string]int{}
	for conn := range envInt("GALAGO_L7_CONNS") {
		c, err := net.Dial("tcp4", "127.0.0.1:"+os.Getenv("GALAGO_L7_PORT"))
		if err != nil {
			return err
		}
		r := bufio.NewReader(c)
		seq := uint64(conn) << 32
		apiOf := map[uint64]string{}
		read := func(n int) error {
			hdr := make([]byte, dubbo.HeaderLen)
			for range n {
				if _, err := io.ReadFull(r, hdr); err != nil {
					return err
				}
				if _, err := io.CopyN(io.Discard, r, int64(binary.BigEndian.Uint32(hdr[12:]))); err != nil {
					return err
				}
				id := binary.BigEndian.Uint64(hdr[4:])
				if hdr[2]&dubbo.FlagEvent == 0 {
					counts[apiOf[id]+" "+strconv.Itoa(int(id&0xff))]++
				}
			}
			return nil
		}
		seq += 0x100
		if _, err := c.Write(dubbotest.Heartbeat(nil, seq)); err != nil {
			return err
		}
		if err := read(1); err != nil {
			return err
		}
		var batch []byte
		inBatch := 0
		for _, call := range dubboCalls {
			api := call.service + "/" + call.method
			if call.version != "" {
				api = call.service + ":" + call.version + "/" + call.method
			}
			for range call.n {
				seq += 0x100
				id := seq | call.outcome
				apiOf[id] = api
				batch = dubbotest.Request(batch, dubbotest.Call{ID: id, Service: call.service, Version: call.version, Method: call.method,
					Args: dubbotest.String(nil, "argument")})
				if inBatch++; inBatch == 3 {
					if _, err := c.Write(batch); err != nil {
						return err
					}
					if err := read(inBatch); err != nil {
						return err
					}
					batch, inBatch = batch[:0], 0
				}
			}
		}
		if inBatch > 0 {
			if _, err := c.Write(batch); err != nil {
				return err
			}
			if err := read(inBatch); err != nil {
				return err
			}
		}
		c.Close()
	}
	printCounts(counts)
	return nil
}

// testSermant: a Dubbo2 server and client (this test binary,
// re-executed) on loopback, 2 connections of 65 calls each, pipelined,
// with service errors, a service not found and exceptions: the sermant
// feature, a second consumer of the l7 probe's shared capture (as in the
// daemon), counts each service/method's calls and its client and server
// errors exactly, on both ends, as the client counted the answers it got.
func testSermant(t *testing.T, l7env *env, shared *syscap.Shared) {
	const conns = 2
	p := NewSermant(WithShared(shared))
	p.reportEvery = reportEvery
	rt := probetest.NewRuntime(t, probetest.ProbeName(SermantName), probetest.WithTimeout(30*time.Second))
	cfg := probe.Config{SubItems: bitBytes | bitRPC, Params: probe.DefaultParams(), Targets: l7env.targets}
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(t, p)
	e := *l7env
	e.t, e.p, e.rt = t, p, rt
	_, port := e.startHelper("dubboserver")
	got := e.runHelper("dubboclient", "GALAGO_L7_CONNS="+strconv.Itoa(conns), "GALAGO_L7_PORT="+strconv.Itoa(port))
	total := 0
	for _, c := range dubboCalls {
		total += conns * c.n
	}
	wants := map[string]expect{}
	for _, role := range []string{"server", "client"} {
		wants[role] = expect{m: rowMatch{tbl: table.SermantL7Rpc, role: role, port: port, protocol: "dubbo", ssl: "no_ssl"}, n: float64(total)}
	}
	recs, _ := e.check(wants)
	for _, role := range []string{"server", "client"} {
		for _, c := range dubboCalls {
			api := c.service + "/" + c.method
			if c.version != "" {
				api = c.service + ":" + c.version + "/" + c.method
			}
			n := got[fmt.Sprintf("%s %d", api, c.outcome)]
			if n != float64(conns*c.n) {
				t.Fatalf("the client got %v answers of %s with outcome %d, want %d", n, api, c.outcome, conns*c.n)
			}
			s := sumRows(recs, rowMatch{tbl: table.SermantL7RpcApi, role: role, port: port, protocol: "dubbo", api: api})
			var wantClient, wantServer float64
			switch c.outcome {
			case dubboNotFound:
				wantClient = n
			case dubboServiceError, dubboException:
				wantServer = n
			}
			if s.req != n || s.resp != n || s.clientErr != wantClient || s.serverEr != wantServer || s.errs != wantClient+wantServer {
				t.Errorf("%s %s: %v; want %v calls, %v client and %v server errors", role, api, s, n, wantClient, wantServer)
			}
		}
	}
	e.checkLost()
}
