package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// curlBlock is one curl command of the seed documents.
type curlBlock struct {
	source string
	cmd    string
}

// seedCurls reads the seed documents' curl commands, kept verbatim in the
// api package's testdata (one shared copy).
func seedCurls(t *testing.T) []curlBlock {
	t.Helper()
	f, err := os.Open("../../internal/api/testdata/seeds.curl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []curlBlock
	var cur curlBlock
	var lines []string
	flush := func() {
		if len(lines) > 0 {
			cur.cmd = strings.Join(lines, "\n")
			out = append(out, cur)
		}
		cur, lines = curlBlock{}, nil
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "# source:"):
			flush()
			cur.source = strings.TrimSpace(strings.TrimPrefix(l, "# source:"))
		case strings.HasPrefix(l, "#"):
		case l == "" && !open(lines):
			flush()
		default:
			lines = append(lines, l)
		}
	}
	flush()
	if len(out) < 9 {
		t.Fatalf("read %d seed curl commands, want at least 9", len(out))
	}
	return out
}

// open reports whether the joined lines leave a single quote open (a
// multi-line JSON argument).
func open(lines []string) bool {
	return strings.Count(strings.Join(lines, "\n"), "'")%2 == 1
}

// TestSeedCurlExamplesAgainstDaemon runs every curl example of the seed
// documents, unchanged but for the address, with the real curl against the
// real daemon. The seed's sli PUT is malformed JSON, so it is refused
// before any feature is looked at; tprofiling's start (java processes) and
// stop are taken; a feature galago lacks would answer 400 "not supported in
// the current version". The flamegraph
// examples reach the real probe and the real validation: the ones with the
// placeholder pod ids or a flame_dir that does not exist here are refused,
// the params example is taken, so the bare state change that follows has no
// sub-item, and the cadvisor example starts the probe.
func TestSeedCurlExamplesAgainstDaemon(t *testing.T) {
	requireE2E(t)
	d := startDaemon(t, daemonOpts{})
	addr := fmt.Sprintf("127.0.0.1:%d", d.restPort)
	for _, b := range seedCurls(t) {
		cmd := strings.NewReplacer("localhost:9999", addr, "<gopher-node-ip>:9999", addr).Replace(b.cmd)
		cmd = strings.Replace(cmd, "curl ", "curl -s -w '\\n%{http_code}' ", 1)
		out, err := exec.Command("bash", "-c", cmd).Output()
		if err != nil {
			t.Fatalf("%s: %v", b.source, err)
		}
		body, code, _ := cutLast(string(out), "\n")
		if strings.Contains(b.source, "not valid JSON") {
			// The documented sli body is malformed: rejected before any
			// feature is looked at.
			if code != "400" || body != failedReply("invalid json format: invalid character '}' after object key (at byte 107)") {
				t.Errorf("%s: answered %s %q", b.source, code, body)
			}
			continue
		}
		if strings.Contains(cmd, "-X GET") {
			// After the params example: its report_period is kept.
			if code != "200" || !strings.Contains(body, `"report_period":180`) || !strings.Contains(body, `"probe":[]`) {
				t.Errorf("%s: GET answered %s %q", b.source, code, body)
			}
			continue
		}
		wantCode, wantBody := "400", failedReply("not supported in the current version")
		if strings.Contains(cmd, "/flamegraph") {
			line := b.source[:strings.Index(b.source+" (", " (")]
			want, ok := flamegraphSeedAnswers[line]
			if !ok {
				t.Errorf("%s: no expected answer", b.source)
				continue
			}
			wantCode, wantBody = want[0], want[1]
		}
		if strings.Contains(cmd, "/tprofiling") {
			wantCode, wantBody = "200", successReply
		}
		if code != wantCode || body != wantBody {
			t.Errorf("%s: answered %s %q, want %s %q", b.source, code, body, wantCode, wantBody)
		}
	}
	// The timeline is served beside the REST API; its trace answers 503
	// since the seed's last tprofiling PUT stopped the probe.
	if code, body := d.get("tprofiling/timeline"); code != 200 || !strings.Contains(body, "<canvas") {
		t.Errorf("GET /tprofiling/timeline: %d %.60q", code, body)
	}
	if code, body := d.get("tprofiling/trace"); code != 503 || body != "tprofiling is not running\n" {
		t.Errorf("GET /tprofiling/trace: %d %q", code, body)
	}
}

