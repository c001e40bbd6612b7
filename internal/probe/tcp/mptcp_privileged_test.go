package tcp

import (
	"context"
	"io"
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/galago-project/galago/internal/table"
)

// TestPrivilegedMPTCP: the subflows of an MPTCP connection are in no fd
// table (the descriptors hold the MPTCP sockets), so the sample pass
// finds them with iter/tcp in the namespaces that hold one. Bytes sent on
// a connection that stays open are reported within the period, exactly.
func TestPrivilegedMPTCP(t *testing.T) {
	requirePrivileged(t)
	_, rt := startProbe(t, defaultCfg())
	var lc net.ListenConfig
	lc.SetMultipathTCP(true)
	ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var d net.Dialer
	d.SetMultipathTCP(true)
	c, err := d.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if mp, err := c.(*net.TCPConn).MultipathTCP(); err != nil || !mp {
		t.Fatalf("client connection is not MPTCP (%v, %v): net.mptcp.enabled?", mp, err)
	}
	const n = 3000
	if _, err := c.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(s, make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	settle()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	var cr, sr []*table.Record
	for _, r := range rows(rt, os.Getpid()) {
		if r.Str("server_port") != port {
			continue
		}
		if r.Str("role") == "client" {
			cr = append(cr, r)
		} else {
			sr = append(sr, r)
		}
	}
	checkSum(t, cr, "tx_bytes", n)
	checkSum(t, sr, "rx_bytes", n)
}
