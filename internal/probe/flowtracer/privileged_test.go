package flowtracer

import (
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/conntrack/conntracktest"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
)

// TestPrivilegedOriginBehindNAT: clients in a pod namespace connect to a
// ClusterIP that the node DNATs to a server namespace and masquerades; the
// server sees the node's address. With flowtracer running, each server-side
// connection (its namespace, its own address, the masqueraded peer) maps to
// exactly the client's own address and port: IPv4 to an IPv4 listener;
// IPv6, IPv4 and IPv4-mapped IPv6 clients to a dual-stack listener (whose
// IPv4 connections are IPv4-mapped). Another namespace's same tuple has
// none; a closed connection's origin is swept after the grace; after Stop,
// nothing answers.
func TestPrivilegedOriginBehindNAT(t *testing.T) {
	probetest.RequireHooks(t, func() error { _, err := bpfrt.HaveCgroup2(); return err }())
	r := conntracktest.NewRouter(t)
	srvNS, err := r.Netns(r.Srv)
	if err != nil {
		t.Fatal(err)
	}
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
	type pair struct {
		name                              string
		client, serverLocal, serverRemote netip.AddrPort
		conns                             []net.Conn
	}
	// connect makes one connection from the pod to service with dial and
	// accepts it on ln. The listeners are made after the start:
	// TCP_SAVE_SYN is set on them at listen().
	connect := func(name string, ln net.Listener, dial func() (net.Conn, error)) pair {
		t.Helper()
		var c net.Conn
		if err := r.Do(r.Pod, func() (err error) { c, err = dial(); return err }); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return pair{name: name, client: c.LocalAddr().(*net.TCPAddr).AddrPort(),
			serverLocal: s.LocalAddr().(*net.TCPAddr).AddrPort(), serverRemote: s.RemoteAddr().(*net.TCPAddr).AddrPort(),
			conns: []net.Conn{c, s}}
	}
	dialer := func(network string, to netip.AddrPort) func() (net.Conn, error) {
		return func() (net.Conn, error) { return net.DialTimeout(network, to.String(), 3*time.Second) }
	}
	listen := func(network, addr string) net.Listener {
		t.Helper()
		var ln net.Listener
		if err := r.Do(r.Srv, func() (err error) { ln, err = net.Listen(network, addr); return err }); err != nil {
			t.Fatal(err)
		}
		return ln
	}
	var pairs []pair
	ln4 := listen("tcp4", r.Backend.String())
	for range 3 {
		pairs = append(pairs, connect("IPv4", ln4, dialer("tcp4", r.Service)))
	}
	ln4.Close()
	dual := listen("tcp", net.JoinHostPort("::", "8080"))
	defer dual.Close()
	for range 2 {
		pairs = append(pairs, connect("IPv6", dual, dialer("tcp6", r.Service6)),
			connect("IPv4 to a dual-stack listener", dual, dialer("tcp4", r.Service)),
			connect("IPv4-mapped IPv6", dual, func() (net.Conn, error) { return dialMapped(r.Service) }))
	}
	for _, pr := range pairs {
		want := r.NodeAddr
		if pr.name == "IPv6" {
			want = r.NodeAddr6
		}
		if mapped := pr.name == "IPv4-mapped IPv6"; pr.client.Addr().Is4In6() != mapped {
			t.Fatalf("%s: the client's address %v", pr.name, pr.client)
		}
		if pr.serverRemote.Addr().Unmap() != want {
			t.Fatalf("%s: the server sees %v, not the node's masqueraded address", pr.name, pr.serverRemote)
		}
		got, ok := origins.Lookup(srvNS, pr.serverLocal, pr.serverRemote)
		if want := netip.AddrPortFrom(pr.client.Addr().Unmap(), pr.client.Port()); !ok || got != want {
			t.Errorf("%s: server connection %v <- %v: origin %v (found %v), want the client's %v", pr.name, pr.serverLocal, pr.serverRemote, got, ok, want)
		}
		if got, ok := origins.Lookup(srvNS+1, pr.serverLocal, pr.serverRemote); ok {
			t.Errorf("%s: the same tuple in another namespace has the origin %v", pr.name, got)
		}
	}
	if _, ok := origins.Lookup(srvNS, pairs[0].serverLocal, netip.AddrPortFrom(pairs[0].serverRemote.Addr(), 1)); ok {
		t.Error("a connection that never was has an origin")
	}
	// Closed connections keep their origin until the sweep's grace.
	for _, c := range pairs[0].conns {
		c.Close()
	}
	probetest.WaitFor(t, "the closed connection stamped", func() bool {
		var v flowtracerFtOrigin
		k := keyOf(srvNS, pairs[0].serverLocal, pairs[0].serverRemote)
		return p.objs.Origins.Lookup(&k, &v) == nil && v.ClosedNs != 0
	})
	if err := p.sweepClosed(time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, ok := origins.Lookup(srvNS, pairs[0].serverLocal, pairs[0].serverRemote); !ok {
		t.Error("a connection closed within the grace lost its origin")
	}
	if err := p.sweepClosed(0); err != nil {
		t.Fatal(err)
	}
	if _, ok := origins.Lookup(srvNS, pairs[0].serverLocal, pairs[0].serverRemote); ok {
		t.Error("a closed connection kept its origin after the grace")
	}
	if _, ok := origins.Lookup(srvNS, pairs[1].serverLocal, pairs[1].serverRemote); !ok {
		t.Error("the sweep deleted an open connection's origin")
	}
	for _, pr := range pairs[1:] {
		for _, c := range pr.conns {
			c.Close()
		}
	}
	rt.Shutdown(t, p)
	stopped = true
	if _, ok := origins.Lookup(srvNS, pairs[1].serverLocal, pairs[1].serverRemote); ok {
		t.Error("origins still answer after Stop")
	}
	if n := rt.LostCount(); n != 0 {
		t.Errorf("%d SYNs without room for the option or origins not kept", n)
	}
}

// dialMapped connects an AF_INET6 socket to the IPv4-mapped form of the
// IPv4 address to (the Go dialer would make an AF_INET socket).
func dialMapped(to netip.AddrPort) (net.Conn, error) {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "mapped")
	defer f.Close()
	if err := unix.Connect(fd, &unix.SockaddrInet6{Addr: netip.AddrFrom16(to.Addr().As16()).As16(), Port: int(to.Port())}); err != nil {
		return nil, err
	}
	return net.FileConn(f)
}
