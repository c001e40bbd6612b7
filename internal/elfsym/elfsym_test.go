package elfsym

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"debug/gosym"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// The finder is checked against debug/elf and debug/gosym, which read
// every symbol: the same answers for the names asked, on real files of
// the machine (libssl, libc, a C program) and Go programs built here,
// stripped and not.

var (
	buildOnce        sync.Once
	goBin, goStrip   string
	buildErr         error
	buildOut, tmpDir string
)

// goBinaries builds testdata/goprog once, and a copy stripped by
// strip(1) (no .symtab, as distributions ship Go programs).
func goBinaries(t testing.TB) (string, string) {
	t.Helper()
	buildOnce.Do(func() {
		tmpDir, buildErr = os.MkdirTemp("", "elfsym")
		if buildErr != nil {
			return
		}
		goBin, goStrip = filepath.Join(tmpDir, "prog"), filepath.Join(tmpDir, "prog.stripped")
		var b []byte
		if b, buildErr = exec.Command("go", "build", "-o", goBin, "./testdata/goprog").CombinedOutput(); buildErr != nil {
			buildOut = string(b)
			return
		}
		if b, buildErr = exec.Command("strip", "-o", goStrip, goBin).CombinedOutput(); buildErr != nil {
			buildOut = string(b)
		}
	})
	if buildErr != nil {
		t.Fatalf("building the Go test program: %v\n%s", buildErr, buildOut)
	}
	return goBin, goStrip
}

func TestMain(m *testing.M) {
	code := m.Run()
	if tmpDir != "" {
		os.RemoveAll(tmpDir)
	}
	os.Exit(code)
}

// sample is up to n names of syms, spread over the table, plus extra.
func sample(syms []elf.Symbol, n int, extra ...string) []string {
	out := append([]string(nil), extra...)
	step := max(1, len(syms)/n)
	for i := 0; i < len(syms); i += step {
		if syms[i].Name != "" {
			out = append(out, syms[i].Name)
		}
	}
	return out
}

