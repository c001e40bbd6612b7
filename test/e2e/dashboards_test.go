package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/dashboards"
)

// TestDashboardsQueriesReturnData runs every query of deploy/grafana's
// dashboards, as Grafana sends it, against a real Prometheus scraping a
// real galago that runs the probes the dashboards read, while an HTTP
// server serves a client's requests: each query returns data.
func TestDashboardsQueriesReturnData(t *testing.T) {
	requireE2E(t)
	port := freePort(t)
	srv := exec.Command("python3", "-m", "http.server", "--bind", "127.0.0.1", "--directory", t.TempDir(), strconv.Itoa(port))
	if err := srv.Start(); err != nil {
		t.Fatalf("python3 http.server: %v", err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { // a steady client: a request every 50 ms, some of them 404
		c := &http.Client{Timeout: time.Second}
		for i := 0; ctx.Err() == nil; i++ {
			path := "/"
			if i%5 == 0 {
				path = "/missing"
			}
			if resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path)); err == nil {
				resp.Body.Close()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	// Every panel must have data: the BPF run-time panel needs the
	// kernel's statistics, which the daemon turns on only when asked.
	d := startDaemon(t, daemonOpts{env: []string{"GALAGO_BPF_STATS=1"}})
	for feature, body := range map[string]string{
		"baseinfo": `{"cmd":{"probe":["cpu","mem","nic","net","disk","fs"]},"blacklist":{},"params":{"report_period":5},"state":"running"}`,
		"tcp":      `{"cmd":{"probe":["tcp_stats","tcp_rtt","tcp_srtt","tcp_abnormal"]},"blacklist":{},"params":{"report_period":5},"state":"running"}`,
		"socket":   `{"cmd":{"probe":["tcp_socket"]},"blacklist":{},"params":{"report_period":5},"state":"running"}`,
		"l7":       `{"cmd":{"probe":["l7_bytes_metrics","l7_rpc_metrics"]},"blacklist":{},"params":{"report_period":5,"l7_protocol":["http"]},"state":"running"}`,
	} {
		if code, reply := d.put(feature, body); code != http.StatusOK {
			t.Fatalf("PUT /%s: %d %s", feature, code, reply)
		}
	}
	checkMapBudget(t, d, "tcp+socket+l7") // baseinfo loads no BPF
	prom := startPrometheus(t, fmt.Sprintf("127.0.0.1:%d", d.metricPort))

	type query struct{ where, expr string }
	var pending []query
	for _, db := range dashboards.All() {
		for _, p := range db.Panels {
			for _, tg := range p.Targets {
				pending = append(pending, query{db.UID + " / " + p.Title, dashboards.Expand(tg.Expr)})
			}
		}
	}
	deadline := time.Now().Add(90 * time.Second)
	for len(pending) > 0 && time.Now().Before(deadline) {
		var still []query
		for _, q := range pending {
			if len(prom.query(q.expr)) == 0 {
				still = append(still, q)
			}
		}
		pending = still
		time.Sleep(time.Second)
	}
	for _, q := range pending {
		t.Errorf("%s: no data for %s", q.where, q.expr)
	}
	if t.Failed() {
		var names []string
		for line := range strings.Lines(d.scrape()) {
			if strings.HasPrefix(line, "# TYPE ") {
				names = append(names, strings.Fields(line)[2])
			}
		}
		t.Logf("families in /metrics: %s", strings.Join(names, " "))
	}
}
