package instmeta

// Privileged tier: the real machine's facts against what the test reads
// itself: /sys/class/dmi/id file by file, and the hypervisor
// systemd-detect-virt --vm names (galago follows its order and its names).
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
	probetest.RequireTools(t, "systemd-detect-virt")
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
	// It prints "none" and exits 1 on bare metal; "vm-other" is a
	// hypervisor it cannot name (galago: "unknown"). lscpu is no reference:
	// it names fewer (this CI VM's CPUID says bhyve, lscpu says nothing).
	out, err := exec.Command("systemd-detect-virt", "--vm").Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	want := strings.TrimSpace(string(out))
	switch want {
	case "none":
		want = ""
	case "vm-other":
		want = "unknown"
	}
	if m.Hypervisor != want {
		t.Errorf("hypervisor %q, systemd-detect-virt --vm says %q", m.Hypervisor, strings.TrimSpace(string(out)))
	}
	t.Logf("%+v", m)
}
