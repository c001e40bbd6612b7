package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestL7OverREST: the l7 probe, enabled over REST for an HTTP server
// (python3's http.server) and for curl (by comm), counts every request of short-lived
// curl processes on both ends, with the 404s as errors, in the exporter's
// gala_gopher_l7_* series: alone, and beside ksli (a second consumer of
// the capture, without snoopers, so that the kernel observes every process
// and l7's snoopers are checked in user space, where a new curl is not
// classified yet when its connection is).
func TestL7OverREST(t *testing.T) {
	requireE2E(t)
	for _, withKsli := range []bool{false, true} {
		name := "alone"
		if withKsli {
			name = "with-ksli"
		}
		t.Run(name, func(t *testing.T) { testL7OverREST(t, withKsli) })
	}
}

func testL7OverREST(t *testing.T, withKsli bool) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatalf("curl is missing: %v", err)
	}
	// The server is a process of its own: this test process scrapes
	// galago over HTTP and is not observed.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ok"), []byte("fine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	srv := exec.Command("python3", "-m", "http.server", "--bind", "127.0.0.1", "--directory", dir, strconv.Itoa(port))
	if err := srv.Start(); err != nil {
		t.Fatalf("python3 http.server: %v", err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	waitFor(t, 10*time.Second, "python3 http.server", func() bool {
		c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	d := startDaemon(t, daemonOpts{})
	if withKsli {
		if code, reply := d.put("ksli", `{"state":"running"}`); code != http.StatusOK {
			t.Fatalf("PUT /ksli: %d %s", code, reply)
		}
	}
	pid := srv.Process.Pid
	body := fmt.Sprintf(`{"cmd":{"probe":["l7_bytes_metrics","l7_rpc_metrics"]},"snoopers":{"proc_id":[%d],"proc_name":[{"comm":"^curl$"}]},"params":{"report_period":5,"l7_protocol":["http"]},"state":"running"}`, pid)
	if code, reply := d.put("l7", body); code != http.StatusOK {
		t.Fatalf("PUT /l7: %d %s", code, reply)
	}
	time.Sleep(time.Second)

	const oks, missing = 8, 4
	for i := 0; i < oks+missing; i++ {
		path := "/ok"
		if i%3 == 2 {
			path = "/missing"
		}
		out, err := exec.Command(curl, "-s", "-o", "/dev/null", "-w", "%{http_code}", fmt.Sprintf("http://127.0.0.1:%d%s", port, path)).Output()
		want := map[string]string{"/ok": "200", "/missing": "404"}[path]
		if err != nil || string(out) != want {
			t.Fatalf("curl %s: %q %v", path, out, err)
		}
	}

	sport := fmt.Sprintf(`server_port="%d"`, port)
	server := fmt.Sprintf(`tgid="%d"`, pid)
	srvReq, srvErr, cliReq, cliErr, apiMissing := newSeriesTotals(), newSeriesTotals(), newSeriesTotals(), newSeriesTotals(), newSeriesTotals()
	collect := func(expo string) {
		srvReq.add(t, expo, "gala_gopher_l7_req_count", server, `l7_role="server"`, sport)
		srvErr.add(t, expo, "gala_gopher_l7_err_count", server, `l7_role="server"`, sport)
		cliReq.add(t, expo, "gala_gopher_l7_req_count", `comm="curl"`, `l7_role="client"`, sport)
		cliErr.add(t, expo, "gala_gopher_l7_err_count", `comm="curl"`, `l7_role="client"`, sport)
		apiMissing.add(t, expo, "gala_gopher_l7_api_client_err_count", server, `api="GET /missing"`, sport)
	}
	const total = oks + missing
	deadline := time.Now().Add(40 * time.Second)
	for (srvReq.sum() < total || cliReq.sum() < total) && time.Now().Before(deadline) {
		collect(d.scrape())
		time.Sleep(time.Second)
	}
	// One more period: nothing may be counted twice.
	time.Sleep(6 * time.Second)
	expo := d.scrape()
	collect(expo)
	for name, c := range map[string]struct {
		s    *seriesTotals
		want float64
	}{
		"server req_count": {srvReq, total}, "server err_count": {srvErr, missing},
		"curl req_count": {cliReq, total}, "curl err_count": {cliErr, missing},
		"server GET /missing client_err_count": {apiMissing, missing},
	} {
		if got := c.s.sum(); got != c.want {
			t.Errorf("%s = %v, want %v (series %v)", name, got, c.want, c.s.total)
		}
	}
	if t.Failed() {
		t.Logf("last exposition, l7:\n%s", strings.Join(samples(expo, "gala_gopher_l7_req_count"), "\n"))
	}
	for _, l := range samples(expo, "galago_probe_events_lost_total") {
		if strings.Contains(l, `probe="l7"`) && !strings.HasSuffix(l, " 0") {
			t.Errorf("l7 lost events: %s", l)
		}
	}
}
