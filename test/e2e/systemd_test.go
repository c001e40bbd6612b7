package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const unitPath = "../../deploy/systemd/galago.service"

// allProbesInit starts every probe that needs a privilege, whole host;
// FLAMEDIR stands for the flame graphs' directory.
const allProbesInit = `baseinfo {"cmd":{"probe":["cpu","mem","nic","net","disk","fs","proc","host","con"]},"blacklist":{},"params":{"report_period":5},"state":"running"}
tcp {"cmd":{"probe":["tcp_stats","tcp_rtt","tcp_srtt","tcp_windows","tcp_rate","tcp_sockbuf","tcp_abnormal"]},"blacklist":{},"params":{"report_period":5,"cluster_ip_backend":1},"state":"running"}
socket {"cmd":{"probe":["tcp_socket","udp_socket"]},"blacklist":{},"params":{"report_period":5},"state":"running"}
io {"cmd":{"probe":["io_trace","io_err","io_count","page_cache"]},"blacklist":{},"params":{"report_period":5},"state":"running"}
l7 {"cmd":{"probe":["l7_bytes_metrics","l7_rpc_metrics"]},"blacklist":{},"params":{"report_period":5,"l7_protocol":["http","redis"],"support_ssl":1},"state":"running"}
flamegraph {"cmd":{"probe":["oncpu","offcpu"]},"blacklist":{},"params":{"report_period":5,"flame_dir":"FLAMEDIR","output_dir":"FLAMEDIR"},"state":"running"}
container {"blacklist":{},"params":{"report_period":5},"state":"running"}
applog {"cmd":{"probe":["container_log","file_log"]},"blacklist":{},"params":{"report_period":5},"state":"running"}
jvm {"blacklist":{},"params":{"report_period":5},"state":"running"}
`

// unitSetting returns the value of key in the unit's [Service] section.
func unitSetting(t *testing.T, unit, key string) string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(unit))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), key+"="); ok {
			return v
		}
	}
	t.Fatalf("%s: no %s= line", unitPath, key)
	return ""
}

// TestSystemdUnitVerifies: deploy/systemd/galago.service passes
// `systemd-analyze verify` (with ExecStart pointing at the built binary).
func TestSystemdUnitVerifies(t *testing.T) {
	requireE2E(t)
	unit, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	exe := unitSetting(t, string(unit), "ExecStart")
	path := filepath.Join(t.TempDir(), "galago.service")
	body := strings.Replace(string(unit), "ExecStart="+exe, "ExecStart="+binary(t)+" -c /etc/gala-gopher/gala-gopher.conf", 1)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", unitPath, err, out)
	}
}

var (
	logMsg   = regexp.MustCompile(`msg="[^"]*"`)
	logErr   = regexp.MustCompile(`err="([^"\\]|\\.)*"`)
	logCause = regexp.MustCompile(`[^:"]*"$`)
)

// troubles returns what the log reports as not done (level WARN or ERROR,
// or an err= attribute), each as its message and the last cause of its
// error ("permission denied"), so that two runs compare whatever process
// or file a line names.
func troubles(log string) []string {
	var out []string
	for line := range strings.Lines(log) {
		if !strings.Contains(line, "level=WARN") && !strings.Contains(line, "level=ERROR") && !strings.Contains(line, " err=") {
			continue
		}
		key := logMsg.FindString(line)
		if e := logErr.FindString(line); e != "" {
			key += " err=" + strings.TrimSpace(strings.TrimSuffix(logCause.FindString(e), `"`))
		}
		out = append(out, key)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestCapabilitySetOfTheUnit runs galago with exactly the unit's
// CapabilityBoundingSet (and no_new_privs) beside a run with every
// capability, both starting every probe: each probe runs under the
// reduced set, and it reports nothing left undone that the full-root run
// does not report too. A JVM of another user (nobody) runs beside them:
// attaching to it takes CAP_KILL (SIGQUIT) and CAP_DAC_OVERRIDE (its 0600
// socket), without which the capped run logs its attach as unavailable.
func TestCapabilitySetOfTheUnit(t *testing.T) {
	requireE2E(t)
	otherUsersJVM(t)
	unit, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	var caps []string
	for c := range strings.FieldsSeq(unitSetting(t, string(unit), "CapabilityBoundingSet")) {
		caps = append(caps, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
	}
	wrap := []string{"setpriv", "--bounding-set=-all," + strings.Join(caps, ",")}
	if unitSetting(t, string(unit), "NoNewPrivileges") == "yes" {
		wrap = append(wrap, "--no-new-privs")
	}
	// Flame graphs go to the test's directory, not /var/log/gala-gopher.
	probesInit := strings.ReplaceAll(allProbesInit, "FLAMEDIR", t.TempDir())
	full := startDaemon(t, daemonOpts{probesInit: probesInit})
	capped := startDaemon(t, daemonOpts{probesInit: probesInit, wrap: wrap})
	for _, d := range []*daemon{full, capped} {
		waitFor(t, 20*time.Second, "probes.init applied", func() bool {
			return strings.Contains(d.stderr.String(), `msg="probes.init read"`)
		})
	}
	// The probes attach to processes as they appear and report their
	// first period within 5 s: let both runs get there.
	time.Sleep(7 * time.Second)

	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", capped.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(status), "NoNewPrivs:\t1") {
		t.Errorf("the capped galago runs without no_new_privs:\n%s", status)
	}
	for line := range strings.Lines(probesInit) {
		feature, _, _ := strings.Cut(line, " ")
		if code, reply := capped.get(feature); code != 200 || !strings.Contains(reply, `"state":"running"`) {
			t.Errorf("GET /%s under the unit's capabilities: %d %s", feature, code, reply)
		}
	}
	base := troubles(full.stderr.String())
	for _, line := range troubles(capped.stderr.String()) {
		if !slices.Contains(base, line) {
			t.Errorf("only under the unit's capabilities: %s", line)
		}
	}
	if t.Failed() {
		t.Logf("capability set %v; the full-root run reports:\n%s", caps, strings.Join(base, "\n"))
	}
}

// otherUsersJVM runs a JVM (rmiregistry: a JDK program that stays up)
// as nobody for the rest of the test.
func otherUsersJVM(t *testing.T) {
	t.Helper()
	java, err := exec.LookPath("rmiregistry")
	if err != nil {
		t.Fatalf("a JDK's rmiregistry is needed: %v", err)
	}
	cmd := exec.Command(java, strconv.Itoa(freePort(t)))
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}
