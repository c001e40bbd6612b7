package socket

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/probe/tcp"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/sockowner"
	"github.com/galago-project/galago/internal/table"
)

// privileged gates the privileged tests on root, ip(8) (the tests' network
// namespaces) and every hook the hooks table names: the probe runs without
// a missing one and leaves its fields unset, which must fail here instead.
func privileged(t *testing.T) {
	t.Helper()
	probetest.RequireTools(t, "ip")
	_, cgroupErr := bpfrt.HaveCgroup2()
	checks := []error{cgroupErr}
	for _, h := range hooks {
		if h.kind == "tp_btf" {
			checks = append(checks, bpfrt.HaveTPBTF(h.target))
		}
	}
	probetest.RequireHooks(t, checks...)
}

// netns is a network namespace the test owns, with loopback up.
type netns struct {
	name string
	fd   int
}

func newNetns(t *testing.T) *netns {
	t.Helper()
	name := fmt.Sprintf("galago-socket-%d-%d", os.Getpid(), time.Now().UnixNano()%100000)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	fd, err := unix.Open("/var/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return &netns{name: name, fd: fd}
}

// do runs fn on a thread inside the namespace; sockets created there stay
// in it. The thread is discarded afterwards (never unlocked).
func (n *netns) do(fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			ch <- err
			return
		}
		ch <- fn()
	}()
	return <-ch
}

// counters reads the namespace's /proc/net/snmp and netstat as "Tcp:ActiveOpens" etc.
func (n *netns) counters(t *testing.T) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := n.do(func() error {
		for _, f := range []string{"/proc/thread-self/net/snmp", "/proc/thread-self/net/netstat"} {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			parseSNMP(string(b), out)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func parseSNMP(s string, out map[string]int64) {
	sc := bufio.NewScanner(strings.NewReader(s))
	var hdr []string
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		if hdr == nil || hdr[0] != f[0] {
			hdr = f
			continue
		}
		for i := 1; i < len(f) && i < len(hdr); i++ {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			out[strings.TrimSuffix(f[0], ":")+":"+hdr[i]] = v
		}
		hdr = nil
	}
}

func tcpSocket(n *netns) (int, error) {
	var fd int
	err := n.do(func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		return err
	})
	return fd, err
}

func listenOn(n *netns, port, backlog int) (int, error) {
	fd, err := tcpSocket(n)
	if err != nil {
		return -1, err
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return -1, err
	}
	return fd, unix.Listen(fd, backlog)
}

var loopback = [4]byte{127, 0, 0, 1}

// connectAccept opens n connections from client to port and accepts each
// on lfd; it returns every descriptor, for the caller to close.
func connectAccept(t *testing.T, ns *netns, lfd, port int, client [4]byte, n int) []int {
	t.Helper()
	var fds []int
	for i := 0; i < n; i++ {
		fd, err := tcpSocket(ns)
		if err != nil {
			t.Fatal(err)
		}
		if client != loopback {
			if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: client}); err != nil {
				t.Fatal(err)
			}
		}
		if err := unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: loopback}); err != nil {
			t.Fatal(err)
		}
		afd, _, err := unix.Accept(lfd)
		if err != nil {
			t.Fatal(err)
		}
		fds = append(fds, fd, afd)
	}
	return fds
}

// overflow sends attempts non-blocking connects to a listener that never
// accepts (backlog 1), lets the SYN retransmission timer (1 s) fire once,
// and closes them.
func overflow(t *testing.T, ns *netns, port, attempts int) {
	t.Helper()
	var pending []int
	for i := 0; i < attempts; i++ {
		fd, err := tcpSocket(ns)
		if err != nil {
			t.Fatal(err)
		}
		unix.SetNonblock(fd, true)
		err = unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: loopback})
		if err != nil && !errors.Is(err, unix.EINPROGRESS) {
			t.Fatal(err)
		}
		pending = append(pending, fd)
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond)
	for _, fd := range pending {
		unix.Close(fd)
	}
}

func udpSocket(t *testing.T, ns *netns) int {
	t.Helper()
	var fd int
	if err := ns.do(func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// udpReceiver is a UDP socket on port with the smallest receive buffer, so
// a burst overflows it.
func udpReceiver(t *testing.T, ns *netns, port int) int {
	t.Helper()
	fd := udpSocket(t, ns)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1); err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: loopback}); err != nil {
		t.Fatal(err)
	}
	return fd
}

