package l7

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/conntrack/conntracktest"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/flowtracer"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/table"
)

// TestClusterIPBackendPrivileged: curl in a namespace asks a ClusterIP-like
// service address that iptables DNATs to a backend; the client's rows name
// the service with cluster_ip_backend=0 and the backend with 1 and with 2;
// then the server side of a DNAT and masquerade router with flowtracer
// (checkFlowTracerServerSide).
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

	// flowtracer runs from the start, for the server side checked last.
	origins := flowtracer.NewOrigins()
	ft := flowtracer.New(flowtracer.WithOrigins(origins))
	frt := probetest.NewRuntime(t)
	if err := ft.Start(frt.Context(), probe.Config{Params: probe.DefaultParams()}, frt); err != nil {
		t.Fatal(err)
	}
	defer frt.Shutdown(t, ft)
	p := New(WithOrigins(origins))
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
	t.Run("flowtracer server side", func(t *testing.T) { checkFlowTracerServerSide(t, p, rt, cfg) })
	if n := rt.ErrorCount(); n != 0 {
		t.Fatalf("%d errors counted: %s", n, rt.Logs())
	}
}

// checkFlowTracerServerSide: curl in a pod namespace asks a ClusterIP that
// the node namespace DNATs to an HTTP server in a server namespace and
// masquerades: the server's rows of p (which reads origins) name the
// node's address as client_ip with cluster_ip_backend=0 and, while the
// flowtracer probe runs, curl's own address with 2.
func checkFlowTracerServerSide(t *testing.T, p *Probe, rt *probetest.Runtime, cfg probe.Config) {
	r := conntracktest.NewRouter(t)
	// The listener is made after flowtracer started: its SYNs are kept.
	var ln net.Listener
	if err := r.Do(r.Srv, func() (err error) { ln, err = net.Listen("tcp4", r.Backend.String()); return err }); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	// A process that stays in the pod namespace: the client side's
	// ctnetlink lookups (cluster_ip_backend=2) find it after curl is gone.
	holder := exec.Command("ip", "netns", "exec", r.Pod, "sleep", "60")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	self := strconv.Itoa(os.Getpid())
	for _, tc := range []struct {
		param int
		want  string
	}{{0, r.NodeAddr.String()}, {2, r.PodAddr.String()}} {
		cfg.Params.ClusterIPBackend = tc.param
		if err := p.Reconfigure(cfg); err != nil {
			t.Fatal(err)
		}
		rt.Take()
		cmd := exec.Command("ip", "netns", "exec", r.Pod, "curl", "-sf", "-o", "/dev/null", "http://"+r.Service.String()+"/")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("curl: %v: %s", err, out)
		}
		recs := rt.WaitTable(t, table.L7Link, 1, func(rec *table.Record) bool {
			return rec.Str("tgid") == self && rec.Str("l7_role") == "server"
		})
		for _, rec := range recs {
			if rec.Str("tgid") != self || rec.Str("l7_role") != "server" {
				continue
			}
			if got := rec.Str("client_ip"); got != tc.want {
				t.Errorf("cluster_ip_backend=%d: server row client_ip %s, want %s", tc.param, got, tc.want)
			}
			if got := rec.Str("server_ip"); got != r.Backend.Addr().String() {
				t.Errorf("server row server_ip %s, want %s", got, r.Backend.Addr())
			}
		}
	}
}
