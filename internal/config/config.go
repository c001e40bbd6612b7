// Package config is galago's one typed configuration: gala-gopher's
// gala-gopher.conf (libconfig syntax, same sections and keys), the GOPHER_*
// environment variables that gala-gopher's container entrypoint applies, and
// the probes.init file.
//
// Start-up is Load, then ApplyEnv, then Validate. Load only decodes: a key
// of the wrong type is an error there; every rule on values (ranges, enums,
// files that must exist) is checked by Validate, so that values coming from
// the environment are checked the same way. Errors name where the value came
// from and the key:
//
//	/etc/gala-gopher/gala-gopher.conf:30: imdb.max_tables_num: 5000 out of range [1, 4096]
//	env GOPHER_REST_PORT: rest_api_server.port: 80 out of range [1024, 65535]
//
// Compatible with gala-gopher, but friendlier (deliberate differences):
//   - A missing section or key takes the value of the shipped file, where
//     gala-gopher refuses to start. The one exception keeps gala-gopher's
//     meaning: a global section without rest_api_on turns the REST server off.
//   - Unknown sections and keys are ignored, as in gala-gopher, but each one
//     is reported by Warnings (log them at debug level).
//   - Values gala-gopher silently mangles are kept or rejected: a kafka_topic
//     longer than 31 characters is used as written up to Kafka's own limit
//     of 249 (gala-gopher cuts it to 31), a log_level outside
//     debug/info/warn/error (gala-gopher falls back to debug; we accept any
//     case), an ssl_auth other than on/off, metric_total_size above 1024 MB
//     (gala-gopher caps it). kafka_broker has no length limit (gala-gopher cuts
//     it to 31 characters, which breaks broker lists).
//   - Rules for a part apply when the part is used, as in gala-gopher:
//     web_server when metric.out_channel is web_server, rest_api_server when
//     global.rest_api_on, the kafka section and topics when a channel is kafka.
//
// galago's own settings are not in gala-gopher's file: the pid file, command
// socket, probes.init and custom-probe JSON paths, and the host root. They
// have defaults and may be set in an optional `galago` section, which
// gala-gopher ignores, so one file serves both:
//
//	galago = { pid_file = "..."; cmd_socket = "..."; probes_init = "...";
//	           custom_json = "..."; host_path = "/host"; pg_stat_conf = "..."; l7_ringbuf_mb = 4;
//	           kafka_tls = true; kafka_tls_ca_file = "..."; kafka_tls_cert_file = "...";
//	           kafka_tls_key_file = "..."; kafka_sasl_mechanism = "SCRAM-SHA-512";
//	           kafka_sasl_username = "..."; kafka_sasl_password = "...";
//	           otlp_endpoint = "collector:4317"; otlp_protocol = "grpc";
//	           otlp_insecure = true; otlp_export_interval = 30; otlp_traces_percent = 10; };
package config

import (
	"log/slog"
	"path/filepath"
	"strings"
)

// DefaultPath is where gala-gopher and galago look for the config file.
const DefaultPath = "/etc/gala-gopher/gala-gopher.conf"

// Channel is an output channel name of metric, event or meta.
type Channel string

const (
	ChannelOff       Channel = ""
	ChannelWebServer Channel = "web_server" // metrics only: the Prometheus exporter
	ChannelLogs      Channel = "logs"
	ChannelJSON      Channel = "json" // metrics only
	ChannelKafka     Channel = "kafka"
	ChannelOTLP      Channel = "otlp" // metrics only: OTLP push (galago's own)
)

// List splits a comma-separated out_channel ("web_server,otlp": galago
// takes several metric channels at once; gala-gopher takes one).
func (ch Channel) List() []Channel {
	if ch == ChannelOff {
		return nil
	}
	var out []Channel
	for _, c := range strings.Split(string(ch), ",") {
		out = append(out, Channel(strings.TrimSpace(c)))
	}
	return out
}

// Has reports whether c is one of the channels of ch.
func (ch Channel) Has(c Channel) bool {
	for _, x := range ch.List() {
		if x == c {
			return true
		}
	}
	return false
}

