package tcp

// Privileged tier: real BPF, real TCP traffic between two network
// namespaces the test creates (10.231.1.0/24 and fd00:231::/64 on a veth
// pair). Runs when GALAGO_PRIVILEGED_TESTS=1, as root, with iproute2 and
// iptables installed (`apt-get install -y iptables`); with the variable set,
// anything missing is a failure, not a skip.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/galago-project/galago/internal/childtest"
	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/probe/socket"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/sockowner"
	"github.com/galago-project/galago/internal/table"
)

// requirePrivileged gates the privileged tier (probetest) and the tools
// these tests run.
func requirePrivileged(t *testing.T) {
	t.Helper()
	probetest.RequireTools(t, "ip", "iptables", "tc")
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// netPair: the client and server namespaces and their veth ends.
type netPair struct{ cns, sns, cdev, sdev string }

const (
	clientV4, serverV4 = "10.231.1.1", "10.231.1.2"
	clientV6, serverV6 = "fd00:231::1", "fd00:231::2"
)

// setupNetns creates a client and a server namespace joined by a veth pair.
func setupNetns(t *testing.T) netPair {
	t.Helper()
	id := strconv.Itoa(os.Getpid() % 100000)
	vc, vs := "gtc"+id, "gts"+id
	n := netPair{cns: "gtcpc" + id, sns: "gtcps" + id, cdev: vc, sdev: vs}
	run(t, "ip", "netns", "add", n.cns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n.cns).Run() })
	run(t, "ip", "netns", "add", n.sns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n.sns).Run() })
	run(t, "ip", "link", "add", vc, "type", "veth", "peer", "name", vs)
	run(t, "ip", "link", "set", vc, "netns", n.cns)
	run(t, "ip", "link", "set", vs, "netns", n.sns)
	for _, x := range []struct{ ns, dev, v4, v6 string }{{n.cns, vc, clientV4, clientV6}, {n.sns, vs, serverV4, serverV6}} {
		run(t, "ip", "-n", x.ns, "addr", "add", x.v4+"/24", "dev", x.dev)
		run(t, "ip", "-n", x.ns, "addr", "add", x.v6+"/64", "dev", x.dev, "nodad")
		run(t, "ip", "-n", x.ns, "link", "set", x.dev, "up")
		run(t, "ip", "-n", x.ns, "link", "set", "lo", "up")
	}
	return n
}

type helper struct {
	t testing.TB
	*childtest.Child
	pid int
}

// startHelper runs this test binary as a helper (helper_test.go) in network
// namespace ns, or in the test's own when ns is "".
func startHelper(t testing.TB, ns, mode, addr string, send, recv int, env ...string) *helper {
	t.Helper()
	args := []string{os.Args[0], addr, strconv.Itoa(send), strconv.Itoa(recv)}
	if ns != "" {
		args = append([]string{"ip", "netns", "exec", ns}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(append(os.Environ(), "GALAGO_TCP_HELPER="+mode), env...)
	cmd.Stderr = os.Stderr
	c := childtest.Start(t, cmd, childtest.Kill(), childtest.Name(mode+" helper"))
	return &helper{t: t, Child: c, pid: c.Pid()}
}

// transfer runs a client in n.cns that sends up bytes to a server in n.sns
// answering down bytes; both keep the connection open, waiting for commands.
func transfer(t *testing.T, n netPair, addr string, up, down int) (cli, srv *helper) {
	t.Helper()
	srv = startHelper(t, n.sns, "server", addr, down, up)
	srv.expect("ready")
	cli = startHelper(t, n.cns, "client", addr, up, down)
	cli.expect("done")
	srv.expect("done")
	return cli, srv
}

// refusedConnect connects from ns to addr where nothing listens (the
// client receives a reset) and returns the finished helper.
func refusedConnect(t *testing.T, ns, addr string) *helper {
	t.Helper()
	h := startHelper(t, ns, "client", addr, 1, 1)
	if l := h.line(); !strings.HasPrefix(l, "dial:") {
		t.Fatalf("connect to a closed port: %q", l)
	}
	h.wait()
	return h
}

func (h *helper) line() string {
	h.t.Helper()
	return h.Line(h.t)
}

func (h *helper) expect(want string) {
	h.t.Helper()
	h.Expect(h.t, want)
}

func (h *helper) do(cmd string) {
	h.t.Helper()
	h.Send(h.t, cmd)
}

func (h *helper) info() tcpInfo {
	h.t.Helper()
	h.do("info")
	var ti tcpInfo
	if err := json.Unmarshal([]byte(h.line()), &ti); err != nil {
		h.t.Fatal(err)
	}
	return ti
}

func (h *helper) wait() {
	h.t.Helper()
	h.Exit(h.t)
}

const (
	testSample = 100 * time.Millisecond
	testReport = 300 * time.Millisecond
)

func allItems() uint32 { return 0xff }

func startProbe(t *testing.T, cfg probe.Config, opts ...Option) (*Probe, *probetest.Runtime) {
	t.Helper()
	p := New(append([]Option{withPeriods(testSample, testReport)}, opts...)...)
	rt := probetest.NewRuntime(t)
	if err := p.Start(context.Background(), cfg, rt); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		rt.Shutdown(t, p)
		if n := rt.LostCount(); n > 0 {
			t.Errorf("lost %d ring buffer records", n)
		}
	})
	return p, rt
}