// udpBurst sends n datagrams of size bytes from sfd to port, then drains
// rfd; it returns the bytes received.
func udpBurst(t *testing.T, sfd, rfd, port, n, size int) int {
	t.Helper()
	payload := make([]byte, size)
	for i := 0; i < n; i++ {
		if err := unix.Sendto(sfd, payload, 0, &unix.SockaddrInet4{Port: port, Addr: loopback}); err != nil {
			t.Fatal(err)
		}
	}
	unix.SetNonblock(rfd, true)
	received := 0
	buf := make([]byte, 2048)
	for {
		n, _, err := unix.Recvfrom(rfd, buf, 0)
		if err != nil {
			return received
		}
		received += n
	}
}

// startProbe starts a probe with fast periods; stop via the returned func.
func startProbe(t *testing.T, cfg probe.Config, opts ...Option) (*Probe, *probetest.Runtime, func()) {
	t.Helper()
	p := New(append([]Option{withInterval(300 * time.Millisecond)}, opts...)...)
	rt := probetest.NewRuntime(t)
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatalf("start: %v", err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		rt.Shutdown(t, p)
	}
	t.Cleanup(stop)
	return p, rt, stop
}

func defaultCfg() probe.Config {
	params := probe.DefaultParams()
	params.ReportEvent = 1
	return probe.Config{SubItems: bitTCP | bitUDP, Params: params}
}

