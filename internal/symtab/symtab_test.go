package symtab

import (
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

//go:noinline
func markerFunction(n int) int { return n * 3 }

// TestUserSelf resolves this test binary's own functions through
// /proc/self/maps and compares with the Go runtime's answer.
func TestUserSelf(t *testing.T) {
	r := NewResolver("/proc")
	for _, f := range []any{markerFunction, TestUserSelf, strings.ToUpper} {
		pc := uint64(reflect.ValueOf(f).Pointer())
		want := runtime.FuncForPC(uintptr(pc)).Name()
		for _, off := range []uint64{0, 4} {
			if got := r.User(os.Getpid(), pc+off); got != want {
				t.Errorf("User(%#x+%d) = %q, want %q", pc, off, got, want)
			}
		}
	}
	if got := r.User(os.Getpid(), 8); got != Unknown {
		t.Errorf("unmapped address named %q", got)
	}
}

func TestParseMaps(t *testing.T) {
	const src = `55d0c0a00000-55d0c0a02000 r--p 00000000 08:01 1234 /usr/bin/cat
55d0c0a02000-55d0c0a07000 r-xp 00002000 08:01 1234 /usr/bin/cat
7f0000000000-7f0000001000 r-xp 00000000 00:00 0 
7f0000002000-7f0000003000 r-xp 00001000 08:01 99 /opt/my app/lib x.so (deleted)
7ffd1000-7ffd2000 r-xp 00000000 00:00 0                          [vdso]
`
	m, err := ParseMaps(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mapping{
		{0x7ffd1000, 0x7ffd2000, 0, "[vdso]"},
		{0x55d0c0a02000, 0x55d0c0a07000, 0x2000, "/usr/bin/cat"},
		{0x7f0000000000, 0x7f0000001000, 0, ""},
		{0x7f0000002000, 0x7f0000003000, 0x1000, "/opt/my app/lib x.so"},
	}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("got %+v\nwant %+v", m, want)
	}
	if got := findMapping(m, 0x55d0c0a06fff); got == nil || got.Path != "/usr/bin/cat" {
		t.Errorf("findMapping = %+v", got)
	}
	if got := findMapping(m, 0x55d0c0a07000); got != nil {
		t.Errorf("findMapping past the end = %+v", got)
	}
	if _, err := ParseMaps(strings.NewReader("garbage\n")); err == nil {
		t.Error("short line accepted")
	}
}

func TestKallsyms(t *testing.T) {
	const src = `0000000000000000 T hidden
ffffffff81000000 T _stext
ffffffff81000100 t helper
ffffffff81000200 D some_data
ffffffff81000300 T schedule
ffffffffc0000000 t mod_fn	[mymod]
`
	k, err := ParseKallsyms(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	for pc, want := range map[uint64]string{
		0xffffffff80ffffff: Unknown,
		0xffffffff81000000: "_stext",
		0xffffffff810001ff: "helper",
		0xffffffff81000250: "helper", // data symbols are not functions
		0xffffffff81000301: "schedule",
		0xffffffffc0000010: "mod_fn",
	} {
		if got := k.Lookup(pc); got != want {
			t.Errorf("Lookup(%#x) = %q, want %q", pc, got, want)
		}
	}
}

func FuzzParseMaps(f *testing.F) {
	f.Add("55d0c0a02000-55d0c0a07000 r-xp 00002000 08:01 1234 /usr/bin/cat\n")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMaps(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, x := range m {
			_ = findMapping(m, x.Start)
		}
	})
}