func defaultCfg() probe.Config {
	return probe.Config{SubItems: allItems(), Params: probe.DefaultParams()}
}

// settle waits for two full report periods so that what happened so far
// has been sampled and reported.
func settle() { time.Sleep(2*testReport + testSample) }

// rows are the tcp_metric records of one process.
func rows(rt *probetest.Runtime, tgid int) []*table.Record { return rowsOf(rt, table.TcpMetric, tgid) }

// rowsOf are the records of table tb of one process.
func rowsOf(rt *probetest.Runtime, tb *table.Table, tgid int) []*table.Record {
	recs := rt.Records()
	var out []*table.Record
	for _, r := range recs {
		if r.Table == tb && r.Str("tgid") == strconv.Itoa(tgid) {
			out = append(out, r)
		}
	}
	return out
}

func sum(recs []*table.Record, field string) float64 {
	i := table.TcpMetric.MustIndex(field)
	var s float64
	for _, r := range recs {
		if r.Values[i].Set {
			s += r.Values[i].Num
		}
	}
	return s
}

// oneKey checks every record of recs has the same key and these key values.
func oneKey(t *testing.T, recs []*table.Record, want map[string]string) {
	t.Helper()
	if len(recs) == 0 {
		t.Fatalf("no records, want %v", want)
	}
	for _, r := range recs {
		if r.Key() != recs[0].Key() {
			t.Fatalf("records under several keys: %q and %q", r.Key(), recs[0].Key())
		}
	}
	for k, v := range want {
		if got := recs[0].Str(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
}

func checkSum(t *testing.T, recs []*table.Record, field string, want float64) {
	t.Helper()
	if got := sum(recs, field); got != want {
		t.Errorf("sum(%s) = %v, want %v", field, got, want)
	}
}

func TestPrivilegedTransfer(t *testing.T) {
	requirePrivileged(t)
	n := setupNetns(t)
	_, rt := startProbe(t, defaultCfg())
	const up, down = 1<<20 + 123, 4567
	for i, fam := range []struct {
		name, cip, sip, proto string
		fmt                   string
	}{{"ipv4", clientV4, serverV4, "2", "%s:%d"}, {"ipv6", clientV6, serverV6, "10", "[%s]:%d"}} {
		t.Run(fam.name, func(t *testing.T) {
			port := 20100 + i
			addr := fmt.Sprintf(fam.fmt, fam.sip, port)
			cli, srv := transfer(t, n, addr, up, down)
			time.Sleep(300 * time.Millisecond) // last ACKs
			ci, si := cli.info(), srv.info()
			settle()
			cr, sr := rows(rt, cli.pid), rows(rt, srv.pid)
			keys := map[string]string{"client_ip": fam.cip, "server_ip": fam.sip, "server_port": strconv.Itoa(port),
				"protocol": fam.proto, "comm": "tcp.test", "client_port": "0"}
			keys["role"] = "client"
			oneKey(t, cr, keys)
			keys["role"] = "server"
			oneKey(t, sr, keys)
			checkSum(t, cr, "tx_bytes", up)
			checkSum(t, cr, "rx_bytes", down)
			checkSum(t, sr, "tx_bytes", down)
			checkSum(t, sr, "rx_bytes", up)
			checkSum(t, cr, "segs_in", float64(ci.SegsIn))
			checkSum(t, cr, "segs_out", float64(ci.SegsOut))
			checkSum(t, sr, "segs_in", float64(si.SegsIn))
			checkSum(t, sr, "segs_out", float64(si.SegsOut))
			checkSum(t, cr, "retran_packets", float64(ci.TotalRetrans))
			// Closing adds FIN segments but no data bytes.
			cli.do("close")
			cli.wait()
			srv.do("close")
			srv.wait()
			settle()
			cr, sr = rows(rt, cli.pid), rows(rt, srv.pid)
			checkSum(t, cr, "tx_bytes", up)
			checkSum(t, cr, "rx_bytes", down)
			checkSum(t, sr, "tx_bytes", down)
			checkSum(t, sr, "rx_bytes", up)
			checkSum(t, cr, "send_rsts", 0)
			checkSum(t, cr, "receive_rsts", 0)
			// Histograms are real: one srtt observation per sample of the connection.
			h := cr[0].Values[table.TcpMetric.MustIndex("srtt")].Hist
			if h == nil || h.Count() == 0 {
				t.Errorf("srtt histogram missing in %v", cr[0].Values)
			}
		})
	}
}

// TestPrivilegedShortLived runs with the socket probe sharing the socket
// owners, as the daemon runs them, its hooks attached first: socket
// creates the client's owner (and writes its socket_aux), this probe finds
// it; the bytes (which depend on the owner's role) and the close record's
// generation (in tcp_aux) stay exact.
func TestPrivilegedShortLived(t *testing.T) {
	requirePrivileged(t)
	n := setupNetns(t)
	owners := sockowner.NewShared()
	sp := socket.New(socket.WithOwners(owners))
	srt := probetest.NewRuntime(t)
	if err := sp.Start(context.Background(), probe.Config{SubItems: 0xff, Params: probe.DefaultParams()}, srt); err != nil {
		t.Fatalf("start socket: %v", err)
	}
	t.Cleanup(func() { srt.Shutdown(t, sp) })
	_, rt := startProbe(t, defaultCfg(), WithOwners(owners))
	const size = 100000
	addr := serverV4 + ":20200"
	srv := startHelper(t, n.sns, "short-server", addr, 0, 0)
	srv.expect("ready")
	cli := startHelper(t, n.cns, "short-client", addr, size, 0)
	srv.expect(strconv.Itoa(size))
	cli.wait()
	srv.wait()
	settle()
	cr, sr := rows(rt, cli.pid), rows(rt, srv.pid)
	oneKey(t, cr, map[string]string{"role": "client", "server_port": "20200"})
	oneKey(t, sr, map[string]string{"role": "server", "client_ip": clientV4})
	checkSum(t, cr, "tx_bytes", size)
	checkSum(t, sr, "rx_bytes", size)
	checkSum(t, cr, "rx_bytes", 0)
	checkSum(t, sr, "tx_bytes", 0)
}

// TestPrivilegedCloseKeepsPort is the regression test for close records
// read after the kernel released the local port (tcp_set_state(TCP_CLOSE)
// runs __inet_put_port, which zeroes skc_num, before the tracepoint):
// server-side short connections landed under server_port 0, one flow split
// into two rows. Every way a connection ends, both families, the
// connection living only a few milliseconds (no sample sees it) or
// long enough for a sample to see it first (snapshot and close record
// must meet in one row): one row per side, the right key, exact bytes.
func TestPrivilegedCloseKeepsPort(t *testing.T) {
	requirePrivileged(t)
	n := setupNetns(t)
	_, rt := startProbe(t, defaultCfg())
	const req, resp = 777, 3333
	type side struct {
		h     *helper
		final tcpInfo
	}
	type tcase struct {
		name, closeMode, fam, cip, sip string
		port                           int
		cli, srv                       side
	}
	var cases []*tcase
	port := 20700
	for _, fam := range []struct{ name, cip, sip string }{{"2", clientV4, serverV4}, {"10", clientV6, serverV6}} {
		for _, cm := range []string{"client", "server", "client-rst", "server-rst"} {
			for _, hold := range []int{0, 2 * int(testSample/time.Millisecond)} {
				port++
				tc := &tcase{name: fmt.Sprintf("af%s/%s-closes/hold%dms", fam.name, cm, hold), closeMode: cm,
					fam: fam.name, cip: fam.cip, sip: fam.sip, port: port}
				addr := net.JoinHostPort(fam.sip, strconv.Itoa(port))
				env := []string{"GALAGO_TCP_CLOSE=" + cm, "GALAGO_TCP_HOLD_MS=" + strconv.Itoa(hold)}
				tc.srv.h = startHelper(t, n.sns, "once-server", addr, resp, req, env...)
				tc.srv.h.expect("ready")
				tc.cli.h = startHelper(t, n.cns, "once-client", addr, req, resp, env...)
				cases = append(cases, tc)
			}
		}
	}
	for _, tc := range cases {
		for _, sd := range []*side{&tc.cli, &tc.srv} {
			if err := json.Unmarshal([]byte(sd.h.line()), &sd.final); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			sd.h.wait()
		}
	}
	settle()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			keys := map[string]string{"client_ip": tc.cip, "server_ip": tc.sip, "server_port": strconv.Itoa(tc.port),
				"protocol": tc.fam, "comm": "tcp.test", "client_port": "0"}
			cr, sr := rows(rt, tc.cli.h.pid), rows(rt, tc.srv.h.pid)
			keys["role"] = "client"
			oneKey(t, cr, keys)
			keys["role"] = "server"
			oneKey(t, sr, keys)
			// Sides that close gracefully or abort have all their data
			// acked and read (the helper waited for it); the side that
			// receives a reset counts what the kernel says it had then.
			cliTx, cliRx, srvTx, srvRx := float64(req), float64(resp), float64(resp), float64(req)
			switch tc.closeMode {
			case "server-rst":
				cliTx = float64(tc.cli.final.BytesAcked - 1) // minus the SYN
				cliRx = float64(tc.cli.final.BytesReceived)
			case "client-rst":
				srvTx = float64(tc.srv.final.BytesAcked)
				srvRx = float64(tc.srv.final.BytesReceived)
			}
			checkSum(t, cr, "tx_bytes", cliTx)
			checkSum(t, cr, "rx_bytes", cliRx)
			checkSum(t, sr, "tx_bytes", srvTx)
			checkSum(t, sr, "rx_bytes", srvRx)
			rsts := map[string][2]float64{"client-rst": {1, 0}, "server-rst": {0, 1}}[tc.closeMode]
			checkSum(t, cr, "send_rsts", rsts[0])
			checkSum(t, cr, "receive_rsts", rsts[1])
			checkSum(t, sr, "send_rsts", rsts[1])
			checkSum(t, sr, "receive_rsts", rsts[0])
		})
	}
}