// Config is the whole configuration. Field comments give the file key.
type Config struct {
	Global        Global
	Metric        Output      // metric
	Event         EventOutput // event
	Meta          Output      // meta
	IMDB          IMDB        // imdb
	WebServer     HTTPServer  // web_server: the Prometheus exporter
	RestAPIServer HTTPServer  // rest_api_server: the REST control API
	Kafka         Kafka
	Logs          Logs
	OTLP          OTLP // galago section: the otlp metric channel

	// galago section; not in gala-gopher's file.
	PIDFile        string // galago.pid_file: singleton lock, /var/run/gala_gopher/gala-gopher.pid
	CmdSocket      string // galago.cmd_socket: gopher-ctl socket, /var/run/gala_gopher/gala_gopher_cmd.sock
	ProbesInitFile string // galago.probes_init: /etc/gala-gopher/probes.init
	CustomJSONFile string // galago.custom_json: /etc/gala-gopher/gala-gopher-custom.json
	HostPath       string // galago.host_path, env GOPHER_HOST_PATH: root of the host file system, "/" or e.g. "/host" in a container
	L7RingbufMB    int    // galago.l7_ringbuf_mb: the l7 capture's ring buffer, MiB, a power of 2 in [1, 256]; 4
	PgStatConf     string // galago.pg_stat_conf: opengauss_sli's servers, /etc/gala-gopher/extend_probes/pg_stat_probe.conf

	// Container runtime API sockets, looked up under HostPath; "" disables.
	CRIEndpoints     string // galago.cri_endpoints: comma-separated CRI sockets (containerd, CRI-O, cri-dockerd, iSulad)
	ContainerdSocket string // galago.containerd_socket: containerd's own API
	DockerSocket     string // galago.docker_socket: the Docker Engine API

	// ProbesInitContent, from GOPHER_PROBES_INIT, replaces the content of
	// ProbesInitFile when non-empty.
	ProbesInitContent string

	// origin maps a key ("imdb.max_tables_num") to where its value came
	// from ("file:line" or "env VAR"); keys at their default are absent.
	origin   map[string]string
	warnings []string
}

// Global is the global section.
type Global struct {
	LogFileName string // log_file_name: debug log file name, in Logs.DebugDir
	LogLevel    string // log_level: debug, info, warn or error
	RestAPIOn   bool   // rest_api_on: start the REST control API
}

// Output is the metric or meta section.
type Output struct {
	OutChannel Channel // out_channel
	KafkaTopic string  // kafka_topic
}

// EventOutput is the event section.
type EventOutput struct {
	OutChannel Channel // out_channel
	KafkaTopic string  // kafka_topic
	Timeout    int     // timeout: seconds an entity's event suppresses the next ones
	// DescLanguage is desc_language: en_US or zh_CN, the language of event
	// descriptions. gala-gopher's current conf no longer ships the key;
	// its older releases and docs have it.
	DescLanguage string
}

// IMDB is the imdb section: the limits of the metric store.
type IMDB struct {
	MaxTablesNum  int // max_tables_num
	MaxRecordsNum int // max_records_num: per table
	MaxMetricsNum int // max_metrics_num: fields per table
	RecordTimeout int // record_timeout: seconds before an unrefreshed record ages out
}

// HTTPServer is the web_server or rest_api_server section.
type HTTPServer struct {
	BindAddr   string // bind_addr
	Port       int    // port
	SSLAuth    string // ssl_auth: "on" serves HTTPS (TLS 1.3)
	PrivateKey string // private_key: required with ssl_auth on
	CertFile   string // cert_file: required with ssl_auth on
	CAFile     string // ca_file: optional; set, clients must present a certificate it signed
}

// TLS reports whether the server serves HTTPS.
func (s HTTPServer) TLS() bool { return s.SSLAuth == "on" }

// Kafka is the kafka section; the numbers are gala-gopher's librdkafka
// producer settings named in the comments. The TLS and SASL settings are
// galago's own, in the galago section (gala-gopher has none).
type Kafka struct {
	Broker                    string // kafka_broker: bootstrap.servers, comma-separated host:port
	BatchNumMessages          int    // batch_num_messages: batch.num.messages
	CompressionCodec          string // compression_codec: none, gzip, snappy, lz4, zstd
	QueueBufferingMaxMessages int    // queue_buffering_max_messages
	QueueBufferingMaxKbytes   int    // queue_buffering_max_kbytes
	QueueBufferingMaxMs       int    // queue_buffering_max_ms: linger.ms

	TLS           bool   // galago.kafka_tls: connect to the brokers over TLS
	TLSCAFile     string // galago.kafka_tls_ca_file: CAs that sign the brokers' certificates ("": the system's)
	TLSCertFile   string // galago.kafka_tls_cert_file: client certificate, for brokers that require one
	TLSKeyFile    string // galago.kafka_tls_key_file: its private key
	SASLMechanism string // galago.kafka_sasl_mechanism: "", PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
	SASLUsername  string // galago.kafka_sasl_username
	SASLPassword  string // galago.kafka_sasl_password
}

