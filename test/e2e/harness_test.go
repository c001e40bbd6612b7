// Package e2e drives the real galago binary over HTTP and its control
// socket, with real servers (Prometheus) and real curl, and checks values
// against ground truth read from the host.
//
// The tier runs when GALAGO_E2E=1 (make e2e, make test, CI); GALAGO_BIN
// names the binary (make builds it), otherwise the test builds one.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// requireE2E skips outside the end-to-end tier; inside it, a missing
// prerequisite is a failure, never a skip.
func requireE2E(t testing.TB) {
	t.Helper()
	if os.Getenv("GALAGO_E2E") != "1" {
		t.Skip("end-to-end tier: set GALAGO_E2E=1 (make e2e)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("GALAGO_E2E=1 needs root (pid file, control socket, /proc of every process)")
	}
}

// binary returns the galago binary under test.
func binary(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("GALAGO_BIN"); b != "" {
		return b
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "galago-e2e-bin")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "galago")
		out, err := exec.Command("go", "build", "-o", builtBin, "../../cmd/galago").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// daemon is one running galago.
type daemon struct {
	t          testing.TB
	dir        string
	conf       string
	metricPort int
	restPort   int
	cmd        *exec.Cmd
	stderr     *syncBuffer
	exited     chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type daemonOpts struct {
	extraConf  string // appended libconfig text (overrides nothing: use sections not written below)
	restOff    bool
	probesInit string
	imdb       string // replaces the imdb section body
	customJSON string // gala-gopher-custom.json content (written root-owned 0640)
	webTLS     string // replaces ssl_auth = "off" in web_server
	restTLS    string // replaces ssl_auth = "off" in rest_api_server
	env        []string
	// galagoConf is appended inside the galago section.
	galagoConf string
	// wrap runs galago through this command (e.g. setpriv and its flags).
	wrap []string
	// metricChannel, eventChannel and metaChannel replace the default
	// out_channel of metric (web_server), event and meta (logs).
	metricChannel, eventChannel, metaChannel string
	// descLanguage, when set, is the event section's desc_language.
	descLanguage string
}

// writeConfig writes a galago config whose every path lives in dir.
func writeConfig(t testing.TB, dir string, metricPort, restPort int, o daemonOpts) string {
	t.Helper()
	imdb := o.imdb
	if imdb == "" {
		imdb = "max_tables_num = 1024; max_records_num = 1024; max_metrics_num = 64; record_timeout = 60;"
	}
	rest := "true"
	if o.restOff {
		rest = "false"
	}
	webTLS, restTLS := o.webTLS, o.restTLS
	if webTLS == "" {
		webTLS = `ssl_auth = "off";`
	}
	if restTLS == "" {
		restTLS = `ssl_auth = "off";`
	}
	descLanguage := ""
	if o.descLanguage != "" {
		descLanguage = `desc_language = "` + o.descLanguage + `"; `
	}
	orDefault := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	conf := fmt.Sprintf(`
global = { log_file_name = "gopher.log"; log_level = "debug"; rest_api_on = %s; };
metric = { out_channel = "`+orDefault(o.metricChannel, "web_server")+`"; kafka_topic = "gala_gopher"; };
event = { out_channel = "`+orDefault(o.eventChannel, "logs")+`"; kafka_topic = "gala_gopher_event"; timeout = 600; `+descLanguage+`};
meta = { out_channel = "`+orDefault(o.metaChannel, "logs")+`"; kafka_topic = "gala_gopher_metadata"; };
imdb = { %s };
web_server = { bind_addr = "127.0.0.1"; port = %[3]d; %[7]s };
rest_api_server = { bind_addr = "127.0.0.1"; port = %[4]d; %[8]s };
logs = {
    metric_total_size = 100;
    metric_dir = "%[5]s/metrics"; event_dir = "%[5]s/event"; meta_dir = "%[5]s/meta"; debug_dir = "%[5]s/debug";
};
galago = {
    pid_file = "%[5]s/galago.pid"; cmd_socket = "%[5]s/cmd.sock";
    probes_init = "%[5]s/probes.init"; custom_json = "%[5]s/gala-gopher-custom.json";
    %[9]s
};
%[6]s
`, rest, imdb, metricPort, restPort, dir, o.extraConf, webTLS, restTLS, o.galagoConf)
	path := filepath.Join(dir, "gala-gopher.conf")
	if err := os.WriteFile(path, []byte(conf), 0o640); err != nil {
		t.Fatal(err)
	}
	if o.customJSON != "" {
		p := filepath.Join(dir, "gala-gopher-custom.json")
		if err := os.WriteFile(p, []byte(o.customJSON), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if o.probesInit != "" {
		if err := os.WriteFile(filepath.Join(dir, "probes.init"), []byte(o.probesInit), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// startDaemon starts galago and waits until its control socket answers.
func startDaemon(t testing.TB, o daemonOpts) *daemon {
	t.Helper()
	dir := t.TempDir()
	d := &daemon{t: t, dir: dir, metricPort: freePort(t), restPort: freePort(t), stderr: &syncBuffer{}, exited: make(chan error, 1)}
	d.conf = writeConfig(t, dir, d.metricPort, d.restPort, o)
	argv := append(append([]string{}, o.wrap...), binary(t), "-c", d.conf)
	d.cmd = exec.Command(argv[0], argv[1:]...)
	d.cmd.Env = append(os.Environ(), o.env...)
	d.cmd.Stdout = d.stderr
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.exited <- d.cmd.Wait() }()
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("galago output:\n%s", d.stderr.String())
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := os.Stat(d.socket()); err == nil {
			break
		}
		select {
		case err := <-d.exited:
			t.Fatalf("galago exited during start-up: %v\n%s", err, d.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("galago did not come up in 15 s\n%s", d.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !o.restOff {
		waitFor(t, 10*time.Second, "REST server", func() bool {
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", d.restPort))
			if err == nil {
				c.Close()
			}
			return err == nil
		})
	}
	return d
}

func (d *daemon) socket() string { return filepath.Join(d.dir, "cmd.sock") }

// stop sends SIGTERM and waits for a clean exit.
func (d *daemon) stop() error {
	if d.cmd.ProcessState != nil {
		return nil
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.exited:
		d.exited <- err
		return err
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Kill()
		return fmt.Errorf("galago did not exit within 20 s of SIGTERM")
	}
}

func (d *daemon) restURL(path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", d.restPort, path)
}

func (d *daemon) metricsURL() string {
	return fmt.Sprintf("http://127.0.0.1:%d/metrics", d.metricPort)
}

// put sends PUT /<feature> with body json=<js> as curl -d does.
func (d *daemon) put(feature, js string) (int, string) {
	d.t.Helper()
	req, err := http.NewRequest(http.MethodPut, d.restURL("/"+feature), strings.NewReader("json="+js))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return do(d.t, req)
}

func (d *daemon) get(feature string) (int, string) {
	d.t.Helper()
	req, err := http.NewRequest(http.MethodGet, d.restURL("/"+feature), nil)
	if err != nil {
		d.t.Fatal(err)
	}
	return do(d.t, req)
}

func do(t testing.TB, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// scrape returns the exporter's text exposition.
func (d *daemon) scrape() string {
	d.t.Helper()
	req, err := http.NewRequest(http.MethodGet, d.metricsURL(), nil)
	if err != nil {
		d.t.Fatal(err)
	}
	code, body := do(d.t, req)
	if code != http.StatusOK {
		d.t.Fatalf("GET /metrics: %d %s", code, body)
	}
	return body
}

// samples returns the lines of an exposition whose metric name is name.
func samples(expo, name string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(expo))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") {
			out = append(out, l)
		}
	}
	return out
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

const successReply = `{ "result": "success", "message":"New config takes effect" }` + "\n"

func failedReply(msg string) string {
	return `{ "result": "failed", "message":"` + msg + `" }` + "\n"
}
