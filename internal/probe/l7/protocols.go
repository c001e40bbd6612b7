package l7

import "github.com/galago-project/galago/internal/l7"

// parsers are the protocols galago parses, by the constructor of one
// connection's parser. A protocol without one is not traced.
var parsers = map[l7.Protocol]func(l7.Role) l7.Parser{}

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