func TestPrivilegedRetransmits(t *testing.T) {
	requirePrivileged(t)
	n := setupNetns(t)
	cfg := defaultCfg()
	cfg.Params.ReportEvent = 1
	cfg.Params.DropsThr = 0
	_, rt := startProbe(t, cfg)
	const port = 20300
	addr := fmt.Sprintf("%s:%d", serverV4, port)
	srv := startHelper(t, n.sns, "server", addr, 10, 256<<10)
	srv.expect("ready")
	// Drop data segments (not the handshake) arriving at the server for a while.
	rule := []string{"INPUT", "-p", "tcp", "--dport", strconv.Itoa(port), "-m", "length", "--length", "200:65535", "-j", "DROP"}
	run(t, append([]string{"ip", "netns", "exec", n.sns, "iptables", "-A"}, rule...)...)
	cli := startHelper(t, n.cns, "client", addr, 256<<10, 10)
	time.Sleep(1500 * time.Millisecond)
	run(t, append([]string{"ip", "netns", "exec", n.sns, "iptables", "-D"}, rule...)...)
	cli.expect("done")
	srv.expect("done")
	time.Sleep(300 * time.Millisecond)
	ci := cli.info()
	if ci.TotalRetrans == 0 {
		t.Fatalf("no retransmissions happened")
	}
	settle()
	cr := rows(rt, cli.pid)
	checkSum(t, cr, "retran_packets", float64(ci.TotalRetrans))
	checkSum(t, cr, "tx_bytes", 256<<10)
	// tmout_count: the client's RTO expirations, as the kernel's own
	// tcpi_total_rto counts them (the DROP rule let no ACK come back for
	// 1.5 s: several expirations, backing off).
	if ci.TotalRto == 0 {
		t.Fatalf("no RTO expired (tcpi_total_rto 0)")
	}
	checkSum(t, cr, "tmout_count", float64(ci.TotalRto))
	si := srv.info()
	checkSum(t, rows(rt, srv.pid), "tmout_count", float64(si.TotalRto))
	// tcp_oom: no reset for lack of memory in this namespace, as the
	// kernel's own TCPAbortOnMemory of both namespaces says.
	for _, ns := range []string{n.cns, n.sns} {
		if v := netstat(t, ns, "TCPAbortOnMemory"); v != 0 {
			t.Fatalf("TCPAbortOnMemory in %s is %d: the test assumes 0", ns, v)
		}
	}
	checkSum(t, cr, "tcp_oom", 0)
	checkSum(t, rows(rt, srv.pid), "tcp_oom", 0)
	t.Logf("client: %d retransmissions, %d RTO expirations (tcpi_total_rto) = tmout_count", ci.TotalRetrans, ci.TotalRto)
	evs := rt.Events()
	var got *event.Event
	for i := range evs {
		if evs[i].PID == cli.pid && evs[i].Metric == "lost_out" {
			got = &evs[i]
		}
	}
	if got == nil {
		t.Fatalf("no lost_out event for the client; events: %+v", evs)
	}
	wantID := fmt.Sprintf("%d_client_%s_%s_%d_2", cli.pid, clientV4, serverV4, port)
	if got.EntityID != wantID || got.Entity != "tcp_link" || !strings.HasPrefix(got.Message, "Number of lost segments estimated by TCP congestion(") ||
		got.IP != fmt.Sprintf("CIP(%s), SIP(%s:%d)", clientV4, serverV4, port) {
		t.Errorf("event = %+v, want entity id %s", got, wantID)
	}
	cli.do("close")
	srv.do("close")
}