// checkTable compares Find(table) with debug/elf's full read for names.
func checkTable(t *testing.T, path string, table Table, names []string) map[string]Sym {
	t.Helper()
	ef, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	var all []elf.Symbol
	if table == Dynamic {
		all, err = ef.DynamicSymbols()
	} else {
		all, err = ef.Symbols()
	}
	if err != nil {
		t.Fatalf("%s %s: %v", path, table, err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := f.Find(table, names)
	if err != nil {
		t.Fatalf("%s %s: %v", path, table, err)
	}
	// debug/elf's entries for each name: got must be one of them, and the
	// best by the same rule.
	want := map[string]Sym{}
	for _, s := range all {
		var found bool
		for _, n := range names {
			found = found || n == s.Name
		}
		if !found {
			continue
		}
		e := Sym{Value: s.Value, Size: s.Size, Type: elf.ST_TYPE(s.Info), Defined: s.Section != elf.SHN_UNDEF,
			Hidden: s.HasVersion && s.VersionIndex.IsHidden()}
		if e.Defined {
			e.Offset = f.FileOffset(s.Value)
		}
		if old, ok := want[s.Name]; !ok || e.better(old) {
			want[s.Name] = e
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s %s: found %d of the %d names, debug/elf %d", path, table, len(got), len(names), len(want))
	}
	for n, w := range want {
		if g, ok := got[n]; !ok || g != w {
			t.Errorf("%s %s %q: got %+v (found %v), debug/elf %+v", path, table, n, g, ok, w)
		}
	}
	return got
}

func TestGoBinary(t *testing.T) {
	bin, stripped := goBinaries(t)
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	syms, err := ef.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	pcln, _ := ef.Section(".gopclntab").Data()
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(pcln, ef.Section(".text").Addr))
	ef.Close()
	if err != nil {
		t.Fatal(err)
	}
	tlsFuncs := []string{"crypto/tls.(*Conn).Write", "crypto/tls.(*Conn).Read"}
	got := checkTable(t, bin, Static, sample(syms, 300, tlsFuncs...))
	for _, n := range tlsFuncs {
		if s := got[n]; !s.Defined || s.Type != elf.STT_FUNC || s.Offset == 0 {
			t.Errorf("%s: %+v", n, s)
		}
	}
	// The function table, for both binaries: gosym's entry and end.
	names := append([]string{"main.main", "runtime.goexit", "no.such.function"}, tlsFuncs...)
	for _, fn := range tab.Funcs[:min(len(tab.Funcs), 2000)] {
		if len(names) < 40 && fn.Entry%7 == 0 {
			names = append(names, fn.Name)
		}
	}
	for _, path := range []string{bin, stripped} {
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.GoFuncs(names)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			fn := tab.LookupFunc(n)
			g, ok := got[n]
			if fn == nil {
				if ok {
					t.Errorf("%s: %s found at %v, gosym has no such function", path, n, g)
				}
				continue
			}
			if !ok || g != [2]uint64{fn.Entry, fn.End} {
				t.Errorf("%s: %s = %v (found %v), gosym [%#x, %#x)", path, n, g, ok, fn.Entry, fn.End)
			}
		}
		v, err := f.GoVersion()
		bi, berr := buildinfo.ReadFile(path)
		if err != nil || berr != nil || v != bi.GoVersion || v != runtime.Version() {
			t.Errorf("%s: GoVersion %q %v, buildinfo %v %v", path, v, err, bi, berr)
		}
		f.Close()
	}
	// The stripped copy has no .symtab.
	f, err := Open(stripped)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Find(Static, tlsFuncs); err == nil {
		t.Error("stripped binary: .symtab found")
	}
}

func TestLibssl(t *testing.T) {
	libs, _ := filepath.Glob("/usr/lib/*/libssl.so.3")
	if len(libs) == 0 {
		t.Fatal("no libssl.so.3 on this machine (Debian's libssl3)")
	}
	names := []string{"SSL_read", "SSL_write", "SSL_read_ex", "SSL_write_ex", "SSL_do_handshake", "SSL_no_such", "OPENSSL_init_ssl", "memcpy"}
	got := checkTable(t, libs[0], Dynamic, names)
	if s := got["SSL_read"]; !s.Defined || s.Offset == 0 || s.Type != elf.STT_FUNC {
		t.Errorf("SSL_read: %+v", s)
	}
	if s, ok := got["memcpy"]; !ok || s.Defined {
		t.Errorf("memcpy (imported from libc): %+v %v", s, ok)
	}
	offs, err := Funcs(libs[0], names, Dynamic, Static)
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != 6 || offs["SSL_read"] != got["SSL_read"].Offset {
		t.Errorf("Funcs: %v", offs)
	}
}

// TestLibcVersions: a libc's old versions of a function are hidden, the
// default one wins.
func TestLibcVersions(t *testing.T) {
	libs, _ := filepath.Glob("/usr/lib/*/libc.so.6")
	if len(libs) == 0 {
		t.Fatal("no libc.so.6")
	}
	got := checkTable(t, libs[0], Dynamic, []string{"pthread_cond_wait", "malloc", "getaddrinfo", "memcpy", "realpath"})
	if s := got["pthread_cond_wait"]; s.Hidden || !s.Defined {
		t.Errorf("pthread_cond_wait: %+v, want the default version", s)
	}
}

// TestCBinary: a C program built here, with its .symtab: its own
// functions are defined there, the libc ones imported in .dynsym; a
// file that is not ELF is refused.
func TestCBinary(t *testing.T) {
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "p.c"), filepath.Join(dir, "p")
	if err := os.WriteFile(src, []byte("#include <stdio.h>\nint galago_fn(int x) { return x * 3; }\nint main(int c, char **v) { printf(\"%d\\n\", galago_fn(c)); return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("gcc", "-O1", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	got := checkTable(t, bin, Static, []string{"galago_fn", "main", "printf", "_start"})
	if s := got["galago_fn"]; !s.Defined || s.Type != elf.STT_FUNC || s.Size == 0 {
		t.Errorf("galago_fn: %+v", s)
	}
	dyn := checkTable(t, bin, Dynamic, []string{"printf", "galago_fn"})
	if s, ok := dyn["printf"]; !ok || s.Defined {
		t.Errorf("printf in .dynsym: %+v %v, want an import", s, ok)
	}
	f, err := Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.GoVersion(); !errors.Is(err, ErrNotGo) {
		t.Errorf("GoVersion of a C program: %v, want ErrNotGo", err)
	}
	if _, err := f.GoFuncs([]string{"main.main"}); err == nil {
		t.Error("GoFuncs of a C program: no error")
	}
	if _, err := Open(src); err == nil {
		t.Error("a C source file opened as ELF")
	}
}

// TestFindAllocs: a look-up in a Go binary allocates a few fixed
// buffers, not per symbol.
func TestFindAllocs(t *testing.T) {
	bin, _ := goBinaries(t)
	f, err := Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := []string{"crypto/tls.(*Conn).Read", "runtime.main"}
	if _, err := f.Find(Static, names); err != nil {
		t.Fatal(err)
	}
	if _, err := f.GoFuncs(names); err != nil {
		t.Fatal(err)
	}
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	got, err := f.Find(Static, names)
	if err != nil || len(got) != 2 {
		t.Fatalf("Find: %v %v", got, err)
	}
	fns, err := f.GoFuncs(names)
	if err != nil || len(fns) != 2 {
		t.Fatalf("GoFuncs: %v %v", fns, err)
	}
	runtime.ReadMemStats(&ms1)
	if d := ms1.TotalAlloc - ms0.TotalAlloc; d > 16<<10 {
		t.Errorf("Find and GoFuncs allocated %d bytes, want a few maps", d)
	}
}

// FuzzFile: the finder reads any executable on the host, containers'
// too: no input makes it panic or loop.
func FuzzFile(f *testing.F) {
	for _, p := range []string{"/usr/bin/true", "/usr/lib/x86_64-linux-gnu/libdl.so.2"} {
		if b, err := os.ReadFile(p); err == nil && len(b) < 1<<16 {
			f.Add(b)
		}
	}
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := NewFile(bytes.NewReader(data))
		if err != nil {
			return
		}
		defer e.Close()
		names := []string{"main", "SSL_read", "crypto/tls.(*Conn).Read"}
		for _, tab := range []Table{Dynamic, Static} {
			_, _ = e.Find(tab, names)
		}
		_, _ = e.Funcs(names, Dynamic, Static)
		_, _ = e.GoVersion()
		_, _ = e.GoFuncs(names)
	})
}
