package instmeta

import (
	"strings"
	"testing"
)

func TestCleanDMI(t *testing.T) {
	for in, want := range map[string]string{
		"  Dell Inc.\n":                "Dell Inc.",
		"To Be Filled By O.E.M.":       "",
		"Default string":               "",
		"0000000000":                   "",
		"FFFFFFFF":                     "",
		"PowerEdge\x00R640\x07":        "PowerEdgeR640",
		"":                             "",
		strings.Repeat("a", 300):       strings.Repeat("a", 128),
		"m5.large":                     "m5.large",
		"a" + strings.Repeat("é", 100): "a" + strings.Repeat("é", 63), // a rune cut at the 128-byte limit goes
		"Google Compute Engine\r\n":    "Google Compute Engine",
	} {
		if got := CleanDMI(in); got != want {
			t.Errorf("CleanDMI(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCloud(t *testing.T) {
	for _, c := range []struct {
		dmi               map[string]string
		provider, typ, id string
	}{
		{map[string]string{"sys_vendor": "Amazon EC2", "product_name": "c6g.xlarge", "board_asset_tag": "i-0abc"}, "aws", "c6g.xlarge", "i-0abc"},
		{map[string]string{"sys_vendor": "Xen", "bios_version": "4.11.amazon"}, "aws", "", ""},
		{map[string]string{"sys_vendor": "Google", "product_name": "Google Compute Engine"}, "gcp", "", ""},
		{map[string]string{"sys_vendor": "Microsoft Corporation", "product_name": "Virtual Machine", "chassis_asset_tag": "7783-7084-3265-9085-8269-3286-77"}, "azure", "", ""},
		{map[string]string{"sys_vendor": "Alibaba Cloud", "product_name": "Alibaba Cloud ECS"}, "alibaba", "", ""},
		{map[string]string{"sys_vendor": "QEMU", "product_name": "Standard PC (Q35 + ICH9, 2009)"}, "", "", ""},
	} {
		p, ty, id := cloud(c.dmi)
		if p != c.provider || ty != c.typ || id != c.id {
			t.Errorf("cloud(%v) = %q %q %q, want %q %q %q", c.dmi, p, ty, id, c.provider, c.typ, c.id)
		}
	}
}

func TestParseNodeLabels(t *testing.T) {
	got := ParseNodeLabels(strings.NewReader(`KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.1 --node-labels=topology.kubernetes.io/region=r1,topology.kubernetes.io/zone=z1,x=y"` + "\n# comment\n"))
	if len(got) != 3 || got["topology.kubernetes.io/region"] != "r1" || got["topology.kubernetes.io/zone"] != "z1" || got["x"] != "y" {
		t.Errorf("%v", got)
	}
	if got := ParseNodeLabels(strings.NewReader("KUBELET_EXTRA_ARGS=\n")); len(got) != 0 {
		t.Errorf("%v", got)
	}
}

func FuzzCleanDMI(f *testing.F) {
	f.Add("Amazon EC2\n")
	f.Add("To be filled by O.E.M.")
	f.Add("\xff\xfe")
	f.Fuzz(func(t *testing.T, s string) {
		out := CleanDMI(s)
		if len(out) > 128 || strings.TrimSpace(out) != out {
			t.Fatalf("CleanDMI(%q) = %q", s, out)
		}
		if CleanDMI(out) != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, out, CleanDMI(out))
		}
	})
}

func FuzzParseNodeLabels(f *testing.F) {
	f.Add("ARGS=--node-labels=a=b,c=d")
	f.Fuzz(func(t *testing.T, s string) {
		for k := range ParseNodeLabels(strings.NewReader(s)) {
			if k == "" {
				t.Fatal("empty key")
			}
		}
	})
}
