package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// maxKafkaTopic is Kafka's limit on a topic name. gala-gopher cuts names to
// 31 characters (its 32-byte buffer); galago uses them as written.
const maxKafkaTopic = 249

// maxSocketPath is the longest AF_UNIX path Linux accepts (sun_path is 108
// bytes with the terminator).
const maxSocketPath = 107

// unsafeDirChars are refused in metric_dir and event_dir by gala-gopher,
// which passes them to shell commands; kept for compatibility.
const unsafeDirChars = "|;&$><()?*'`[]\\!\n"

// Validate checks every value against gala-gopher's rules (see the package
// doc for where they are stricter) and returns all violations, each
// naming where the value came from, the key, and what is wrong.
func (c *Config) Validate() error {
	v := &validator{c: c}

	v.nonEmpty("global.log_file_name", c.Global.LogFileName)
	v.oneOf("global.log_level", strings.ToLower(c.Global.LogLevel), c.Global.LogLevel, "debug", "info", "warn", "error")

	v.channels("metric", c.Metric.OutChannel, ChannelWebServer, ChannelLogs, ChannelJSON, ChannelKafka, ChannelOTLP)
	v.channel("event", c.Event.OutChannel, ChannelLogs, ChannelKafka, ChannelOff)
	v.channel("meta", c.Meta.OutChannel, ChannelLogs, ChannelKafka, ChannelOff)
	v.topic("metric", c.Metric.OutChannel, c.Metric.KafkaTopic)
	v.topic("event", c.Event.OutChannel, c.Event.KafkaTopic)
	v.topic("meta", c.Meta.OutChannel, c.Meta.KafkaTopic)
	v.intRange("event.timeout", c.Event.Timeout, 0, math.MaxInt32)
	v.oneOf("event.desc_language", c.Event.DescLanguage, c.Event.DescLanguage, "en_US", "zh_CN", "")

	v.intRange("imdb.max_tables_num", c.IMDB.MaxTablesNum, 1, 4096)
	v.intRange("imdb.max_records_num", c.IMDB.MaxRecordsNum, 1, math.MaxInt32)
	v.intRange("imdb.max_metrics_num", c.IMDB.MaxMetricsNum, 1, 128)
	v.intRange("imdb.record_timeout", c.IMDB.RecordTimeout, 1, math.MaxInt32)

	if c.Metric.OutChannel.Has(ChannelWebServer) {
		v.server("web_server", c.WebServer)
	}
	if c.Global.RestAPIOn {
		v.server("rest_api_server", c.RestAPIServer)
	}
	if c.Metric.OutChannel.Has(ChannelWebServer) && c.Global.RestAPIOn &&
		c.WebServer.Port == c.RestAPIServer.Port && c.WebServer.BindAddr == c.RestAPIServer.BindAddr {
		v.fail("rest_api_server.port", "%s:%d is also web_server's address",
			c.RestAPIServer.BindAddr, c.RestAPIServer.Port)
	}

	if c.Metric.OutChannel.Has(ChannelKafka) || c.Event.OutChannel == ChannelKafka || c.Meta.OutChannel == ChannelKafka {
		v.brokers("kafka.kafka_broker", c.Kafka.Broker)
		v.intRange("kafka.batch_num_messages", c.Kafka.BatchNumMessages, 1, math.MaxInt32)
		v.oneOf("kafka.compression_codec", c.Kafka.CompressionCodec, c.Kafka.CompressionCodec, "none", "gzip", "snappy", "lz4", "zstd")
		v.intRange("kafka.queue_buffering_max_messages", c.Kafka.QueueBufferingMaxMessages, 1, math.MaxInt32)
		v.intRange("kafka.queue_buffering_max_kbytes", c.Kafka.QueueBufferingMaxKbytes, 1, math.MaxInt32)
		v.intRange("kafka.queue_buffering_max_ms", c.Kafka.QueueBufferingMaxMs, 1, math.MaxInt32)
		v.kafkaSecurity(c.Kafka)
	}

	v.intRange("logs.metric_total_size", c.Logs.MetricTotalSize, 1, 1024)
	v.logDir("logs.metric_dir", c.Logs.MetricDir, true)
	v.logDir("logs.event_dir", c.Logs.EventDir, true)
	v.logDir("logs.meta_dir", c.Logs.MetaDir, false)
	v.logDir("logs.debug_dir", c.Logs.DebugDir, false)

	v.nonEmpty("galago.pid_file", c.PIDFile)
	v.nonEmpty("galago.probes_init", c.ProbesInitFile)
	if v.nonEmpty("galago.cmd_socket", c.CmdSocket) && len(c.CmdSocket) > maxSocketPath {
		v.fail("galago.cmd_socket", "%q is %d bytes, longer than a unix socket path may be (%d)",
			c.CmdSocket, len(c.CmdSocket), maxSocketPath)
	}
	if !filepath.IsAbs(c.HostPath) {
		v.fail("galago.host_path", "%q is not an absolute path", c.HostPath)
	}
	for _, e := range c.CRISockets() {
		v.socketEndpoint("galago.cri_endpoints", e)
	}
	v.socketEndpoint("galago.containerd_socket", c.ContainerdSocket)
	v.socketEndpoint("galago.docker_socket", c.DockerSocket)
	v.intRange("galago.otlp_traces_percent", c.OTLP.TracesPercent, 0, 100)
	if c.OTLP.TracesPercent > 0 {
		if p := c.OTLP.Protocol; p != "" && p != "grpc" && p != "http/protobuf" {
			v.fail("galago.otlp_protocol", "%q is not one of \"grpc\", \"http/protobuf\"", p)
		}
	}
	if n := c.L7RingbufMB; n < 1 || n > 256 || n&(n-1) != 0 {
		v.fail("galago.l7_ringbuf_mb", "%d is not a power of 2 in [1, 256] (MiB of the l7 capture's ring buffer)", n)
	}
	return errors.Join(v.errs...)
}