// netstat reads one TcpExt counter of network namespace ns.
func netstat(t *testing.T, ns, name string) uint64 {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/proc/net/netstat").Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(out), "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		names, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) == 0 || names[0] != "TcpExt:" || len(names) != len(vals) {
			continue
		}
		for j, n := range names {
			if n == name {
				v, err := strconv.ParseUint(vals[j], 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
		}
	}
	t.Fatalf("no TcpExt %s in %s", name, ns)
	return 0
}

func TestPrivilegedResets(t *testing.T) {
	requirePrivileged(t)
	n := setupNetns(t)
	_, rt := startProbe(t, defaultCfg())
	// Connecting to a closed port: the client receives a reset.
	refused := refusedConnect(t, n.cns, serverV4+":20401")
	// Aborting with SO_LINGER 0: the aborting side sends a reset, the peer receives it.
	addr := serverV4 + ":20402"
	cli, srv := transfer(t, n, addr, 10, 10)
	cli.do("abort")
	cli.wait()
	settle()
	rr := rows(rt, refused.pid)
	oneKey(t, rr, map[string]string{"role": "client", "server_port": "20401"})
	checkSum(t, rr, "receive_rsts", 1)
	checkSum(t, rr, "send_rsts", 0)
	cr, sr := rows(rt, cli.pid), rows(rt, srv.pid)
	checkSum(t, cr, "send_rsts", 1)
	checkSum(t, cr, "receive_rsts", 0)
	checkSum(t, sr, "receive_rsts", 1)
	checkSum(t, sr, "send_rsts", 0)
	checkSum(t, sr, "rx_bytes", 10)
	// The abort's reset has another reason than lack of memory.
	checkSum(t, cr, "tcp_oom", 0)
	checkSum(t, sr, "tcp_oom", 0)
	srv.do("close")
}

