package custom

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/probe"
)

func TestPermRules(t *testing.T) {
	root := rootOnly
	for _, tc := range []struct {
		uid  uint32
		mode fs.FileMode
		want string // "" = accepted; else substrings, "|"-separated
	}{
		{0, 0o640, ""},
		{0, 0o600, ""},
		{0, 0o400, ""},
		{1000, 0o640, "owned by uid 1000, not root"},
		{0, 0o660, "mode 0660 is group-writable"},
		{0, 0o642, "world-writable"},
		{0, 0o644, "mode 0644 is world-readable"},
		{0, 0o750, "is executable"},
		{0, 0o640 | fs.ModeSetgid, "mode 2640 has setuid"},
		{0, 0o640 | fs.ModeDir, "not a regular file"},
		{1000, 0o666, "mode 0666 is owned by uid 1000, not root, is group-writable, is world-writable, is world-readable|must be owned by root with mode 0640"},
	} {
		err := root.config(tc.uid, tc.mode)
		checkRule(t, "config", tc.uid, tc.mode, err, tc.want)
	}
	for _, tc := range []struct {
		uid  uint32
		mode fs.FileMode
		want string
	}{
		{0, 0o550, ""},
		{0, 0o500, ""},
		{0, 0o510, ""},
		{0, 0o100, ""},
		{1000, 0o550, "owned by uid 1000, not root"},
		{0, 0o750, "mode 0750 is writable by its owner"},
		{0, 0o570, "group-writable"},
		{0, 0o552, "world-writable"},
		{0, 0o554, "world-readable or world-executable"},
		{0, 0o551, "world-readable or world-executable"},
		{0, 0o450, "not executable by its owner"},
		{0, 0o550 | fs.ModeSetuid, "mode 4550 has setuid"},
		{0, 0o550 | fs.ModeSymlink, "not a regular file"},
		{0, 0o755, "writable by its owner, is world-readable or world-executable|must be owned by root with mode 0550"},
	} {
		err := root.bin(tc.uid, tc.mode)
		checkRule(t, "bin", tc.uid, tc.mode, err, tc.want)
	}
	// The owner is a parameter (tests that do not run as root use theirs).
	if err := (permCheck{owner: 1000}).bin(1000, 0o550); err != nil {
		t.Errorf("owner 1000: %v", err)
	}
	if err := (permCheck{owner: 1000}).bin(0, 0o550); err == nil || !strings.Contains(err.Error(), "not uid 1000") {
		t.Errorf("owner 1000, file of root: %v", err)
	}
}

func checkRule(t *testing.T, what string, uid uint32, mode fs.FileMode, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Errorf("%s uid %d mode %v: %v", what, uid, mode, err)
		}
		return
	}
	if err == nil {
		t.Errorf("%s uid %d mode %v: accepted", what, uid, mode)
		return
	}
	for _, w := range strings.Split(want, "|") {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s uid %d mode %v: %q does not say %q", what, uid, mode, err, w)
		}
	}
}