// flamegraphSeedAnswers are the real daemon's answers to the seed's
// flamegraph PUTs, run in order.
var flamegraphSeedAnswers = map[string][2]string{
	"001_fa10e049cd4295a3.txt line 85":  {"400", failedReply(`Error occurs when parsing snooper pod_id: \"pod1\" is not a pod uid`)},
	"001_fa10e049cd4295a3.txt line 144": {"200", successReply},
	"001_fa10e049cd4295a3.txt line 184": {"400", failedReply("invalid probe ranges: at least one must be set")},
	"001_fa10e049cd4295a3.txt line 252": {"200", successReply},
	"001_fa10e049cd4295a3.txt line 253": {"400", failedReply("params.flame_dir path /var/log/gala-gopher/flamegraph does not exist")},
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return "", s, false
	}
	return s[:i], s[i+len(sep):], true
}

// TestRESTErrorsOverHTTP drives the reference's error messages through the
// real HTTP server and Manager with the real curl, on the built baseinfo
// probe, then checks nothing was changed by the failed requests.
func TestRESTErrorsOverHTTP(t *testing.T) {
	requireE2E(t)
	d := startDaemon(t, daemonOpts{})
	curl := func(args ...string) (string, string) {
		t.Helper()
		out, err := exec.Command("curl", append([]string{"-s", "-w", "\n%{http_code}"}, args...)...).Output()
		if err != nil {
			t.Fatalf("curl %v: %v", args, err)
		}
		body, code, _ := cutLast(string(out), "\n")
		return code, body
	}
	url := d.restURL("/baseinfo")
	cases := []struct{ body, code, reply string }{
		{`{"cmd":{"probe":["cpu"]},"snoopers":{"proc_id":[1]},"params":{"report_period":5},"state":"running"}`, "200", successReply},
		{`{"cmd":{}}`, "400", failedReply(`Bad request: cmd has no \"probe\" list of sub-items`)},
		{`{"cmd":{"probe":"cpu"}}`, "400", failedReply("Bad request: cmd.probe must be an array of sub-item names, got a string")},
		{`{"cmd":{"probe":["gpu"]}}`, "400", failedReply("unsupported probe range: gpu. Known: cpu, mem, nic, net, disk, fs, proc, host, con, delay, app")},
		{`{"params":{}}`, "400", failedReply("Bad request: params is empty; give at least one parameter, e.g. report_period")},
		{`{"params":{"report_period":"x"}}`, "400", failedReply("params.report_period invalid data type: want a number, got a string")},
		{`{"params":{"report_period":700}}`, "400", failedReply("params.report_period invalid value 700, must be in [5, 600]")},
		{`{"params":{"report_period":5.5}}`, "400", failedReply("params.report_period invalid value 5.5, must be in [5, 600]: not an integer")},
		{`{"params":{"res_upper_thr":101}}`, "400", failedReply("params.res_upper_thr invalid value 101, must be in [0, 100]")},
		{`{"state":"paused"}`, "400", failedReply("invalid state paused: must be running or stopped")},
		{`{"cmd":{"probe":[]},"state":"running"}`, "400", failedReply("invalid probe ranges: at least one must be set")},
		{`{"snoopers":{"proc_id":[2]},"blacklist":{"proc_id":[3]}}`, "400", failedReply("snoopers and blacklist are mutually exclusive")},
		{`{"snoopers":{"pod_id":[7]}}`, "400", failedReply("Error occurs when parsing snooper pod_id: want an array of strings, got 7 in it")},
		{`{"snoopers":{"proc_nam":[{"comm":"x"}]}}`, "400", failedReply("Error occurs when parsing snooper proc_nam: not a field of snoopers (known: proc_id, proc_name, pod_id, container_id, container_name, custom_labels, pod_labels)")},
		{`{"snoopers":{"proc_id":[99999999999]}}`, "400", failedReply("Error occurs when parsing snooper proc_id: pid 99999999999 is above 4194304, the largest pid Linux allows")},
		{`{"blacklist":[1,2]}`, "400", failedReply("Error occurs when parsing snooper: blacklist must be an object of selector lists, got an array")},
		{"{\"snoopers\":{\"proc_name\":[{\"comm\":\"\xff\"}]}}", "400", failedReply("Error occurs when parsing snooper proc_name: not valid UTF-8 text: galago could not keep it unchanged")},
		{`{"cmd":{"probe":["mem"]},"params":{"report_period":1}}`, "400", failedReply("params.report_period invalid value 1, must be in [5, 600]")},
		{`{not json`, "400", failedReply("invalid json format: invalid character 'n' looking for beginning of object key string (at byte 2)")},
	}
	for _, c := range cases {
		code, reply := curl("-X", "PUT", url, "-d", "json="+c.body)
		if code != c.code || reply != c.reply {
			t.Errorf("PUT %s: %s %q, want %s %q", c.body, code, reply, c.code, c.reply)
		}
	}
	// The failed requests changed nothing (the last cmd+params one rolled back).
	code, got := curl(url)
	want := `{"cmd":{"bin":"","probe":["cpu"]},"params":{"dev_name":"","elf_path":"","report_event":0,"report_period":5,"res_lower_thr":0,"res_upper_thr":0},"snoopers":{"container_id":[],"container_name":[],"pod_id":[],"proc_id":[1],"proc_name":[]},"state":"running"}` + "\n"
	if code != "200" || got != want {
		t.Errorf("GET /baseinfo: %s\n got %s\nwant %s", code, got, want)
	}
	// --data-urlencode (as the seed documents use) reaches the same Manager.
	code, reply := curl("-X", "PUT", url, "--data-urlencode", `json={"params": {"report_period": 10}}`)
	if code != "200" || reply != successReply {
		t.Errorf("--data-urlencode: %s %q", code, reply)
	}
	if _, got := curl(url); !strings.Contains(got, `"report_period":10`) {
		t.Errorf("urlencoded params not applied: %s", got)
	}
	// Unknown features: PUT 400 as gala-gopher, GET 404 url not found.
	if code, reply := curl("-X", "PUT", d.restURL("/haproxy"), "-d", `json={}`); code != "400" || reply != failedReply("invalid probe name haproxy") {
		t.Errorf("PUT /haproxy: %s %q", code, reply)
	}
	if code, reply := curl(d.restURL("/haproxy")); code != "404" || reply != failedReply("url not found") {
		t.Errorf("GET /haproxy: %s %q", code, reply)
	}
	if code, _ := curl("-X", "DELETE", url); code != "405" {
		t.Errorf("DELETE: %s", code)
	}
}

