package e2e

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

var (
	hwSample = regexp.MustCompile(`^(gala_gopher_hw_carrier_(?:up|down)_count)\{(.*)\} (\S+) \d+$`)
	hwName   = regexp.MustCompile(`(?:^|,)name="([^"]*)"`)
)

// TestHwVirtLvsOverREST switches on hw, virt and lvs through the real
// daemon's REST API: hw's carrier counters in /metrics equal the host's
// sysfs; virt starts and logs this VM's hypervisor; lvs is refused on this
// kernel (no IPVS) with the reason in the reply, or starts where IPVS exists.
func TestHwVirtLvsOverREST(t *testing.T) {
	requireE2E(t)
	d := startDaemon(t, daemonOpts{})

	if code, body := d.put("hw", `{"cmd":{"probe":["hw_nic","hw_mem"]},"params":{"report_period":5},"state":"running"}`); code != 200 || body != successReply {
		t.Fatalf("PUT /hw: %d %s", code, body)
	}
	if code, body := d.put("virt", `{"params":{"report_period":5},"state":"running"}`); code != 200 || body != successReply {
		t.Fatalf("PUT /virt: %d %s", code, body)
	}
	_, ipvsErr := os.Stat("/proc/net/ip_vs")
	code, body := d.put("lvs", `{"state":"running"}`)
	switch {
	case ipvsErr != nil && (code != 400 || !strings.Contains(body, "no IPVS")):
		t.Errorf("PUT /lvs on a kernel without IPVS: %d %s, want 400 naming it", code, body)
	case ipvsErr == nil && (code != 200 || body != successReply):
		t.Errorf("PUT /lvs on a kernel with IPVS: %d %s", code, body)
	}

	var expo string
	waitFor(t, 15*time.Second, "hw carrier samples", func() bool {
		expo = d.scrape()
		return strings.Contains(expo, "gala_gopher_hw_carrier_up_count{")
	})
	got := map[string]string{} // metric and interface -> value
	for _, l := range strings.Split(expo, "\n") {
		m := hwSample.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if name := hwName.FindStringSubmatch(m[2]); name != nil {
			got[m[1]+" "+name[1]] = m[3]
		}
	}
	// Every interface of the scrape against sysfs read now (one that went
	// away since, created by another test, is passed over).
	if got["gala_gopher_hw_carrier_up_count lo"] == "" {
		t.Errorf("no row for lo in:\n%s", expo)
	}
	for k, v := range got {
		metric, dev, _ := strings.Cut(k, " ")
		b, err := os.ReadFile("/sys/class/net/" + dev + "/" + strings.TrimPrefix(metric, "gala_gopher_hw_"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.TrimSpace(string(b)); v != want {
			t.Errorf("%s: %s, sysfs %s", k, v, want)
		}
	}
	if !strings.Contains(d.stderr.String(), "virt: this host is") {
		t.Errorf("virt did not report the host's hypervisor:\n%s", d.stderr.String())
	}
}
