package l7

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/conntrack/conntracktest"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/table"
)

// TestClusterIPBackendPrivileged: curl in a namespace asks a ClusterIP-like
// service address that iptables DNATs to a backend; the client's rows name
// the service with cluster_ip_backend=0 and the backend with 1 and with 2.
func TestClusterIPBackendPrivileged(t *testing.T) {
	probetest.RequireTools(t, "ip", "iptables", "curl", "sleep")
	probetest.RequireHooks(t, bpfrt.HaveTPBTF("sys_exit"))
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ns := conntracktest.NewServiceNetns(t, func(ln net.Listener) {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			t.Errorf("backend server: %v", err)
		}
	})
	t.Cleanup(func() { _ = srv.Close() })
	// A process that stays in the namespace, as a pod's pause process does:
	// curl may be gone when its connection is looked up.
	holder := exec.Command("ip", "netns", "exec", ns.Name, "sleep", "60")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	probetest.WaitFor(t, "the holder process in the namespace", func() bool {
		var st unix.Stat_t
		err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", holder.Process.Pid), &st)
		return err == nil && st.Ino == uint64(ns.Inode)
	})

	p := New()
	p.reportEvery = 200 * time.Millisecond
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	cfg := probe.Config{SubItems: bitBytes | bitRPC, Params: probe.DefaultParams()}
	cfg.Params.L7Protocol = []string{"http"}
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(t, p)

	for _, tc := range []struct {
		param int
		want  string
	}{
		{0, ns.Service.String()},
		{1, ns.Backend.String()},
		{2, ns.Backend.String()},
	} {
		cfg.Params.ClusterIPBackend = tc.param
		if err := p.Reconfigure(cfg); err != nil {
			t.Fatal(err)
		}
		svc := "http://" + ns.Service.String()
		cmd := exec.Command("ip", "netns", "exec", ns.Name, "curl", "-sf", "-o", "/dev/null", svc+"/")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("curl: %v: %s", err, out)
		}
		tgid := strconv.Itoa(cmd.Process.Pid) // ip netns exec execs curl
		for _, tbl := range []*table.Table{table.L7Rpc, table.L7Link} {
			recs := rt.WaitTable(t, tbl, 1, func(r *table.Record) bool {
				return r.Str("tgid") == tgid && r.Str("l7_role") == "client"
			})
			for _, r := range recs {
				if r.Str("tgid") != tgid || r.Str("l7_role") != "client" {
					continue
				}
				got := net.JoinHostPort(r.Str("server_ip"), r.Str("server_port"))
				if got != tc.want {
					t.Errorf("cluster_ip_backend=%d: %s client row server %s, want %s (%s)",
						tc.param, tbl.Name, got, tc.want, rt.Logs())
				}
			}
		}
	}
	if !strings.Contains(rt.Logs(), "cluster_ip_backend=2 behaves as 1 (ctnetlink lookups) on the client side") {
		t.Errorf("no log line says 2 behaves as 1: %s", rt.Logs())
	}
	if n := rt.ErrorCount(); n != 0 {
		t.Fatalf("%d errors counted: %s", n, rt.Logs())
	}
}