// gopherCtl returns a gopher-ctl link to the binary under test.
func gopherCtl(t *testing.T) string {
	t.Helper()
	link := filepath.Join(t.TempDir(), "gopher-ctl")
	bin, err := filepath.Abs(binary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	return link
}

// TestGopherCtlWithRESTOff: with rest_api_on=false there is no REST port,
// and gopher-ctl (the seed documents' commands) configures probes over the
// local socket.
func TestGopherCtlWithRESTOff(t *testing.T) {
	requireE2E(t)
	d := startDaemon(t, daemonOpts{restOff: true})
	if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", d.restPort), time.Second); err == nil {
		c.Close()
		t.Fatal("REST port open with rest_api_on = false")
	}
	ctl := gopherCtl(t)
	run := func(args ...string) (string, error) {
		cmd := exec.Command(ctl, args...)
		cmd.Env = append(os.Environ(), "GALAGO_CTL_SOCKET="+d.socket())
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("probe", "set", "baseinfo", `{"cmd":{"probe":["mem"]},"snoopers":{"proc_name":[{"comm":"^python.*","cmdline":""}]},"params":{"report_period":5},"state":"running"}`)
	if err != nil || out != successReply {
		t.Fatalf("gopher-ctl probe set: %v %q", err, out)
	}
	out, err = run("probe", "get", "baseinfo")
	if err != nil || !strings.Contains(out, `"probe":["mem"]`) || !strings.Contains(out, `"comm":"^python.*"`) || !strings.Contains(out, `"state":"running"`) {
		t.Fatalf("gopher-ctl probe get: %v %q", err, out)
	}
	// The seed document's flowtracer commands: started, then stopped.
	for _, state := range []string{"running", "stopped"} {
		out, err = run("probe", "set", "flowtracer", `{"state":"`+state+`"}`)
		if err != nil || out != successReply {
			t.Fatalf("gopher-ctl flowtracer %s: %v %q", state, err, out)
		}
	}
	// galago ctl is the same client.
	cmd := exec.Command(binary(t), "ctl", "--socket", d.socket(), "probe", "get", "baseinfo")
	if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), `"state":"running"`) {
		t.Fatalf("galago ctl: %v %q", err, b)
	}
	waitFor(t, 20*time.Second, "meminfo series", func() bool {
		return len(samples(d.scrape(), "gala_gopher_mem_total_kB")) == 1
	})
}

