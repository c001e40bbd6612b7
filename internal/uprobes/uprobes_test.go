package uprobes

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
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
	libs, mapped := Mappings(dir, IsLibc)
	want := []string{"/usr/lib/x86_64-linux-gnu/libc.so.6", "/opt/old/lib/libc-2.17.so"}
	if !reflect.DeepEqual(libs, want) || !mapped {
		t.Errorf("Mappings = %v, %v; want %v, true", libs, mapped, want)
	}
	// A kernel thread maps nothing; a gone process has no maps.
	if err := os.WriteFile(filepath.Join(dir, "maps"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if libs, mapped := Mappings(dir, IsLibc); len(libs) != 0 || mapped {
		t.Errorf("empty maps: %v, %v", libs, mapped)
	}
	if libs, mapped := Mappings(filepath.Join(dir, "gone"), IsLibc); len(libs) != 0 || mapped {
		t.Errorf("no maps: %v, %v", libs, mapped)
	}
}

func TestArgCookie(t *testing.T) {
	for _, c := range []struct {
		spec, arch string
		want       uint64
	}{
		{"-4@%edi", "amd64", ArgReg<<56 | 0x84<<48 | 112<<32},
		{"-8@%r12", "amd64", ArgReg<<56 | 0x88<<48 | 24<<32},
		{"-4@112(%rsp)", "amd64", ArgDeref<<56 | 0x84<<48 | 152<<32 | 112},
		{"-4@-8(%rbp)", "amd64", ArgDeref<<56 | 0x84<<48 | 32<<32 | 0xfffffff8},
		{"8@$5", "amd64", ArgConst<<56 | 8<<48 | 5},
		{"-4@x1", "arm64", ArgReg<<56 | 0x84<<48 | 8<<32},
		{"-8@[sp, 16]", "arm64", ArgDeref<<56 | 0x88<<48 | 248<<32 | 16},
	} {
		got, err := ArgCookie(c.spec, c.arch)
		if err != nil || got != c.want {
			t.Errorf("ArgCookie(%q, %s) = %#x, %v; want %#x", c.spec, c.arch, got, err, c.want)
		}
	}
	for _, bad := range []string{"%edi", "x@%edi", "16@%edi", "-4@%xmm0", "-4@8(%rax,%rbx)"} {
		if _, err := ArgCookie(bad, "amd64"); err == nil {
			t.Errorf("ArgCookie(%q) took it", bad)
		}
	}
}

// TestUSDTPython reads Debian's python3 notes (the interpreter on the
// image and in CI's TEST_DEBS): gc__start and gc__done, with semaphores,
// at the offsets readelf -n gives, and their argument specs.
func TestUSDTPython(t *testing.T) {
	const py = "/usr/bin/python3"
	path, err := filepath.EvalSymlinks(py)
	if err != nil {
		t.Skipf("no %s: %v", py, err)
	}
	for _, name := range []string{"gc__start", "gc__done"} {
		u, err := FindUSDT(path, "python", name)
		if err != nil {
			t.Fatal(err)
		}
		if u.Offset == 0 || u.Semaphore == 0 || len(u.Args) != 1 {
			t.Errorf("%s: %+v", name, u)
		}
		if _, err := ArgCookie(u.Args[0], runtime.GOARCH); err != nil {
			t.Error(err)
		}
	}
	if _, err := FindUSDT(path, "python", "nope"); !errors.Is(err, ErrNoNote) {
		t.Errorf("a missing note: %v", err)
	}
}
