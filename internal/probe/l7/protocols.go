package l7

import (
	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/crpc"
	"github.com/galago-project/galago/internal/l7/dns"
	"github.com/galago-project/galago/internal/l7/dubbo"
	"github.com/galago-project/galago/internal/l7/http"
	"github.com/galago-project/galago/internal/l7/http2"
	"github.com/galago-project/galago/internal/l7/kafka"
	"github.com/galago-project/galago/internal/l7/memcached"
	"github.com/galago-project/galago/internal/l7/mongo"
	"github.com/galago-project/galago/internal/l7/mysql"
	"github.com/galago-project/galago/internal/l7/pgsql"
	"github.com/galago-project/galago/internal/l7/redis"
	"github.com/galago-project/galago/internal/syscap"
)

// parserEnv is what a connection's parser is made with.
type parserEnv struct {
	role l7.Role
	l4   syscap.L4
	// in interns API templates; it is shared by the connections of a
	// protocol (the probe serialises Feed).
	in *l7.Interner
	// topics are the Kafka topic names learnt by the process's
	// connections (Metadata answers come on another connection than the
	// Produce and Fetch requests that name topics by id).
	topics *kafka.TopicNames
	// paths: HTTP parsers keep each request's raw path, for spans.
	paths bool
}

// parsers are the protocols galago parses. A protocol without one is not
// traced.
var parsers = map[l7.Protocol]func(parserEnv) l7.Parser{
	l7.HTTP: func(e parserEnv) l7.Parser {
		p := http.NewParser(e.role)
		p.SetInterner(e.in)
		if e.paths {
			p.KeepPaths()
		}
		return p
	},
	l7.HTTP2: func(e parserEnv) l7.Parser {
		p := http2.NewParser(e.role)
		p.SetInterner(e.in)
		if e.paths {
			p.KeepPaths()
		}
		return p
	},
	l7.Redis: func(e parserEnv) l7.Parser {
		p := redis.NewParser(e.role)
		p.SetInterner(e.in)
		return p
	},
	l7.Memcached: func(e parserEnv) l7.Parser { return memcached.NewParser(e.role) },
	l7.DNS: func(e parserEnv) l7.Parser {
		p := dns.NewParser(e.role)
		if e.l4 == syscap.UDP {
			p = dns.NewUDPParser(e.role)
		}
		p.SetInterner(e.in)
		return p
	},
	l7.PgSQL: func(e parserEnv) l7.Parser { return pgsql.NewParserWith(e.role, e.in) },
	l7.MySQL: func(e parserEnv) l7.Parser { return mysql.NewParserWith(e.role, e.in) },
	l7.Kafka: func(e parserEnv) l7.Parser {
		p := kafka.NewParser(e.role)
		p.SetTopicNames(e.topics)
		return p
	},
	l7.Mongo: func(e parserEnv) l7.Parser { return mongo.NewParser(e.role) },
	l7.CRPC:  func(e parserEnv) l7.Parser { return crpc.NewParser(e.role) },
	l7.Dubbo: func(e parserEnv) l7.Parser {
		p := dubbo.NewParser(e.role)
		p.SetInterner(e.in)
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

// upgraded returns the parser that continues a connection whose HTTP/1
// parser saw it switch to HTTP/2 (h2c), with the part of chunk c that
// already belongs to HTTP/2; ok false when there is no such switch.
func upgraded(p l7.Parser, c l7.Chunk, env func() parserEnv) (next l7.Parser, rest l7.Chunk, ok bool) {
	h, isHTTP := p.(*http.Parser)
	if !isHTTP {
		return nil, c, false
	}
	up, done := h.Upgrade()
	if !done || up.Protocol != l7.HTTP2 {
		return nil, c, false
	}
	e := env()
	p2 := http2.NewUpgradedParser(e.role, up.Start, up.API, up.ReqBytes)
	p2.SetInterner(e.in)
	if e.paths {
		p2.KeepPaths()
		p2.SetUpgradePath(up.Path)
	}
	return p2, up.Rest(c), true
}
