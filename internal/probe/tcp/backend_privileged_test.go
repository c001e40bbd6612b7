package tcp

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/conntrack/conntracktest"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/flowtracer"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// TestPrivilegedClusterIPBackend: a client in a namespace connects to a
// ClusterIP-like service address that iptables DNATs to a backend; its
// tcp_metric row names the service with cluster_ip_backend=0 and the
// backend with 1 and 2.
func TestPrivilegedClusterIPBackend(t *testing.T) {
	requirePrivileged(t)
	// The backend is a helper process in the namespace, not the test
	// process: the probe walks a namespace through /proc/<tgid>/ns/net of a
	// process with a socket in it, and the test process's is its main
	// thread's. The port NewServiceNetns picked is free again once its
	// listener is closed (nobody else is in the namespace).
	ns := conntracktest.NewServiceNetns(t, func(ln net.Listener) { ln.Close() })
	srv := startHelper(t, ns.Name, "hold-server", ns.Backend.String(), 0, 3)
	srv.expect(ns.Backend.String())
	// Only the test's clients are observed: the rest of the machine's
	// connections stay out of the ring buffer.
	targets := probetest.NewTargets(snoop.Whitelist)
	cfg := defaultCfg()
	cfg.Targets = targets
	p, rt := startProbe(t, cfg)
	for _, tc := range []struct {
		param    int
		ip, port string
	}{
		{0, ns.Service.Addr().String(), strconv.Itoa(int(ns.Service.Port()))},
		{1, ns.Backend.Addr().String(), strconv.Itoa(int(ns.Backend.Port()))},
		{2, ns.Backend.Addr().String(), strconv.Itoa(int(ns.Backend.Port()))},
	} {
		cfg.Params.ClusterIPBackend = tc.param
		if err := p.Reconfigure(cfg); err != nil {
			t.Fatal(err)
		}
		cli := startHelper(t, ns.Name, "client", ns.Service.String(), 1000, 0)
		cli.expect("done")
		// Observed from now on: the next snapshot sees the open connection
		// (with its counters since it started).
		targets.Set(cli.pid)
		var client []*table.Record
		probetest.WaitFor(t, "the client's bytes reported", func() bool {
			client = client[:0]
			for _, r := range rows(rt, cli.pid) {
				if r.Str("role") == "client" {
					client = append(client, r)
				}
			}
			return sum(client, "tx_bytes") >= 1000
		})
		oneKey(t, client, map[string]string{"server_ip": tc.ip, "server_port": tc.port})
		checkSum(t, client, "tx_bytes", 1000)
		cli.do("close")
		cli.wait()
	}
	if !strings.Contains(rt.Logs(), "cluster_ip_backend=2 behaves as 1 (ctnetlink lookups) on the client side") {
		t.Errorf("no log line says 2 behaves as 1: %s", rt.Logs())
	}
	if n := rt.ErrorCount(); n != 0 {
		t.Fatalf("%d errors counted: %s", n, rt.Logs())
	}
}

// TestPrivilegedFlowTracerServerSide: a client in a pod namespace sends
// 1000 bytes to a ClusterIP that the node DNATs to a server namespace and
// masquerades. The server's tcp_metric row names the node's masqueraded
// address as client_ip with cluster_ip_backend=0, and with 2, while the
// flowtracer probe runs, the real client (the pod's address), with the
// exact byte count either way.
func TestPrivilegedFlowTracerServerSide(t *testing.T) {
	requirePrivileged(t)
	r := conntracktest.NewRouter(t)
	origins := flowtracer.NewOrigins()
	ft := flowtracer.New(flowtracer.WithOrigins(origins))
	frt := probetest.NewRuntime(t)
	if err := ft.Start(frt.Context(), probe.Config{Params: probe.DefaultParams()}, frt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { frt.Shutdown(t, ft) })
	targets := probetest.NewTargets(snoop.Whitelist)
	cfg := defaultCfg()
	cfg.Targets = targets
	p := New(withPeriods(testSample, testReport), WithOrigins(origins))
	rt := probetest.NewRuntime(t)
	if err := p.Start(context.Background(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(t, p) })
	const sent = 1000
	for _, tc := range []struct {
		param  int
		client netip.Addr
	}{{0, r.NodeAddr}, {2, r.PodAddr}} {
		cfg.Params.ClusterIPBackend = tc.param
		if err := p.Reconfigure(cfg); err != nil {
			t.Fatal(err)
		}
		// The server listens after flowtracer started: its SYNs are kept.
		srv := startHelper(t, r.Srv, "server", r.Backend.String(), 0, sent)
		srv.expect("ready")
		targets.Set(srv.pid)
		cli := startHelper(t, r.Pod, "client", r.Service.String(), sent, 0)
		cli.expect("done")
		srv.expect("done")
		var server []*table.Record
		probetest.WaitFor(t, "the server's bytes reported", func() bool {
			server = server[:0]
			for _, rec := range rows(rt, srv.pid) {
				if rec.Str("role") == "server" {
					server = append(server, rec)
				}
			}
			return sum(server, "rx_bytes") >= sent
		})
		oneKey(t, server, map[string]string{"client_ip": tc.client.String(), "server_ip": r.Backend.Addr().String(),
			"server_port": strconv.Itoa(int(r.Backend.Port()))})
		checkSum(t, server, "rx_bytes", sent)
		cli.do("close")
		srv.do("close")
		cli.wait()
		srv.wait()
	}
	if n := rt.ErrorCount(); n != 0 {
		t.Fatalf("%d errors counted: %s", n, rt.Logs())
	}
}