func TestMetaPath(t *testing.T) {
	for in, want := range map[string]string{
		"/opt/x/myprobe.sh":     "/opt/x/myprobe.meta",
		"/opt/x/myprobe":        "/opt/x/myprobe.meta",
		"/opt/x/my.probe.py":    "/opt/x/my.probe.meta",
		"/opt/x.d/myprobe":      "/opt/x.d/myprobe.meta",
		"/opt/x/myprobe.meta":   "/opt/x/myprobe.meta",
		"/opt/gala/bin/probe.1": "/opt/gala/bin/probe.meta",
	} {
		if got := MetaPath(in); got != want {
			t.Errorf("MetaPath(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestParseDecls(t *testing.T) {
	feats, err := parseDecls([]byte(`{
		"zeta": {"bin": "/opt/z/zeta.sh", "probe": ["a", "b", "c"], "custom_param": "p1, p2,,p3"},
		"alpha": {"bin": "/opt/a/alpha", "unknown_key": 1},
		"mid": {"bin": "/opt/m/mid.py", "probe": [], "custom_param": ""}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []*probe.Feature{
		{Name: "zeta", IPCType: 101, Snooper: probe.SnooperProc,
			SubItems: []probe.SubItem{{Name: "a", Bit: 1}, {Name: "b", Bit: 2}, {Name: "c", Bit: 4}},
			Custom: &probe.CustomDecl{Bin: "/opt/z/zeta.sh", MetaPath: "/opt/z/zeta.meta",
				Params: []string{"p1", "p2", "p3"}, SubItemList: []string{"a", "b", "c"}}},
		{Name: "alpha", IPCType: 102, Snooper: probe.SnooperProc,
			Custom: &probe.CustomDecl{Bin: "/opt/a/alpha", MetaPath: "/opt/a/alpha.meta"}},
		{Name: "mid", IPCType: 103, Snooper: probe.SnooperProc,
			Custom: &probe.CustomDecl{Bin: "/opt/m/mid.py", MetaPath: "/opt/m/mid.meta"}},
	}
	if !reflect.DeepEqual(feats, want) {
		for i := range feats {
			t.Logf("got %+v %+v", *feats[i], *feats[i].Custom)
		}
		t.Fatal("features differ")
	}

	for _, empty := range []string{"", " \n", "{}"} {
		if feats, err := parseDecls([]byte(empty)); err != nil || len(feats) != 0 {
			t.Errorf("%q: %v %v", empty, feats, err)
		}
	}

	nine := "{"
	for i := range 9 {
		if i > 0 {
			nine += ","
		}
		nine += `"p` + string(rune('0'+i)) + `":{"bin":"/x"}`
	}
	nine += "}"
	for _, tc := range []struct{ in, want string }{
		{nine, "more than 8 custom probes"},
		{`{"TCP":{"bin":"/x"}}`, `"TCP" clashes with a built-in feature`},
		{`{"baseinfo":{"bin":"/x"}}`, "clashes with a built-in"},
		{`{"a":{"bin":"/x"},"a":{"bin":"/y"}}`, `"a" is declared twice`},
		{`{"":{"bin":"/x"}}`, "name is empty"},
		{`{"a/b":{"bin":"/x"}}`, "only letters"},
		{`{"` + strings.Repeat("n", 32) + `":{"bin":"/x"}}`, "longer than 31"},
		{`{"a":{"probe":["x"]}}`, "bin is missing"},
		{`{"a":{"bin":"rel/x"}}`, "clean absolute path"},
		{`{"a":{"bin":"/opt/../x"}}`, "clean absolute path"},
		{`{"a":{"bin":7}}`, `"bin" has the wrong type`},
		{`{"a":{"bin":"/x","probe":"s"}}`, `"probe" has the wrong type`},
		{`{"a":{"bin":"/x","custom_param":["p"]}}`, `"custom_param" has the wrong type`},
		{`{"a":"x"}`, "must be an object"},
		{`{"a":{"bin":"/x","probe":["1","2","3","4","5","6","7","8","9"]}}`, "more than 8 sub-items"},
		{`{"a":{"bin":"/x","probe":["s","s"]}}`, `sub-item "s" is listed twice`},
		{`{"a":{"bin":"/x","probe":[""]}}`, "empty sub-item"},
		{`{"a":{"bin":"/x","custom_param":"p,p"}}`, `custom_param "p" is listed twice`},
		{`[]`, "top level must be an object"},
		{`{"a":{"bin":"/x"}`, "invalid JSON"},
		{`{"a":{"bin":"/x"}} {}`, "data after"},
		{`{"a":{"bin":"/x"},}`, "invalid JSON"},
	} {
		_, err := parseDecls([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.in, err, tc.want)
		}
	}
}

// declFixture writes a declaration file, a bin and its meta into a temp dir
// with gala-gopher's modes. Files are owned by the test's uid: root in CI.
type declFixture struct {
	dir, conf, bin, meta string
}

func newDeclFixture(t *testing.T) *declFixture {
	t.Helper()
	dir := t.TempDir()
	f := &declFixture{dir: dir, conf: filepath.Join(dir, "gala-gopher-custom.json"),
		bin: filepath.Join(dir, "myprobe.sh"), meta: filepath.Join(dir, "myprobe.meta")}
	meta, err := os.ReadFile("testdata/myprobe.meta")
	if err != nil {
		t.Fatal(err)
	}
	f.write(t, f.meta, string(meta), 0o640)
	f.write(t, f.bin, "#!/bin/sh\nexit 0\n", 0o550)
	f.write(t, f.conf, `{"myprobe":{"bin":"`+f.bin+`","probe":["sub1","sub2"],"custom_param":"p1"}}`, 0o640)
	return f
}

func (f *declFixture) write(t *testing.T, path, data string, mode fs.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// asTester is the permission check for files the test created: root's when
// the test runs as root, else the test's own uid.
func asTester() permCheck { return permCheck{owner: uint32(os.Geteuid())} }

func TestLoadDeclsFiles(t *testing.T) {
	f := newDeclFixture(t)
	feats, err := loadDecls(f.conf, asTester())
	if err != nil {
		t.Fatal(err)
	}
	if len(feats) != 1 || feats[0].Name != "myprobe" || feats[0].IPCType != 101 ||
		feats[0].Custom.Bin != f.bin || feats[0].Custom.MetaPath != f.meta {
		t.Fatalf("got %+v", feats)
	}
	tables, err := LoadMeta(feats[0])
	if err != nil || len(tables) != 2 || tables[0].Name != "custom_test" || tables[1].Name != "custom_cfg" {
		t.Fatalf("meta: %v %v", tables, err)
	}

	// A missing file means no custom probes.
	if feats, err := loadDecls(filepath.Join(f.dir, "none.json"), asTester()); err != nil || feats != nil {
		t.Fatalf("missing file: %v %v", feats, err)
	}

	expectErr := func(what string, want ...string) {
		t.Helper()
		_, err := loadDecls(f.conf, asTester())
		if err == nil {
			t.Fatalf("%s: accepted", what)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%s: %q does not say %q", what, err, w)
			}
		}
	}

	must(t, os.Chmod(f.conf, 0o666))
	expectErr("writable conf", f.conf, "mode 0666", "group-writable", "world-writable")
	must(t, os.Chmod(f.conf, 0o640))

	must(t, os.Chmod(f.bin, 0o755))
	expectErr("writable bin", "probe myprobe", f.bin, "mode 0755", "writable by its owner")
	must(t, os.Chmod(f.bin, 0o550))

	must(t, os.Remove(f.bin))
	expectErr("missing bin", "probe myprobe", f.bin, "no such file")
	f.write(t, f.bin, "#!/bin/sh\n", 0o550)

	f.write(t, f.meta, "measurements = ( { table_name = \"x\" } )", 0o640)
	expectErr("bad meta", "probe myprobe", f.meta, "entity_name")
	must(t, os.Remove(f.meta))
	expectErr("missing meta", f.meta, "no such file")

	f.write(t, f.meta, strings.Replace(string(mustRead(t, "testdata/myprobe.meta")), "custom_cfg", "tcp_metric", 1), 0o640)
	expectErr("built-in table", "table tcp_metric", "clashes with a built-in table")

	f.write(t, f.meta, string(mustRead(t, "testdata/myprobe.meta")), 0o640)
	other := filepath.Join(f.dir, "other")
	f.write(t, other, "#!/bin/sh\n", 0o550)
	f.write(t, other+".meta", string(mustRead(t, "testdata/myprobe.meta")), 0o640)
	f.write(t, f.conf, `{"myprobe":{"bin":"`+f.bin+`"},"other":{"bin":"`+other+`"}}`, 0o640)
	expectErr("table twice", "probe other", "table custom_test", "already declared by probe myprobe")

	f.write(t, f.conf, `{"myprobe":{"bin":"`+f.bin+`"},}`, 0o640)
	expectErr("bad json", f.conf, "invalid JSON")
}

// TestLoadDeclsOwnership checks the exported LoadDecls (root-owned files)
// end to end. Changing a file's owner needs root.
func TestLoadDeclsOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("GALAGO_PRIVILEGED_TESTS") == "1" {
			t.Fatal("GALAGO_PRIVILEGED_TESTS=1 but not root: chown needs root")
		}
		t.Skip("chown needs root; the ownership rule itself is covered by TestPermRules")
	}
	f := newDeclFixture(t)
	if _, err := LoadDecls(f.conf); err != nil {
		t.Fatal(err)
	}
	must(t, os.Chown(f.conf, 1000, 0))
	_, err := LoadDecls(f.conf)
	if err == nil || !strings.Contains(err.Error(), "owned by uid 1000, not root") || !strings.Contains(err.Error(), f.conf) {
		t.Fatalf("non-root conf: %v", err)
	}
	must(t, os.Chown(f.conf, 0, 0))
	must(t, os.Chown(f.bin, 1000, 0))
	_, err = LoadDecls(f.conf)
	if err == nil || !strings.Contains(err.Error(), "owned by uid 1000, not root") || !strings.Contains(err.Error(), f.bin) {
		t.Fatalf("non-root bin: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
