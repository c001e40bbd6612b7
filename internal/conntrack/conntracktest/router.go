package conntracktest

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/netns"
)

// Router is a Kubernetes-like path to a ClusterIP across three network
// namespaces: Pod (10.200.1.2) routes through Node, which DNATs Service
// (10.96.0.10:80) to Backend (10.200.2.2:8080) in Srv and masquerades what
// it forwards there, so the server sees Node's NodeAddr (10.200.2.1), as
// behind kube-proxy's SNAT. The same path exists in IPv6 (the *6 fields:
// Service6 [fd00:96::10]:80 to Backend6 [fd00:200:2::2]:8080, masqueraded
// as NodeAddr6), as on a dual-stack cluster.
type Router struct {
	Pod, Node, Srv string
	PodAddr        netip.Addr
	NodeAddr       netip.Addr
	Service        netip.AddrPort
	Backend        netip.AddrPort
	PodAddr6       netip.Addr
	NodeAddr6      netip.Addr
	Service6       netip.AddrPort
	Backend6       netip.AddrPort
}

// NewRouter makes the namespaces, links, routes and rules (removed when t
// ends). Nothing listens on Backend: the test does, in Srv.
func NewRouter(t testing.TB) *Router {
	t.Helper()
	tag := fmt.Sprintf("%d-%d", os.Getpid()%100000, time.Now().UnixNano()%100000)
	r := &Router{Pod: "galago-rp-" + tag, Node: "galago-rn-" + tag, Srv: "galago-rs-" + tag,
		PodAddr: netip.MustParseAddr("10.200.1.2"), NodeAddr: netip.MustParseAddr("10.200.2.1"),
		Service: netip.MustParseAddrPort("10.96.0.10:80"), Backend: netip.MustParseAddrPort("10.200.2.2:8080"),
		PodAddr6: netip.MustParseAddr("fd00:200:1::2"), NodeAddr6: netip.MustParseAddr("fd00:200:2::1"),
		Service6: netip.MustParseAddrPort("[fd00:96::10]:80"), Backend6: netip.MustParseAddrPort("[fd00:200:2::2]:8080")}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	for _, ns := range []string{r.Pod, r.Node, r.Srv} {
		run("ip", "netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		run("ip", "-n", ns, "link", "set", "lo", "up")
	}
	run("ip", "-n", r.Pod, "link", "add", "eth0", "type", "veth", "peer", "name", "pod0", "netns", r.Node)
	run("ip", "-n", r.Srv, "link", "add", "eth0", "type", "veth", "peer", "name", "srv0", "netns", r.Node)
	for _, c := range [][]string{
		{r.Pod, "eth0", r.PodAddr.String() + "/24"}, {r.Node, "pod0", "10.200.1.1/24"},
		{r.Srv, "eth0", r.Backend.Addr().String() + "/24"}, {r.Node, "srv0", r.NodeAddr.String() + "/24"},
		{r.Pod, "eth0", r.PodAddr6.String() + "/64"}, {r.Node, "pod0", "fd00:200:1::1/64"},
		{r.Srv, "eth0", r.Backend6.Addr().String() + "/64"}, {r.Node, "srv0", r.NodeAddr6.String() + "/64"},
	} {
		// nodad: usable at once, not after duplicate address detection
		run("ip", "-n", c[0], "addr", "add", c[2], "dev", c[1], "nodad")
		run("ip", "-n", c[0], "link", "set", c[1], "up")
	}
	run("ip", "-n", r.Pod, "route", "add", "default", "via", "10.200.1.1")
	run("ip", "-n", r.Srv, "route", "add", "default", "via", r.NodeAddr.String())
	run("ip", "-n", r.Pod, "-6", "route", "add", "default", "via", "fd00:200:1::1")
	run("ip", "-n", r.Srv, "-6", "route", "add", "default", "via", r.NodeAddr6.String())
	run("ip", "netns", "exec", r.Node, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	for _, nat := range []struct {
		cmd, dst     string
		svc, backend netip.AddrPort
	}{{"iptables", "/32", r.Service, r.Backend}, {"ip6tables", "/128", r.Service6, r.Backend6}} {
		run("ip", "netns", "exec", r.Node, nat.cmd, "-t", "nat", "-A", "PREROUTING",
			"-d", nat.svc.Addr().String()+nat.dst, "-p", "tcp", "--dport", fmt.Sprint(nat.svc.Port()),
			"-j", "DNAT", "--to-destination", nat.backend.String())
		run("ip", "netns", "exec", r.Node, nat.cmd, "-t", "nat", "-A", "POSTROUTING", "-o", "srv0", "-j", "MASQUERADE")
	}
	return r
}

// Do runs fn on a thread inside namespace ns (one of the router's);
// sockets made there stay in it.
func (r *Router) Do(ns string, fn func() error) error {
	fd, err := unix.Open("/var/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return netns.DoFD(fd, fn)
}

// Netns is the inode number of namespace ns (one of the router's), the
// namespace id the probes report.
func (r *Router) Netns(ns string) (uint32, error) {
	var st unix.Stat_t
	if err := unix.Stat("/var/run/netns/"+ns, &st); err != nil {
		return 0, err
	}
	return uint32(st.Ino), nil
}
