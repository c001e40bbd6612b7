package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var promLabel = regexp.MustCompile(`(\w+)="([^"]*)"`)

func labelsOf(sample string) map[string]string {
	m := map[string]string{}
	open, end := strings.IndexByte(sample, '{'), strings.LastIndexByte(sample, '}')
	if open < 0 || end < open {
		return m
	}
	for _, l := range promLabel.FindAllStringSubmatch(sample[open:end], -1) {
		m[l[1]] = l[2]
	}
	return m
}

// TestBaseinfoDelayAppInstance drives galago's own baseinfo sub-items over
// REST: a python process gets its proc_app row (app_type python) and its
// per-period CPU run-queue delay, which cannot exceed what the kernel's
// schedstat counted for it since it started; host_instance names the
// hypervisor lscpu names.
func TestBaseinfoDelayAppInstance(t *testing.T) {
	requireE2E(t)
	d := startDaemon(t, daemonOpts{})
	py := exec.Command("python3", "-c", "import time\nwhile True:\n  sum(range(100000)); time.sleep(0.01)")
	if err := py.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = py.Process.Kill(); _ = py.Wait() })
	pid := strconv.Itoa(py.Process.Pid)
	code, body := d.put("baseinfo", fmt.Sprintf(`{"cmd":{"probe":["host","delay","app"]},"snoopers":{"proc_id":[%s]},"params":{"report_period":5},"state":"running"}`, pid))
	if code != 200 || body != successReply {
		t.Fatalf("PUT /baseinfo: %d %s", code, body)
	}
	if code, body := d.get("baseinfo"); code != 200 || !strings.Contains(body, `"probe":["host","delay","app"]`) {
		t.Fatalf("GET /baseinfo: %d %s", code, body)
	}
	var expo string
	defer func() {
		if t.Failed() {
			t.Logf("last scrape:\n%s", expo)
		}
	}()
	waitFor(t, 20*time.Second, "proc_delay, proc_app and host_instance samples", func() bool {
		expo = d.scrape()
		return len(samples(expo, "gala_gopher_proc_cpu_delay_ns")) > 0 && len(samples(expo, "gala_gopher_proc_app_info")) > 0 &&
			len(samples(expo, "gala_gopher_host_instance_info")) > 0
	})
	b, err := os.ReadFile("/proc/" + pid + "/schedstat")
	if err != nil {
		t.Fatal(err)
	}
	runDelay, _ := strconv.ParseFloat(strings.Fields(string(b))[1], 64)

	app := samples(expo, "gala_gopher_proc_app_info")
	if l := labelsOf(app[0]); len(app) != 1 || l["tgid"] != pid || l["app_type"] != "python" || l["comm"] == "" || !strings.Contains(app[0], "} 1 ") {
		t.Errorf("proc_app: %v", app)
	}
	cpu := samples(expo, "gala_gopher_proc_cpu_delay_ns")
	if len(cpu) != 1 || labelsOf(cpu[0])["tgid"] != pid {
		t.Fatalf("proc_cpu_delay_ns: %v", cpu)
	}
	f := strings.Fields(cpu[0])
	v, err := strconv.ParseFloat(f[len(f)-2], 64)
	if err != nil || v > runDelay {
		t.Errorf("cpu_delay_ns %v over one period, the kernel counted %v ns since the process started (%v)", v, runDelay, err)
	}
	acct, err := os.ReadFile("/proc/sys/kernel/task_delayacct")
	if err != nil {
		t.Fatal(err)
	}
	if blk := samples(expo, "gala_gopher_proc_blkio_delay_ns"); strings.TrimSpace(string(acct)) == "0" && len(blk) != 0 {
		t.Errorf("blkio delay reported with kernel.task_delayacct=0: %v", blk)
	}
	out, err := exec.Command("lscpu").Output()
	if err != nil {
		t.Fatal(err)
	}
	inst := labelsOf(samples(expo, "gala_gopher_host_instance_info")[0])
	if strings.Contains(string(out), "Hypervisor vendor:") && strings.Contains(string(out), "KVM") && inst["hypervisor"] != "kvm" {
		t.Errorf("host_instance %v, lscpu:\n%s", inst, out)
	}
	if h, _ := os.Hostname(); inst["hostname"] != h {
		t.Errorf("host_instance hostname %q, want %q", inst["hostname"], h)
	}
}
