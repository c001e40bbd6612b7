package virt

import (
	"strings"
	"testing"
)

// FuzzParseQEMU feeds arbitrary command lines (NUL-separated) and option
// values: no panic, and what is reported is well formed.
func FuzzParseQEMU(f *testing.F) {
	f.Add("/usr/bin/qemu-system-x86_64\x00-name\x00guest=web,,01,debug-threads=on\x00-uuid\x005f3c1a2e-8b7d-4c2e-9a1b-2f6e5d4c3b2a\x00")
	f.Add("qemu-kvm\x00-smbios\x00type=1,uuid=0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9\x00-name\x00")
	f.Add("kvm\x00--name\x00,,,\x00")
	f.Fuzz(func(t *testing.T, cmdline string) {
		g, ok := parseQEMU(splitCmdline([]byte(cmdline)))
		if !ok && g != (guest{}) {
			t.Fatalf("not QEMU but %+v", g)
		}
		if g.uuid != "" && (!uuidRE.MatchString(g.uuid) || strings.ToLower(g.uuid) != g.uuid) {
			t.Fatalf("uuid %q", g.uuid)
		}
		if strings.Contains(g.name, "\x00") {
			t.Fatalf("name %q holds a NUL", g.name)
		}
	})
}
