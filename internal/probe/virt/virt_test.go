package virt

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/table"
)

// args reads a recorded command line (one argument per line).
func args(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata/cmdline", name+".args"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}

func TestParseQEMU(t *testing.T) {
	for _, tt := range []struct {
		file string
		ok   bool
		want guest
	}{
		{"libvirt-debian", true, guest{name: "web-01", uuid: "5f3c1a2e-8b7d-4c2e-9a1b-2f6e5d4c3b2a"}},
		{"openeuler-qemu-kvm", true, guest{name: "openEuler-22.03,lts", uuid: "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9"}},
		{"plain-name", true, guest{name: "dev-box"}}, // -uuid not a UUID: ignored
		{"plain-anon", true, guest{}},
		{"qemu-img", false, guest{}},
	} {
		g, ok := parseQEMU(args(t, tt.file))
		if ok != tt.ok || g != tt.want {
			t.Errorf("%s: got %+v %v, want %+v %v", tt.file, g, ok, tt.want, tt.ok)
		}
	}
	if _, ok := parseQEMU(nil); ok {
		t.Error("empty command line taken for QEMU")
	}
	// A trailing option without its value is not read past the end.
	if g, ok := parseQEMU([]string{"qemu-system-x86_64", "-name"}); !ok || g != (guest{}) {
		t.Errorf("dangling -name: %+v %v", g, ok)
	}
}

func TestQemuOpts(t *testing.T) {
	got := qemuOpts("a,,b,x=1,y=2,,3,z", "guest")
	want := map[string]string{"guest": "a,b", "x": "1", "y": "2,3"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestCgroupVMName(t *testing.T) {
	for file, want := range map[string]string{"v1-systemd": "web-01", "v2-systemd": "plain-anon", "no-systemd": "db", "user": ""} {
		f, err := os.Open(filepath.Join("testdata/cgroup", file+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := cgroupVMName(f)
		f.Close()
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", file, got, err, want)
		}
	}
	f, err := os.Open("testdata/cgroup/bad.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := cgroupVMName(f); err == nil || !strings.Contains(err.Error(), "0:bad line") {
		t.Errorf("bad line: err %v, want one quoting the line", err)
	}
}

// procTree writes a /proc fixture: pid -> (recorded command line, cgroup file).
func procTree(t *testing.T, procs map[int][2]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, pc := range procs {
		dir := filepath.Join(root, "proc", strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := strings.Join(args(t, pc[0]), "\x00") + "\x00"
		if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(cmd), 0o644); err != nil {
			t.Fatal(err)
		}
		if pc[1] != "" {
			b, err := os.ReadFile(filepath.Join("testdata/cgroup", pc[1]+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "cgroup"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

func TestProbeOnFixtures(t *testing.T) {
	root := procTree(t, map[int][2]string{
		100: {"libvirt-debian", "v1-systemd"},
		200: {"plain-anon", "v2-systemd"}, // name from libvirt's machine cgroup
		300: {"plain-name", "user"},
		400: {"qemu-img", ""},
		500: {"plain-anon", ""}, // no -name, no cgroup file: no vm_name
	})
	p := New(procfs.FS{Root: root}, withInterval(time.Hour))
	p.cpuid = func() (string, bool) { return "", false }
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	if err := p.Start(rt.Context(), probe.Config{Params: probe.DefaultParams()}, rt); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(t, p)
	recs := rt.WaitTable(t, table.VirtProc, 4, nil)
	got := map[string][2]string{}
	for _, r := range recs {
		if v := r.Values[r.Table.MustIndex("value")]; !v.Set || v.Num != 1 {
			t.Errorf("tgid %s value %+v, want 1", r.Str("tgid"), v)
		}
		got[r.Str("tgid")] = [2]string{r.Str("vm_name"), r.Str("uuid")}
	}
	want := map[string][2]string{
		"100": {"web-01", "5f3c1a2e-8b7d-4c2e-9a1b-2f6e5d4c3b2a"},
		"200": {"plain-anon", ""},
		"300": {"dev-box", ""},
		"500": {"", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("tgid %s: %v, want %v", k, got[k], v)
		}
	}
	if !strings.Contains(rt.Logs(), "bare metal") {
		t.Errorf("no bare-metal line in the log:\n%s", rt.Logs())
	}
}
