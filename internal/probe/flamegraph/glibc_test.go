package flamegraph

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestLibcMappings(t *testing.T) {
	dir := t.TempDir()
	const maps = `55d0c0a00000-55d0c0a02000 r--p 00000000 08:01 1234 /usr/bin/app
7f0000000000-7f0000028000 r--p 00000000 08:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000028000-7f000017d000 r-xp 00028000 08:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000200000-7f0000201000 r-xp 00000000 08:01 98 /opt/old/lib/libc-2.17.so (deleted)
7f0000300000-7f0000301000 r-xp 00000000 08:01 97 /usr/lib/libcrypto.so.3
7f0000400000-7f0000401000 r-xp 00000000 08:01 96 /usr/lib/libc.so.6.bak
7ffd1000-7ffd2000 r-xp 00000000 00:00 0                          [vdso]
`
	if err := os.WriteFile(filepath.Join(dir, "maps"), []byte(maps), 0o600); err != nil {
		t.Fatal(err)
	}
	libs, mapped := libcMappings(dir)
	want := []string{"/usr/lib/x86_64-linux-gnu/libc.so.6", "/opt/old/lib/libc-2.17.so"}
	if !reflect.DeepEqual(libs, want) || !mapped {
		t.Errorf("libcMappings = %v, %v; want %v, true", libs, mapped, want)
	}
	// A kernel thread maps nothing; a gone process has no maps.
	if err := os.WriteFile(filepath.Join(dir, "maps"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if libs, mapped := libcMappings(dir); len(libs) != 0 || mapped {
		t.Errorf("empty maps: %v, %v", libs, mapped)
	}
	if libs, mapped := libcMappings(filepath.Join(dir, "gone")); len(libs) != 0 || mapped {
		t.Errorf("no maps: %v, %v", libs, mapped)
	}
}