// OTLP configures the otlp metric channel. Unset fields fall back to the
// standard OTEL_EXPORTER_OTLP_* and OTEL_METRIC_EXPORT_INTERVAL variables,
// then to the OpenTelemetry SDK's defaults.
type OTLP struct {
	Endpoint       string // galago.otlp_endpoint: host:port (grpc, http/protobuf) or a URL (http/protobuf)
	Protocol       string // galago.otlp_protocol: grpc or http/protobuf
	Insecure       bool   // galago.otlp_insecure: plain text instead of TLS
	ExportInterval int    // galago.otlp_export_interval: seconds between pushes
	// TracesPercent is the share of l7 exchanges sent as spans (by trace
	// id), 0 (off) to 100; galago.otlp_traces_percent.
	TracesPercent int
}

// Logs is the logs section.
type Logs struct {
	MetricTotalSize int    // metric_total_size: MB for the metric log files
	MetricDir       string // metric_dir
	EventDir        string // event_dir
	MetaDir         string // meta_dir
	DebugDir        string // debug_dir
}

// Default is the configuration of gala-gopher's shipped gala-gopher.conf,
// plus galago's paths.
func Default() *Config {
	return &Config{
		Global: Global{LogFileName: "gopher.log", LogLevel: "info", RestAPIOn: true},
		Metric: Output{OutChannel: ChannelWebServer, KafkaTopic: "gala_gopher"},
		Event:  EventOutput{OutChannel: ChannelLogs, KafkaTopic: "gala_gopher_event", Timeout: 600, DescLanguage: "en_US"},
		Meta:   Output{OutChannel: ChannelLogs, KafkaTopic: "gala_gopher_metadata"},
		IMDB:   IMDB{MaxTablesNum: 1024, MaxRecordsNum: 1024, MaxMetricsNum: 64, RecordTimeout: 60},
		WebServer: HTTPServer{
			BindAddr: "127.0.0.1", Port: 8888, SSLAuth: "off",
		},
		RestAPIServer: HTTPServer{
			BindAddr: "127.0.0.1", Port: 9999, SSLAuth: "off",
		},
		Kafka: Kafka{
			BatchNumMessages:          10000,
			CompressionCodec:          "none",
			QueueBufferingMaxMessages: 100000,
			QueueBufferingMaxKbytes:   1048576,
			QueueBufferingMaxMs:       5,
		},
		Logs: Logs{
			MetricTotalSize: 100,
			MetricDir:       "/var/log/gala-gopher/metrics",
			EventDir:        "/var/log/gala-gopher/event",
			MetaDir:         "/var/log/gala-gopher/meta",
			DebugDir:        "/var/log/gala-gopher/debug",
		},
		PIDFile:        "/var/run/gala_gopher/gala-gopher.pid",
		CmdSocket:      "/var/run/gala_gopher/gala_gopher_cmd.sock",
		ProbesInitFile: "/etc/gala-gopher/probes.init",
		CustomJSONFile: "/etc/gala-gopher/gala-gopher-custom.json",
		HostPath:       "/",
		// The kubelet's well-known CRI endpoints and iSulad's.
		CRIEndpoints:     "/run/containerd/containerd.sock,/run/crio/crio.sock,/var/run/cri-dockerd.sock,/var/run/isulad.sock",
		ContainerdSocket: "/run/containerd/containerd.sock",
		DockerSocket:     "/var/run/docker.sock",
		PgStatConf:       "/etc/gala-gopher/extend_probes/pg_stat_probe.conf",
		L7RingbufMB:      4,
	}
}

// CRISockets splits CRIEndpoints into its endpoints (empty ones dropped).
func (c *Config) CRISockets() []string {
	var out []string
	for _, e := range strings.Split(c.CRIEndpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// Warnings are notes from loading that do not stop start-up, such as
// unknown keys, each prefixed with its file and line.
func (c *Config) Warnings() []string { return c.warnings }

// DebugLogPath is the debug log file: Logs.DebugDir/Global.LogFileName.
func (c *Config) DebugLogPath() string {
	return filepath.Join(c.Logs.DebugDir, c.Global.LogFileName)
}

// SlogLevel is Global.LogLevel as a slog level (info if invalid; Validate
// rejects invalid levels).
func (c *Config) SlogLevel() slog.Level {
	switch strings.ToLower(c.Global.LogLevel) {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// setOrigin records where key's value came from.
func (c *Config) setOrigin(key, origin string) {
	if c.origin == nil {
		c.origin = map[string]string{}
	}
	c.origin[key] = origin
}
