package proc

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/table"
)

//go:embed testdata/dnsload.c
var dnsloadSrc []byte

// TestPrivilegedDNS: a process resolves one name of its hosts file a known
// number of times (getaddrinfo and gethostbyname) and one absent name a
// known number of times, through the C library, in its own mount
// namespace (hosts file only: no DNS server): counts, errors and the
// error ratio per name are exact, and the failing name raises gala-gopher's
// event.
func TestPrivilegedDNS(t *testing.T) {
	const okName, badName, nOK, nBad = "galago-dns-ok.test", "galago-dns-absent.test", 20, 7
	bin := probetest.BuildC(t, "dnsload", dnsloadSrc)
	dir := t.TempDir()
	hosts, nss := filepath.Join(dir, "hosts"), filepath.Join(dir, "nsswitch.conf")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n192.0.2.7 "+okName+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nss, []byte("hosts: files\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, hosts, nss, okName, strconv.Itoa(nOK), badName, strconv.Itoa(nBad))
	stdin := probetest.StartReady(t, cmd)
	pid := cmd.Process.Pid

	const period = 500 * time.Millisecond
	p, rt := startFor(t, period, []int{pid}, "proc_dns")
	p.mu.Lock()
	p.cfg.Params.ReportEvent = 1
	p.mu.Unlock()
	if _, err := stdin.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("dnsload: %v", err)
	}
	of := func(domain string) func(*table.Record) bool {
		return func(r *table.Record) bool { return r.Str("tgid") == strconv.Itoa(pid) && r.Str("domain") == domain }
	}
	rt.WaitRecords(t, "both names", func(recs []*table.Record) bool {
		return sum(recs, table.ProcDns, "count", of(okName)) >= nOK+1 && sum(recs, table.ProcDns, "count", of(badName)) >= nBad
	})
	recs, evs := finish(t, p, rt, period)
	for _, c := range []struct {
		domain, field string
		want          float64
	}{
		{okName, "count", nOK + 1}, {okName, "error_count", 0},
		{badName, "count", nBad}, {badName, "error_count", nBad},
	} {
		if got := sum(recs, table.ProcDns, c.field, of(c.domain)); got != c.want {
			t.Errorf("%s %s = %v, want %v", c.domain, c.field, got, c.want)
		}
	}
	for _, r := range recs {
		if r.Table != table.ProcDns {
			t.Errorf("row of %s with only proc_dns on", r.Table.Name)
			continue
		}
		v := func(f string) table.Value { return r.Values[table.ProcDns.MustIndex(f)] }
		switch {
		case of(okName)(r):
			if v("error_ratio").Num != 0 || !v("delay_avg").Set || v("delay_avg").Num <= 0 || v("max_delay").Num < v("delay_avg").Num {
				t.Errorf("%s: %+v", okName, r.Values)
			}
		case of(badName)(r):
			if v("error_ratio").Num != 100 || v("delay_avg").Set || v("max_delay").Set {
				t.Errorf("%s: %+v, want error_ratio 100 and no delay (no success)", badName, r.Values)
			}
		default:
			t.Errorf("row of another process or name: %+v", r.Values)
		}
	}
	want := fmt.Sprintf("Process(PID:%d) DNS error ratio(100.000 %%).", pid)
	found := false
	for _, e := range evs {
		found = found || (e.Message == want && e.EntityID == fmt.Sprintf("%d_%s", pid, badName) && e.Metric == "error_ratio")
		if e.EntityID != fmt.Sprintf("%d_%s", pid, badName) {
			t.Errorf("event of a name without errors: %+v", e)
		}
	}
	if !found {
		t.Errorf("no event %q in %+v", want, evs)
	}
}