// sums adds up the numeric fields of the records of tbl that match keys.
func sums(recs []*table.Record, tbl *table.Table, keys map[string]string) (map[string]float64, uint64, int) {
	out := map[string]float64{}
	var histCount uint64
	n := 0
	for _, r := range recs {
		if r.Table != tbl {
			continue
		}
		match := true
		for k, v := range keys {
			if r.Str(k) != v {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		n++
		for i, f := range tbl.Fields {
			v := r.Values[i]
			if !v.Set {
				continue
			}
			switch f.Kind {
			case table.KindGauge, table.KindCounter:
				out[f.Name] += v.Num
			case table.KindHistogram:
				histCount += v.Hist.Count()
			}
		}
	}
	return out, histCount, n
}

func mapID(t *testing.T, m *ebpf.Map) ebpf.MapID {
	t.Helper()
	info, err := m.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, ok := info.ID()
	if !ok {
		t.Fatal("no map ID")
	}
	return id
}

// settle waits for the ring buffer and a few periods to pass.
func settle() { time.Sleep(time.Second) }

// TestPrivilegedTCP runs with the tcp probe sharing the socket owners, as
// the daemon runs them, its hooks attached first: tcp creates each owner,
// this probe finds it, and its counts (estab_latency from the connect time
// in socket_aux included) stay exact beside tcp's own per-socket words.
func TestPrivilegedTCP(t *testing.T) {
	privileged(t)
	ns := newNetns(t)
	pid := strconv.Itoa(os.Getpid())
	owners := sockowner.NewShared()
	tp := tcp.New(tcp.WithOwners(owners))
	trt := probetest.NewRuntime(t)
	if err := tp.Start(trt.Context(), probe.Config{SubItems: 0xff, Params: probe.DefaultParams()}, trt); err != nil {
		t.Fatalf("start tcp: %v", err)
	}
	t.Cleanup(func() { trt.Shutdown(t, tp) })
	p, rt, stop := startProbe(t, defaultCfg(), WithOwners(owners))
	spec, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	shared, release, err := owners.Acquire(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{sockowner.OwnersMap, sockowner.ListenMap} {
		if got, want := mapID(t, p.coll.Maps[name]), mapID(t, shared[name]); got != want {
			t.Errorf("%s: the probe uses map %d, the shared one is %d", name, got, want)
		}
	}
	release()

	before := ns.counters(t)

	// 1. Connects to a closed port are refused: each is a failed active open.
	const refused = 5
	for i := 0; i < refused; i++ {
		fd, err := tcpSocket(ns)
		if err != nil {
			t.Fatal(err)
		}
		err = unix.Connect(fd, &unix.SockaddrInet4{Port: 1, Addr: loopback})
		unix.Close(fd)
		if !errors.Is(err, unix.ECONNREFUSED) {
			t.Fatalf("connect to closed port: %v", err)
		}
	}

	// 2. Accepted connections.
	const conns = 4
	const okPort = 18080
	lfd, err := listenOn(ns, okPort, 128)
	if err != nil {
		t.Fatal(err)
	}
	keep := connectAccept(t, ns, lfd, okPort, loopback, conns)

	// 3. A listener that never accepts: backlog 1, then more connects.
	const ovPort = 18081
	const attempts = 6
	ofd, err := listenOn(ns, ovPort, 1)
	if err != nil {
		t.Fatal(err)
	}
	overflow(t, ns, ovPort, attempts)
	unix.Close(ofd)
	for _, fd := range keep {
		unix.Close(fd)
	}
	unix.Close(lfd)
	time.Sleep(100 * time.Millisecond)
	after := ns.counters(t)
	settle()
	stop()
	recs, evs := rt.Take()
	d := func(k string) float64 { return float64(after[k] - before[k]) }
	t.Logf("kernel deltas: ActiveOpens %v PassiveOpens %v AttemptFails %v ListenOverflows %v ListenDrops %v TCPSynRetrans %v",
		d("Tcp:ActiveOpens"), d("Tcp:PassiveOpens"), d("Tcp:AttemptFails"), d("TcpExt:ListenOverflows"), d("TcpExt:ListenDrops"), d("TcpExt:TCPSynRetrans"))

	tcp := table.EndpointTcp
	closed, _, _ := sums(recs, tcp, map[string]string{"tgid": pid, "role": "client", "server_port": "1"})
	if closed["active_open_failed"] != refused || closed["syn_sent"] != refused || closed["active_open"] != 0 {
		t.Errorf("closed port client: %v, want active_open_failed=syn_sent=%d", closed, refused)
	}

	okc, okcLat, n := sums(recs, tcp, map[string]string{"tgid": pid, "role": "client", "client_ip": "127.0.0.1", "server_ip": "127.0.0.1", "server_port": strconv.Itoa(okPort)})
	t.Logf("ok client (%d records): %v latency count %d", n, okc, okcLat)
	if okc["active_open"] != conns || okc["syn_sent"] != conns || okcLat != conns {
		t.Errorf("ok client: active_open %v syn_sent %v estab_latency count %d, want %d each", okc["active_open"], okc["syn_sent"], okcLat, conns)
	}
	oks, ovs := checkListeners(t, recs, okPort, ovPort, conns, d)
	ovc, _, _ := sums(recs, tcp, map[string]string{"tgid": pid, "role": "client", "server_port": strconv.Itoa(ovPort)})
	t.Logf("overflow client: %v", ovc)
	allc, _, _ := sums(recs, tcp, map[string]string{"tgid": pid, "role": "client"})
	if allc["syn_sent"] != d("Tcp:ActiveOpens") {
		t.Errorf("syn_sent total %v, kernel ActiveOpens %v", allc["syn_sent"], d("Tcp:ActiveOpens"))
	}
	if got := allc["retran_syn"] + ovs["retran_synacks"] + oks["retran_synacks"]; got != d("TcpExt:TCPSynRetrans") {
		t.Errorf("retran_syn+retran_synacks %v, kernel TCPSynRetrans %v", got, d("TcpExt:TCPSynRetrans"))
	}
	if ovc["syn_sent"] != attempts {
		t.Errorf("overflow client syn_sent %v, want %d", ovc["syn_sent"], attempts)
	}

	// Events: one per nonzero metric of the overflowing listener.
	var sawOverflow bool
	for _, e := range evs {
		if e.Metric == "accept_overflow" {
			sawOverflow = true
			if !strings.HasPrefix(e.Message, "TCP accept queue overflow(") || e.Entity != "endpoint_tcp" ||
				!strings.HasPrefix(e.EntityID, pid+"_127.0.0.1_127.0.0.1_18081_1") || e.IP != "Client 127.0.0.1, Server 127.0.0.1:18081" {
				t.Errorf("bad event %+v", e)
			}
		}
		if e.Metric == "listendrop" && !strings.HasPrefix(e.Message, "TCP listen drops(") {
			t.Errorf("bad event %+v", e)
		}
	}
	if !sawOverflow {
		t.Errorf("no accept_overflow event in %+v", evs)
	}
	if n := rt.LostCount(); n != 0 {
		t.Errorf("lost %d events", n)
	}
	// Map reads, the period variable and idle deletes all worked.
	if n := rt.ErrorCount(); n != 0 {
		t.Errorf("%d errors: %v", n, rt.Logs())
	}
}

func TestPrivilegedUDP(t *testing.T) {
	privileged(t)
	ns := newNetns(t)
	_, rt, stop := startProbe(t, defaultCfg())

	const port = 19090
	rfd := udpReceiver(t, ns, port)
	sfd := udpSocket(t, ns)
	checkUDP(t, ns, rt, stop, sfd, rfd, port)
}

// checkUDP sends a burst from sfd to rfd on port that overflows rfd's
// receive buffer, stops the probe and checks endpoint_udp of the test
// process against the namespace's Udp counters and the bytes moved.
func checkUDP(t *testing.T, ns *netns, rt *probetest.Runtime, stop func(), sfd, rfd, port int) {
	t.Helper()
	const size = 100
	const sent = 200
	pid := strconv.Itoa(os.Getpid())
	before := ns.counters(t)
	received := udpBurst(t, sfd, rfd, port, sent, size)
	after := ns.counters(t)
	settle()
	stop()
	recs, _ := rt.Take()
	drops := after["Udp:RcvbufErrors"] - before["Udp:RcvbufErrors"]
	inerr := after["Udp:InErrors"] - before["Udp:InErrors"]
	t.Logf("RcvbufErrors %d InErrors %d received bytes %d", drops, inerr, received)
	if drops == 0 || drops != inerr {
		t.Fatalf("test setup: want RcvbufErrors == InErrors > 0, got %d, %d", drops, inerr)
	}
	u := table.EndpointUdp
	recv, _, _ := sums(recs, u, map[string]string{"tgid": pid, "local_port": strconv.Itoa(port)})
	t.Logf("receiver: %v", recv)
	if recv["udp_rcv_drops"] != float64(drops*size) {
		t.Errorf("udp_rcv_drops %v bytes, kernel %d drops of %d bytes", recv["udp_rcv_drops"], drops, size)
	}
	if recv["bind_rcvs"] != float64(received) || int64(received) != (sent-drops)*size {
		t.Errorf("bind_rcvs %v, received %d", recv["bind_rcvs"], received)
	}
	all, _, _ := sums(recs, u, map[string]string{"tgid": pid})
	if all["bind_sends"] != sent*size {
		t.Errorf("bind_sends %v, want %d", all["bind_sends"], sent*size)
	}
	if n := rt.ErrorCount(); n != 0 {
		t.Errorf("%d errors: %v", n, rt.Logs())
	}
}

// checkListeners checks the server rows of the test process: conns clean
// passive opens on okPort (from 127.0.0.1 to 127.0.0.1), the overflowing
// listener on ovPort against the namespace's ListenOverflows and
// ListenDrops (d gives counter deltas), and that the two saw every passive
// open of the namespace. It returns the two listeners' sums.
func checkListeners(t *testing.T, recs []*table.Record, okPort, ovPort, conns int, d func(string) float64) (oks, ovs map[string]float64) {
	t.Helper()
	pid := strconv.Itoa(os.Getpid())
	tcp := table.EndpointTcp
	oks, oksLat, _ := sums(recs, tcp, map[string]string{"tgid": pid, "role": "server", "client_ip": "127.0.0.1", "server_ip": "127.0.0.1", "server_port": strconv.Itoa(okPort)})
	t.Logf("server: %v latency count %d", oks, oksLat)
	if oks["passive_open"] != float64(conns) || oksLat != uint64(conns) || oks["synack_sent"] != float64(conns) || oks["passive_open_failed"] != 0 {
		t.Errorf("server: passive_open %v estab_latency count %d synack_sent %v, want %d each", oks["passive_open"], oksLat, oks["synack_sent"], conns)
	}
	ovs, _, _ = sums(recs, tcp, map[string]string{"tgid": pid, "role": "server", "server_port": strconv.Itoa(ovPort)})
	t.Logf("overflow server: %v", ovs)
	if ovs["accept_overflow"] != d("TcpExt:ListenOverflows") || ovs["accept_overflow"] == 0 {
		t.Errorf("accept_overflow = %v, kernel ListenOverflows delta %v", ovs["accept_overflow"], d("TcpExt:ListenOverflows"))
	}
	if ovs["listendrop"] != d("TcpExt:ListenDrops") {
		t.Errorf("listendrop = %v, kernel ListenDrops delta %v", ovs["listendrop"], d("TcpExt:ListenDrops"))
	}
	// Every passive open in the namespace went through the two listeners.
	if got := oks["passive_open"] + ovs["passive_open"]; got != d("Tcp:PassiveOpens") {
		t.Errorf("passive_open total %v, kernel PassiveOpens %v", got, d("Tcp:PassiveOpens"))
	}
	return oks, ovs
}

// TestPrivilegedPreexisting: listeners and a UDP socket opened BEFORE the
// probe starts (every listener on a real node) are attributed by the
// task_file walk at Start, so their passive opens, overflows and drops are
// reported exactly.
func TestPrivilegedPreexisting(t *testing.T) {
	privileged(t)
	ns := newNetns(t)
	const okPort, ovPort, udpPort = 18180, 18181, 19190
	const conns, attempts = 5, 6
	lfd, err := listenOn(ns, okPort, 128)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(lfd)
	ofd, err := listenOn(ns, ovPort, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ofd)
	rfd := udpReceiver(t, ns, udpPort)

	_, rt, stop := startProbe(t, defaultCfg())
	before := ns.counters(t)
	keep := connectAccept(t, ns, lfd, okPort, loopback, conns)
	overflow(t, ns, ovPort, attempts)
	for _, fd := range keep {
		unix.Close(fd)
	}
	time.Sleep(100 * time.Millisecond)
	after := ns.counters(t)
	settle()
	stop()
	recs, _ := rt.Take()
	d := func(k string) float64 { return float64(after[k] - before[k]) }
	t.Logf("kernel deltas: PassiveOpens %v ListenOverflows %v ListenDrops %v", d("Tcp:PassiveOpens"), d("TcpExt:ListenOverflows"), d("TcpExt:ListenDrops"))

	checkListeners(t, recs, okPort, ovPort, conns, d)

	// UDP: a receiver bound before Start, overflowed after it. Its drops
	// happen in softirq, so only the walk can name its owner.
	_, rt, stop = startProbe(t, defaultCfg())
	sfd := udpSocket(t, ns)
	checkUDP(t, ns, rt, stop, sfd, rfd, udpPort)
}

// TestPrivilegedWalkOnDemand: a listener whose owner is unknown while the
// probe runs (its record is deleted here, as for a socket the Start walk
// could not see) asks for a walk from the hook that meets it; once the
// walk ran, its connections are counted exactly again.
func TestPrivilegedWalkOnDemand(t *testing.T) {
	privileged(t)
	ns := newNetns(t)
	pid := strconv.Itoa(os.Getpid())
	const port, conns = 18280, 4
	lfd, err := listenOn(ns, port, 128)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(lfd)
	p, rt, stop := startProbe(t, defaultCfg())
	owners := p.coll.Maps["galago_sk_owners"]
	var o socketGalagoSkOwner
	if err := owners.Lookup(uint32(lfd), &o); err != nil {
		t.Fatalf("Start walk left the listener without owner: %v", err)
	}
	if o.Tgid != uint32(os.Getpid()) || o.Src != 4 {
		t.Fatalf("listener owner %+v, want tgid %d src FILE (4)", o, os.Getpid())
	}
	if err := owners.Delete(uint32(lfd)); err != nil {
		t.Fatal(err)
	}
	// The first connection meets the unowned listener (from 127.0.0.2, a
	// row of its own: its SYN is not attributable).
	trigger := connectAccept(t, ns, lfd, port, [4]byte{127, 0, 0, 2}, 1)
	deadline := time.Now().Add(3 * time.Second)
	for owners.Lookup(uint32(lfd), &o) != nil {
		if time.Now().After(deadline) {
			t.Fatal("no owner walk after a hook met the unowned listener")
		}
		time.Sleep(20 * time.Millisecond)
	}
	keep := connectAccept(t, ns, lfd, port, loopback, conns)
	for _, fd := range append(trigger, keep...) {
		unix.Close(fd)
	}
	settle()
	stop()
	recs, _ := rt.Take()
	got, lat, _ := sums(recs, table.EndpointTcp, map[string]string{"tgid": pid, "role": "server", "client_ip": "127.0.0.1", "server_port": strconv.Itoa(port)})
	t.Logf("after the on-demand walk: %v latency count %d", got, lat)

	if got["passive_open"] != conns || got["synack_sent"] != conns || lat != conns {
		t.Errorf("passive_open %v synack_sent %v estab_latency count %d, want %d each", got["passive_open"], got["synack_sent"], lat, conns)
	}
}

func TestPrivilegedSnoopers(t *testing.T) {
	privileged(t)
	for _, tc := range []struct {
		name string
		tgt  snoop.Targets
		want bool
	}{
		{"whitelist-other", probetest.NewTargets(snoop.Whitelist, 1), false},
		{"whitelist-self", probetest.NewTargets(snoop.Whitelist, os.Getpid()), true},
		{"blacklist-self", probetest.NewTargets(snoop.Blacklist, os.Getpid()), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNetns(t)
			cfg := defaultCfg()
			cfg.Targets = tc.tgt
			_, rt, stop := startProbe(t, cfg)
			for i := 0; i < 3; i++ {
				fd, err := tcpSocket(ns)
				if err != nil {
					t.Fatal(err)
				}
				_ = unix.Connect(fd, &unix.SockaddrInet4{Port: 1, Addr: loopback})
				unix.Close(fd)
			}
			settle()
			stop()
			recs, _ := rt.Take()
			got, _, n := sums(recs, table.EndpointTcp, map[string]string{"tgid": strconv.Itoa(os.Getpid()), "server_port": "1"})
			if tc.want && got["active_open_failed"] != 3 {
				t.Errorf("observed: active_open_failed %v, want 3", got["active_open_failed"])
			}
			if !tc.want && n != 0 {
				t.Errorf("not observed, yet %d series: %v", n, got)
			}
		})
	}
}

func TestPrivilegedRestartLeavesNothing(t *testing.T) {
	privileged(t)
	for i := 0; i < 2; i++ {
		p, _, stop := startProbe(t, defaultCfg())
		var progIDs []ebpf.ProgramID
		for name, prog := range p.coll.Programs {
			info, err := prog.Info()
			if err != nil {
				t.Fatal(err)
			}
			id, ok := info.ID()
			if !ok {
				t.Fatalf("no id for %s", name)
			}
			progIDs = append(progIDs, id)
		}
		var linkIDs []uint32
		for _, l := range p.links {
			info, err := l.Info()
			if err != nil {
				t.Fatal(err)
			}
			linkIDs = append(linkIDs, uint32(info.ID))
		}
		if len(linkIDs) != len(hooks) {
			t.Errorf("%d links attached, want %d", len(linkIDs), len(hooks))
		}
		stop()
		time.Sleep(50 * time.Millisecond)
		for _, id := range progIDs {
			if prog, err := ebpf.NewProgramFromID(id); err == nil {
				prog.Close()
				t.Errorf("program %d still loaded after Stop", id)
			}
		}
		for _, id := range linkIDs {
			if l, err := link.NewFromID(link.ID(id)); err == nil {
				l.Close()
				t.Errorf("link %d still exists after Stop", id)
			}
		}
	}
}

// closingServer listens on addr and closes every connection it accepts,
// until the test ends.
func closingServer(t testing.TB, network, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	return ln
}

// TestPrivilegedIPv6: endpoints of IPv6 sockets carry their addresses
// (read from sock_common with direct loads): three connections over ::1
// and one 100-byte datagram, each end exact.
func TestPrivilegedIPv6(t *testing.T) {
	privileged(t)
	_, rt, stop := startProbe(t, defaultCfg())
	ln := closingServer(t, "tcp6", "[::1]:0")
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	const conns, size = 3, 100
	for i := 0; i < conns; i++ {
		c, err := net.Dial("tcp6", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	}
	u, err := net.ListenPacket("udp6", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	s, err := net.Dial("udp6", u.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	if n, _, err := u.ReadFrom(make([]byte, 2*size)); err != nil || n != size {
		t.Fatalf("udp read %d, %v", n, err)
	}
	settle()
	stop()
	recs, _ := rt.Take()
	pid := strconv.Itoa(os.Getpid())
	keys := map[string]string{"tgid": pid, "client_ip": "::1", "server_ip": "::1", "server_port": port}
	keys["role"] = "client"
	cl, clLat, _ := sums(recs, table.EndpointTcp, keys)
	keys["role"] = "server"
	sv, _, _ := sums(recs, table.EndpointTcp, keys)
	if cl["active_open"] != conns || cl["syn_sent"] != conns || clLat != conns || sv["passive_open"] != conns || sv["synack_sent"] != conns {
		t.Errorf("client %v (estab_latency count %d), server %v: want %d opens each", cl, clLat, sv, conns)
	}
	uport := strconv.Itoa(u.LocalAddr().(*net.UDPAddr).Port)
	snd, _, _ := sums(recs, table.EndpointUdp, map[string]string{"tgid": pid, "local_ip": "::1", "remote_ip": "::1", "remote_port": uport})
	rcv, _, _ := sums(recs, table.EndpointUdp, map[string]string{"tgid": pid, "local_ip": "::1", "local_port": uport})
	if snd["bind_sends"] != size || rcv["bind_rcvs"] != size {
		t.Errorf("udp sender %v, receiver %v: want %d bytes each way", snd, rcv, size)
	}
}
