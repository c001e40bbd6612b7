package syscap

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/galago-project/galago/internal/procfs"
)

// TestScanReads: the scanner's /proc readers, which reuse one buffer,
// agree with procfs on this process's start time, read a command holding
// ") " and spaces, and list a process's libssl mappings once each.
func TestScanReads(t *testing.T) {
	a := NewTLSScanner(nil, "/", nil)
	st, err := procfs.FS{Root: "/"}.PIDStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if got := a.startTime("/proc/self"); got != st.StartTime || got == 0 {
		t.Errorf("startTime = %d, procfs %d", got, st.StartTime)
	}
	dir := t.TempDir()
	stat := "77 (a) b (c) ) S 1 77 77 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 1 0 9876543 1000 10 18446744073709551615 0 0\n"
	maps := `55d0c0a00000-55d0c0a02000 r-xp 00000000 08:01 1 /usr/sbin/nginx
7f0000000000-7f0000028000 r--p 00000000 08:01 2 /usr/lib/x86_64-linux-gnu/libssl.so.3
7f0000028000-7f000017d000 r-xp 00028000 08:01 2 /usr/lib/x86_64-linux-gnu/libssl.so.3
7f0000200000-7f0000201000 r-xp 00000000 08:01 3 /opt/ssl/lib/libssl.so.1.1
7f0000300000-7f0000301000 r-xp 00000000 08:01 4 /usr/lib/x86_64-linux-gnu/libcrypto.so.3
7ffd1000-7ffd2000 r-xp 00000000 00:00 0                          [vdso]
`
	for name, body := range map[string]string{"stat": stat, "maps": maps} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.startTime(dir); got != 9876543 {
		t.Errorf("startTime of a command with \") \" = %d, want 9876543", got)
	}
	want := []string{"/usr/lib/x86_64-linux-gnu/libssl.so.3", "/opt/ssl/lib/libssl.so.1.1"}
	if got := a.sslMappings(dir); !reflect.DeepEqual(got, want) {
		t.Errorf("sslMappings = %q, want %q", got, want)
	}
	if got := a.startTime(filepath.Join(dir, "gone")); got != 0 {
		t.Errorf("startTime of a gone process = %d", got)
	}
}
