package appinfo

import (
	"strings"
	"testing"
)

func TestDetect(t *testing.T) {
	for _, c := range []struct {
		in   Input
		want App
	}{
		{Input{Exe: "/usr/lib/postgresql/15/bin/postgres", Args: []string{"postgres: checkpointer "}, Comm: "postgres"}, App{Type: "postgres"}},
		{Input{Exe: "", Args: []string{"postgres: 15/main: walwriter"}}, App{Type: "postgres"}},
		{Input{Exe: "/usr/sbin/nginx", Args: []string{"nginx: worker process"}, Comm: "nginx"}, App{Type: "nginx"}},
		{Input{Exe: "/usr/bin/redis-server", Args: []string{"/usr/bin/redis-server 127.0.0.1:6379"}, Comm: "redis-server"}, App{Type: "redis"}},
		{Input{Exe: "/usr/bin/memcached", Args: []string{"memcached", "-u", "nobody"}}, App{Type: "memcached"}},
		{Input{Exe: "/usr/sbin/mariadbd", Args: []string{"/usr/sbin/mariadbd"}}, App{Type: "mysql"}},
		{Input{Exe: "/usr/lib/jvm/java-17-openjdk-amd64/bin/java", Args: []string{"java", "-Xmx1G", "-cp", "/opt/kafka/libs/*", "kafka.Kafka", "server.properties"}},
			App{Type: "kafka", Detail: "kafka.Kafka"}},
		{Input{Exe: "/usr/lib/jvm/java-17-openjdk-amd64/bin/java", Args: []string{"/usr/bin/java", "-jar", "app.jar"}},
			App{Type: "java", Detail: "app.jar"}},
		{Input{Exe: "/usr/lib/jvm/x/bin/java", Args: []string{"java", "-cp", "x", "org.apache.zookeeper.server.quorum.QuorumPeerMain"}},
			App{Type: "zookeeper", Detail: "org.apache.zookeeper.server.quorum.QuorumPeerMain"}},
		{Input{Exe: "/usr/bin/python3.11", Args: []string{"python3", "-u", "/srv/app.py"}}, App{Type: "python", Detail: "/srv/app.py"}},
		{Input{Exe: "/usr/bin/python3.11", Args: []string{"python3", "-m", "http.server"}}, App{Type: "python", Detail: "http.server"}},
		{Input{Exe: "/usr/bin/python3.11", Args: []string{"/usr/bin/python3", "/usr/bin/gunicorn", "app:app"}}, App{Type: "gunicorn", Detail: "/usr/bin/gunicorn"}},
		{Input{Exe: "/usr/bin/python3.11", Args: []string{"python3", "-c", "pass"}}, App{Type: "python"}},
		{Input{Exe: "/usr/bin/node", Args: []string{"node", "--max-old-space-size=100", "server.js"}}, App{Type: "nodejs", Detail: "server.js"}},
		{Input{Exe: "/usr/local/bin/envoy", Args: []string{"envoy", "-c", "x.yaml"}}, App{Type: "envoy"}},
		// a renamed binary: the listening port names it
		{Input{Exe: "/opt/bin/cache", Args: []string{"cache"}, Ports: []uint16{8080, 6379}}, App{Type: "redis"}},
		{Input{Exe: "/opt/bin/thing", Args: []string{"thing"}, Ports: []uint16{8080}}, App{}},
		{Input{}, App{}},
	} {
		if got := Detect(c.in); got != c.want {
			t.Errorf("Detect(%+v) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

const tcpTable = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:9C40 0100007F:18EB 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 20 4 30 10 -1
   2: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000000000000 100 0 0 10 0
`

func TestParseListen(t *testing.T) {
	got := ParseListen(strings.NewReader(tcpTable))
	if len(got) != 1 || got[4242] != 6379 {
		t.Errorf("%v, want inode 4242 -> 6379 only", got)
	}
}

func FuzzDetect(f *testing.F) {
	f.Add("/usr/bin/java", "java\x00-cp\x00x\x00kafka.Kafka", "java")
	f.Add("/usr/bin/python3", "python3\x00-m", "python3")
	f.Add("", "postgres: x", "")
	f.Fuzz(func(t *testing.T, exe, cmdline, comm string) {
		a := Detect(Input{Exe: exe, Args: splitArgs([]byte(cmdline)), Comm: comm})
		if a.Type == "" && a.Detail != "" {
			t.Fatalf("detail %q without a type", a.Detail)
		}
	})
}

func FuzzParseListen(f *testing.F) {
	f.Add(tcpTable)
	f.Fuzz(func(t *testing.T, s string) {
		for ino := range ParseListen(strings.NewReader(s)) {
			if ino == 0 {
				t.Fatal("inode 0")
			}
		}
	})
}