// socketEndpoint checks a runtime API endpoint: "" (disabled), an absolute
// socket path or "unix://" and one.
func (v *validator) socketEndpoint(key, e string) {
	if e == "" {
		return
	}
	p := e
	if scheme, rest, ok := strings.Cut(e, "://"); ok {
		if scheme != "unix" {
			v.fail(key, "%q: only unix sockets are supported, not %s://", e, scheme)
			return
		}
		p = rest
	}
	if !filepath.IsAbs(p) {
		v.fail(key, "%q is not an absolute socket path", e)
	}
}

type validator struct {
	c    *Config
	errs []error
}

// fail records an error for key, prefixed with where its value came from.
func (v *validator) fail(key, format string, args ...any) {
	msg := key + ": " + fmt.Sprintf(format, args...)
	if o := v.c.origin[key]; o != "" {
		msg = o + ": " + msg
	}
	v.errs = append(v.errs, errors.New(msg))
}

func (v *validator) nonEmpty(key, val string) bool {
	if val == "" {
		v.fail(key, "must not be empty")
		return false
	}
	return true
}

func (v *validator) intRange(key string, val, min, max int) {
	if val < min || val > max {
		v.fail(key, "%d out of range [%d, %d]", val, min, max)
	}
}

// oneOf checks norm (val, normalised by the caller) against allowed.
func (v *validator) oneOf(key, norm, val string, allowed ...string) {
	for _, a := range allowed {
		if norm == a {
			return
		}
	}
	q := make([]string, len(allowed))
	for i, a := range allowed {
		q[i] = strconv.Quote(a)
	}
	v.fail(key, "%q is not one of %s", val, strings.Join(q, ", "))
}

// channels checks a metric out_channel: one channel or several,
// comma-separated, each allowed and named once; empty means none.
func (v *validator) channels(section string, ch Channel, allowed ...Channel) {
	seen := map[Channel]bool{}
	for _, c := range ch.List() {
		if seen[c] {
			v.fail(section+".out_channel", "%q names %q twice", ch, c)
			return
		}
		seen[c] = true
		v.channel(section, c, allowed...)
	}
	if seen[ChannelOTLP] {
		if p := v.c.OTLP.Protocol; p != "" && p != "grpc" && p != "http/protobuf" {
			v.fail("galago.otlp_protocol", "%q is not one of \"grpc\", \"http/protobuf\"", p)
		}
		v.intRange("galago.otlp_export_interval", v.c.OTLP.ExportInterval, 0, 86400)
	}
}

func (v *validator) channel(section string, ch Channel, allowed ...Channel) {
	s := make([]string, len(allowed))
	for i, a := range allowed {
		s[i] = string(a)
	}
	v.oneOf(section+".out_channel", string(ch), string(ch), s...)
}

