package lvs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/table"
)

// wantLinks are the rows of testdata/ip_vs_conn: client, virtual, server,
// protocol -> live connections (template and CLOSE entries left out).
var wantLinks = map[string]float64{
	"10.0.1.5 10.0.0.10:80 10.0.0.100:8080 6":     2,
	"10.0.1.5 10.0.0.10:80 10.0.0.101:8080 6":     1, // TIME_WAIT still a link
	"10.0.1.6 10.0.0.10:53 10.0.0.102:53 17":      1,
	"10.0.1.7 10.0.0.10:2905 10.0.0.103:2905 132": 1,
	"fd00::5 fd00::a:443 fd00::64:8443 6":         1,
	"10.0.1.8 10.0.0.10:80 fd00::64:8080 6":       1, // IPv4 service, IPv6 real server
	"10.0.1.9 10.0.0.10:5060 10.0.0.104:5060 17":  1, // with persistence engine data
}

func rowKey(r *table.Record) string {
	return r.Str("client_ip") + " " + r.Str("virtual_ip") + ":" + r.Str("virtual_port") + " " +
		r.Str("server_ip") + ":" + r.Str("server_port") + " " + r.Str("protocol")
}

func fixtureRoot(t *testing.T, conns []byte) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "proc/1/net")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ip_vs_conn"), conns, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestParseConns(t *testing.T) {
	f, err := os.Open("testdata/ip_vs_conn")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	conns, dropped, err := parseConns(f, 100)
	if err != nil || dropped != 0 || len(conns) != 10 {
		t.Fatalf("%d conns, %d dropped, %v; want 10, 0", len(conns), dropped, err)
	}
	c := conns[0]
	if c.proto != "TCP" || c.client.String() != "10.0.1.5:53924" || c.virtual.String() != "10.0.0.10:80" ||
		c.server.String() != "10.0.0.100:8080" || c.state != "ESTABLISHED" {
		t.Errorf("first: %+v", c)
	}
	if !conns[5].template() || conns[0].template() {
		t.Error("template flag")
	}
	for _, bad := range []struct{ in, want string }{
		{"", "empty"},
		{"TCP 0A000105 D2A4\n", "header"},
		{"Pro FromIP\nTCP 0A000105 D2A4 0A00000A 0050 0A000064 1F90 ESTABLISHED\n", "line 2: 8 fields"},
		{"Pro FromIP\nTCP 0A0001 D2A4 0A00000A 0050 0A000064 1F90 ESTABLISHED 1\n", "line 2: client: address \"0A0001\""},
		{"Pro FromIP\nTCP 0A000105 D2A 0A00000A 0050 0A000064 1F90 ESTABLISHED 1\n", "line 2: client: port \"D2A\""},
		{"Pro FromIP\n\nTCP 0A000105 D2A4 0A00000A 0050 0A000064 1F90 ESTABLISHED x\n", "line 3: expires"},
		{"Pro FromIP\nTCP zz00:0000:0000:0000:0000:0000:0000:0005 C350 0A00000A 0050 0A000064 1F90 ESTABLISHED 1\n", "not IPv6"},
	} {
		_, _, err := parseConns(strings.NewReader(bad.in), 100)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: err %v, want one containing %q", bad.in, err, bad.want)
		}
	}
}

func TestProbeOnFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/ip_vs_conn")
	if err != nil {
		t.Fatal(err)
	}
	p := New(procfs.FS{Root: fixtureRoot(t, b)}, withInterval(20*time.Millisecond))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	if err := p.Start(rt.Context(), probe.Config{Params: probe.DefaultParams()}, rt); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(t, p)
	recs := rt.WaitTable(t, table.IpvsLink, len(wantLinks), nil)
	got := map[string]float64{}
	for _, r := range recs[:len(wantLinks)] {
		got[rowKey(r)] = r.Values[r.Table.MustIndex("link_count")].Num
		if r.Str("process_name") != "ipvs" || r.Str("client_port") != "" || r.Str("local_ip") != "" || r.Str("local_port") != "" {
			t.Errorf("row %v", r.Labels())
		}
	}
	if len(got) != len(wantLinks) {
		t.Errorf("rows %v\nwant %v", got, wantLinks)
	}
	for k, v := range wantLinks {
		if got[k] != v {
			t.Errorf("%s: %v, want %v", k, got[k], v)
		}
	}
	if rt.LostCount() != 0 || rt.ErrorCount() != 0 {
		t.Errorf("lost %d errors %d", rt.LostCount(), rt.ErrorCount())
	}
}

// TestBound: lines past the bound are not parsed and each is counted lost.
func TestBound(t *testing.T) {
	b, err := os.ReadFile("testdata/ip_vs_conn")
	if err != nil {
		t.Fatal(err)
	}
	p := New(procfs.FS{Root: fixtureRoot(t, b)}, withInterval(time.Hour), withMaxConns(3))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	if err := p.Start(rt.Context(), probe.Config{Params: probe.DefaultParams()}, rt); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(t, p)
	p.loop.Collect(time.Now())
	if rt.LostCount() != 7 {
		t.Errorf("lost %d, want 7", rt.LostCount())
	}
	var sum float64
	for _, r := range rt.Records() {
		sum += r.Values[r.Table.MustIndex("link_count")].Num
	}
	if sum != 3 {
		t.Errorf("links %v, want the first 3", sum)
	}
}

// TestNoIPVS: without the connection table the probe refuses to start,
// saying why, and publishes nothing.
func TestNoIPVS(t *testing.T) {
	root := t.TempDir()
	p := New(procfs.FS{Root: root}, withInterval(time.Millisecond))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	err := p.Start(rt.Context(), probe.Config{Params: probe.DefaultParams()}, rt)
	if !errors.Is(err, probe.ErrNotSupported) || !strings.Contains(err.Error(), "no IPVS") || !strings.Contains(err.Error(), filepath.Join(root, connPath)) {
		t.Fatalf("err %v", err)
	}
	if len(rt.Records()) != 0 {
		t.Error("records without IPVS")
	}
}

// TestBadTable: a table that does not parse is an error, no rows.
func TestBadTable(t *testing.T) {
	p := New(procfs.FS{Root: fixtureRoot(t, []byte("garbage\n"))}, withInterval(time.Hour))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	if err := p.Start(rt.Context(), probe.Config{Params: probe.DefaultParams()}, rt); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(t, p)
	p.loop.Collect(time.Now())
	if rt.ErrorCount() != 1 || len(rt.Records()) != 0 || !strings.Contains(rt.Logs(), "cannot parse") {
		t.Errorf("errors %d records %d logs %s", rt.ErrorCount(), len(rt.Records()), rt.Logs())
	}
}

func FuzzParseConns(f *testing.F) {
	b, err := os.ReadFile("testdata/ip_vs_conn")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(b))
	f.Add("Pro FromIP\nTCP 0A000105 D2A4 0A00000A 0050 0A000064 1F90 ESTABLISHED 1\n")
	f.Fuzz(func(t *testing.T, s string) {
		conns, dropped, err := parseConns(strings.NewReader(s), 4)
		if err != nil && (conns != nil || dropped != 0) {
			t.Fatal("error with results")
		}
		if len(conns) > 4 {
			t.Fatalf("%d conns past the bound", len(conns))
		}
		for _, c := range conns {
			if !c.client.IsValid() || !c.virtual.IsValid() || !c.server.IsValid() {
				t.Fatalf("invalid address in %+v", c)
			}
		}
		links, _ := aggregate(conns)
		n := 0
		for _, v := range links {
			n += v
		}
		if n > len(conns) {
			t.Fatalf("%d links from %d conns", n, len(conns))
		}
	})
}
