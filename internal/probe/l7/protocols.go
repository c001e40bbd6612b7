package l7

import (
	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/dns"
	"github.com/galago-project/galago/internal/l7/http"
	"github.com/galago-project/galago/internal/l7/memcached"
	"github.com/galago-project/galago/internal/l7/redis"
	"github.com/galago-project/galago/internal/syscap"
)

// newParser makes one connection's parser. in interns API templates; it is
// shared by the connections of a protocol (the probe serialises Feed).
type newParser func(role l7.Role, l4 syscap.L4, in *l7.Interner) l7.Parser

// parsers are the protocols galago parses. A protocol without one is not
// traced.
var parsers = map[l7.Protocol]newParser{
	l7.HTTP: func(r l7.Role, _ syscap.L4, in *l7.Interner) l7.Parser {
		p := http.NewParser(r)
		p.SetInterner(in)
		return p
	},
	l7.Redis: func(r l7.Role, _ syscap.L4, in *l7.Interner) l7.Parser {
		p := redis.NewParser(r)
		p.SetInterner(in)
		return p
	},
	l7.Memcached: func(r l7.Role, _ syscap.L4, _ *l7.Interner) l7.Parser { return memcached.NewParser(r) },
	l7.DNS: func(r l7.Role, l4 syscap.L4, in *l7.Interner) l7.Parser {
		p := dns.NewParser(r)
		if l4 == syscap.UDP {
			p = dns.NewUDPParser(r)
		}
		p.SetInterner(in)
		return p
	},
}

// internMax bounds each protocol's shared interner.
const internMax = 4096

// protocolsByName maps the l7_protocol parameter's values to protocols:
// gala-gopher's names, "http" covering HTTP/1.x and HTTP/2 (gRPC), plus
// galago's "memcached".
var protocolsByName = map[string][]l7.Protocol{
	"http":      {l7.HTTP, l7.HTTP2},
	"dns":       {l7.DNS},
	"redis":     {l7.Redis},
	"mysql":     {l7.MySQL},
	"pgsql":     {l7.PgSQL},
	"kafka":     {l7.Kafka},
	"mongo":     {l7.Mongo},
	"crpc":      {l7.CRPC},
	"memcached": {l7.Memcached},
}

// DefaultProtocols is what an empty l7_protocol traces: gala-gopher's
// documented default.
var DefaultProtocols = []string{"http"}