// topic checks a kafka topic when its channel is kafka: non-empty, within
// gala-gopher's length, and in Kafka's legal characters.
func (v *validator) topic(section string, ch Channel, topic string) {
	if !ch.Has(ChannelKafka) {
		return
	}
	key := section + ".kafka_topic"
	switch {
	case topic == "":
		v.fail(key, "must not be empty when %s.out_channel is kafka", section)
	case len(topic) > maxKafkaTopic:
		v.fail(key, "%q is %d characters, longer than Kafka's limit of %d", topic, len(topic), maxKafkaTopic)
	case topic == "." || topic == "..":
		v.fail(key, "%q is not a legal Kafka topic name", topic)
	case strings.Trim(topic, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "":
		v.fail(key, "%q: a Kafka topic may only contain letters, digits, '.', '_' and '-'", topic)
	}
}

func (v *validator) server(section string, s HTTPServer) {
	v.nonEmpty(section+".bind_addr", s.BindAddr)
	v.intRange(section+".port", s.Port, 1024, 65535)
	v.oneOf(section+".ssl_auth", s.SSLAuth, s.SSLAuth, "on", "off")
	if !s.TLS() {
		return
	}
	v.file(section+".private_key", s.PrivateKey, true)
	v.file(section+".cert_file", s.CertFile, true)
	v.file(section+".ca_file", s.CAFile, false)
}

// file checks that path names an existing regular file; an empty path is
// an error only if required.
func (v *validator) file(key, path string, required bool) {
	if path == "" {
		if required {
			v.fail(key, "required when ssl_auth is on")
		}
		return
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		v.fail(key, "%v", err)
	case !fi.Mode().IsRegular():
		v.fail(key, "%s is not a regular file", path)
	}
}

// brokers checks a comma-separated host:port list.
func (v *validator) brokers(key, list string) {
	if list == "" {
		v.fail(key, "must not be empty when an out_channel is kafka")
		return
	}
	for _, b := range strings.Split(list, ",") {
		host, port, err := net.SplitHostPort(strings.TrimSpace(b))
		if err != nil {
			v.fail(key, "%q: want host:port", b)
			continue
		}
		n, err := strconv.Atoi(port)
		if host == "" || err != nil || n < 1 || n > 65535 {
			v.fail(key, "%q: want host:port with a port in [1, 65535]", b)
		}
	}
}

// SASLMechanisms are the values of galago.kafka_sasl_mechanism ("" is none).
var SASLMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// kafkaSecurity checks galago's Kafka TLS and SASL settings.
func (v *validator) kafkaSecurity(k Kafka) {
	if k.TLS {
		v.tlsFile("galago.kafka_tls_ca_file", k.TLSCAFile)
		v.tlsFile("galago.kafka_tls_cert_file", k.TLSCertFile)
		v.tlsFile("galago.kafka_tls_key_file", k.TLSKeyFile)
		if (k.TLSCertFile == "") != (k.TLSKeyFile == "") {
			v.fail("galago.kafka_tls_cert_file", "kafka_tls_cert_file and kafka_tls_key_file go together: set both or neither")
		}
	} else if k.TLSCAFile != "" || k.TLSCertFile != "" || k.TLSKeyFile != "" {
		v.fail("galago.kafka_tls", "kafka_tls_* files are set but kafka_tls is false")
	}
	if k.SASLMechanism == "" {
		if k.SASLUsername != "" || k.SASLPassword != "" {
			v.fail("galago.kafka_sasl_mechanism", "must be one of %s when a SASL username or password is set", strings.Join(SASLMechanisms, ", "))
		}
		return
	}
	v.oneOf("galago.kafka_sasl_mechanism", strings.ToUpper(k.SASLMechanism), k.SASLMechanism, SASLMechanisms...)
	v.nonEmpty("galago.kafka_sasl_username", k.SASLUsername)
}

// tlsFile checks an optional file path: set, it must name a regular file.
func (v *validator) tlsFile(key, path string) {
	if path == "" {
		return
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		v.fail(key, "%v", err)
	case !fi.Mode().IsRegular():
		v.fail(key, "%s is not a regular file", path)
	}
}

// logDir checks a log directory; gala-gopher refuses shell
// metacharacters in the metric and event dirs.
func (v *validator) logDir(key, dir string, shellSafe bool) {
	if !v.nonEmpty(key, dir) || !shellSafe {
		return
	}
	if i := strings.IndexAny(dir, unsafeDirChars); i >= 0 {
		v.fail(key, "%q contains %q, which gala-gopher refuses in log dirs", dir, dir[i:i+1])
		return
	}
	for _, s := range []string{"./", "/."} {
		if strings.Contains(dir, s) {
			v.fail(key, "%q contains %q, which gala-gopher refuses in log dirs", dir, s)
			return
		}
	}
}
