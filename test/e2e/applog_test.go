package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// appLogLines is what the writer appends in one write: 4 logins, an error
// with its Java trace (4 lines), 2 disk warnings.
const appLogLines = `2024-05-01 12:00:01 INFO user 1 logged in from 10.0.0.1
2024-05-01 12:00:02 INFO user 2 logged in from 10.0.0.2
2024-05-01 12:00:03 ERROR job 7 failed
java.lang.IllegalStateException: queue closed
	at com.example.Jobs.run(Jobs.java:42)
	at java.base/java.lang.Thread.run(Thread.java:833)
2024-05-01 12:00:04 WARN disk /data at 91% capacity
2024-05-01 12:00:05 INFO user 3 logged in from 10.0.0.3
2024-05-01 12:00:06 WARN disk /var at 95% capacity
2024-05-01 12:00:07 INFO user 4 logged in from 10.0.0.4
`

var (
	appLogSample = regexp.MustCompile(`^(gala_gopher_app_log_(?:messages|lines))\{(.*)\} (\S+) (\d+)$`)
	appLogLabel  = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)
)

// TestAppLogOverREST switches applog on over REST for one process that
// writes a file under the real /var/log, and checks the Prometheus
// samples: messages and lines per level and pattern, summed over every
// report period seen (each sample is stamped with its period's end),
// equal to what was written, with the comm and tgid of the writer.
func TestAppLogOverREST(t *testing.T) {
	requireE2E(t)
	d := startDaemon(t, daemonOpts{})
	logDir, err := os.MkdirTemp("/var/log", "galago-e2e-applog-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(logDir) })
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "lines"), []byte(appLogLines), 0o644); err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("sh", "-c", fmt.Sprintf(`exec 3>>%s/app.log
while [ ! -e %[2]s/go ]; do sleep 0.05; done
cat %[2]s/lines >&3
while [ ! -e %[2]s/stop ]; do sleep 0.05; done`, logDir, work))
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sh.Process.Kill(); _ = sh.Wait() })
	pid := sh.Process.Pid

	code, body := d.put("applog", fmt.Sprintf(`{"cmd":{"probe":["file_log"]},"snoopers":{"proc_id":[%d]},"params":{"report_period":5},"state":"running"}`, pid))
	if code != 200 || body != successReply {
		t.Fatalf("PUT /applog: %d %s", code, body)
	}
	if code, body := d.get("applog"); code != 200 || !strings.Contains(body, `"probe":["file_log"]`) || !strings.Contains(body, `"state":"running"`) {
		t.Fatalf("GET /applog: %d %s", code, body)
	}
	// The file predates the probe: it is read from its end, once followed.
	waitFor(t, 15*time.Second, "applog following app.log", func() bool {
		return strings.Contains(d.stderr.String(), "applog: following") && strings.Contains(d.stderr.String(), logDir+"/app.log")
	})
	if err := os.WriteFile(filepath.Join(work, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	type cell struct{ messages, lines float64 }
	perPeriod := map[string]float64{} // metric, labels and timestamp -> value
	totals := func() map[string]cell {
		out := map[string]cell{}
		for k, v := range perPeriod {
			name, rest, _ := strings.Cut(k, "|")
			labels, _, _ := strings.Cut(rest, "|")
			m := map[string]string{}
			for _, l := range appLogLabel.FindAllStringSubmatch(labels, -1) {
				m[l[1]] = l[2]
			}
			if m["tgid"] != strconv.Itoa(pid) || m["comm"] != "sh" || m["pattern"] == "" || m["sample"] == "" {
				t.Errorf("sample labels %v", m)
			}
			key := m["level"] + " " + m["template"]
			c := out[key]
			if name == "gala_gopher_app_log_messages" {
				c.messages += v
			} else {
				c.lines += v
			}
			out[key] = c
		}
		return out
	}
	scrape := func() {
		for _, l := range strings.Split(d.scrape(), "\n") {
			m := appLogSample.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			v, err := strconv.ParseFloat(m[3], 64)
			if err != nil {
				t.Fatalf("sample %q", l)
			}
			perPeriod[m[1]+"|"+m[2]+"|"+m[4]] = v
		}
	}
	sumMessages := func() (n float64) {
		for _, c := range totals() {
			n += c.messages
		}
		return n
	}
	waitFor(t, 30*time.Second, "7 messages in /metrics", func() bool { scrape(); return sumMessages() >= 7 })
	// Two more periods: nothing else may come.
	for end := time.Now().Add(11 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		scrape()
	}
	want := map[string]cell{
		"info <*> <*> INFO user <*> logged in from <*>": {4, 4},
		"error <*> <*> ERROR job <*> failed":            {1, 4},
		"warning <*> <*> WARN disk <*> at <*> capacity": {2, 2},
	}
	got := totals()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("app_log totals\n got %v\nwant %v", got, want)
	}
	if err := os.WriteFile(filepath.Join(work, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