// TestPrivilegedNetDelay: a tbf qdisc limits the client's egress to rate
// R, so a write of N bytes cannot be acknowledged before (N - burst)/R.
// The client makes K such writes, each after the previous one was
// acknowledged (so every one is timed), and measures itself how long each
// took to be acknowledged. net_delay must hold exactly K samples, all
// above the tbf bound, summing to what the client measured (within the
// client's polling and scheduling slack).
func TestPrivilegedNetDelay(t *testing.T) {
	requirePrivileged(t)
	n := setupNetns(t)
	const (
		rate  = 1_000_000 // bytes/s: 8mbit
		burst = 4096
		size  = 65536
		k     = 5
		port  = 20900
	)
	run(t, "ip", "netns", "exec", n.cns, "tc", "qdisc", "add", "dev", n.cdev, "root", "tbf",
		"rate", "8mbit", "burst", strconv.Itoa(burst), "latency", "1s")
	cfg := defaultCfg()
	cfg.SubItems = bitDelay
	_, rt := startProbe(t, cfg)
	addr := fmt.Sprintf("%s:%d", serverV4, port)
	srv := startHelper(t, n.sns, "short-server", addr, 0, 0)
	srv.expect("ready")
	cli := startHelper(t, n.cns, "delay-client", addr, size, k)
	var seen []int64
	if err := json.Unmarshal([]byte(cli.line()), &seen); err != nil || len(seen) != k {
		t.Fatalf("client said %v (%v)", seen, err)
	}
	cli.wait()
	srv.expect(strconv.Itoa(size * k))
	srv.wait()
	settle()
	minNs := float64(size-burst) / rate * 1e9
	var clientSum float64
	for _, v := range seen {
		clientSum += float64(v)
		if float64(v) < minNs {
			t.Fatalf("client saw a write acknowledged in %d ns, below the tbf bound %.0f ns: tbf not in effect", v, minNs)
		}
	}
	recs := rowsOf(rt, table.ProcFlowPerf, cli.pid)
	if len(recs) == 0 {
		t.Fatal("no proc_flow_perf rows for the client")
	}
	iDelay, iSys := table.ProcFlowPerf.MustIndex("net_delay"), table.ProcFlowPerf.MustIndex("sys_delay")
	var count uint64
	var sum, maxv float64
	for _, r := range recs {
		for name, want := range map[string]string{"role": "client", "remote_ip": serverV4, "server_port": strconv.Itoa(port)} {
			if got := r.Str(name); got != want {
				t.Errorf("%s = %q, want %q", name, got, want)
			}
		}
		if r.Values[iSys].Set {
			t.Error("sys_delay set")
		}
		h := r.Values[iDelay].Hist
		if h == nil {
			t.Fatalf("row without net_delay: %v", r.Values)
		}
		// Every sample above the bound: no count in a bucket whose upper
		// bound is below it.
		for i, b := range h.Bounds {
			if b < minNs && h.Counts[i] != 0 {
				t.Errorf("%d samples <= %.0f ns, below the tbf bound %.0f ns", h.Counts[i], b, minNs)
			}
		}
		count += h.Count()
		sum += h.Sum
		maxv = max(maxv, h.Max)
	}
	if count != k {
		t.Errorf("net_delay has %d samples, want %d (one per write)", count, k)
	}
	// The client's time starts after write() returned and ends when its
	// 100 µs polling saw the acknowledgement: allow 3 ms per write.
	if d := sum - clientSum; d < -3e6*k || d > 3e6*k {
		t.Errorf("net_delay sum %.0f ns, client measured %.0f ns (difference %.0f ns)", sum, clientSum, d)
	}
	if rs := rowsOf(rt, table.ProcFlowPerf, srv.pid); len(rs) != 0 {
		t.Errorf("%d proc_flow_perf rows for the server, which wrote nothing", len(rs))
	}
	t.Logf("net_delay: %d samples, sum %.1f ms, max %.1f ms; client measured sum %.1f ms; bound per write %.1f ms",
		count, sum/1e6, maxv/1e6, clientSum/1e6, minNs/1e6)
}

