package nginx

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/table"
)

// raw encodes a record as the BPF side lays it out (the generated type).
func raw(t testing.TB, e nginxNginxEv) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := binary.Write(&b, binary.LittleEndian, e); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func v4(s string) (out [16]uint8) {
	a := netip.MustParseAddr(s).As4()
	copy(out[:], a[:])
	return out
}

func v6(s string) [16]uint8 { return netip.MustParseAddr(s).As16() }

func TestDecode(t *testing.T) {
	link4 := nginxNginxEv{ClientSk: 0xffff888812345678, Tgid: 4242, Kind: uint8(nginxNginxEvKindNGINX_EV_LINK), IsL7: 1,
		Family: afInet, ServerFamily: afInet, ClientPort: 50000, VirtualPort: 80, ServerPort: 8080,
		ClientIp: v4("10.0.0.9"), VirtualIp: v4("10.0.0.1"), ServerIp: v4("10.0.1.2")}
	// An IPv6 client whose upstream is IPv4, and an IPv4-mapped virtual address.
	link6 := nginxNginxEv{ClientSk: 7, Tgid: 1, Kind: uint8(nginxNginxEvKindNGINX_EV_LINK),
		Family: afInet6, ServerFamily: afInet, ClientPort: 1, VirtualPort: 443, ServerPort: 9000,
		ClientIp: v6("fd00::9"), VirtualIp: v6("::ffff:192.0.2.1"), ServerIp: v4("192.0.2.7")}
	closeEv := nginxNginxEv{ClientSk: 0xffff888812345678, Tgid: 4242, Kind: uint8(nginxNginxEvKindNGINX_EV_CLOSE)}
	for _, c := range []struct {
		name string
		in   nginxNginxEv
		want event
	}{
		{"ipv4 http", link4, event{kind: nginxNginxEvKindNGINX_EV_LINK, id: connID{4242, 0xffff888812345678}, l7: true,
			client: netip.MustParseAddrPort("10.0.0.9:50000"), virtual: netip.MustParseAddrPort("10.0.0.1:80"),
			server: netip.MustParseAddrPort("10.0.1.2:8080")}},
		{"ipv6 stream", link6, event{kind: nginxNginxEvKindNGINX_EV_LINK, id: connID{1, 7},
			client: netip.MustParseAddrPort("[fd00::9]:1"), virtual: netip.MustParseAddrPort("192.0.2.1:443"),
			server: netip.MustParseAddrPort("192.0.2.7:9000")}},
		{"close", closeEv, event{kind: nginxNginxEvKindNGINX_EV_CLOSE, id: connID{4242, 0xffff888812345678}}},
	} {
		got, err := decode(raw(t, c.in))
		if err != nil || got != c.want {
			t.Errorf("%s: %+v %v, want %+v", c.name, got, err, c.want)
		}
	}
	bad := link4
	bad.Kind = 9
	badFam := link4
	badFam.ServerFamily = 1 // AF_UNIX
	for name, b := range map[string][]byte{
		"short":       raw(t, link4)[:evSize-1],
		"kind":        raw(t, bad),
		"unix family": raw(t, badFam),
	} {
		if _, err := decode(b); err == nil || !strings.HasPrefix(err.Error(), "nginx: ") {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(raw(f, nginxNginxEv{Kind: uint8(nginxNginxEvKindNGINX_EV_LINK), Family: afInet, ServerFamily: afInet6}))
	f.Add(raw(f, nginxNginxEv{Kind: uint8(nginxNginxEvKindNGINX_EV_CLOSE)}))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decode(b)
		if err != nil {
			return
		}
		if e.kind == nginxNginxEvKindNGINX_EV_LINK && (!e.client.IsValid() || !e.server.IsValid() || !e.virtual.IsValid()) {
			t.Fatalf("link with an invalid address: %+v", e)
		}
		l := newLinks()
		if e.kind == nginxNginxEvKindNGINX_EV_LINK {
			l.add(&e)
		}
		l.close(e.id)
		if rows, _ := l.flush(); len(l.open) != 0 || len(rows) > 1 {
			t.Fatalf("after close: %d open, rows %v", len(l.open), rows)
		}
	})
}

