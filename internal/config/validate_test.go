package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateRejects(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(key, []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	long := "/" + strings.Repeat("s", 110)

	cases := []struct {
		name, src, want string
	}{
		{"log file name", `global = { log_file_name = ""; rest_api_on = true; };`,
			`f.conf:1: global.log_file_name: must not be empty`},
		{"log level", "global = {\n log_level = \"verbose\"; rest_api_on = true; };",
			`f.conf:2: global.log_level: "verbose" is not one of "debug", "info", "warn", "error"`},
		{"metric channel", `metric = { out_channel = "stdout"; };`,
			`f.conf:1: metric.out_channel: "stdout" is not one of "web_server", "logs", "json", "kafka", "otlp"`},
		{"metric channel list item", `metric = { out_channel = "web_server,stdout"; };`,
			`f.conf:1: metric.out_channel: "stdout" is not one of "web_server", "logs", "json", "kafka", "otlp"`},
		{"metric channel twice", `metric = { out_channel = "otlp, otlp"; };`,
			`f.conf:1: metric.out_channel: "otlp, otlp" names "otlp" twice`},
		{"metric channel empty item", `metric = { out_channel = "web_server,"; };`,
			`f.conf:1: metric.out_channel: "" is not one of "web_server", "logs", "json", "kafka", "otlp"`},
		{"otlp traces percent", `galago = { otlp_traces_percent = 101; };`,
			`f.conf:1: galago.otlp_traces_percent: 101 out of range [0, 100]`},
		{"otlp protocol", `metric = { out_channel = "otlp"; }; galago = { otlp_protocol = "http/json"; };`,
			`f.conf:1: galago.otlp_protocol: "http/json" is not one of "grpc", "http/protobuf"`},
		{"event channel json", `event = { out_channel = "json"; };`,
			`f.conf:1: event.out_channel: "json" is not one of "logs", "kafka", ""`},
		{"meta channel web_server", `meta = { out_channel = "web_server"; };`,
			`f.conf:1: meta.out_channel: "web_server" is not one of "logs", "kafka", ""`},
		{"event timeout", `event = { timeout = -1; };`,
			`f.conf:1: event.timeout: -1 out of range [0, 2147483647]`},
		{"event desc_language", `event = { desc_language = "zh"; };`,
			`f.conf:1: event.desc_language: "zh" is not one of "en_US", "zh_CN", ""`},
		{"empty topic", `kafka = { kafka_broker = "k:9092"; }; event = { out_channel = "kafka"; kafka_topic = ""; };`,
			`f.conf:1: event.kafka_topic: must not be empty when event.out_channel is kafka`},
		{"long topic", `kafka = { kafka_broker = "k:9092"; }; metric = { out_channel = "kafka"; kafka_topic = "` + strings.Repeat("t", 250) + `"; };`,
			`f.conf:1: metric.kafka_topic: "` + strings.Repeat("t", 250) + `" is 250 characters, longer than Kafka's limit of 249`},
		{"dot topic", `kafka = { kafka_broker = "k:9092"; }; event = { out_channel = "kafka"; kafka_topic = ".."; };`,
			`f.conf:1: event.kafka_topic: ".." is not a legal Kafka topic name`},
		{"sasl mechanism", `kafka = { kafka_broker = "k:9092"; }; meta = { out_channel = "kafka"; }; galago = { kafka_sasl_mechanism = "GSSAPI"; kafka_sasl_username = "u"; };`,
			`f.conf:1: galago.kafka_sasl_mechanism: "GSSAPI" is not one of "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"`},
		{"sasl user", `kafka = { kafka_broker = "k:9092"; }; meta = { out_channel = "kafka"; }; galago = { kafka_sasl_mechanism = "PLAIN"; };`,
			`galago.kafka_sasl_username: must not be empty`},
		{"sasl without mechanism", `kafka = { kafka_broker = "k:9092"; }; meta = { out_channel = "kafka"; }; galago = { kafka_sasl_password = "p"; };`,
			`galago.kafka_sasl_mechanism: must be one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 when a SASL username or password is set`},
		{"tls files without tls", `kafka = { kafka_broker = "k:9092"; }; meta = { out_channel = "kafka"; }; galago = { kafka_tls_ca_file = "/etc/passwd"; };`,
			`galago.kafka_tls: kafka_tls_* files are set but kafka_tls is false`},
		{"tls missing ca", `kafka = { kafka_broker = "k:9092"; }; meta = { out_channel = "kafka"; }; galago = { kafka_tls = true; kafka_tls_ca_file = "/nonexistent/ca.pem"; };`,
			`f.conf:1: galago.kafka_tls_ca_file: stat /nonexistent/ca.pem: no such file or directory`},
		{"topic chars", `kafka = { kafka_broker = "k:9092"; }; meta = { out_channel = "kafka"; kafka_topic = "meta/data"; };`,
			`f.conf:1: meta.kafka_topic: "meta/data": a Kafka topic may only contain letters, digits, '.', '_' and '-'`},
		{"max tables", "imdb =\n{\n    max_tables_num = 5000;\n};",
			`f.conf:3: imdb.max_tables_num: 5000 out of range [1, 4096]`},
		{"max tables 0", `imdb = { max_tables_num = 0; };`, `f.conf:1: imdb.max_tables_num: 0 out of range [1, 4096]`},
		{"max records", `imdb = { max_records_num = 0; };`, `f.conf:1: imdb.max_records_num: 0 out of range [1, 2147483647]`},
		{"max records 64-bit", `imdb = { max_records_num = 4294967296; };`,
			`f.conf:1: imdb.max_records_num: 4294967296 out of range [1, 2147483647]`},
		{"max metrics", `imdb = { max_metrics_num = 129; };`, `f.conf:1: imdb.max_metrics_num: 129 out of range [1, 128]`},
		{"record timeout", `imdb = { record_timeout = 0; };`, `f.conf:1: imdb.record_timeout: 0 out of range [1, 2147483647]`},
		{"web port low", `web_server = { port = 80; };`, `f.conf:1: web_server.port: 80 out of range [1024, 65535]`},
		{"web port high", `web_server = { port = 65536; };`, `f.conf:1: web_server.port: 65536 out of range [1024, 65535]`},
		{"web bind addr", `web_server = { bind_addr = ""; };`, `f.conf:1: web_server.bind_addr: must not be empty`},
		{"web ssl_auth", `web_server = { ssl_auth = "yes"; };`, `f.conf:1: web_server.ssl_auth: "yes" is not one of "on", "off"`},
		{"ssl without key", `web_server = { ssl_auth = "on"; cert_file = "` + key + `"; };`,
			`web_server.private_key: required when ssl_auth is on`},
		{"ssl key missing", `rest_api_server = { ssl_auth = "on"; private_key = "` + missing + `"; cert_file = "` + key + `"; };`,
			`f.conf:1: rest_api_server.private_key: stat ` + missing + `: no such file or directory`},
		{"ssl cert is a dir", `rest_api_server = { ssl_auth = "on"; private_key = "` + key + `"; cert_file = "` + dir + `"; };`,
			`f.conf:1: rest_api_server.cert_file: ` + dir + ` is not a regular file`},
		{"ssl ca missing", `rest_api_server = { ssl_auth = "on"; private_key = "` + key + `"; cert_file = "` + key + `"; ca_file = "` + missing + `"; };`,
			`f.conf:1: rest_api_server.ca_file: stat ` + missing + `: no such file or directory`},
		{"same address", `rest_api_server = { port = 8888; };`,
			`f.conf:1: rest_api_server.port: 127.0.0.1:8888 is also web_server's address`},
		{"rest port", `rest_api_server = { port = 1023; };`, `f.conf:1: rest_api_server.port: 1023 out of range [1024, 65535]`},
		{"broker empty", `event = { out_channel = "kafka"; };`,
			`kafka.kafka_broker: must not be empty when an out_channel is kafka`},
		{"broker no port", `kafka = { kafka_broker = "k:9092,k2"; }; event = { out_channel = "kafka"; };`,
			`f.conf:1: kafka.kafka_broker: "k2": want host:port`},
		{"broker port 0", `kafka = { kafka_broker = "k:0"; }; event = { out_channel = "kafka"; };`,
			`f.conf:1: kafka.kafka_broker: "k:0": want host:port with a port in [1, 65535]`},
		{"broker no host", `kafka = { kafka_broker = ":9092"; }; event = { out_channel = "kafka"; };`,
			`f.conf:1: kafka.kafka_broker: ":9092": want host:port with a port in [1, 65535]`},
		{"batch", `kafka = { kafka_broker = "k:1"; batch_num_messages = 0; }; meta = { out_channel = "kafka"; };`,
			`f.conf:1: kafka.batch_num_messages: 0 out of range [1, 2147483647]`},
		{"codec", `kafka = { kafka_broker = "k:1"; compression_codec = "brotli"; }; meta = { out_channel = "kafka"; };`,
			`f.conf:1: kafka.compression_codec: "brotli" is not one of "none", "gzip", "snappy", "lz4", "zstd"`},
		{"queue messages", `kafka = { kafka_broker = "k:1"; queue_buffering_max_messages = -5; }; meta = { out_channel = "kafka"; };`,
			`f.conf:1: kafka.queue_buffering_max_messages: -5 out of range [1, 2147483647]`},
		{"queue kbytes", `kafka = { kafka_broker = "k:1"; queue_buffering_max_kbytes = 0; }; meta = { out_channel = "kafka"; };`,
			`f.conf:1: kafka.queue_buffering_max_kbytes: 0 out of range [1, 2147483647]`},
		{"queue ms", `kafka = { kafka_broker = "k:1"; queue_buffering_max_ms = 0; }; meta = { out_channel = "kafka"; };`,
			`f.conf:1: kafka.queue_buffering_max_ms: 0 out of range [1, 2147483647]`},
		{"metric size 0", `logs = { metric_total_size = 0; };`, `f.conf:1: logs.metric_total_size: 0 out of range [1, 1024]`},
		{"metric size big", `logs = { metric_total_size = 2048; };`, `f.conf:1: logs.metric_total_size: 2048 out of range [1, 1024]`},
		{"metric dir empty", `logs = { metric_dir = ""; };`, `f.conf:1: logs.metric_dir: must not be empty`},
		{"debug dir empty", `logs = { debug_dir = ""; };`, `f.conf:1: logs.debug_dir: must not be empty`},
		{"metric dir ;", `logs = { metric_dir = "/var/log/a;rm"; };`,
			`f.conf:1: logs.metric_dir: "/var/log/a;rm" contains ";", which gala-gopher refuses in log dirs`},
		{"event dir $", `logs = { event_dir = "/var/log/$HOME"; };`,
			`f.conf:1: logs.event_dir: "/var/log/$HOME" contains "$", which gala-gopher refuses in log dirs`},
		{"event dir newline", `logs = { event_dir = "/var/log\nx"; };`,
			`f.conf:1: logs.event_dir: "/var/log\nx" contains "\n", which gala-gopher refuses in log dirs`},
		{"metric dir ./", `logs = { metric_dir = "/var/log/./m"; };`,
			`f.conf:1: logs.metric_dir: "/var/log/./m" contains "./", which gala-gopher refuses in log dirs`},
		{"metric dir /.", `logs = { metric_dir = "/var/log/.m"; };`,
			`f.conf:1: logs.metric_dir: "/var/log/.m" contains "/.", which gala-gopher refuses in log dirs`},
		{"host path", `galago = { host_path = "host"; };`, `f.conf:1: galago.host_path: "host" is not an absolute path`},
		{"cri endpoint scheme", `galago = { cri_endpoints = "/run/a.sock, tcp://10.0.0.1:2375"; };`, `f.conf:1: galago.cri_endpoints: "tcp://10.0.0.1:2375": only unix sockets are supported, not tcp://`},
		{"docker socket relative", `galago = { docker_socket = "unix://run/docker.sock"; };`, `f.conf:1: galago.docker_socket: "unix://run/docker.sock" is not an absolute socket path`},
		{"containerd socket relative", `galago = { containerd_socket = "containerd.sock"; };`, `f.conf:1: galago.containerd_socket: "containerd.sock" is not an absolute socket path`},
		{"l7 ring 0", `galago = { l7_ringbuf_mb = 0; };`, `f.conf:1: galago.l7_ringbuf_mb: 0 is not a power of 2 in [1, 256] (MiB of the l7 capture's ring buffer)`},
		{"l7 ring 3", `galago = { l7_ringbuf_mb = 3; };`, `f.conf:1: galago.l7_ringbuf_mb: 3 is not a power of 2 in [1, 256] (MiB of the l7 capture's ring buffer)`},
		{"l7 ring 512", `galago = { l7_ringbuf_mb = 512; };`, `f.conf:1: galago.l7_ringbuf_mb: 512 is not a power of 2 in [1, 256] (MiB of the l7 capture's ring buffer)`},
		{"l7 ring -4", `galago = { l7_ringbuf_mb = -4; };`, `f.conf:1: galago.l7_ringbuf_mb: -4 is not a power of 2 in [1, 256] (MiB of the l7 capture's ring buffer)`},
		{"pid file", `galago = { pid_file = ""; };`, `f.conf:1: galago.pid_file: must not be empty`},
		{"probes init", `galago = { probes_init = ""; };`, `f.conf:1: galago.probes_init: must not be empty`},
		{"cmd socket", `galago = { cmd_socket = "` + long + `"; };`,
			`f.conf:1: galago.cmd_socket: "` + long + `" is 111 bytes, longer than a unix socket path may be (107)`},
		{"several", "imdb = { max_metrics_num = 0;\n max_tables_num = 0; };",
			"f.conf:2: imdb.max_tables_num: 0 out of range [1, 4096]\nf.conf:1: imdb.max_metrics_num: 0 out of range [1, 128]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := mustParse(t, c.src)
			err := cfg.Validate()
			if err == nil || err.Error() != c.want {
				t.Errorf("Validate() =\n%v\nwant\n%s", err, c.want)
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(key, []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"log level any case": `global = { log_level = "DEBUG"; rest_api_on = true; };`,
		// Parts that are not used are not checked, as in gala-gopher.
		"web_server unused":  `metric = { out_channel = "logs"; }; web_server = { port = 80; ssl_auth = "on"; };`,
		"rest server off":    `global = { rest_api_on = false; }; rest_api_server = { port = 1; ssl_auth = "bad"; };`,
		"kafka unused":       `kafka = { kafka_broker = "x"; batch_num_messages = 0; compression_codec = "x"; }; metric = { kafka_topic = ""; };`,
		"channels off":       `metric = { out_channel = ""; }; event = { out_channel = ""; }; meta = { out_channel = ""; };`,
		"same port off":      `metric = { out_channel = "json"; }; rest_api_server = { port = 8888; };`,
		"meta dir any chars": `logs = { meta_dir = "/var/log/m;x"; debug_dir = "/var/log/./d"; };`,
		"kafka ok": `kafka = { kafka_broker = "k1:9092, [::1]:9093"; compression_codec = "zstd"; };
			metric = { out_channel = "kafka"; kafka_topic = "a_topic_name_longer_than_gala_gophers_31_chars"; };`,
		"kafka sasl tls": `kafka = { kafka_broker = "k1:9093"; }; event = { out_channel = "kafka"; };
			galago = { kafka_tls = true; kafka_tls_ca_file = "` + key + `"; kafka_sasl_mechanism = "scram-sha-512"; kafka_sasl_username = "u"; kafka_sasl_password = "p"; };`,
		"web_server and otlp": `metric = { out_channel = "web_server, otlp"; };
			galago = { otlp_endpoint = "127.0.0.1:4317"; otlp_protocol = "grpc"; otlp_insecure = true; otlp_export_interval = 10; };`,
		"kafka and otlp": `kafka = { kafka_broker = "k1:9092"; }; metric = { out_channel = "kafka,otlp"; };`,
		"tls":            `rest_api_server = { ssl_auth = "on"; private_key = "` + key + `"; cert_file = "` + key + `"; ca_file = "` + key + `"; };`,
		"edges": `imdb = { max_tables_num = 4096; max_metrics_num = 128; max_records_num = 1; record_timeout = 1; };
			web_server = { port = 65535; }; rest_api_server = { port = 1024; }; logs = { metric_total_size = 1024; };
			event = { timeout = 0; };`,
		"l7 ring 1":   `galago = { l7_ringbuf_mb = 1; };`,
		"l7 ring 256": `galago = { l7_ringbuf_mb = 256; };`,
	}
	for name, src := range cases {
		if err := mustParse(t, src).Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestValidateDefaultOrigin(t *testing.T) {
	c := Default()
	c.IMDB.MaxTablesNum = 0
	if err := c.Validate(); err == nil || err.Error() != "imdb.max_tables_num: 0 out of range [1, 4096]" {
		t.Errorf("Validate() = %v", err)
	}
}
