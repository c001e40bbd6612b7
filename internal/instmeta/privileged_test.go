package instmeta

// Privileged tier: the real machine's facts against what the test reads
// itself: /sys/class/dmi/id file by file, and lscpu's "Hypervisor vendor".
// Runs when GALAGO_PRIVILEGED_TESTS=1 (CI always sets it) as root (serial
// numbers and the system UUID are root only).

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/procfs"
)

func TestPrivilegedHost(t *testing.T) {
	probetest.RequireTools(t, "lscpu")
	m := Read(procfs.FS{})
	const dir = "/sys/class/dmi/id"
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		// This CI VM has no DMI: nothing may be made up, and why is said.
		if len(m.DMI) != 0 || !strings.Contains(m.Missing["dmi"], "no /sys/class/dmi/id") {
			t.Errorf("no %s, yet DMI %v, missing %q", dir, m.DMI, m.Missing["dmi"])
		}
	} else {
		for _, a := range DMIAttrs {
			b, err := os.ReadFile(filepath.Join(dir, a))
			want := ""
			if err == nil {
				want = strings.TrimSpace(string(b))
			}
			if got := m.DMI[a]; got != want && (got != "" || CleanDMI(want) != "") {
				t.Errorf("%s: %q, the file says %q", a, got, want)
			}
		}
	}
	out, err := exec.Command("lscpu").Output()
	if err != nil {
		t.Fatal(err)
	}
	vendor := ""
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "Hypervisor vendor" {
			vendor = strings.ToLower(strings.TrimSpace(v))
		}
	}
	// lscpu's names: KVM, Microsoft, VMware, Xen, ...; galago's are
	// systemd-detect-virt's.
	lscpu := map[string]string{"kvm": "kvm", "microsoft": "microsoft", "vmware": "vmware", "xen": "xen", "": ""}
	if want, ok := lscpu[vendor]; !ok {
		t.Fatalf("lscpu hypervisor vendor %q not in this test's table", vendor)
	} else if m.Hypervisor != want {
		t.Errorf("hypervisor %q, lscpu says %q", m.Hypervisor, vendor)
	}
	t.Logf("%+v", m)
}
