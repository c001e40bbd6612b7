package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// seriesTotals sums, per series, the distinct (timestamp, value) samples of
// a family seen across scrapes: per-period fields add up to the true total.
type seriesTotals struct {
	seen  map[string]bool
	total map[string]float64
}

// sampleLine is one line of the text exposition: name, labels, value and
// the optional timestamp.
var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)(?: (\d+))?$`)

func newSeriesTotals() *seriesTotals {
	return &seriesTotals{seen: map[string]bool{}, total: map[string]float64{}}
}

// add folds one scrape's samples of family in, keeping only series whose
// labels contain every want fragment.
func (s *seriesTotals) add(t testing.TB, expo, family string, want ...string) {
	t.Helper()
	for _, l := range samples(expo, family) {
		m := sampleLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("unparsable sample %q", l)
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(m[2], w)
		}
		if !ok {
			continue
		}
		key := m[2] + " " + m[4]
		if s.seen[key] {
			continue
		}
		s.seen[key] = true
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatal(err)
		}
		s.total[m[2]] += v
	}
}

// sum is the total over every matching series.
func (s *seriesTotals) sum() float64 {
	var n float64
	for _, v := range s.total {
		n += v
	}
	return n
}

// TestTCPAndSocketProbesOverREST: the tcp and socket probes, enabled over
// REST for this test process only, report a loopback transfer of known size
// and the exact number of connections, through the daemon's exporter.
func TestTCPAndSocketProbesOverREST(t *testing.T) {
	requireE2E(t)
	d := startDaemon(t, daemonOpts{})
	pid := os.Getpid()
	for feature, body := range map[string]string{
		"tcp":    fmt.Sprintf(`{"cmd":{"probe":["tcp_stats"]},"snoopers":{"proc_id":[%d]},"params":{"report_period":5},"state":"running"}`, pid),
		"socket": fmt.Sprintf(`{"cmd":{"probe":["tcp_socket"]},"snoopers":{"proc_id":[%d]},"params":{"report_period":5},"state":"running"}`, pid),
	} {
		if code, reply := d.put(feature, body); code != http.StatusOK {
			t.Fatalf("PUT /%s: %d %s", feature, code, reply)
		}
	}
	// The BPF filter maps are filled from the snoopers; give the probes a
	// moment to attach before traffic starts.
	time.Sleep(time.Second)

	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	const conns, up, down = 3, 1<<20 + 123, 4567
	served := make(chan error, conns)
	go func() {
		for i := 0; i < conns; i++ {
			c, err := ln.Accept()
			if err != nil {
				served <- err
				return
			}
			go func() {
				defer c.Close()
				if n, err := io.CopyN(io.Discard, c, up); err != nil || n != up {
					served <- fmt.Errorf("server read %d: %w", n, err)
					return
				}
				_, err := c.Write(make([]byte, down))
				served <- err
			}()
		}
	}()
	for i := 0; i < conns; i++ {
		c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(make([]byte, up)); err != nil {
			t.Fatal(err)
		}
		if n, err := io.CopyN(io.Discard, c, down); err != nil || n != down {
			t.Fatalf("client read %d: %v", n, err)
		}
		c.Close()
	}
	for i := 0; i < conns; i++ {
		if err := <-served; err != nil {
			t.Fatal(err)
		}
	}

	tgid := fmt.Sprintf(`tgid="%d"`, pid)
	sport := fmt.Sprintf(`server_port="%d"`, port)
	clientTx, serverRx, serverTx := newSeriesTotals(), newSeriesTotals(), newSeriesTotals()
	activeOpen, passiveOpen := newSeriesTotals(), newSeriesTotals()
	want := map[*seriesTotals]float64{
		clientTx: conns * up, serverRx: conns * up, serverTx: conns * down,
		activeOpen: conns, passiveOpen: conns,
	}
	done := func() bool {
		for s, n := range want {
			if s.sum() < n {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(40 * time.Second)
	for !done() && time.Now().Before(deadline) {
		expo := d.scrape()
		clientTx.add(t, expo, "gala_gopher_tcp_link_tx_bytes", tgid, `role="client"`, sport)
		serverRx.add(t, expo, "gala_gopher_tcp_link_rx_bytes", tgid, `role="server"`, sport)
		serverTx.add(t, expo, "gala_gopher_tcp_link_tx_bytes", tgid, `role="server"`, sport)
		activeOpen.add(t, expo, "gala_gopher_endpoint_tcp_active_open", tgid, sport)
		passiveOpen.add(t, expo, "gala_gopher_endpoint_tcp_passive_open", tgid, sport)
		time.Sleep(time.Second)
	}
	// One more period: nothing may be counted twice.
	time.Sleep(6 * time.Second)
	expo := d.scrape()
	clientTx.add(t, expo, "gala_gopher_tcp_link_tx_bytes", tgid, `role="client"`, sport)
	serverRx.add(t, expo, "gala_gopher_tcp_link_rx_bytes", tgid, `role="server"`, sport)
	serverTx.add(t, expo, "gala_gopher_tcp_link_tx_bytes", tgid, `role="server"`, sport)
	activeOpen.add(t, expo, "gala_gopher_endpoint_tcp_active_open", tgid, sport)
	passiveOpen.add(t, expo, "gala_gopher_endpoint_tcp_passive_open", tgid, sport)
	for name, c := range map[string]struct {
		s    *seriesTotals
		want float64
	}{
		"client tx_bytes": {clientTx, conns * up}, "server rx_bytes": {serverRx, conns * up},
		"server tx_bytes": {serverTx, conns * down}, "active_open": {activeOpen, conns},
		"passive_open": {passiveOpen, conns},
	} {
		if got := c.s.sum(); got != c.want {
			t.Errorf("%s = %v, want %v (series %v)", name, got, c.want, c.s.total)
		}
	}
	if t.Failed() {
		t.Logf("last exposition, tcp_link and endpoint_tcp:\n%s\n%s",
			strings.Join(samples(expo, "gala_gopher_tcp_link_tx_bytes"), "\n"),
			strings.Join(samples(expo, "gala_gopher_endpoint_tcp_passive_open"), "\n"))
	}
	// Only this process was observed: no series of galago's own sockets.
	if n := len(samples(expo, "gala_gopher_tcp_link_tx_bytes")); n == 0 {
		t.Fatal("no tcp_link series at all")
	}
	for _, l := range samples(expo, "gala_gopher_tcp_link_tx_bytes") {
		if !strings.Contains(l, tgid) {
			t.Errorf("series of an unobserved process: %s", l)
		}
	}
}
