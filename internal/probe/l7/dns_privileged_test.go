package l7

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/table"
)

// dnsZone is the local zone unbound answers: dnsName exists in it, any
// other name in it is NXDOMAIN.
const (
	dnsZone    = "galago.test"
	dnsName    = "a." + dnsZone
	dnsMissing = "b." + dnsZone
)

// unboundConf serves dnsZone from memory on 127.0.0.1:53 (of its network
// namespace), one thread, statistics by RCODE, remote control on a Unix
// socket (the harness's reads are not DNS traffic). %[1]s is its directory.
const unboundConf = `server:
	interface: 127.0.0.1
	port: 53
	do-ip6: no
	do-tcp: no
	do-daemonize: no
	chroot: ""
	username: ""
	directory: "%[1]s"
	pidfile: "%[1]s/unbound.pid"
	use-syslog: no
	logfile: ""
	num-threads: 1
	module-config: "iterator"
	access-control: 127.0.0.0/8 allow
	extended-statistics: yes
	statistics-cumulative: yes
	local-zone: "` + dnsZone + `." static
	local-data: "` + dnsName + `. IN A 192.0.2.7"
remote-control:
	control-enable: yes
	control-interface: "%[1]s/control.sock"
	control-use-cert: no
`

// dnsClient looks up GALAGO_L7_N times the A record of dnsName and
// GALAGO_L7_ERRS times that of dnsMissing with Go's own resolver, over
// UDP to 127.0.0.1:53, and prints the count of each answer's rcode.
func dnsClient() error {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp4", "127.0.0.1:53")
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	counts := map[string]int{}
	for range envInt("GALAGO_L7_N") {
		ips, err := r.LookupIP(ctx, "ip4", dnsName+".")
		if err != nil || len(ips) != 1 || ips[0].String() != "192.0.2.7" {
			return fmt.Errorf("%s: %v %w", dnsName, ips, err)
		}
		counts["NOERROR"]++
	}
	for range envInt("GALAGO_L7_ERRS") {
		_, err := r.LookupIP(ctx, "ip4", dnsMissing+".")
		var de *net.DNSError
		if !errors.As(err, &de) || !de.IsNotFound {
			return fmt.Errorf("%s: %w, want not found", dnsMissing, err)
		}
		counts["NXDOMAIN"]++
	}
	printCounts(counts)
	return nil
}

// unboundStats reads unbound's counters (unbound-control stats_noreset).
func unboundStats(t *testing.T, conf string) map[string]float64 {
	t.Helper()
	out, err := exec.Command("unbound-control", "-c", conf, "stats_noreset").CombinedOutput()
	if err != nil {
		t.Fatalf("unbound-control: %v\n%s", err, out)
	}
	stats := map[string]float64{}
	for _, l := range lines(out) {
		if k, v, ok := strings.Cut(l, "="); ok {
			stats[k], _ = strconv.ParseFloat(v, 64)
		}
	}
	return stats
}

// testDNS: unbound in a network namespace of its own answers a local
// zone; Go's resolver (this test binary, re-executed in the namespace)
// asks it for a name that exists and one that does not: on both ends the
// queries and answers equal unbound's own counts, NOERROR and NXDOMAIN
// (a client error) split as unbound counted them, per API too.
func testDNS(t *testing.T, e *env) {
	const n, errs = 60, 15
	ns := fmt.Sprintf("galago-dns-%d", os.Getpid())
	for _, args := range [][]string{{"netns", "add", ns}, {"-n", ns, "link", "set", "lo", "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	dir := filepath.Join(e.dir, "unbound")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "unbound.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, unboundConf, dir), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := e.procs.Start("unbound", exec.Command("ip", "netns", "exec", ns, "unbound", "-d", "-c", conf))
	if err != nil {
		t.Fatal(err)
	}
	probetest.WaitFor(t, "unbound's remote control", func() bool {
		return exec.Command("unbound-control", "-c", conf, "status").Run() == nil
	})
	before := unboundStats(t, conf)
	cli := e.helperCmd("dnsclient", "GALAGO_L7_N="+strconv.Itoa(n), "GALAGO_L7_ERRS="+strconv.Itoa(errs))
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Fatal(err)
	}
	cli.Path, cli.Args = ip, []string{"ip", "netns", "exec", ns, cli.Path}
	out, err := e.procs.Run(e.ctx, cli)
	if cli.Process != nil {
		e.targets.remember(cli.Process.Pid) // ip netns exec execs the client
	}
	if err != nil {
		t.Fatalf("dnsclient: %v\n%s\nunbound: %s", err, out, srv.Output.String())
	}
	after := unboundStats(t, conf)
	d := func(k string) float64 { return after[k] - before[k] }
	queries, noerror, nxdomain := d("total.num.queries"), d("num.answer.rcode.NOERROR"), d("num.answer.rcode.NXDOMAIN")
	t.Logf("unbound counted %v queries, %v NOERROR, %v NXDOMAIN; client: %s", queries, noerror, nxdomain, strings.TrimSpace(string(out)))
	if noerror != n || nxdomain != errs || queries != n+errs {
		t.Fatalf("unbound counted %v queries, %v NOERROR and %v NXDOMAIN, want %d, %d and %d", queries, noerror, nxdomain, n+errs, n, errs)
	}
	recs, tallies := e.check(map[string]expect{
		"unbound (server)": {m: rowMatch{tbl: table.L7Rpc, role: "server", port: 53, protocol: "dns"}, n: queries},
		"client":           {m: rowMatch{tbl: table.L7Rpc, role: "client", port: 53, protocol: "dns"}, n: queries},
	})
	for role, s := range tallies {
		if s.errs != nxdomain {
			t.Errorf("%s l7_rpc err_count %v, want %v (NXDOMAIN)", role, s.errs, nxdomain)
		}
	}
	for _, role := range []string{"server", "client"} {
		for api, w := range map[string]float64{"A " + dnsName: noerror, "A " + dnsMissing: nxdomain} {
			var wantErr float64
			if strings.HasSuffix(api, dnsMissing) {
				wantErr = w
			}
			s := sumRows(recs, rowMatch{tbl: table.L7RpcApi, role: role, port: 53, protocol: "dns", api: api})
			if s.req != w || s.resp != w || s.clientErr != wantErr || s.serverEr != 0 {
				t.Logf("%s l7_rpc_api rows: %v", role, apis(recs, 53, role))
				t.Errorf("%s l7_rpc_api %q: %v, want %v requests and responses, %v client errors", role, api, s, w, wantErr)
			}
		}
	}
}