func TestPrivilegedSnoopers(t *testing.T) {
	requirePrivileged(t)
	n := setupNetns(t)
	for i, mode := range []snoop.Mode{snoop.Whitelist, snoop.Blacklist} {
		addr := fmt.Sprintf("%s:%d", serverV4, 20500+i)
		srv := startHelper(t, n.sns, "server", addr, 10, 1000)
		srv.expect("ready")
		cfg := defaultCfg()
		// Whitelist: only the server; blacklist: all but the server.
		cfg.Targets = probetest.NewTargets(mode, srv.pid)
		p, rt := startProbe(t, cfg)
		cli := startHelper(t, n.cns, "client", addr, 1000, 10)
		cli.expect("done")
		srv.expect("done")
		settle()
		cr, sr := rows(rt, cli.pid), rows(rt, srv.pid)
		if mode == snoop.Whitelist {
			if len(cr) != 0 || len(sr) == 0 {
				t.Errorf("whitelist of the server: %d client rows (want 0), %d server rows (want >0)", len(cr), len(sr))
			}
			checkSum(t, sr, "rx_bytes", 1000)
		} else {
			if len(sr) != 0 || len(cr) == 0 {
				t.Errorf("blacklist of the server: %d server rows (want 0), %d client rows (want >0)", len(sr), len(cr))
			}
			checkSum(t, cr, "tx_bytes", 1000)
		}
		cli.do("close")
		srv.do("close")
		cli.wait()
		srv.wait()
		rt.Stop()
		_ = p.Stop()
	}
}

