package appinfo

import (
	"path"
	"strings"

	"github.com/galago-project/galago/internal/identity"
)

// App is what a process is.
type App struct {
	// Type is the application type: postgres, mysql, redis, nginx, java,
	// python, ...; "" when nothing matched.
	Type string
	// Detail narrows Type for runtimes: a java main class (or -jar file),
	// a python script or module, a node script; "" otherwise.
	Detail string
}

// Input is what Detect looks at.
type Input struct {
	Exe   string   // target of /proc/<pid>/exe ("" when unreadable)
	Args  []string // /proc/<pid>/cmdline split at NULs
	Comm  string   // /proc/<pid>/comm
	Ports []uint16 // TCP ports the process listens on (only read when the rest names nothing)
}

// byName maps an executable or argv[0] base name to its type.
var byName = map[string]string{
	"postgres": "postgres", "postmaster": "postgres",
	"mysqld": "mysql", "mariadbd": "mysql", "mysqld_safe": "mysql",
	"redis-server": "redis", "redis-sentinel": "redis-sentinel", "keydb-server": "keydb", "valkey-server": "valkey",
	"memcached": "memcached",
	"nginx":     "nginx", "openresty": "nginx",
	"httpd": "apache", "apache2": "apache",
	"haproxy": "haproxy", "envoy": "envoy", "traefik": "traefik", "caddy": "caddy",
	"mongod": "mongodb", "mongos": "mongodb",
	"etcd": "etcd", "coredns": "coredns", "consul": "consul",
	"prometheus": "prometheus", "clickhouse-server": "clickhouse", "clickhouse": "clickhouse",
	"kube-apiserver": "kube-apiserver", "kubelet": "kubelet", "kube-proxy": "kube-proxy",
	"kube-scheduler": "kube-scheduler", "kube-controller-manager": "kube-controller-manager",
	"containerd": "containerd", "dockerd": "dockerd", "crio": "crio",
	"php-fpm": "php-fpm", "gunicorn": "gunicorn", "uwsgi": "uwsgi",
	"beam.smp": "erlang", "pgbouncer": "pgbouncer", "influxd": "influxdb", "nats-server": "nats",
	"zookeeper": "zookeeper", "rabbitmq-server": "rabbitmq",
}

// javaApps maps a java main class prefix to the application it runs.
var javaApps = []struct{ prefix, typ string }{
	{"kafka.Kafka", "kafka"},
	{"org.apache.zookeeper.", "zookeeper"},
	{"org.elasticsearch.", "elasticsearch"},
	{"org.opensearch.", "opensearch"},
	{"org.apache.cassandra.", "cassandra"},
	{"org.apache.catalina.", "tomcat"},
	{"org.eclipse.jetty.", "jetty"},
	{"org.apache.hadoop.", "hadoop"},
	{"org.apache.flink.", "flink"},
	{"org.apache.spark.", "spark"},
	{"io.confluent.", "kafka"},
	{"org.apache.activemq.", "activemq"},
	{"org.apache.rocketmq.", "rocketmq"},
}

// portApps names the type of a process that listens on a well-known port,
// for binaries whose name says nothing.
var portApps = map[uint16]string{
	5432: "postgres", 3306: "mysql", 6379: "redis", 11211: "memcached", 27017: "mongodb",
	9092: "kafka", 2181: "zookeeper", 9200: "elasticsearch", 5672: "rabbitmq", 2379: "etcd",
	8123: "clickhouse", 9000: "clickhouse", 4222: "nats",
}

// base is the program name of a path or argv[0]: its last element, with
// the ": ..." a process title adds ("postgres: checkpointer") dropped.
func base(s string) string {
	s, _, _ = strings.Cut(s, " ")
	s = strings.TrimSuffix(path.Base(s), ":")
	if s == "." || s == "/" {
		return ""
	}
	return s
}

// interpreter strips a version from an interpreter name: python3.11 ->
// python, nodejs -> node.
func interpreter(name string) string {
	for _, p := range []string{"python", "ruby", "perl", "php", "node", "java"} {
		if name == p || strings.HasPrefix(name, p) && strings.Trim(name[len(p):], "0123456789.") == "" {
			return p
		}
	}
	if name == "nodejs" {
		return "node"
	}
	return ""
}

// Detect names the application of a process.
func Detect(in Input) App {
	names := []string{base(in.Exe)}
	if len(in.Args) > 0 {
		names = append(names, base(in.Args[0]))
	}
	names = append(names, in.Comm)
	for _, n := range names {
		if n == "" {
			continue
		}
		if t, ok := byName[n]; ok {
			return App{Type: t}
		}
	}
	for _, n := range names {
		switch interpreter(n) {
		case "java":
			return java(in.Args)
		case "python":
			return python(in.Args)
		case "node":
			return App{Type: "nodejs", Detail: firstArg(in.Args)}
		case "ruby", "perl", "php":
			return App{Type: interpreter(n), Detail: firstArg(in.Args)}
		}
	}
	if n := base(in.Exe); n == "dotnet" {
		return App{Type: "dotnet", Detail: firstArg(in.Args)}
	}
	for _, p := range in.Ports {
		if t, ok := portApps[p]; ok {
			return App{Type: t}
		}
	}
	return App{}
}

func java(args []string) App {
	jargs := args
	if len(jargs) > 0 {
		jargs = append([]string{"java"}, jargs[1:]...) // JavaMainClass wants argv[0] "java"
	}
	main := identity.JavaMainClass(jargs)
	for _, a := range javaApps {
		if strings.HasPrefix(main, a.prefix) {
			return App{Type: a.typ, Detail: main}
		}
	}
	return App{Type: "java", Detail: main}
}

// pythonValueOpts are python options whose value is the next argument.
var pythonValueOpts = map[string]bool{"-W": true, "-X": true, "--check-hash-based-pycs": true}

func python(args []string) App {
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-m" && i+1 < len(args):
			m := args[i+1]
			if t, ok := byName[m]; ok { // python -m gunicorn
				return App{Type: t, Detail: m}
			}
			return App{Type: "python", Detail: m}
		case a == "-c":
			return App{Type: "python"}
		case pythonValueOpts[a]:
			i++
		case strings.HasPrefix(a, "-"):
		default:
			if t, ok := byName[base(a)]; ok { // python /usr/bin/gunicorn app:app
				return App{Type: t, Detail: a}
			}
			return App{Type: "python", Detail: a}
		}
	}
	return App{Type: "python"}
}

// firstArg is the first argument that is not an option: the script an
// interpreter runs.
func firstArg(args []string) string {
	for i := 1; i < len(args); i++ {
		if a := args[i]; !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}