// TestProbesInitAppliedAndSaved: probes.init lines apply at start (with the
// whitespace init_probes.sh strips), a bad line is skipped and named with its
// line number, one log line sums up the file, and a clean stop writes the
// running configuration back, keeping every line galago did not apply as it
// was (the comment, a line naming a sub-item the feature lacks, a malformed
// line and a refused one), which the next start re-applies.
func TestProbesInitAppliedAndSaved(t *testing.T) {
	requireE2E(t)
	initFile := "# comment\n" +
		"\n" +
		"baseinfo {\"cmd\": {\"probe\": [\"mem\", \"cpu\"]}, \"blacklist\": {}, \"params\": {\"report_period\": 7}, \"state\": \"running\"}\n" +
		"tcp {\"state\": \"running\"}\n" +
		"virt {not json}\n" +
		"sermant {\"cmd\":{\"probe\":[\"l7_bytes_metrics\",\"l7_no_such_metrics\"]},\"snoopers\":{\"proc_name\":[{\"comm\":\"java\"}]},\"state\":\"running\"}\n"
	d := startDaemon(t, daemonOpts{probesInit: initFile})
	// probes.init applies once the servers listen: wait for its summary.
	waitFor(t, 10*time.Second, "probes.init applied", func() bool { return strings.Contains(d.stderr.String(), `msg="probes.init read"`) })
	_, got := d.get("baseinfo")
	want := `{"blacklist":{},"cmd":{"bin":"","probe":["cpu","mem"]},"params":{"dev_name":"","elf_path":"","report_event":0,"report_period":7,"res_lower_thr":0,"res_upper_thr":0},"state":"running"}` + "\n"
	if got != want {
		t.Fatalf("GET /baseinfo after probes.init:\n got %s\nwant %s", got, want)
	}
	path := filepath.Join(d.dir, "probes.init")
	logs := d.stderr.String()
	for _, line := range []string{
		`msg="probes.init line refused" line=` + path + `:4 feature=tcp err="invalid probe ranges: at least one must be set"`,
		`msg="probes.init line refused" line=` + path + `:5 err="virt: invalid JSON: invalid character 'n' looking for beginning of object key string"`,
		`msg="probes.init line refused" line=` + path + `:6 feature=sermant err="unsupported probe range: l7_no_such_metrics. Known:`,
		`msg="probes.init read" source=` + path + ` applied=1 refused=3 skipped=2`,
	} {
		if !strings.Contains(logs, line) {
			t.Errorf("log lacks %s", line)
		}
	}
	if code, body := d.put("baseinfo", `{"params":{"report_period":9}}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if code, body := d.put("socket", `{"cmd":{"probe":["tcp_socket"]},"snoopers":{"proc_id":[1],"custom_labels":{"env":"e2e"}}}`); code != 200 {
		t.Fatalf("PUT socket: %d %s", code, body)
	}
	_, running := d.get("baseinfo")
	if err := d.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	saved, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	wantSaved := "# comment\n" +
		"\n" +
		"baseinfo " + strings.TrimSpace(running) + "\n" +
		"tcp {\"state\": \"running\"}\n" +
		"virt {not json}\n" +
		"sermant {\"cmd\":{\"probe\":[\"l7_bytes_metrics\",\"l7_no_such_metrics\"]},\"snoopers\":{\"proc_name\":[{\"comm\":\"java\"}]},\"state\":\"running\"}\n" +
		`socket {"cmd":{"bin":"","probe":["tcp_socket"]},"params":{"report_event":0,"report_period":60,"res_lower_thr":0,"res_upper_thr":0,"ringbuf_map_size":1},"snoopers":{"container_id":[],"container_name":[],"custom_labels":{"env":"e2e"},"pod_id":[],"proc_id":[1],"proc_name":[]},"state":"stopped"}` + "\n"
	if string(saved) != wantSaved {
		t.Fatalf("saved probes.init:\n%s\nwant:\n%s", saved, wantSaved)
	}
	// A fresh daemon on the saved file runs the same configuration, and a
	// second save gives the same file.
	d2 := startDaemon(t, daemonOpts{probesInit: string(saved)})
	waitFor(t, 10*time.Second, "probes.init applied", func() bool { return strings.Contains(d2.stderr.String(), `msg="probes.init read"`) })
	if _, got := d2.get("baseinfo"); got != running {
		t.Fatalf("re-applied:\n got %s\nwant %s", got, running)
	}
	if err := d2.stop(); err != nil {
		t.Fatal(err)
	}
	if again, err := os.ReadFile(filepath.Join(d2.dir, "probes.init")); err != nil || string(again) != string(saved) {
		t.Fatalf("second save differs (%v):\n%s", err, again)
	}
	// No pid file or socket left after the first daemon's clean stop.
	for _, f := range []string{"galago.pid", "cmd.sock"} {
		if _, err := os.Stat(filepath.Join(d.dir, f)); !os.IsNotExist(err) {
			t.Errorf("%s left behind after stop: %v", f, err)
		}
	}
}

// TestProbesInitSeedExamples: the seed README's probes.init example, as
// printed there, starts baseinfo without snoopers (its host-wide sub-items
// collect); the shipped probes.init of comments only is summed up in the
// log rather than passed over in silence.
func TestProbesInitSeedExamples(t *testing.T) {
	requireE2E(t)
	shipped, err := os.ReadFile("../../testdata/probes.init")
	if err != nil {
		t.Fatal(err)
	}
	// The shipped file has no newline after its last comment.
	seed := strings.TrimSuffix(string(shipped), "\n") + "\n" + `baseinfo {"cmd":{"bin":"system_infos","probe":["cpu","fs","host"]},"params":{"report_period":5},"state":"running"}` + "\n"
	d := startDaemon(t, daemonOpts{probesInit: seed})
	waitFor(t, 10*time.Second, "probes.init applied", func() bool { return strings.Contains(d.stderr.String(), `msg="probes.init read"`) })
	path := filepath.Join(d.dir, "probes.init")
	if want := `msg="probes.init read" source=` + path + ` applied=1 refused=0 skipped=3`; !strings.Contains(d.stderr.String(), want) {
		t.Fatalf("log lacks %s:\n%s", want, d.stderr.String())
	}
	waitFor(t, 20*time.Second, "system_os series", func() bool {
		return len(samples(d.scrape(), "gala_gopher_host_value")) == 1
	})
	// The same body over REST, with proc added: accepted, and one log line
	// says proc observes nothing without snoopers.
	if code, body := d.put("baseinfo", `{"cmd":{"bin":"system_infos","probe":["cpu","fs","host","proc"]},"state":"running"}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	waitFor(t, 5*time.Second, "the proc warning", func() bool {
		return strings.Contains(d.stderr.String(), `baseinfo: sub-items proc observe no process until snoopers or a blacklist are given; cpu, fs, host collect host-wide`)
	})

	only := startDaemon(t, daemonOpts{probesInit: string(shipped)})
	waitFor(t, 10*time.Second, "probes.init read", func() bool { return strings.Contains(only.stderr.String(), `msg="probes.init read"`) })
	if want := `msg="probes.init read" source=` + filepath.Join(only.dir, "probes.init") + ` applied=0 refused=0 skipped=3`; !strings.Contains(only.stderr.String(), want) {
		t.Fatalf("log lacks %s:\n%s", want, only.stderr.String())
	}
}

// TestSingleInstance: a second daemon on the same pid file refuses to start.
func TestSingleInstance(t *testing.T) {
	requireE2E(t)
	d := startDaemon(t, daemonOpts{})
	out, err := exec.Command(binary(t), "-c", d.conf).CombinedOutput()
	if err == nil {
		t.Fatal("second instance started")
	}
	if !strings.Contains(string(out), "another instance (pid ") || !strings.Contains(string(out), "galago.pid") {
		t.Fatalf("second instance message: %s", out)
	}
	if code, _ := d.get("baseinfo"); code != http.StatusOK {
		t.Fatal("first instance disturbed")
	}
}

// TestInvalidConfigStopsStartup: a bad value stops start-up with a message
// naming the file, the line and the key; a bad environment value names the
// variable.
func TestInvalidConfigStopsStartup(t *testing.T) {
	requireE2E(t)
	dir := t.TempDir()
	conf := writeConfig(t, dir, freePort(t), freePort(t), daemonOpts{imdb: "max_tables_num = 5000; max_records_num = 1024; max_metrics_num = 64;"})
	out, err := exec.Command(binary(t), "-c", conf).CombinedOutput()
	if err == nil {
		t.Fatal("started with max_tables_num = 5000")
	}
	// The imdb section is on line 6 of the written file.
	if want := conf + ":6: imdb.max_tables_num: 5000 out of range [1, 4096]"; !strings.Contains(string(out), want) {
		t.Fatalf("message %q does not contain %q", out, want)
	}
	conf = writeConfig(t, dir, freePort(t), freePort(t), daemonOpts{})
	cmd := exec.Command(binary(t), "-c", conf)
	cmd.Env = append(os.Environ(), "GOPHER_METRIC_PORT=80")
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "env GOPHER_METRIC_PORT: web_server.port: 80 out of range [1024, 65535]") {
		t.Fatalf("GOPHER_METRIC_PORT=80: %v %q", err, out)
	}
	if out, err := exec.Command(binary(t), "-c", filepath.Join(dir, "missing.conf")).CombinedOutput(); err == nil || !strings.Contains(string(out), "missing.conf") {
		t.Fatalf("missing explicit config: %v %q", err, out)
	}
}

// TestEnvOverrides: GOPHER_* variables are read by the binary itself and
// override the file.
func TestEnvOverrides(t *testing.T) {
	requireE2E(t)
	port := freePort(t)
	d := startDaemon(t, daemonOpts{env: []string{fmt.Sprintf("GOPHER_METRIC_PORT=%d", port), "GOPHER_LOG_LEVEL=warn"}})
	d.metricPort = port
	if !strings.Contains(d.scrape(), "galago_records_total") {
		t.Fatal("metrics not served on GOPHER_METRIC_PORT")
	}
	if strings.Contains(d.stderr.String(), "level=INFO") {
		t.Fatalf("GOPHER_LOG_LEVEL=warn still logs info:\n%s", d.stderr.String())
	}
}