func TestPrivilegedPreexisting(t *testing.T) {
	requirePrivileged(t)
	n := setupNetns(t)
	addr := serverV4 + ":20600"
	cli, srv := transfer(t, n, addr, 1000, 10)
	_, rt := startProbe(t, defaultCfg())
	settle()
	cr, sr := rows(rt, cli.pid), rows(rt, srv.pid)
	oneKey(t, cr, map[string]string{"role": "client", "client_ip": clientV4, "server_ip": serverV4, "server_port": "20600", "comm": "tcp.test"})
	oneKey(t, sr, map[string]string{"role": "server", "client_ip": clientV4, "server_ip": serverV4, "server_port": "20600", "comm": "tcp.test"})
	// The transfer happened before the probe: nothing of it is counted.
	checkSum(t, cr, "tx_bytes", 0)
	checkSum(t, sr, "rx_bytes", 0)
	cli.do("close")
	srv.do("close")
	cli.wait()
	srv.wait()
	settle()
	checkSum(t, rows(rt, cli.pid), "tx_bytes", 0)
	checkSum(t, rows(rt, srv.pid), "rx_bytes", 0)
}

// ourPrograms lists loaded BPF programs with this probe's names (other
// processes may run programs of the same names: compare sets of ids).
func ourPrograms(t *testing.T) map[ebpf.ProgramID]bool {
	t.Helper()
	names := map[string]bool{}
	spec, err := loadTcp()
	if err != nil {
		t.Fatal(err)
	}
	for name := range spec.Programs {
		names[name] = true // Info().Name is the full name (from BTF)
	}
	ids := map[ebpf.ProgramID]bool{}
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return ids
		}
		if err != nil {
			t.Fatal(err)
		}
		id = next
		prog, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // unloaded meanwhile
		}
		info, err := prog.Info()
		prog.Close()
		if err == nil && names[info.Name] {
			ids[id] = true
		}
	}
}

func newIDs(before, now map[ebpf.ProgramID]bool) int {
	n := 0
	for id := range now {
		if !before[id] {
			n++
		}
	}
	return n
}

