package l7

import "testing"

func TestProtocolNames(t *testing.T) {
	want := map[Protocol]string{
		Unknown: "unknown", HTTP: "http", HTTP2: "http2", MySQL: "mysql", PgSQL: "pgsql", DNS: "dns",
		Redis: "redis", Kafka: "kafka", Mongo: "mongo", Memcached: "memcached", CRPC: "crpc", Dubbo: "dubbo", 200: "protocol(200)",
	}
	for p, s := range want {
		if got := p.String(); got != s {
			t.Errorf("%d: %q, want %q", uint8(p), got, s)
		}
	}
}

func TestInterner(t *testing.T) {
	in := Interner{Max: 2}
	a := in.Intern([]byte("GET /a"))
	if b := in.Intern([]byte("GET /a")); b != a {
		t.Fatalf("%q != %q", a, b)
	}
	if n := testing.AllocsPerRun(100, func() { in.Intern([]byte("GET /a")) }); n != 0 {
		t.Errorf("a known value allocates %.0f times", n)
	}
	in.Intern([]byte("b"))
	if got := in.Intern([]byte("c")); got != "c" || len(in.m) != 2 {
		t.Errorf("past Max: %q, %d entries", got, len(in.m))
	}
}

func TestExchangeLatency(t *testing.T) {
	e := Exchange{HasRequest: true, HasResponse: true, Start: 10, End: 25}
	if e.Latency() != 15 {
		t.Errorf("latency %d", e.Latency())
	}
	e.HasResponse = false
	if e.Latency() != 0 {
		t.Errorf("half exchange latency %d", e.Latency())
	}
}
