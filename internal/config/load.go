package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/galago-project/galago/internal/libconfig"
)

// key is one setting of the file: its section, its name and the Config
// field it fills (*string, *Channel, *int or *bool).
type key struct {
	section, name string
	field         func(*Config) any
}

func (k key) path() string { return k.section + "." + k.name }

// schema lists every key of the file in the order of gala-gopher's shipped
// gala-gopher.conf, then galago's own section. Decoding and Marshal both
// walk it.
var schema = []key{
	{"global", "log_file_name", func(c *Config) any { return &c.Global.LogFileName }},
	{"global", "log_level", func(c *Config) any { return &c.Global.LogLevel }},
	{"global", "rest_api_on", func(c *Config) any { return &c.Global.RestAPIOn }},

	{"metric", "out_channel", func(c *Config) any { return &c.Metric.OutChannel }},
	{"metric", "kafka_topic", func(c *Config) any { return &c.Metric.KafkaTopic }},

	{"event", "out_channel", func(c *Config) any { return &c.Event.OutChannel }},
	{"event", "kafka_topic", func(c *Config) any { return &c.Event.KafkaTopic }},
	{"event", "timeout", func(c *Config) any { return &c.Event.Timeout }},
	{"event", "desc_language", func(c *Config) any { return &c.Event.DescLanguage }},

	{"meta", "out_channel", func(c *Config) any { return &c.Meta.OutChannel }},
	{"meta", "kafka_topic", func(c *Config) any { return &c.Meta.KafkaTopic }},

	{"imdb", "max_tables_num", func(c *Config) any { return &c.IMDB.MaxTablesNum }},
	{"imdb", "max_records_num", func(c *Config) any { return &c.IMDB.MaxRecordsNum }},
	{"imdb", "max_metrics_num", func(c *Config) any { return &c.IMDB.MaxMetricsNum }},
	{"imdb", "record_timeout", func(c *Config) any { return &c.IMDB.RecordTimeout }},

	{"web_server", "bind_addr", func(c *Config) any { return &c.WebServer.BindAddr }},
	{"web_server", "port", func(c *Config) any { return &c.WebServer.Port }},
	{"web_server", "ssl_auth", func(c *Config) any { return &c.WebServer.SSLAuth }},
	{"web_server", "private_key", func(c *Config) any { return &c.WebServer.PrivateKey }},
	{"web_server", "cert_file", func(c *Config) any { return &c.WebServer.CertFile }},
	{"web_server", "ca_file", func(c *Config) any { return &c.WebServer.CAFile }},

	{"rest_api_server", "bind_addr", func(c *Config) any { return &c.RestAPIServer.BindAddr }},
	{"rest_api_server", "port", func(c *Config) any { return &c.RestAPIServer.Port }},
	{"rest_api_server", "ssl_auth", func(c *Config) any { return &c.RestAPIServer.SSLAuth }},
	{"rest_api_server", "private_key", func(c *Config) any { return &c.RestAPIServer.PrivateKey }},
	{"rest_api_server", "cert_file", func(c *Config) any { return &c.RestAPIServer.CertFile }},
	{"rest_api_server", "ca_file", func(c *Config) any { return &c.RestAPIServer.CAFile }},

	{"kafka", "kafka_broker", func(c *Config) any { return &c.Kafka.Broker }},
	{"kafka", "batch_num_messages", func(c *Config) any { return &c.Kafka.BatchNumMessages }},
	{"kafka", "compression_codec", func(c *Config) any { return &c.Kafka.CompressionCodec }},
	{"kafka", "queue_buffering_max_messages", func(c *Config) any { return &c.Kafka.QueueBufferingMaxMessages }},
	{"kafka", "queue_buffering_max_kbytes", func(c *Config) any { return &c.Kafka.QueueBufferingMaxKbytes }},
	{"kafka", "queue_buffering_max_ms", func(c *Config) any { return &c.Kafka.QueueBufferingMaxMs }},

	{"logs", "metric_total_size", func(c *Config) any { return &c.Logs.MetricTotalSize }},
	{"logs", "metric_dir", func(c *Config) any { return &c.Logs.MetricDir }},
	{"logs", "event_dir", func(c *Config) any { return &c.Logs.EventDir }},
	{"logs", "meta_dir", func(c *Config) any { return &c.Logs.MetaDir }},
	{"logs", "debug_dir", func(c *Config) any { return &c.Logs.DebugDir }},

	{"galago", "pid_file", func(c *Config) any { return &c.PIDFile }},
	{"galago", "cmd_socket", func(c *Config) any { return &c.CmdSocket }},
	{"galago", "probes_init", func(c *Config) any { return &c.ProbesInitFile }},
	{"galago", "custom_json", func(c *Config) any { return &c.CustomJSONFile }},
	{"galago", "host_path", func(c *Config) any { return &c.HostPath }},
	{"galago", "cri_endpoints", func(c *Config) any { return &c.CRIEndpoints }},
	{"galago", "containerd_socket", func(c *Config) any { return &c.ContainerdSocket }},
	{"galago", "docker_socket", func(c *Config) any { return &c.DockerSocket }},
	{"galago", "pg_stat_conf", func(c *Config) any { return &c.PgStatConf }},
	{"galago", "l7_ringbuf_mb", func(c *Config) any { return &c.L7RingbufMB }},
	{"galago", "kafka_tls", func(c *Config) any { return &c.Kafka.TLS }},
	{"galago", "kafka_tls_ca_file", func(c *Config) any { return &c.Kafka.TLSCAFile }},
	{"galago", "kafka_tls_cert_file", func(c *Config) any { return &c.Kafka.TLSCertFile }},
	{"galago", "kafka_tls_key_file", func(c *Config) any { return &c.Kafka.TLSKeyFile }},
	{"galago", "kafka_sasl_mechanism", func(c *Config) any { return &c.Kafka.SASLMechanism }},
	{"galago", "kafka_sasl_username", func(c *Config) any { return &c.Kafka.SASLUsername }},
	{"galago", "kafka_sasl_password", func(c *Config) any { return &c.Kafka.SASLPassword }},
	{"galago", "otlp_endpoint", func(c *Config) any { return &c.OTLP.Endpoint }},
	{"galago", "otlp_protocol", func(c *Config) any { return &c.OTLP.Protocol }},
	{"galago", "otlp_insecure", func(c *Config) any { return &c.OTLP.Insecure }},
	{"galago", "otlp_export_interval", func(c *Config) any { return &c.OTLP.ExportInterval }},
	{"galago", "otlp_traces_percent", func(c *Config) any { return &c.OTLP.TracesPercent }},
}

