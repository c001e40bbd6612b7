package flowtracer

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
)

// router is a pod namespace, a node namespace that routes it to a server
// namespace, DNATs the service address 10.96.0.10:80 to the backend
// 10.200.2.2:8080 and masquerades what it forwards (the server sees the
// node's 10.200.2.1, as behind kube-proxy's SNAT), and the server
// namespace.
type router struct {
	pod, node, srv string
	service        netip.AddrPort
	backend        netip.AddrPort
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v: %s", args, err, out)
	}
}

func newRouter(t *testing.T) *router {
	t.Helper()
	tag := fmt.Sprintf("%d-%d", os.Getpid()%100000, time.Now().UnixNano()%100000)
	r := &router{pod: "galago-ftp-" + tag, node: "galago-ftn-" + tag, srv: "galago-fts-" + tag,
		service: netip.MustParseAddrPort("10.96.0.10:80"), backend: netip.MustParseAddrPort("10.200.2.2:8080")}
	for _, ns := range []string{r.pod, r.node, r.srv} {
		run(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	}
	run(t, "ip", "-n", r.pod, "link", "add", "eth0", "type", "veth", "peer", "name", "pod0", "netns", r.node)
	run(t, "ip", "-n", r.srv, "link", "add", "eth0", "type", "veth", "peer", "name", "srv0", "netns", r.node)
	for _, c := range [][]string{
		{r.pod, "eth0", "10.200.1.2/24"}, {r.node, "pod0", "10.200.1.1/24"},
		{r.srv, "eth0", "10.200.2.2/24"}, {r.node, "srv0", "10.200.2.1/24"},
	} {
		run(t, "ip", "-n", c[0], "addr", "add", c[2], "dev", c[1])
		run(t, "ip", "-n", c[0], "link", "set", c[1], "up")
	}
	run(t, "ip", "-n", r.pod, "route", "add", "default", "via", "10.200.1.1")
	run(t, "ip", "-n", r.srv, "route", "add", "default", "via", "10.200.2.1")
	run(t, "ip", "netns", "exec", r.node, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	run(t, "ip", "netns", "exec", r.node, "iptables", "-t", "nat", "-A", "PREROUTING",
		"-d", r.service.Addr().String()+"/32", "-p", "tcp", "--dport", fmt.Sprint(r.service.Port()),
		"-j", "DNAT", "--to-destination", r.backend.String())
	run(t, "ip", "netns", "exec", r.node, "iptables", "-t", "nat", "-A", "POSTROUTING", "-o", "srv0", "-j", "MASQUERADE")
	return r
}

// in runs fn on a thread inside namespace ns; sockets made there stay in it.
func in(ns string, fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ch <- err
			return // the thread stays locked and ends with the goroutine
		}
		defer self.Close()
		target, err := os.Open("/var/run/netns/" + ns)
		if err != nil {
			ch <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- err
			return
		}
		ferr := fn()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- fmt.Errorf("back from the namespace: %w", err)
			return
		}
		runtime.UnlockOSThread()
		ch <- ferr
	}()
	return <-ch
}

// TestPrivilegedOriginBehindNAT: clients in a pod namespace connect to a
// ClusterIP that the node DNATs to a server namespace and masquerades; the
// server sees the node's address. With flowtracer running, each server-side
// connection (its own address, the masqueraded peer) maps to exactly the
// client's own address and port; after Stop, nothing does.
func TestPrivilegedOriginBehindNAT(t *testing.T) {
	probetest.RequireHooks(t, func() error { _, err := bpfrt.HaveCgroup2(); return err }())
	r := newRouter(t)
	origins := NewOrigins()
	p := New(WithOrigins(origins))
	rt := probetest.NewRuntime(t)
	if err := p.Start(rt.Context(), probe.Config{Params: probe.DefaultParams()}, rt); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			rt.Shutdown(t, p)
		}
	})
	// The listener is made after the start: TCP_SAVE_SYN is set on it at
	// listen().
	var ln net.Listener
	if err := in(r.srv, func() (err error) { ln, err = net.Listen("tcp4", r.backend.String()); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const n = 5
	type pair struct{ client, serverLocal, serverRemote netip.AddrPort }
	var pairs []pair
	for range n {
		var c net.Conn
		if err := in(r.pod, func() (err error) { c, err = net.DialTimeout("tcp4", r.service.String(), 3*time.Second); return err }); err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		pairs = append(pairs, pair{
			client:       c.LocalAddr().(*net.TCPAddr).AddrPort(),
			serverLocal:  s.LocalAddr().(*net.TCPAddr).AddrPort(),
			serverRemote: s.RemoteAddr().(*net.TCPAddr).AddrPort(),
		})
		defer c.Close()
		defer s.Close()
	}
	for _, pr := range pairs {
		if pr.serverRemote.Addr() != netip.MustParseAddr("10.200.2.1") {
			t.Fatalf("the server sees %v, not the node's masqueraded address", pr.serverRemote)
		}
		got, ok := origins.Lookup(pr.serverLocal, pr.serverRemote)
		if !ok || got != pr.client {
			t.Errorf("server connection %v <- %v: origin %v (found %v), want the client's %v", pr.serverLocal, pr.serverRemote, got, ok, pr.client)
		}
	}
	if _, ok := origins.Lookup(pairs[0].serverLocal, netip.AddrPortFrom(pairs[0].serverRemote.Addr(), 1)); ok {
		t.Error("a connection that never was has an origin")
	}
	rt.Shutdown(t, p)
	stopped = true
	if _, ok := origins.Lookup(pairs[0].serverLocal, pairs[0].serverRemote); ok {
		t.Error("origins still answer after Stop")
	}
	if n := rt.LostCount(); n != 0 {
		t.Errorf("%d SYNs without room for the option", n)
	}
}