func TestPrivilegedNoLeftovers(t *testing.T) {
	requirePrivileged(t)
	before := ourPrograms(t)
	for range 3 {
		p := New(withPeriods(testSample, testReport))
		rt := probetest.NewRuntime(t)
		if err := p.Start(context.Background(), defaultCfg(), rt); err != nil {
			t.Fatal(err)
		}
		if got := newIDs(before, ourPrograms(t)); got != 10 {
			t.Fatalf("running: %d new programs, want 10 (8 and the filter's fork and exec)", got)
		}
		time.Sleep(2 * testSample)
		rt.Stop()
		if err := p.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := p.Stop(); err != nil { // idempotent
			t.Fatal(err)
		}
	}
	// The kernel frees programs through RCU once the last reference is
	// gone: allow it a moment.
	deadline := time.Now().Add(5 * time.Second)
	for newIDs(before, ourPrograms(t)) != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := newIDs(before, ourPrograms(t)); got != 0 {
		t.Fatalf("after stop: %d of our programs left behind", got)
	}
}

// attachedPrograms names this probe's programs that have a BPF link now.
func attachedPrograms(t *testing.T, p *Probe) map[string]bool {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	byID := map[ebpf.ProgramID]string{}
	for name, prog := range map[string]*ebpf.Program{
		"on_set_state": p.objs.OnSetState, "dump_tcp": p.objs.DumpTcp, "dump_mptcp": p.objs.DumpMptcp,
		"on_send_reset": p.objs.OnSendReset, "on_receive_reset": p.objs.OnReceiveReset,
		"on_kfree_skb": p.objs.OnKfreeSkb, "on_exceed_buf_limit": p.objs.OnExceedBufLimit,
		"on_sock_ops": p.objs.OnSockOps,
	} {
		info, err := prog.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := info.ID()
		byID[id] = name
	}
	out := map[string]bool{}
	var it link.Iterator
	defer it.Close()
	for it.Next() {
		if info, err := it.Link.Info(); err == nil && byID[info.Program] != "" {
			out[byID[info.Program]] = true
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPrivilegedHooksFollowSubItems: tcp_stats alone runs only the
// mandatory hooks; enabling tcp_abnormal attaches the optional ones (and
// they count), disabling it detaches them again.
func TestPrivilegedHooksFollowSubItems(t *testing.T) {
	requirePrivileged(t)
	n := setupNetns(t)
	cfg := defaultCfg()
	cfg.SubItems = bitStats
	p, rt := startProbe(t, cfg)
	minimal := map[string]bool{"on_set_state": true, "dump_tcp": true, "dump_mptcp": true}
	if got := attachedPrograms(t, p); !maps.Equal(got, minimal) {
		t.Fatalf("tcp_stats only: attached %v, want %v", got, minimal)
	}
	cfg.SubItems = bitStats | bitAbnormal
	if err := p.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	all := maps.Clone(minimal)
	for _, h := range optionalHooks {
		all[h.prog] = true
	}
	if got := attachedPrograms(t, p); !maps.Equal(got, all) {
		t.Fatalf("tcp_stats+tcp_abnormal: attached %v, want %v", got, all)
	}
	// The attached reset hooks count: a connect to a closed port.
	refused := refusedConnect(t, n.cns, serverV4+":20801")
	settle()
	checkSum(t, rows(rt, refused.pid), "receive_rsts", 1)
	cfg.SubItems = bitStats
	if err := p.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if got := attachedPrograms(t, p); !maps.Equal(got, minimal) {
		t.Fatalf("back to tcp_stats only: attached %v, want %v", got, minimal)
	}
	// tcp_delay attaches the sock_ops program (net_delay), and only it.
	cfg.SubItems = bitStats | bitDelay
	if err := p.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	withDelay := maps.Clone(minimal)
	withDelay["on_sock_ops"] = true
	if got := attachedPrograms(t, p); !maps.Equal(got, withDelay) {
		t.Fatalf("tcp_stats+tcp_delay: attached %v, want %v", got, withDelay)
	}
	cfg.SubItems = bitStats
	if err := p.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if got := attachedPrograms(t, p); !maps.Equal(got, minimal) {
		t.Fatalf("tcp_delay off again: attached %v, want %v", got, minimal)
	}
}
