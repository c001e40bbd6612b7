package virt

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/childtest"
	"github.com/galago-project/galago/internal/instmeta"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/table"
)

// TestHostHypervisor compares the probe's answer about this machine with
// systemd-detect-virt --vm, an independent reader (DMI, CPUID, /sys and
// device tree in its own code), and with the cpuinfo hypervisor flag.
func TestHostHypervisor(t *testing.T) {
	probetest.RequireTools(t, "systemd-detect-virt")
	out, _ := exec.Command("systemd-detect-virt", "--vm").Output() // exits 1 with "none"
	want := strings.TrimSpace(string(out))
	if want == "" {
		t.Fatal("systemd-detect-virt --vm printed nothing")
	}
	got := instmeta.DetectHypervisor(procfs.FS{}, instmeta.CPUIDSignature)
	t.Logf("hypervisor: %+v; systemd-detect-virt --vm: %s", got, want)
	if want == "none" {
		if got.VM() {
			t.Errorf("probe sees %+v, systemd-detect-virt sees bare metal", got)
		}
		return
	}
	if got.Name != want {
		t.Errorf("probe sees %q (%s), systemd-detect-virt sees %q", got.Name, got.Source, want)
	}
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("flags")) && !bytes.Contains(b, []byte(" hypervisor")) {
		t.Errorf("a guest without the cpuinfo hypervisor flag")
	}
}

// TestMain turns the test binary into the fake QEMU process of
// TestRealProcess when GALAGO_VIRT_HELPER=1: it waits for its stdin to close.
func TestMain(m *testing.M) {
	if os.Getenv("GALAGO_VIRT_HELPER") == "1" {
		_, _ = os.Stdin.Read(make([]byte, 1))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRealProcess runs a process whose command line is a libvirt QEMU's
// and finds it in /proc with its name and UUID; no other row is made for
// a process that is not a QEMU.
func TestRealProcess(t *testing.T) {
	const uuid = "6d1f3c2b-1a2b-4c3d-8e9f-0a1b2c3d4e5f"
	cmd := exec.Command(os.Args[0])
	cmd.Args = []string{"/usr/bin/qemu-system-x86_64",
		"-name", "guest=galago-test,debug-threads=on", "-uuid", uuid, "-m", "64"}
	cmd.Env = append(os.Environ(), "GALAGO_VIRT_HELPER=1")
	childtest.Start(t, cmd)

	p := New(procfs.FS{}, withInterval(50*time.Millisecond))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	if err := p.Start(context.Background(), probe.Config{Params: probe.DefaultParams()}, rt); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(t, p)
	pid := strconv.Itoa(cmd.Process.Pid)
	recs := rt.WaitTable(t, table.VirtProc, 1, func(r *table.Record) bool { return r.Str("tgid") == pid })
	if r := recs[0]; r.Str("vm_name") != "galago-test" || r.Str("uuid") != uuid {
		t.Errorf("row %+v", r.Labels())
	}
	for _, r := range rt.Records() {
		b, err := os.ReadFile("/proc/" + r.Str("tgid") + "/cmdline")
		if err != nil {
			continue // exited since
		}
		if !isQEMU(string(bytes.SplitN(b, []byte{0}, 2)[0])) {
			t.Errorf("row for a process that is not QEMU: %q", b)
		}
	}
}