func TestLinks(t *testing.T) {
	l := newLinks()
	a, b := netip.MustParseAddrPort("10.0.1.1:80"), netip.MustParseAddrPort("10.0.1.2:80")
	front := netip.MustParseAddrPort("10.0.0.1:8080")
	ev := func(tgid uint32, sk uint64, client string, server netip.AddrPort) *event {
		return &event{kind: nginxNginxEvKindNGINX_EV_LINK, id: connID{tgid, sk}, l7: true,
			client: netip.MustParseAddrPort(client), virtual: front, server: server}
	}
	// Connection 1 (keep-alive) goes to a three times and to b once;
	// connection 2, from the same client address, to a; connection 3 stays
	// open over two periods.
	for range 3 {
		l.add(ev(10, 1, "10.0.0.9:1000", a))
	}
	l.add(ev(10, 1, "10.0.0.9:1000", b))
	l.add(ev(10, 2, "10.0.0.9:1001", a))
	l.add(ev(10, 3, "10.0.0.8:1000", a))
	l.close(connID{10, 1})
	l.close(connID{10, 2})
	l.close(connID{10, 99}) // linked before the probe: ignored
	key := func(client string, server netip.AddrPort) rowKey {
		c := netip.MustParseAddrPort(client)
		return rowKey{client: c.Addr(), clientPort: c.Port(), virtual: front, server: server, l7: true}
	}
	flush := func() map[rowKey]uint64 {
		rows, folded := l.flush()
		if folded {
			t.Fatalf("%d rows folded", len(rows))
		}
		return rows
	}
	want := map[rowKey]uint64{key("10.0.0.9:1000", a): 1, key("10.0.0.9:1000", b): 1, key("10.0.0.9:1001", a): 1, key("10.0.0.8:1000", a): 1}
	if got := flush(); !equal(got, want) {
		t.Fatalf("period 1: %v, want %v", got, want)
	}
	want = map[rowKey]uint64{key("10.0.0.8:1000", a): 1}
	if got := flush(); !equal(got, want) {
		t.Fatalf("period 2: %v, want %v", got, want)
	}
	// Its process died without closing it.
	l.forget(func(tgid uint32) bool { return tgid != 10 })
	if got := flush(); !equal(got, want) {
		t.Fatalf("period 3: %v, want %v", got, want)
	}
	if got := flush(); len(got) != 0 || len(l.open) != 0 {
		t.Fatalf("period 4: %v, %d open", got, len(l.open))
	}

	// Past maxRows rows, a period is reported per client address (port 0:
	// client_port not set), every link counted.
	l.maxRows = 3
	for i, c := range []string{"10.0.0.9:1000", "10.0.0.9:1001", "10.0.0.9:1002", "10.0.0.8:1000"} {
		l.add(ev(10, uint64(i), c, a))
	}
	rows, folded := l.flush()
	want = map[rowKey]uint64{key("10.0.0.9:0", a): 3, key("10.0.0.8:0", a): 1}
	if !folded || !equal(rows, want) {
		t.Fatalf("folded %v: %v, want %v", folded, rows, want)
	}
	if r := record(key("10.0.0.9:0", a), 3, time.Now(), time.Second); r.Str("client_port") != "" {
		t.Errorf("a folded row's client_port %q", r.Str("client_port"))
	}
	if r := record(key("10.0.0.9:1000", a), 1, time.Now(), time.Second); r.Str("client_port") != "1000" {
		t.Errorf("client_port %q, want 1000", r.Str("client_port"))
	}
}

func TestLinksBound(t *testing.T) {
	l := newLinks()
	l.max = 16
	e := &event{kind: nginxNginxEvKindNGINX_EV_LINK, client: netip.MustParseAddrPort("10.0.0.9:1"),
		virtual: netip.MustParseAddrPort("10.0.0.1:80"), server: netip.MustParseAddrPort("10.0.1.1:80")}
	for i := range l.max {
		e.id = connID{1, uint64(i)}
		if !l.add(e) {
			t.Fatalf("connection %d dropped", i)
		}
	}
	e.id = connID{1, uint64(l.max)}
	if l.add(e) {
		t.Fatal("connection past the bound kept")
	}
	e.id = connID{1, 0}
	if !l.add(e) {
		t.Fatal("a known connection refused")
	}
}

func equal(a, b map[rowKey]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestRecord(t *testing.T) {
	k := rowKey{client: netip.MustParseAddr("10.0.0.9"), virtual: netip.MustParseAddrPort("10.0.0.1:80"),
		server: netip.MustParseAddrPort("[fd00::2]:8080")}
	r := record(k, 5, time.Unix(10, 0), time.Minute)
	for f, v := range map[string]string{"client_ip": "10.0.0.9", "virtual_ip": "10.0.0.1", "virtual_port": "80",
		"server_ip": "fd00::2", "server_port": "8080", "is_l7": "0", "client_port": ""} {
		if got := r.Str(f); got != v {
			t.Errorf("%s = %q, want %q", f, got, v)
		}
	}
	if n := r.Values[table.NginxLink.MustIndex("link_count")].Num; n != 5 {
		t.Errorf("link_count %v", n)
	}
}

func TestParseModules(t *testing.T) {
	maps := `55d0c0a00000-55d0c0a2a000 r--p 00000000 08:01 1234 /usr/sbin/nginx
7f0e1c000000-7f0e1c010000 r-xp 00002000 08:01 5678 /usr/lib/nginx/modules/ngx_stream_module.so
7f0e1c010000-7f0e1c020000 r--p 00012000 08:01 5678 /usr/lib/nginx/modules/ngx_stream_module.so
7f0e1d000000-7f0e1d010000 r-xp 00000000 08:01 999 /opt/my nginx/ngx_http_echo_module.so
7f0e1e000000-7f0e1e010000 r-xp 00000000 08:01 998 /usr/lib/x86_64-linux-gnu/libssl.so.3
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
`
	got := parseModules(strings.NewReader(maps))
	want := []string{"/usr/lib/nginx/modules/ngx_stream_module.so", "/opt/my nginx/ngx_http_echo_module.so"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("modules %q, want %q", got, want)
	}
}
