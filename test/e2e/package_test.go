package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runOK runs a command and fails the test with its output if it fails.
func runOK(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestDebPackage builds the deb with `make package`, installs it with
// dpkg, runs the installed galago with the installed configuration (ports
// moved by GOPHER_* variables), talks to it through the installed
// gopher-ctl, then removes and purges the package: nothing of it is left
// but what the administrator made.
func TestDebPackage(t *testing.T) {
	requireE2E(t)
	for _, p := range []string{"/usr/bin/galago", "/etc/gala-gopher", "/usr/lib/systemd/system/galago.service"} {
		if _, err := os.Lstat(p); err == nil {
			t.Fatalf("%s exists: this test installs and purges the galago package, which would replace it; remove it first", p)
		}
	}
	dist := t.TempDir()
	runOK(t, "make", "-C", "../..", "--no-print-directory", "package", "DIST="+dist)
	debs, _ := filepath.Glob(filepath.Join(dist, "galago_*.deb"))
	rpms, _ := filepath.Glob(filepath.Join(dist, "galago-*.rpm"))
	if len(debs) != 1 || len(rpms) != 1 {
		t.Fatalf("make package wrote %v %v, want one deb and one rpm", debs, rpms)
	}
	runOK(t, "dpkg", "-i", debs[0])
	purged := false
	t.Cleanup(func() {
		if !purged {
			_ = exec.Command("dpkg", "-P", "galago").Run()
		}
	})
	if out := runOK(t, "dpkg", "--verify", "galago"); out != "" {
		t.Errorf("dpkg --verify galago:\n%s", out)
	}
	if target, err := os.Readlink("/usr/bin/gopher-ctl"); err != nil || target != "galago" {
		t.Errorf("/usr/bin/gopher-ctl -> %q (%v), want galago", target, err)
	}
	if out := runOK(t, "systemd-analyze", "verify", "--man=no", "/usr/lib/systemd/system/galago.service"); out != "" {
		t.Errorf("systemd-analyze verify of the installed unit:\n%s", out)
	}

	// The installed galago, as the unit starts it.
	metricPort, restPort := freePort(t), freePort(t)
	cmd := exec.Command("/usr/bin/galago", "-c", "/etc/gala-gopher/gala-gopher.conf")
	cmd.Env = append(os.Environ(), fmt.Sprintf("GOPHER_METRIC_PORT=%d", metricPort), fmt.Sprintf("GOPHER_REST_PORT=%d", restPort))
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("installed galago exited with %v\n%s", err, out.String())
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("installed galago did not stop within 20 s of SIGTERM\n%s", out.String())
		}
	}
	waitFor(t, 20*time.Second, "the installed galago's REST API", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", restPort))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	set := runOK(t, "/usr/bin/gopher-ctl", "probe", "set", "baseinfo", `{"cmd":{"probe":["cpu"]},"snoopers":{"proc_id":[1]},"params":{"report_period":5},"state":"running"}`)
	if !strings.Contains(set, "success") {
		t.Errorf("gopher-ctl probe set: %s", set)
	}
	if got := runOK(t, "/usr/bin/gopher-ctl", "probe", "get", "baseinfo"); !strings.Contains(got, `"state":"running"`) {
		t.Errorf("gopher-ctl probe get baseinfo: %s", got)
	}
	stop()
	// On a clean stop galago saves the running probes into the packaged
	// probes.init, as gala-gopher's ExecStop does.
	if saved, err := os.ReadFile("/etc/gala-gopher/probes.init"); err != nil || !strings.Contains(string(saved), "baseinfo ") {
		t.Errorf("probes.init after stop (%v):\n%s", err, saved)
	}

	runOK(t, "dpkg", "-r", "galago")
	for _, p := range []string{"/usr/bin/galago", "/usr/bin/gopher-ctl", "/usr/lib/systemd/system/galago.service", "/usr/share/doc/galago"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s left after dpkg -r", p)
		}
	}
	if _, err := os.Stat("/etc/gala-gopher/gala-gopher.conf"); err != nil {
		t.Errorf("dpkg -r removed the configuration: %v", err)
	}
	runOK(t, "dpkg", "-P", "galago")
	purged = true
	for _, p := range []string{"/etc/gala-gopher", "/var/log/gala-gopher", "/run/gala_gopher"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s left after dpkg -P", p)
		}
	}
}