// Load reads the config file at path. An empty path means DefaultPath, and
// then a missing file is not an error: the result is Default(). A path given
// explicitly must exist.
func Load(path string) (*Config, error) {
	if path == "" {
		return loadFile(DefaultPath, true)
	}
	return loadFile(path, false)
}

func loadFile(path string, missingOK bool) (*Config, error) {
	data, err := os.ReadFile(path)
	if missingOK && errors.Is(err, fs.ErrNotExist) {
		return Default(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes a config file's content; name is the file name used in
// errors and warnings. Keys absent from data keep their Default() value.
func Parse(name string, data []byte) (*Config, error) {
	root, err := libconfig.Parse(name, data)
	if err != nil {
		return nil, err
	}
	c := Default()
	var errs []error
	for _, sec := range root.Elems {
		at := fmt.Sprintf("%s:%d", name, sec.Line)
		if !knownSection(sec.Name) {
			c.warnings = append(c.warnings, fmt.Sprintf("%s: unknown section %s ignored", at, sec.Name))
			continue
		}
		if sec.Kind != libconfig.KindGroup {
			errs = append(errs, fmt.Errorf("%s: %s: want a group { ... }, got %s", at, sec.Name, sec.Kind))
			continue
		}
		for _, m := range sec.Elems {
			at := fmt.Sprintf("%s:%d", name, m.Line)
			k, ok := findKey(sec.Name, m.Name)
			if !ok {
				c.warnings = append(c.warnings, fmt.Sprintf("%s: unknown key %s.%s ignored", at, sec.Name, m.Name))
				continue
			}
			if err := decode(k.field(c), m); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w", at, k.path(), err))
				continue
			}
			c.setOrigin(k.path(), at)
		}
		if sec.Name == "global" && sec.Member("rest_api_on") == nil {
			// gala-gopher's rule for this optional key, kept so existing
			// files behave the same.
			c.Global.RestAPIOn = false
			c.setOrigin("global.rest_api_on", at)
			c.warnings = append(c.warnings, at+": global.rest_api_on absent: REST API off, as in gala-gopher")
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

func knownSection(name string) bool {
	for _, k := range schema {
		if k.section == name {
			return true
		}
	}
	return false
}

func findKey(section, name string) (key, bool) {
	for _, k := range schema {
		if k.section == section && k.name == name {
			return k, true
		}
	}
	return key{}, false
}

func decode(dst any, s *libconfig.Setting) error {
	switch p := dst.(type) {
	case *string:
		v, err := s.StringValue()
		if err == nil {
			*p = v
		}
		return err
	case *Channel:
		v, err := s.StringValue()
		if err == nil {
			*p = Channel(v)
		}
		return err
	case *bool:
		v, err := s.BoolValue()
		if err == nil {
			*p = v
		}
		return err
	case *int:
		v, err := s.IntValue()
		if err == nil {
			*p = int(v)
		}
		return err
	}
	panic(fmt.Sprintf("config: schema field of type %T", dst))
}

// Marshal writes c as a config file in the layout of gala-gopher's
// shipped one, with galago's section last. ProbesInitContent, which only
// comes from the environment, is not written. Parse(Marshal()) gives c back.
func (c *Config) Marshal() []byte {
	root := &libconfig.Setting{Kind: libconfig.KindGroup}
	var sec *libconfig.Setting
	for _, k := range schema {
		if sec == nil || sec.Name != k.section {
			sec = &libconfig.Setting{Name: k.section, Kind: libconfig.KindGroup}
			root.Elems = append(root.Elems, sec)
		}
		s := &libconfig.Setting{Name: k.name}
		switch p := k.field(c).(type) {
		case *string:
			s.Kind, s.Str = libconfig.KindString, *p
		case *Channel:
			s.Kind, s.Str = libconfig.KindString, string(*p)
		case *bool:
			s.Kind, s.Bool = libconfig.KindBool, *p
		case *int:
			s.Kind, s.Int = libconfig.KindInt, int64(*p)
			if int64(int32(*p)) != s.Int {
				s.Kind = libconfig.KindInt64
			}
		}
		sec.Elems = append(sec.Elems, s)
	}
	return libconfig.Format(root)
}
