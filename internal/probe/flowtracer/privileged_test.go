package flowtracer

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/conntrack/conntracktest"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
)

// TestPrivilegedOriginBehindNAT: clients in a pod namespace connect to a
// ClusterIP that the node DNATs to a server namespace and masquerades; the
// server sees the node's address. With flowtracer running, each server-side
// connection (its own address, the masqueraded peer) maps to exactly the
// client's own address and port; after Stop, nothing does.
func TestPrivilegedOriginBehindNAT(t *testing.T) {
	probetest.RequireHooks(t, func() error { _, err := bpfrt.HaveCgroup2(); return err }())
	r := conntracktest.NewRouter(t)
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
	if err := r.Do(r.Srv, func() (err error) { ln, err = net.Listen("tcp4", r.Backend.String()); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const n = 5
	type pair struct{ client, serverLocal, serverRemote netip.AddrPort }
	var pairs []pair
	for range n {
		var c net.Conn
		if err := r.Do(r.Pod, func() (err error) { c, err = net.DialTimeout("tcp4", r.Service.String(), 3*time.Second); return err }); err != nil {
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
		if pr.serverRemote.Addr() != r.NodeAddr || pr.client.Addr() != r.PodAddr {
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
