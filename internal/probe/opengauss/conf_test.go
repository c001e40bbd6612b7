package opengauss

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestParseConf(t *testing.T) {
	// gala-gopher's sample, plus a second entry with a numeric port and
	// an empty password.
	in := `servers:
  -
    ip: "192.168.0.23"
    port: "5432"
    dbname: "postgres"
    user: "opengauss_exporter"
    password: "opengauss_exporter123"
  - ip: 127.0.0.1
    port: 15432
    dbname: app
    user: mon
    password: ""
`
	got, err := ParseConf([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Server{
		{IP: "192.168.0.23", Port: 5432, DBName: "postgres", User: "opengauss_exporter", Password: "opengauss_exporter123"},
		{IP: "127.0.0.1", Port: 15432, DBName: "app", User: "mon"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestParseConfErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "EOF"},
		{"servers: []\n", "no servers"},
		{"server:\n  - ip: x\n", "field server not found"},
		{"servers:\n  - port: 1\n    dbname: d\n    user: u\n    password: p\n", "servers[0]: no ip"},
		{"servers:\n  - ip: h\n    port: 1\n    dbname: d\n    user: u\n    password: p\n  - ip: h\n    port: 70000\n    dbname: d\n    user: u\n    password: p\n", `servers[1]: port "70000" is not a TCP port`},
		{"servers:\n  - ip: h\n    port: x\n    dbname: d\n    user: u\n    password: p\n", `port "x"`},
		{"servers:\n  - ip: h\n    port: 1\n    dbname: \"\"\n    user: u\n    password: p\n", "servers[0]: empty dbname"},
		{"servers:\n  - ip: h\n    port: 1\n    dbname: d\n    user: u\n", "servers[0]: no password"},
	} {
		_, err := ParseConf([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one with %q", tc.in, err, tc.want)
		}
	}
}

func TestConnString(t *testing.T) {
	s := Server{IP: "127.0.0.1", Port: 5432, DBName: "d b", User: `o'k`, Password: `a\b`}
	want := `host='127.0.0.1' port=5432 dbname='d b' user='o\'k' password='a\\b' connect_timeout=3`
	if got := s.connString(); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func TestListenInodes(t *testing.T) {
	tcp := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:3C3C 00000000:0000 0A 00000000:00000000 00:00000000 00000000   102        0 1111 1 0000000000000000 100 0 0 10 0
   1: 00000000:3C3C 00000000:0000 0A 00000000:00000000 00:00000000 00000000   102        0 2222 1 0000000000000000 100 0 0 10 0
   2: 0200007F:3C3C 00000000:0000 0A 00000000:00000000 00:00000000 00000000   102        0 3333 1 0000000000000000 100 0 0 10 0
   3: 0100007F:3C3C 0100007F:D431 01 00000000:00000000 00:00000000 00000000   102        0 4444 1 0000000000000000 100 0 0 10 0
   4: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000   102        0 5555 1 0000000000000000 100 0 0 10 0
`
	got, err := listenInodes(strings.NewReader(tcp), netip.MustParseAddr("127.0.0.1"), 0x3C3C)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []uint64{1111, 2222}) {
		t.Errorf("got %v, want the listener on 127.0.0.1 and the wildcard one", got)
	}
	tcp6 := `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:3C3C 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000   102        0 6666 1 0000000000000000 100 0 0 10 0
`
	got, err = listenInodes(strings.NewReader(tcp6), netip.MustParseAddr("::1"), 0x3C3C)
	if err != nil || !slices.Equal(got, []uint64{6666}) {
		t.Errorf("tcp6: got %v, %v, want [6666]", got, err)
	}
}
