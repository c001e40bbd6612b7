package tcp

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/conntrack/conntracktest"
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
	if !strings.Contains(rt.Logs(), "cluster_ip_backend=2 behaves as 1") {
		t.Errorf("no log line says 2 behaves as 1: %s", rt.Logs())
	}
	if n := rt.ErrorCount(); n != 0 {
		t.Fatalf("%d errors counted: %s", n, rt.Logs())
	}
}
